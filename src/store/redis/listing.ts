// Listing tasks from Redis: each principal's index and the all-tasks index are lexical sorted sets of listing keys,
// read newest first a batch at a time behind a signed cursor. Entries of expired tasks are dropped as a listing
// meets them, and a small sweep after each create keeps the all-tasks index about as large as the live tasks.
import { isCluster, type RedisClient } from '../redis-connection.js';
import type { RedisKeys } from '../redis-keys.js';
import {
  ALL_TASKS_CURSOR,
  EXPIRED_MEMORY_MS,
  LIST_ALL_SCAN,
  listingKey,
  matchesFilter,
  type CursorCodec,
  type TaskFilter,
  type TaskPage,
  type TaskRecord,
} from '../task-store.js';
import { summaryFromHmget, SUMMARY_FIELDS } from './task-record.js';

const LIST_BATCH_EXTRA = 8;
/** Entries of the all-tasks index checked per task created, oldest first and round the index: what expired goes. */
const SWEEP_PER_CREATE = 4;

export class TaskListing {
  /** Where the all-tasks index sweep goes on (a listing key; '' = from the start), and whether one runs. */
  private sweepAfter = '';
  private sweeping = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    /** The cursor codec, signed with the replicas' shared secret (fetched on first use). */
    private readonly cursorCodec: () => Promise<CursorCodec>,
  ) {}

  /** Lists a task just created, in its principal's index and the all-tasks one. */
  async add(task: TaskRecord): Promise<void> {
    // The index outlives its newest task's TTL (and the expired-id memory), then goes: sessions come and go.
    const indexKey = this.keys.principalTasks(task.principal);
    await Promise.all([
      this.redis.multi().zadd(indexKey, 0, listingKey(task)).pexpire(indexKey, task.retentionMs + EXPIRED_MEMORY_MS).exec(),
      this.redis.zadd(this.keys.allTasks(), 0, listingKey(task)),
    ]);
    this.sweepAllTasks();
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

  /**
   * The summaries of the tasks `keys` (listing keys) name, in order; undefined for those that expired, and for an
   * entry whose id now names a later task (an idempotency key makes its id again once its task has gone): the new
   * task has an entry of its own.
   */
  private async summaries(keys: readonly string[]): Promise<(TaskRecord | undefined)[]> {
    const records = await this.records(keys);
    return records.map((task, i) => (task !== undefined && listingKey(task) === keys[i] ? task : undefined));
  }

  private async records(keys: readonly string[]): Promise<(TaskRecord | undefined)[]> {
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
}
