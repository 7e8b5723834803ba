// The task store on Redis (one server, a Sentinel-managed primary, or a Cluster). Every atomic step is a Lua file
// in redis/scripts/ and every key is built in redis-keys.ts; the record codec, topics, own-event tracking and the
// read batch are modules of redis/.
//
// Over 450 lines because it implements the whole TaskStore interface (tasks, listings, leases, slots, rate
// windows, sessions, topics) on one connection and one subscriber; each method is a few lines around its script.
// The listing and the lease/slot methods are the pieces to move into redis/ next, as memory/ did for its twin.
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { NO_EVENTS, type GatewayEvents } from '../events.js';
import type { JsonObject } from '../jsonrpc.js';
import { isCluster, subscriberConnection, type RedisClient } from './redis-connection.js';
import { redisKeys, slotKeyList, type RedisKeys } from './redis-keys.js';
import { OwnEvents } from './redis/own-events.js';
import { ReadBatch } from './redis/read-batch.js';
import { RedisTopics } from './redis/topics.js';
import { parseTask, readFields, summaryFromHmget, SUMMARY_FIELDS } from './redis/task-record.js';
import { defineScripts, type RunScript } from './redis/scripts.js';
import { timedScripts } from './store-events.js';
import {
  batches,
  CursorCodec,
  DEFAULT_RESULT_GRACE_MS,
  EXPIRED_MEMORY_MS,
  IDS_PER_SCRIPT_CALL,
  isTerminal,
  LIST_ALL_SCAN,
  listingKey,
  matchesFilter,
  TIMELINE_LENGTH,
  ALL_TASKS_CURSOR,
  type NewTask,
  type SlotGrant,
  type TaskChange,
  type TaskFilter,
  type TaskPage,
  type TaskTransition,
  type TaskRecord,
  type TaskStatus,
  type TaskStore,
  type TransitionResult,
} from './task-store.js';

/** An idle semaphore's keys go this many lease periods after its last acquire or renewal. */
const SLOT_KEY_LEASES = 10;
const LIST_BATCH_EXTRA = 8;
/** Entries of the all-tasks index checked per task created, oldest first and round the index: what expired goes. */
const SWEEP_PER_CREATE = 4;
/**
 * With `waitForReplica`, how long a create or a task's end waits for a replica to confirm it has the write. Past
 * this (no replica connected) it is acknowledged anyway: the primary has it, as it would without the wait.
 */
const REPLICA_WAIT_MS = 500;

/**
 * Tasks in Redis, shared by every replica: records are hashes that Redis expires itself, listing is a lexical
 * sorted set per principal, and changes are published on one channel that each replica fans out locally.
 */
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
  /** Where the all-tasks index sweep goes on (a listing key; '' = from the start), and whether one runs. */
  private sweepAfter = '';
  private sweeping = false;
  /** On a cluster only: writes return once their own event is back (see OwnEvents). */
  private readonly ownEvents: OwnEvents | undefined;
  /** Replica messages (publish, subscribe, subscribers), on this store's subscription. */
  private readonly topics: RedisTopics;
  /** Record reads of one turn, sent together (one server; a cluster client pipelines by itself). */
  private readonly reads: ReadBatch | undefined;

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
    this.topics = new RedisTopics(redis, this.keys, () => {
      this.ensureSubscribed();
      return this.subscriber as RedisClient;
    });
    this.events.setMaxListeners(0);
    this.run = timedScripts(defineScripts(redis), options.events ?? NO_EVENTS);
    // Subscribe from the start: a watcher added for a new task must not miss its first events while a lazy
    // subscription is still being set up.
    this.ensureSubscribed();
  }

  async create(input: NewTask): Promise<TaskRecord> {
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
    if (input.call !== undefined) fields.push('call', JSON.stringify(input.call));
    const created = (await this.run('create', this.keys.task(input.taskId), this.keys.taskTimeline(input.taskId), this.keys.taskEvents(), String(TIMELINE_LENGTH), ...fields)) as string[] | null;
    if (created === null) throw new Error(`task ${input.taskId} already exists`);
    const task = parseTask(created);
    const acknowledged = this.acknowledgement(created, true);
    if (acknowledged !== undefined) await acknowledged;
    // Listed only after the record exists: a crash in between leaves a task that works but is not listed,
    // never a listing entry without a task.
    // The index outlives its newest task's TTL (and the expired-id memory), then goes: sessions come and go.
    const indexKey = this.keys.principalTasks(task.principal);
    await Promise.all([
      this.redis.multi().zadd(indexKey, 0, listingKey(task)).pexpire(indexKey, task.retentionMs + EXPIRED_MEMORY_MS).exec(),
      this.redis.zadd(this.keys.allTasks(), 0, listingKey(task)),
    ]);
    this.sweepAllTasks();
    return task;
  }

  async get(taskId: string, options: { outcome?: boolean; call?: boolean } = {}): Promise<TaskRecord | undefined> {
    // Only the large fields asked for cross the wire: a stored call can be megabytes of arguments.
    const key = this.keys.task(taskId);
    const fields = readFields(options);
    return summaryFromHmget(await (this.reads === undefined ? this.redis.hmget(key, ...fields) : this.reads.hmget(key, fields)), fields);
  }

  async expired(taskId: string): Promise<boolean> {
    // The marker outlives the record; while the record is there, the task has not expired.
    const [marker, record] = await Promise.all([this.redis.exists(this.keys.taskExpired(taskId)), this.redis.exists(this.keys.task(taskId))]);
    return marker === 1 && record === 0;
  }

  async transition(taskId: string, change: TaskChange): Promise<TransitionResult> {
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
      change.outcome === undefined ? '' : JSON.stringify(change.outcome),
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
    return verdict === 'ok' ? { ok: true, task } : { ok: false, reason: 'terminal', task };
  }

  async list(principal: string, page: { cursor?: string; limit: number }): Promise<TaskPage> {
    const cursors = await this.cursorCodec();
    const indexKey = this.keys.principalTasks(principal);
    let upper = page.cursor === undefined ? '+' : `(${cursors.decode(principal, page.cursor)}`;
    const tasks: TaskRecord[] = [];
    let more = true;
    // Entries of expired tasks are dropped as they are met, so a page may need a second batch (bounded).
    for (let round = 0; round < 10 && tasks.length < page.limit && more; round++) {
      const want = page.limit - tasks.length + LIST_BATCH_EXTRA;
      const keys = await this.redis.zrevrangebylex(indexKey, upper, '-', 'LIMIT', 0, want);
      more = keys.length === want;
      if (keys.length === 0) break;
      const records = await this.summaries(keys);
      const expired: string[] = [];
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i] as string;
        const task = records[i];
        if (task === undefined) {
          expired.push(key);
          continue;
        }
        if (tasks.length === page.limit) {
          more = true;
          break;
        }
        tasks.push(task);
        upper = `(${key}`;
      }
      if (expired.length > 0) await this.redis.zrem(indexKey, ...expired);
    }
    const last = tasks.at(-1);
    return more && last !== undefined ? { tasks, nextCursor: cursors.encode(principal, listingKey(last)) } : { tasks };
  }

  async listAll(page: { cursor?: string; limit: number } & TaskFilter): Promise<TaskPage> {
    const cursors = await this.cursorCodec();
    const indexKey = this.keys.allTasks();
    let upper = page.cursor === undefined ? '+' : `(${cursors.decode(ALL_TASKS_CURSOR, page.cursor)}`;
    const tasks: TaskRecord[] = [];
    let scanned = 0;
    let lastKey: string | undefined;
    let more = true;
    while (more && tasks.length < page.limit && scanned < LIST_ALL_SCAN) {
      const want = Math.min(page.limit - tasks.length + LIST_BATCH_EXTRA, LIST_ALL_SCAN - scanned);
      const keys = await this.redis.zrevrangebylex(indexKey, upper, '-', 'LIMIT', 0, want);
      more = keys.length === want;
      if (keys.length === 0) break;
      const records = await this.summaries(keys);
      const expired: string[] = [];
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i] as string;
        const task = records[i];
        if (task === undefined) expired.push(key);
        else if (tasks.length === page.limit) {
          more = true;
          break;
        } else if (matchesFilter(task, page)) tasks.push(task);
        scanned++;
        upper = `(${key}`;
        lastKey = key; // a cursor is an exclusive bound: it works whether or not its entry is still there
      }
      if (expired.length > 0) await this.redis.zrem(indexKey, ...expired);
    }
    // Going on from the last entry read (matching or not): a page cut short by the scan bound resumes after it.
    return more && lastKey !== undefined ? { tasks, nextCursor: cursors.encode(ALL_TASKS_CURSOR, lastKey) } : { tasks };
  }

  async timeline(taskId: string): Promise<TaskTransition[]> {
    const entries = await this.redis.lrange(this.keys.taskTimeline(taskId), 0, -1);
    return entries.flatMap((text) => {
      const entry = JSON.parse(text) as { s: TaskStatus; t: string; m?: string };
      return entry.m === undefined ? [{ status: entry.s, atMs: Number(entry.t) }] : [{ status: entry.s, atMs: Number(entry.t), message: entry.m }];
    });
  }

  /** The summaries of the tasks `keys` (listing keys) name, in order; undefined for those that expired. */
  private async summaries(keys: readonly string[]): Promise<(TaskRecord | undefined)[]> {
    const taskKeys = keys.map((key) => this.keys.task(key.slice(key.indexOf(':') + 1)));
    if (isCluster(this.redis)) {
      // The records live in many slots, where a pipeline may not go; one command each, which the client's
      // auto-pipelining sends to each node together.
      const cluster = this.redis;
      return Promise.all(taskKeys.map(async (key) => summaryFromHmget(await cluster.hmget(key, ...SUMMARY_FIELDS))));
    }
    const pipeline = this.redis.pipeline();
    for (const key of taskKeys) pipeline.hmget(key, ...SUMMARY_FIELDS);
    const replies = (await pipeline.exec()) ?? [];
    return keys.map((_, i) => summaryFromHmget((replies[i]?.[1] as (string | null)[] | undefined) ?? []));
  }

  /** Which of the tasks `keys` (listing keys) name have no record any more (one pipeline, or per node on a cluster). */
  private async expiredOf(keys: readonly string[]): Promise<string[]> {
    const taskKeys = keys.map((key) => this.keys.task(key.slice(key.indexOf(':') + 1)));
    const cluster = isCluster(this.redis) ? this.redis : undefined;
    if (cluster !== undefined) {
      const counts = await Promise.all(taskKeys.map((key) => cluster.exists(key)));
      return keys.filter((_, i) => counts[i] === 0);
    }
    const pipeline = this.redis.pipeline();
    for (const key of taskKeys) pipeline.exists(key);
    const replies = (await pipeline.exec()) ?? [];
    return keys.filter((_, i) => replies[i]?.[0] === null && replies[i]?.[1] === 0);
  }

  /**
   * Drops the all-tasks index entries of expired tasks, SWEEP_PER_CREATE at a time, going round the index: nobody
   * need list for the index to stay about as large as the set of live tasks. Off the create path (not awaited),
   * one sweep at a time per store; a failure only leaves the entries for the next sweep or listing.
   */
  private sweepAllTasks(): void {
    if (this.sweeping) return;
    this.sweeping = true;
    void (async () => {
      const indexKey = this.keys.allTasks();
      const keys = await this.redis.zrangebylex(indexKey, this.sweepAfter === '' ? '-' : `(${this.sweepAfter}`, '+', 'LIMIT', 0, SWEEP_PER_CREATE);
      this.sweepAfter = keys.length < SWEEP_PER_CREATE ? '' : (keys.at(-1) as string);
      if (keys.length === 0) return;
      const expired = await this.expiredOf(keys);
      if (expired.length > 0) await this.redis.zrem(indexKey, ...expired);
    })()
      .catch(() => undefined)
      .finally(() => {
        this.sweeping = false;
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

  async ping(): Promise<void> {
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('Redis did not answer within 1 s')), 1000).unref());
    await Promise.race([this.redis.ping(), timeout]);
  }

  async close(): Promise<void> {
    this.events.removeAllListeners();
    this.topics.close();
    // QUIT lets replies in flight arrive; the disconnect after it makes sure nothing reconnects (a Sentinel client
    // with ioredis' failover detector kept reconnecting to its sentinels after QUIT).
    await this.subscriber?.quit().catch(() => undefined);
    this.subscriber?.disconnect();
    await this.redis.quit().catch(() => undefined);
    this.redis.disconnect();
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
        this.topics.deliver(channel, payload);
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

  async lease(taskIds: readonly string[], owner: string, leaseMs: number): Promise<void> {
    const keys = [this.keys.replicasAlive(), this.keys.runningOwners(), this.keys.runningOf(owner)];
    // One batch after the other: other clients' commands get their turn between them.
    for (const batch of batches(taskIds)) await this.run('lease', ...keys, owner, String(leaseMs), this.keys.runningOfPrefix(), ...batch);
  }

  async heartbeat(replica: string, leaseMs: number): Promise<void> {
    await this.run('heartbeat', this.keys.replicasAlive(), replica, String(leaseMs));
  }

  async unlease(taskId: string): Promise<void> {
    await this.run('unlease', this.keys.runningOwners(), this.keys.legacyRunning(), taskId, this.keys.runningOfPrefix());
  }

  async takeOrphans(limit: number, taker: string, leaseMs: number): Promise<{ taskId: string; owner: string }[]> {
    const most = String(Math.min(limit, IDS_PER_SCRIPT_CALL));
    const keys = [this.keys.replicasAlive(), this.keys.runningOwners(), this.keys.runningOf(taker), this.keys.legacyRunning()];
    const flat = (await this.run('take-orphans', ...keys, most, taker, String(leaseMs), this.keys.runningOfPrefix())) as string[];
    const orphans: { taskId: string; owner: string }[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) orphans.push({ taskId: flat[i] as string, owner: flat[i + 1] as string });
    return orphans;
  }

  async acquireSlot(key: string, ticket: string, owner: string, limit: number, leaseMs: number, options: { queue?: boolean } = {}): Promise<SlotGrant> {
    const [granted, ahead] = (await this.run(
      'acquire-slot',
      ...slotKeyList(this.keys.slot(key)),
      ticket,
      owner,
      String(limit),
      String(leaseMs),
      options.queue === false ? 'once' : 'queue',
      this.keys.topic('slots'),
      JSON.stringify({ key }),
      String(leaseMs * SLOT_KEY_LEASES),
    )) as [number, number?];
    return granted === 1 ? { granted: true } : { granted: false, ahead: ahead ?? 0 };
  }

  async releaseSlot(key: string, ticket: string): Promise<void> {
    await this.run('release-slot', ...slotKeyList(this.keys.slot(key)), ticket, this.keys.topic('slots'), JSON.stringify({ key }));
  }

  async countHit(name: string, principal: string, windowMs: number, hits = 1): Promise<{ hits: number; resetInMs: number }> {
    const [total, left] = (await this.run('count-hit', this.keys.rateWindow(name, principal), String(Math.max(1, Math.ceil(windowMs))), String(hits))) as [number, number];
    return { hits: Number(total), resetInMs: Number(left) };
  }

  async renewSlots(entries: readonly { key: string; ticket: string }[], leaseMs: number): Promise<void> {
    // Scripts per semaphore (each semaphore's keys live in their own Cluster slot), its tickets batch by batch.
    const byKey = new Map<string, string[]>();
    for (const { key, ticket } of entries) {
      const tickets = byKey.get(key);
      if (tickets === undefined) byKey.set(key, [ticket]);
      else tickets.push(ticket);
    }
    await Promise.all(
      [...byKey].map(async ([key, tickets]) => {
        const keys = slotKeyList(this.keys.slot(key));
        for (const batch of batches(tickets)) await this.run('renew-slots', ...keys, String(leaseMs), String(leaseMs * SLOT_KEY_LEASES), ...batch);
      }),
    );
  }

  async slotHolders(key: string): Promise<string[]> {
    return (await this.run('slot-holders', this.keys.slot(key).holders)) as string[];
  }

  publish(topic: string, message: JsonObject): Promise<number> {
    return this.topics.publish(topic, message);
  }

  subscribers(topic: string): Promise<number> {
    return this.topics.subscribers(topic);
  }

  subscribe(topic: string, handler: (message: JsonObject) => void): Promise<() => void> {
    return this.topics.subscribe(topic, handler);
  }

  async saveSession(sessionId: string, fields: Record<string, string | null>, expireAfterMs: number, options: { create?: boolean } = {}): Promise<boolean> {
    const args: string[] = [];
    for (const [field, value] of Object.entries(fields)) args.push(field, value === null ? 'del' : 'set', value ?? '');
    const saved = await this.run('save-session', this.keys.session(sessionId), options.create ? 'create' : 'update', String(Math.max(1, Math.ceil(expireAfterMs))), ...args);
    return saved === 1;
  }

  async getSession(sessionId: string): Promise<Record<string, string> | undefined> {
    const fields = await this.redis.hgetall(this.keys.session(sessionId));
    return Object.keys(fields).length === 0 ? undefined : fields;
  }

  async deleteSession(sessionId: string): Promise<boolean> {
    return (await this.redis.del(this.keys.session(sessionId))) === 1;
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
