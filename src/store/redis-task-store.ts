// The task store on Redis (one server, a Sentinel-managed primary, or a Cluster): the TaskStore interface, method by
// method. Every atomic step is a Lua file in redis/scripts/ and every key is built in redis-keys.ts. The listings,
// who runs what (leases), the slot semaphores, the record codec, topics, own-event tracking and the read batch are
// modules of redis/; this class keeps the records, the event subscription, rate windows and sessions.
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { storeFailureKind } from '../errors.js';
import { NO_EVENTS, type GatewayEvents } from '../events.js';
import { closeConnection, isCluster, subscriberConnection, type RedisClient } from './redis-connection.js';
import { redisKeys, type RedisKeys } from './redis-keys.js';
import { RedisDeliveries } from './redis/deliveries.js';
import { TaskListing } from './redis/listing.js';
import { OwnEvents } from './redis/own-events.js';
import { ReadBatch } from './redis/read-batch.js';
import { RedisLeases } from './redis/leases.js';
import { RedisRates } from './redis/rates.js';
import { RedisSemaphores } from './redis/semaphores.js';
import { RedisSessions } from './redis/sessions.js';
import { RedisStoredBytes } from './redis/stored-bytes.js';
import { RedisApprovals } from './redis/approvals.js';
import { RedisTopics } from './redis/topics.js';
import { RedisUpstreamSessions } from './redis/upstream-sessions.js';
import { parseTask, readFields, summaryFromHmget } from './redis/task-record.js';
import { defineScripts, type RunScript } from './redis/scripts.js';
import { timedScripts } from './store-events.js';
import { CursorCodec, DEFAULT_RESULT_GRACE_MS, EXPIRED_MEMORY_MS, isTerminal, ledgerOf, storedTaskBytes, terminalExpiry, TIMELINE_LENGTH, type CreateOnceResult, type DeleteResult, type KeyRetirement, type NewTask, type StoredBytes, type TaskChange, type TaskFilter, type TaskPage, type TaskTransition, type TaskRecord, type TaskStatus, type TaskStore, type TransitionResult } from './task-store.js';
import { pendingHoldOf } from './approvals.js';

/**
 * With `waitForReplica`, how long a create or a task's end waits for a replica to confirm it has the write. Past
 * this (no replica connected) it is acknowledged anyway: the primary has it, as it would without the wait.
 */
const REPLICA_WAIT_MS = 500;

/**
 * Tasks in Redis, shared by every replica: records are hashes that Redis expires itself, listing is a lexical
 * sorted set per principal, and changes are published on one channel that each replica fans out locally.
 */
/** How long /readyz waits for the store's PING before it says the store is slow. */
export const READY_PING_TIMEOUT_MS = 1000;

export class RedisTaskStore implements TaskStore {
  readonly kind = 'redis' as const;
  private readonly keys: RedisKeys;
  private readonly events = new EventEmitter();
  /** When each watched task last changed, as its last event said (so a resync tells only what was missed). */
  private readonly lastEvents = new Map<string, number>();
  /** Replica messages by channel. */
  private subscriber: RedisClient | undefined;
  private subscribed: Promise<unknown> | undefined;
  private secret: Promise<Buffer> | undefined;
  private cursors: CursorCodec | undefined;
  private readonly run: RunScript;
  /** On a cluster only: writes return once their own event is back (see OwnEvents). */
  private readonly ownEvents: OwnEvents | undefined;
  /** Replica messages (publish, subscribe, subscribers), on this store's subscription. */
  readonly bus: RedisTopics;
  /** Record reads of one turn, sent together (one server; a cluster client pipelines by itself). */
  private readonly reads: ReadBatch | undefined;
  /** The principals' and the all-tasks indexes. */
  private readonly listing: TaskListing;
  readonly leases: RedisLeases;
  readonly upstreamSessions: RedisUpstreamSessions;
  readonly slots: RedisSemaphores;
  readonly rates: RedisRates;
  /** Bytes of stored tasks (record, call or outcome), per principal and in total. */
  private readonly stored: RedisStoredBytes;
  readonly approvals: RedisApprovals;
  readonly deliveries: RedisDeliveries;
  readonly sessions: RedisSessions;

  constructor(
    readonly redis: RedisClient,
    prefix: string,
    /**
     * `events`: where the scripts' durations (and slow ones) are announced. `waitForReplica` (a Sentinel-managed
     * primary): a task is acknowledged created, and its end final, only once a replica has it too (WAIT), so a
     * failover right after loses neither; replication is asynchronous otherwise.
     */
    private readonly options: { resultGraceMs?: number; events?: GatewayEvents; waitForReplica?: boolean } = {},
  ) {
    this.keys = redisKeys(prefix);
    this.ownEvents = isCluster(redis) ? new OwnEvents() : undefined;
    this.reads = isCluster(redis) ? undefined : new ReadBatch(redis);
    this.bus = new RedisTopics(redis, this.keys, () => {
      this.ensureSubscribed();
      return this.subscriber as RedisClient;
    });
    this.events.setMaxListeners(0);
    this.run = timedScripts(defineScripts(redis), options.events ?? NO_EVENTS);
    this.listing = new TaskListing(redis, this.keys, () => this.cursorCodec());
    this.leases = new RedisLeases(this.run, this.keys);
    this.upstreamSessions = new RedisUpstreamSessions(this.run, this.keys, redis);
    this.slots = new RedisSemaphores(this.run, this.keys);
    this.rates = new RedisRates(this.run, this.keys);
    this.stored = new RedisStoredBytes(this.run, this.keys);
    this.approvals = new RedisApprovals(this.run, this.keys, redis, (taskId) => this.get(taskId));
    this.deliveries = new RedisDeliveries(this.run, this.keys, redis);
    this.sessions = new RedisSessions(this.run, this.keys, redis);
    // Subscribe from the start: a watcher added for a new task must not miss its first events while a lazy
    // subscription is still being set up.
    this.ensureSubscribed();
  }

  async create(input: NewTask): Promise<TaskRecord> {
    const created = await this.insert(input, '');
    if (created.outcome !== 'created') throw new Error(`task ${input.taskId} already exists`);
    return created.task;
  }

  createOnce(input: NewTask, digest: string): Promise<CreateOnceResult> {
    return this.insert(input, digest);
  }

  /** Runs create.lua: `digest` is '' for a task no idempotency key made (then an existing id is answered 'conflict'). */
  private async insert(input: NewTask, digest: string): Promise<CreateOnceResult> {
    const fields: string[] = [
      'taskId', input.taskId,
      'principal', input.principal,
      'era', input.era,
      'tool', input.tool,
      'upstream', input.upstream,
      'retentionMs', String(input.retentionMs),
      'pollMs', String(input.pollMs),
    ];
    if (input.message !== undefined) fields.push('message', input.message);
    if (input.native === true) fields.push('native', '1');
    if (input.chargeTo !== undefined && input.chargeTo !== input.principal) fields.push('chargedTo', input.chargeTo);
    const call = input.call === undefined ? undefined : JSON.stringify(input.call);
    const approval = input.approval === undefined ? undefined : JSON.stringify(input.approval);
    if (call !== undefined) fields.push('call', call);
    if (approval !== undefined) fields.push('approval', approval, 'queued', '1');
    const id = input.taskId;
    const keys = [this.keys.task(id), this.keys.taskTimeline(id), this.keys.taskExpired(id), this.keys.taskDeleted(id)];
    const [verdict, created] = (await this.run('create', ...keys, this.keys.taskEvents(), String(TIMELINE_LENGTH), digest, ...fields)) as [string, (string[] | string)?];
    if (verdict === 'retired') return { outcome: 'retired', reason: created === 'deleted' ? 'deleted' : 'expired' };
    if (typeof created === 'string') return { outcome: 'conflict' };
    if (verdict === 'existing' && created !== undefined) return { outcome: 'existing', task: parseTask(created) };
    if (verdict !== 'created' || created === undefined) return { outcome: 'conflict' };
    const task = parseTask(created);
    const acknowledged = this.acknowledgement(created, true);
    if (acknowledged !== undefined) await acknowledged;
    // Listed only after the record exists: a crash in between leaves a task that works but is not listed,
    // never a listing entry without a task.
    await this.listing.add(task);
    // Indexed only after the record exists (as listed): a crash in between leaves a hold that a takeover indexes again.
    const hold = pendingHoldOf(task);
    if (hold !== undefined) await this.approvals.index(hold);
    // Charged once the record exists, until the earliest it can expire (its end charges it anew): a failed charge
    // leaves the task uncounted, never the creation undone.
    const bytes = storedTaskBytes({ callJson: `${call ?? ''}${approval ?? ''}` });
    await this.stored.charge(ledgerOf(task), task.taskId, bytes, task.createdMs + task.retentionMs).catch(() => undefined);
    return { outcome: 'created', task };
  }

  async get(taskId: string, options: { outcome?: boolean; call?: boolean } = {}): Promise<TaskRecord | undefined> {
    // Only the large fields asked for cross the wire: a stored call can be megabytes of arguments.
    const key = this.keys.task(taskId);
    const fields = readFields(options);
    return summaryFromHmget(await (this.reads === undefined ? this.redis.hmget(key, ...fields) : this.reads.hmget(key, fields)), fields);
  }

  async retired(taskId: string): Promise<KeyRetirement | undefined> {
    const [deleted, marker, record] = await Promise.all([this.redis.exists(this.keys.taskDeleted(taskId)), this.redis.exists(this.keys.taskExpired(taskId)), this.redis.exists(this.keys.task(taskId))]);
    if (record === 1) return undefined;
    return deleted === 1 ? 'deleted' : marker === 1 ? 'expired' : undefined;
  }

  async expired(taskId: string): Promise<boolean> {
    // The marker outlives the record; while the record is there, the task has not expired.
    const [marker, record] = await Promise.all([this.redis.exists(this.keys.taskExpired(taskId)), this.redis.exists(this.keys.task(taskId))]);
    return marker === 1 && record === 0;
  }

  async transition(taskId: string, change: TaskChange): Promise<TransitionResult> {
    const outcome = change.outcome === undefined ? '' : JSON.stringify(change.outcome);
    const mode = change.message === undefined ? 'keep' : change.message === null ? 'clear' : 'set';
    const reply = (await this.run(
      'transition',
      this.keys.task(taskId),
      this.keys.taskExpired(taskId),
      this.keys.taskTimeline(taskId),
      this.keys.taskEvents(),
      change.to,
      mode,
      change.message ?? '',
      outcome,
      String(this.options.resultGraceMs ?? DEFAULT_RESULT_GRACE_MS),
      String(EXPIRED_MEMORY_MS),
      change.openRequests === undefined ? 'keep' : change.openRequests === null ? 'clear' : 'set',
      change.openRequests ? JSON.stringify(change.openRequests) : '',
      change.attempt === undefined ? '' : String(change.attempt),
      change.queued === undefined ? 'keep' : change.queued ? 'set' : 'clear',
      String(TIMELINE_LENGTH),
    )) as string[];
    const [verdict, ...fields] = reply;
    if (verdict === 'not_found') return { ok: false, reason: 'not_found' };
    const task = parseTask(fields);
    const acknowledged = verdict === 'ok' ? this.acknowledgement(fields, isTerminal(task.status)) : undefined;
    if (acknowledged !== undefined) await acknowledged;
    if (verdict === 'ok' && isTerminal(task.status)) {
      // Charged after the transition, in the ledgers' own slots, until the task expires (the expiry the script set:
      // the same rule from the same clock), replacing its creation's charge. A failed charge leaves the task stored
      // but uncounted: the end stands.
      const expiresAt = terminalExpiry(task, task.updatedMs, this.options.resultGraceMs ?? DEFAULT_RESULT_GRACE_MS);
      await this.stored.charge(change.chargeTo ?? ledgerOf(task), taskId, storedTaskBytes({ outcomeJson: outcome }), expiresAt).catch(() => undefined);
    }
    return verdict === 'ok' ? { ok: true, task } : { ok: false, reason: 'terminal', task };
  }

  storedBytes(principal: string): Promise<StoredBytes> {
    return this.stored.read(principal);
  }

  async delete(taskId: string, chargedTo?: string): Promise<DeleteResult> {
    const keys = [this.keys.task(taskId), this.keys.taskTimeline(taskId), this.keys.taskExpired(taskId), this.keys.taskDeleted(taskId)];
    const [verdict, principal, ledger] = (await this.run('delete', ...keys, String(EXPIRED_MEMORY_MS))) as [DeleteResult, string?, string?];
    if (verdict === 'deleted' && principal !== undefined) await this.stored.release(chargedTo ?? ledger ?? principal, taskId);
    return verdict;
  }

  list(principal: string, page: { cursor?: string; limit: number }): Promise<TaskPage> {
    return this.listing.list(principal, page);
  }

  listAll(page: { cursor?: string; limit: number } & TaskFilter): Promise<TaskPage> {
    return this.listing.listAll(page);
  }

  async timeline(taskId: string): Promise<TaskTransition[]> {
    const entries = await this.redis.lrange(this.keys.taskTimeline(taskId), 0, -1);
    return entries.flatMap((text) => {
      const entry = JSON.parse(text) as { s: TaskStatus; t: string; m?: string };
      return entry.m === undefined ? [{ status: entry.s, atMs: Number(entry.t) }] : [{ status: entry.s, atMs: Number(entry.t), message: entry.m }];
    });
  }

  watch(taskId: string, listener: (task: TaskRecord) => void): () => void {
    this.ensureSubscribed();
    this.events.on(taskId, listener);
    return () => {
      this.events.off(taskId, listener);
      if (this.events.listenerCount(taskId) === 0) this.lastEvents.delete(taskId);
    };
  }

  private async resync(): Promise<void> {
    for (const name of this.events.eventNames()) {
      const taskId = String(name);
      for (let attempt = 0; attempt < 5; attempt++) {
        try {
          const task = await this.get(taskId);
          // Only what changed while the subscription was down: watchers need not hear the same state twice.
          if (task !== undefined && task.updatedMs !== this.lastEvents.get(taskId)) {
            this.lastEvents.set(taskId, task.updatedMs);
            this.events.emit(taskId, task);
          }
          break;
        } catch {
          await new Promise((resolve) => setTimeout(resolve, 200)); // the main connection may not be back yet
        }
      }
    }
  }

  /** Resolves once the event subscription is active (a watcher added before then could miss an event). */
  async ready(): Promise<void> {
    this.ensureSubscribed();
    await this.subscribed;
  }

  /**
   * Fails with a sentence of the gateway's own (what /readyz shows), never the Redis client's words: whether the
   * connection is missing, or there but not answering within READY_PING_TIMEOUT_MS (a blocked or overloaded Redis).
   */
  async ping(): Promise<void> {
    if (this.redis.status !== 'ready') throw new Error('no connection to the store (reconnecting)');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), READY_PING_TIMEOUT_MS)));
    try {
      const answer = await Promise.race([this.redis.ping().then(() => 'ok' as const, (error: unknown) => error), timeout]);
      if (answer === 'ok') return;
      if (answer === 'timeout') throw new Error(`the store is connected but did not answer within ${READY_PING_TIMEOUT_MS} ms`);
      const kind = storeFailureKind(answer);
      if (kind === 'slow') throw new Error(`the store is connected but did not answer within ${READY_PING_TIMEOUT_MS} ms`);
      if (kind === 'unavailable') throw new Error('no connection to the store (reconnecting)');
      // An error Redis itself answered (LOADING, NOAUTH, MISCONF): its own words say what to fix.
      throw new Error(`the store refused PING: ${(answer as Error).message}`);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    this.events.removeAllListeners();
    this.bus.close();
    if (this.subscriber !== undefined) await closeConnection(this.subscriber);
    await closeConnection(this.redis);
  }

  /**
   * What a write waits for before it is acknowledged: on a cluster its own event back (OwnEvents); with
   * `waitForReplica`, for a `durable` write, a replica's copy (or REPLICA_WAIT_MS). Undefined when there is nothing
   * to wait for (one server), so the common path adds no await to every create and transition.
   */
  private acknowledgement(fields: readonly string[], durable: boolean): Promise<unknown> | undefined {
    const ownEvent = this.ownEvents?.back(fields);
    const replica = durable && this.options.waitForReplica === true && !isCluster(this.redis) ? this.redis.wait(1, REPLICA_WAIT_MS) : undefined;
    if (ownEvent === undefined) return replica;
    return replica === undefined ? ownEvent : Promise.all([ownEvent, replica]);
  }

  private ensureSubscribed(): void {
    if (this.subscriber !== undefined) return;
    const subscriber = subscriberConnection(this.redis);
    this.subscriber = subscriber;
    subscriber.on('error', () => undefined); // reconnects by itself; readiness reports the main connection
    let connected = false;
    subscriber.on('ready', () => {
      if (!connected) {
        connected = true;
        return;
      }
      // Events published while the subscription was down are lost. Once it is back (the PING answers after the
      // re-subscriptions), every watcher gets its task's current state, so nobody waits for an event that passed.
      void subscriber.ping().then(() => this.resync(), () => undefined);
    });
    const onMessage = (channel: string, payload: string): void => {
      if (channel !== this.keys.taskEvents()) {
        this.bus.deliver(channel, payload);
        return;
      }
      let task: TaskRecord;
      try {
        task = parseTask(JSON.parse(payload) as string[]);
      } catch {
        return;
      }
      if (this.events.listenerCount(task.taskId) > 0) this.lastEvents.set(task.taskId, task.updatedMs);
      this.events.emit(task.taskId, task);
      this.ownEvents?.arrived(payload);
    };
    subscriber.on('message', onMessage);
    subscriber.on('smessage', onMessage); // topics on a cluster (see subscribe)
    this.subscribed = subscriber.subscribe(this.keys.taskEvents()).catch(() => undefined); // only on close
  }

  /** All replicas sign with one secret, created by whichever replica needs it first. */
  signingSecret(): Promise<Buffer> {
    this.secret ??= (async () => {
      const key = this.keys.signingSecret();
      await this.redis.set(key, randomBytes(32).toString('hex'), 'NX');
      const secret = await this.redis.get(key);
      if (secret === null) throw new Error('the signing secret vanished from Redis');
      return Buffer.from(secret, 'hex');
    })().catch((error: unknown) => {
      this.secret = undefined;
      throw error;
    });
    return this.secret;
  }

  private async cursorCodec(): Promise<CursorCodec> {
    this.cursors ??= new CursorCodec(await this.signingSecret());
    return this.cursors;
  }
}
