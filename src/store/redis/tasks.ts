// Task records on Redis: hashes that Redis expires itself, written only by create.lua, transition.lua, delete.lua and
// decide-approval.lua (approvals.ts), each publishing the change on the task events' channel (task-events.ts). Listing
// entries (listing.ts), the pending-holds index (approvals.ts) and the stored-bytes ledgers (stored-bytes.ts) are
// written after the record, each in its own slot. The embedded store's twin is memory/tasks.ts.
import type { Approvals } from '../approvals.js';
import type { CursorCodec } from '../cursors.js';
import { isCluster, type RedisClient } from '../redis-connection.js';
import type { RedisKeys } from '../redis-keys.js';
import { pendingHoldOf } from '../approvals.js';
import {
  DEFAULT_RESULT_GRACE_MS,
  EXPIRED_MEMORY_MS,
  isTerminal,
  ledgerOf,
  storedTaskBytes,
  terminalExpiry,
  TIMELINE_LENGTH,
  type CreateOnceResult,
  type DeleteResult,
  type KeyRetirement,
  type NewTask,
  type StoredBytes,
  type TaskChange,
  type TaskFilter,
  type TaskPage,
  type TaskRecord,
  type TaskRecords,
  type TaskStatus,
  type TaskTransition,
  type TransitionResult,
} from '../tasks.js';
import { TaskListing } from './listing.js';
import { ReadBatch } from './read-batch.js';
import type { RunScript } from './scripts.js';
import { RedisStoredBytes } from './stored-bytes.js';
import type { TaskEvents } from './task-events.js';
import { parseTask, readFields, summaryFromHmget } from './task-record.js';

/**
 * With `waitForReplica`, how long a create or a task's end waits for a replica to confirm it has the write. Past
 * this (no replica connected) it is acknowledged anyway: the primary has it, as it would without the wait.
 */
const REPLICA_WAIT_MS = 500;

export interface RedisTasksOptions {
  run: RunScript;
  keys: RedisKeys;
  redis: RedisClient;
  /** The store's subscription: watchers, and on a cluster the own events writes wait for. */
  events: TaskEvents;
  /** The index a task held from its creation joins. */
  approvals: Pick<Approvals, 'index'>;
  /** The list cursors' codec, once the store's secret is known. */
  cursors: () => Promise<CursorCodec>;
  resultGraceMs?: number;
  /**
   * A Sentinel-managed primary: a task is acknowledged created, and its end final, only once a replica has it too
   * (WAIT), so a failover right after loses neither; replication is asynchronous otherwise.
   */
  waitForReplica?: boolean;
}

export class RedisTasks implements TaskRecords {
  private readonly run: RunScript;
  private readonly keys: RedisKeys;
  private readonly redis: RedisClient;
  private readonly approvals: Pick<Approvals, 'index'>;
  /** Record reads of one turn, sent together (one server; a cluster client pipelines by itself). */
  private readonly reads: ReadBatch | undefined;
  /** The principals' and the all-tasks indexes. */
  private readonly listing: TaskListing;
  /** Bytes of stored tasks (record, call or outcome), per principal and in total. */
  private readonly stored: RedisStoredBytes;

  constructor(private readonly options: RedisTasksOptions) {
    this.run = options.run;
    this.keys = options.keys;
    this.redis = options.redis;
    this.approvals = options.approvals;
    this.reads = isCluster(options.redis) ? undefined : new ReadBatch(options.redis);
    this.listing = new TaskListing(options.redis, options.keys, options.cursors);
    this.stored = new RedisStoredBytes(options.run, options.keys);
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

  async transition(taskId: string, change: TaskChange, applied?: (result: TransitionResult) => void): Promise<TransitionResult> {
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
    if (verdict === 'not_found') {
      const missing: TransitionResult = { ok: false, reason: 'not_found' };
      applied?.(missing);
      return missing;
    }
    const task = parseTask(fields);
    const acknowledged = verdict === 'ok' ? this.acknowledgement(fields, isTerminal(task.status)) : undefined;
    if (acknowledged !== undefined) await acknowledged;
    const result: TransitionResult = verdict === 'ok' ? { ok: true, task } : { ok: false, reason: 'terminal', task };
    applied?.(result);
    if (verdict === 'ok' && isTerminal(task.status)) {
      // Charged after the transition, in the ledgers' own slots, until the task expires (the expiry the script set:
      // the same rule from the same clock), replacing its creation's charge. A failed charge leaves the task stored
      // but uncounted: the end stands.
      const expiresAt = terminalExpiry(task, task.updatedMs, this.options.resultGraceMs ?? DEFAULT_RESULT_GRACE_MS);
      // Sent once the waiters `applied` woke have answered (their answers go out in this turn's promise reactions):
      // the charge's writes to Redis would otherwise come first.
      if (applied !== undefined) await new Promise((resolve) => setImmediate(resolve));
      await this.stored.charge(change.chargeTo ?? ledgerOf(task), taskId, storedTaskBytes({ outcomeJson: outcome }), expiresAt).catch(() => undefined);
    }
    return result;
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
    return this.options.events.watch(taskId, listener);
  }

  /**
   * What a write waits for before it is acknowledged: on a cluster its own event back (OwnEvents); with
   * `waitForReplica`, for a `durable` write, a replica's copy (or REPLICA_WAIT_MS). Undefined when there is nothing
   * to wait for (one server), so the common path adds no await to every create and transition.
   */
  private acknowledgement(fields: readonly string[], durable: boolean): Promise<unknown> | undefined {
    const ownEvent = this.options.events.ownEvents?.back(fields);
    const replica = durable && this.options.waitForReplica === true && !isCluster(this.redis) ? this.redis.wait(1, REPLICA_WAIT_MS) : undefined;
    if (ownEvent === undefined) return replica;
    return replica === undefined ? ownEvent : Promise.all([ownEvent, replica]);
  }
}
