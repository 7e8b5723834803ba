import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import type { JsonObject } from '../jsonrpc.js';
import { redisKeys, slotKeyList, type RedisKeys } from './redis-keys.js';
import {
  CursorCodec,
  DEFAULT_RESULT_GRACE_MS,
  EXPIRED_MEMORY_MS,
  listingKey,
  TASK_STATUSES,
  type NewTask,
  type SlotGrant,
  type TaskChange,
  type TaskPage,
  type TaskRecord,
  type TaskStatus,
  type TaskStore,
  type TransitionResult,
} from './task-store.js';

// Creation: the record appears whole or not at all, and its event goes out in the same step.
// KEYS[1] task hash. ARGV[1] channel, ARGV[2..] field/value pairs. Times come from Redis, one clock for all replicas.
const CREATE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local t = redis.call('TIME')
local now = tostring(math.floor(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000))
local us = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('HSET', KEYS[1], 'createdAt', now, 'createdAtUs', us, 'lastUpdatedAt', now, 'status', 'working', unpack(ARGV, 2))
local fields = redis.call('HGETALL', KEYS[1])
redis.call('PUBLISH', ARGV[1], cjson.encode(fields))
return fields
`;

// The record without its outcome: what events and transition replies carry (an outcome can be large).
const SUMMARY = `
local function summary(key)
  local all = redis.call('HGETALL', key)
  local out = {}
  for i = 1, #all, 2 do
    if all[i] ~= 'outcome' and all[i] ~= 'call' then
      out[#out + 1] = all[i]
      out[#out + 1] = all[i + 1]
    end
  end
  return out
end
`;

// One transition: check the current status, apply the change, set the expiry, emit the event, atomically.
// KEYS[1] task hash, KEYS[2] expired-marker. ARGV: 1 channel, 2 to, 3 message mode ('keep'|'set'|'clear'),
// 4 message, 5 outcome JSON or '', 6 result grace ms, 7 how long the marker outlives the record,
// 8 input-requests mode ('keep'|'set'|'clear'), 9 input requests JSON, 10 attempt or '', 11 queued mark ('keep'|'set'|'clear').
const TRANSITION = `${SUMMARY}
local current = redis.call('HGET', KEYS[1], 'status')
if not current then return {'not_found'} end
local terminal = { completed = true, failed = true, cancelled = true }
if terminal[current] then return {'terminal', unpack(summary(KEYS[1]))} end
local t = redis.call('TIME')
local now = math.floor(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'lastUpdatedAt', tostring(now))
if ARGV[3] == 'set' then redis.call('HSET', KEYS[1], 'statusMessage', ARGV[4])
elseif ARGV[3] == 'clear' then redis.call('HDEL', KEYS[1], 'statusMessage') end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'outcome', ARGV[5]) end
if ARGV[10] ~= '' then redis.call('HSET', KEYS[1], 'attempt', ARGV[10]) end
if ARGV[11] == 'set' then redis.call('HSET', KEYS[1], 'queued', '1')
elseif ARGV[11] == 'clear' or terminal[ARGV[2]] then redis.call('HDEL', KEYS[1], 'queued') end
if ARGV[8] == 'clear' or terminal[ARGV[2]] then redis.call('HDEL', KEYS[1], 'inputRequests')
elseif ARGV[8] == 'set' then redis.call('HSET', KEYS[1], 'inputRequests', ARGV[9]) end
if terminal[ARGV[2]] then
  local created = tonumber(redis.call('HGET', KEYS[1], 'createdAt'))
  local ttl = tonumber(redis.call('HGET', KEYS[1], 'ttlMs'))
  local expireAt = math.max(created + ttl, now + tonumber(ARGV[6]))
  redis.call('PEXPIREAT', KEYS[1], expireAt)
  redis.call('SET', KEYS[2], '1', 'PXAT', expireAt + tonumber(ARGV[7]))
end
local fields = summary(KEYS[1])
redis.call('PUBLISH', ARGV[1], cjson.encode(fields))
return {'ok', unpack(fields)}
`;

// Leases: KEYS[1] running zset, KEYS[2] owners hash. ARGV: 1 owner, 2 lease ms, 3 'renew'|'claim', 4.. ids.
// The deadline is Redis time, one clock for every replica.
const LEASE = `
local t = redis.call('TIME')
local deadline = math.floor(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000) + tonumber(ARGV[2])
for i = 4, #ARGV do
  if ARGV[3] == 'claim' or redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], deadline, ARGV[i])
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[1])
  end
end
return 1
`;

// Orphans: tasks past their lease deadline, removed as they are taken, so exactly one replica gets each.
// KEYS as LEASE; ARGV[1] limit. Returns id, owner pairs.
const TAKE_ORPHANS = `
local t = redis.call('TIME')
local now = math.floor(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local out = {}
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[2], id) or ''
  redis.call('HDEL', KEYS[2], id)
end
return out
`;

// A session save: applies only to a session that exists, unless creating. KEYS[1] session hash. ARGV: 1 'create'|'update',
// 2 ttl ms, then field/value triples (field, 'set'|'del', value).
const SAVE_SESSION = `
if ARGV[1] ~= 'create' and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 3, #ARGV, 3 do
  if ARGV[i + 1] == 'set' then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2]) else redis.call('HDEL', KEYS[1], ARGV[i]) end
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
`;

// Slot semaphores. Each script gets one semaphore's keys (one hash tag, one Cluster slot):
// KEYS 1 holders (zset: ticket -> lease deadline ms), 2 queue (zset: ticket -> arrival sequence),
// 3 queue deadlines (zset: ticket -> lease deadline ms), 4 owners (hash: ticket -> replica), 5 sequence counter.
// A lease has run out when its deadline is <= now (Redis time, one clock for every replica).
const SLOT_NOW = `
local t = redis.call('TIME')
local now = math.floor(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000)
`;

// Keeps an idle semaphore from living forever without ever dropping a live lease: keys only ever get a longer
// expiry, and every deadline written is at most `keep` ms away.
const SLOT_KEEP = `
local function keep(ms)
  for i = 1, 5 do
    local left = redis.call('PTTL', KEYS[i])
    if left == -1 or (left >= 0 and left < ms) then redis.call('PEXPIRE', KEYS[i], ms) end
  end
end
`;

// Acquire: drop expired holders and waiters, then grant, keep waiting or join the line, atomically.
// ARGV: 1 ticket, 2 owner, 3 limit, 4 lease ms, 5 'queue'|'once', 6 channel, 7 message, 8 key expiry ms.
// Returns {1} when granted, {0, ahead} otherwise.
const ACQUIRE_SLOT = `${SLOT_NOW}${SLOT_KEEP}
local ticket = ARGV[1]
local deadline = now + tonumber(ARGV[4])
local dropped = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do
  redis.call('ZREM', KEYS[2], gone)
  dropped[#dropped + 1] = gone
end
if #dropped > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  for _, gone in ipairs(dropped) do redis.call('HDEL', KEYS[4], gone) end
end
local reply
if redis.call('ZSCORE', KEYS[1], ticket) then
  redis.call('ZADD', KEYS[1], deadline, ticket)
  redis.call('HSET', KEYS[4], ticket, ARGV[2])
  reply = {1}
else
  local holders = redis.call('ZCARD', KEYS[1])
  local position = redis.call('ZRANK', KEYS[2], ticket)
  local queued = position ~= false
  if not queued then position = redis.call('ZCARD', KEYS[2]) end
  if position < tonumber(ARGV[3]) - holders then
    redis.call('ZREM', KEYS[2], ticket)
    redis.call('ZREM', KEYS[3], ticket)
    redis.call('ZADD', KEYS[1], deadline, ticket)
    redis.call('HSET', KEYS[4], ticket, ARGV[2])
    reply = {1}
  else
    if not queued and ARGV[5] == 'queue' then
      redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[5]), ticket)
      queued = true
    end
    if queued then
      redis.call('ZADD', KEYS[3], deadline, ticket)
      redis.call('HSET', KEYS[4], ticket, ARGV[2])
    end
    reply = {0, holders + position}
  end
end
keep(tonumber(ARGV[8]))
if #dropped > 0 then redis.call('PUBLISH', ARGV[6], ARGV[7]) end
return reply
`;

// Release: out of the holders and the line; waiters hear of it only when something was there.
// KEYS as ACQUIRE_SLOT. ARGV: 1 ticket, 2 channel, 3 message.
const RELEASE_SLOT = `
local removed = redis.call('ZREM', KEYS[1], ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if removed > 0 then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return removed
`;

// Renew: only leases still running are extended; one already run out stays out even before an acquire drops it.
// KEYS as ACQUIRE_SLOT. ARGV: 1 lease ms, 2 key expiry ms, 3.. tickets.
const RENEW_SLOTS = `${SLOT_NOW}${SLOT_KEEP}
local deadline = now + tonumber(ARGV[1])
local renewed = 0
for i = 3, #ARGV do
  if tonumber(redis.call('ZSCORE', KEYS[1], ARGV[i]) or '0') > now then
    redis.call('ZADD', KEYS[1], deadline, ARGV[i])
    renewed = renewed + 1
  elseif tonumber(redis.call('ZSCORE', KEYS[3], ARGV[i]) or '0') > now then
    redis.call('ZADD', KEYS[3], deadline, ARGV[i])
    renewed = renewed + 1
  end
end
if renewed > 0 then keep(tonumber(ARGV[2])) end
return renewed
`;

// Holders whose lease still runs. KEYS[1] holders.
const SLOT_HOLDERS = `${SLOT_NOW}
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
`;

/** An idle semaphore's keys go this many lease periods after its last acquire or renewal. */
const SLOT_KEY_LEASES = 10;
const LIST_BATCH_EXTRA = 8;
/** Every record field but the outcome; taskId first (its absence means no record). */
const SUMMARY_FIELDS = ['taskId', 'principal', 'era', 'tool', 'upstream', 'status', 'statusMessage', 'createdAt', 'createdAtUs', 'lastUpdatedAt', 'ttlMs', 'pollIntervalMs', 'inputRequests', 'native', 'attempt', 'queued'] as const;

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
  private readonly topics = new EventEmitter();
  private subscriber: Redis | undefined;
  private subscribed: Promise<unknown> | undefined;
  private secret: Promise<Buffer> | undefined;
  private cursors: CursorCodec | undefined;

  constructor(
    readonly redis: Redis,
    prefix: string,
    private readonly options: { resultGraceMs?: number } = {},
  ) {
    this.keys = redisKeys(prefix);
    this.events.setMaxListeners(0);
    this.topics.setMaxListeners(0);
    redis.defineCommand('taskgateCreate', { numberOfKeys: 1, lua: CREATE });
    redis.defineCommand('taskgateTransition', { numberOfKeys: 2, lua: TRANSITION });
    redis.defineCommand('taskgateLease', { numberOfKeys: 2, lua: LEASE });
    redis.defineCommand('taskgateTakeOrphans', { numberOfKeys: 2, lua: TAKE_ORPHANS });
    redis.defineCommand('taskgateSaveSession', { numberOfKeys: 1, lua: SAVE_SESSION });
    redis.defineCommand('taskgateAcquireSlot', { numberOfKeys: 5, lua: ACQUIRE_SLOT });
    redis.defineCommand('taskgateReleaseSlot', { numberOfKeys: 5, lua: RELEASE_SLOT });
    redis.defineCommand('taskgateRenewSlots', { numberOfKeys: 5, lua: RENEW_SLOTS });
    redis.defineCommand('taskgateSlotHolders', { numberOfKeys: 1, lua: SLOT_HOLDERS });
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
      'ttlMs', String(input.ttlMs),
      'pollIntervalMs', String(input.pollIntervalMs),
    ];
    if (input.statusMessage !== undefined) fields.push('statusMessage', input.statusMessage);
    if (input.native === true) fields.push('native', '1');
    if (input.call !== undefined) fields.push('call', JSON.stringify(input.call));
    const created = (await this.command('taskgateCreate', this.keys.task(input.taskId), this.keys.taskEvents(), ...fields)) as string[] | null;
    if (created === null) throw new Error(`task ${input.taskId} already exists`);
    const task = parseTask(created);
    // Listed only after the record exists: a crash in between leaves a task that works but is not listed,
    // never a listing entry without a task.
    // The index outlives its newest task's TTL (and the expired-id memory), then goes: sessions come and go.
    const indexKey = this.keys.principalTasks(task.principal);
    await this.redis.multi().zadd(indexKey, 0, listingKey(task)).pexpire(indexKey, task.ttlMs + EXPIRED_MEMORY_MS).exec();
    return task;
  }

  async get(taskId: string, options: { outcome?: boolean } = {}): Promise<TaskRecord | undefined> {
    const key = this.keys.task(taskId);
    if (options.outcome === true) {
      const fields = await this.redis.hgetall(key);
      return Object.keys(fields).length === 0 ? undefined : parseTask(fields);
    }
    return summaryFromHmget(await this.redis.hmget(key, ...SUMMARY_FIELDS));
  }

  async expired(taskId: string): Promise<boolean> {
    // The marker outlives the record; while the record is there, the task has not expired.
    const [marker, record] = await Promise.all([this.redis.exists(this.keys.taskExpired(taskId)), this.redis.exists(this.keys.task(taskId))]);
    return marker === 1 && record === 0;
  }

  async transition(taskId: string, change: TaskChange): Promise<TransitionResult> {
    const mode = change.statusMessage === undefined ? 'keep' : change.statusMessage === null ? 'clear' : 'set';
    const reply = (await this.command(
      'taskgateTransition',
      this.keys.task(taskId),
      this.keys.taskExpired(taskId),
      this.keys.taskEvents(),
      change.to,
      mode,
      change.statusMessage ?? '',
      change.outcome === undefined ? '' : JSON.stringify(change.outcome),
      String(this.options.resultGraceMs ?? DEFAULT_RESULT_GRACE_MS),
      String(EXPIRED_MEMORY_MS),
      change.inputRequests === undefined ? 'keep' : change.inputRequests === null ? 'clear' : 'set',
      change.inputRequests ? JSON.stringify(change.inputRequests) : '',
      change.attempt === undefined ? '' : String(change.attempt),
      change.queued === undefined ? 'keep' : change.queued ? 'set' : 'clear',
    )) as string[];
    const [verdict, ...fields] = reply;
    if (verdict === 'not_found') return { ok: false, reason: 'not_found' };
    const task = parseTask(fields);
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
      const pipeline = this.redis.pipeline();
      for (const key of keys) pipeline.hmget(this.keys.task(key.slice(key.indexOf(':') + 1)), ...SUMMARY_FIELDS);
      const records = (await pipeline.exec()) ?? [];
      const expired: string[] = [];
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i] as string;
        const task = summaryFromHmget((records[i]?.[1] as (string | null)[] | undefined) ?? []);
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
          if (task !== undefined && task.lastUpdatedAt !== this.lastEvents.get(taskId)) {
            this.lastEvents.set(taskId, task.lastUpdatedAt);
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
    this.topics.removeAllListeners();
    await this.subscriber?.quit().catch(() => this.subscriber?.disconnect());
    await this.redis.quit().catch(() => this.redis.disconnect());
  }

  private command(name: string, ...args: string[]): Promise<unknown> {
    return (this.redis as unknown as Record<string, (...a: string[]) => Promise<unknown>>)[name]!(...args);
  }

  private ensureSubscribed(): void {
    if (this.subscriber !== undefined) return;
    // The subscription waits for Redis however long it is away (offline queue, no retry limit) and ioredis renews
    // it after reconnects: watchers must not fail because Redis is slow or restarting.
    const subscriber = this.redis.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null });
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
    subscriber.on('message', (channel: string, payload: string) => {
      if (channel !== this.keys.taskEvents()) {
        try {
          this.topics.emit(channel, JSON.parse(payload) as JsonObject);
        } catch {
          // not JSON: not ours
        }
        return;
      }
      let task: TaskRecord;
      try {
        task = parseTask(JSON.parse(payload) as string[]);
      } catch {
        return;
      }
      if (this.events.listenerCount(task.taskId) > 0) this.lastEvents.set(task.taskId, task.lastUpdatedAt);
      this.events.emit(task.taskId, task);
    });
    this.subscribed = subscriber.subscribe(this.keys.taskEvents()).catch(() => undefined); // only on close
  }

  async lease(taskIds: readonly string[], owner: string, leaseMs: number, options: { renew?: boolean } = {}): Promise<void> {
    if (taskIds.length === 0) return;
    await this.command('taskgateLease', this.keys.running(), this.keys.runningOwners(), owner, String(leaseMs), options.renew ? 'renew' : 'claim', ...taskIds);
  }

  async unlease(taskId: string): Promise<void> {
    await this.redis.multi().zrem(this.keys.running(), taskId).hdel(this.keys.runningOwners(), taskId).exec();
  }

  async takeOrphans(limit: number): Promise<{ taskId: string; owner: string }[]> {
    const flat = (await this.command('taskgateTakeOrphans', this.keys.running(), this.keys.runningOwners(), String(limit))) as string[];
    const orphans: { taskId: string; owner: string }[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) orphans.push({ taskId: flat[i] as string, owner: flat[i + 1] as string });
    return orphans;
  }

  async acquireSlot(key: string, ticket: string, owner: string, limit: number, leaseMs: number, options: { queue?: boolean } = {}): Promise<SlotGrant> {
    const [granted, ahead] = (await this.command(
      'taskgateAcquireSlot',
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
    await this.command('taskgateReleaseSlot', ...slotKeyList(this.keys.slot(key)), ticket, this.keys.topic('slots'), JSON.stringify({ key }));
  }

  async renewSlots(entries: readonly { key: string; ticket: string }[], leaseMs: number): Promise<void> {
    // One script per semaphore: each semaphore's keys live in their own Cluster slot.
    const byKey = new Map<string, string[]>();
    for (const { key, ticket } of entries) byKey.set(key, [...(byKey.get(key) ?? []), ticket]);
    await Promise.all(
      [...byKey].map(([key, tickets]) =>
        this.command('taskgateRenewSlots', ...slotKeyList(this.keys.slot(key)), String(leaseMs), String(leaseMs * SLOT_KEY_LEASES), ...tickets),
      ),
    );
  }

  async slotHolders(key: string): Promise<string[]> {
    return (await this.command('taskgateSlotHolders', this.keys.slot(key).holders)) as string[];
  }

  async publish(topic: string, message: JsonObject): Promise<number> {
    return this.redis.publish(this.keys.topic(topic), JSON.stringify(message));
  }

  async subscribers(topic: string): Promise<number> {
    const reply = (await this.redis.pubsub('NUMSUB', this.keys.topic(topic))) as [string, number | string];
    return Number(reply[1] ?? 0);
  }

  async subscribe(topic: string, handler: (message: JsonObject) => void): Promise<() => void> {
    this.ensureSubscribed();
    const channel = this.keys.topic(topic);
    const subscriber = this.subscriber as Redis;
    if (this.topics.listenerCount(channel) === 0) await subscriber.subscribe(channel);
    this.topics.on(channel, handler);
    return () => {
      this.topics.off(channel, handler);
      if (this.topics.listenerCount(channel) === 0) void subscriber.unsubscribe(channel).catch(() => undefined);
    };
  }

  async saveSession(sessionId: string, fields: Record<string, string | null>, ttlMs: number, options: { create?: boolean } = {}): Promise<boolean> {
    const args: string[] = [];
    for (const [field, value] of Object.entries(fields)) args.push(field, value === null ? 'del' : 'set', value ?? '');
    const saved = await this.command('taskgateSaveSession', this.keys.session(sessionId), options.create ? 'create' : 'update', String(Math.max(1, Math.ceil(ttlMs))), ...args);
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

/** A record from an HMGET of SUMMARY_FIELDS; undefined when there is no record (no taskId). */
function summaryFromHmget(values: readonly (string | null | undefined)[]): TaskRecord | undefined {
  if (values[0] === null || values[0] === undefined) return undefined;
  const fields: Record<string, string> = {};
  SUMMARY_FIELDS.forEach((name, i) => {
    const value = values[i];
    if (value !== null && value !== undefined) fields[name] = value;
  });
  return parseTask(fields);
}

/** A record from a HGETALL reply (flat array, as Lua returns it, or an object, as ioredis returns it). */
function parseTask(input: string[] | Record<string, string>): TaskRecord {
  const fields: Record<string, string> = {};
  if (Array.isArray(input)) for (let i = 0; i + 1 < input.length; i += 2) fields[input[i] as string] = input[i + 1] as string;
  else Object.assign(fields, input);
  const status = fields.status as TaskStatus;
  if (!(TASK_STATUSES as readonly string[]).includes(status) || fields.taskId === undefined) throw new Error('not a task record');
  const task: TaskRecord = {
    taskId: fields.taskId,
    principal: fields.principal ?? '',
    era: fields.era === 'modern' ? 'modern' : 'legacy',
    tool: fields.tool ?? '',
    upstream: fields.upstream ?? '',
    status,
    createdAt: Number(fields.createdAt),
    createdAtUs: Number(fields.createdAtUs),
    lastUpdatedAt: Number(fields.lastUpdatedAt),
    ttlMs: Number(fields.ttlMs),
    pollIntervalMs: Number(fields.pollIntervalMs),
  };
  if (fields.statusMessage !== undefined) task.statusMessage = fields.statusMessage;
  if (fields.native === '1') task.native = true;
  if (fields.attempt !== undefined) task.attempt = Number(fields.attempt);
  if (fields.queued === '1') task.queued = true;
  if (fields.call !== undefined) task.call = JSON.parse(fields.call) as TaskRecord['call'];
  if (fields.inputRequests !== undefined) task.inputRequests = JSON.parse(fields.inputRequests) as TaskRecord['inputRequests'];
  if (fields.outcome !== undefined) task.outcome = JSON.parse(fields.outcome) as TaskRecord['outcome'];
  return task;
}
