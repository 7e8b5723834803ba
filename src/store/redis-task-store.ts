// The task store on Redis (one server, a Sentinel-managed primary, or a Cluster). Every atomic step is a Lua file in
// redis/scripts/ and every key is built in redis-keys.ts. Each concern is a module of redis/ (records, leases,
// upstream sessions, slots, rate windows, the replica bus, client sessions, approvals, webhook deliveries, per-user
// connections), on one connection and one subscription (redis/task-events.ts); this class builds them and keeps what
// belongs to the whole store: the signing secret and the readiness PING.
import { randomBytes } from 'node:crypto';
import { storeFailureKind } from '../errors.js';
import { NO_EVENTS, type GatewayEvents } from '../events.js';
import { closeConnection, type RedisClient } from './redis-connection.js';
import { redisKeys, type RedisKeys } from './redis-keys.js';
import { RedisApprovals } from './redis/approvals.js';
import { RedisConnections } from './redis/connections.js';
import { RedisDeliveries } from './redis/deliveries.js';
import { RedisLeases } from './redis/leases.js';
import { RedisRates } from './redis/rates.js';
import { defineScripts } from './redis/scripts.js';
import { RedisSemaphores } from './redis/semaphores.js';
import { RedisSessions } from './redis/sessions.js';
import { TaskEvents } from './redis/task-events.js';
import { RedisTasks } from './redis/tasks.js';
import { RedisTopics } from './redis/topics.js';
import { RedisUpstreamSessions } from './redis/upstream-sessions.js';
import { timedScripts } from './store-events.js';
import { CursorCodec, type TaskStore } from './task-store.js';

/** How long /readyz waits for the store's PING before it says the store is slow. */
export const READY_PING_TIMEOUT_MS = 1000;

export class RedisTaskStore implements TaskStore {
  readonly kind = 'redis' as const;
  private readonly keys: RedisKeys;
  /** Task changes for this replica's watchers, and the bus's topics, on one subscribing connection. */
  private readonly events: TaskEvents;
  private secret: Promise<Buffer> | undefined;
  private cursors: CursorCodec | undefined;
  readonly tasks: RedisTasks;
  /** Replica messages (publish, subscribe, subscribers), on this store's subscription. */
  readonly bus: RedisTopics;
  readonly leases: RedisLeases;
  readonly upstreamSessions: RedisUpstreamSessions;
  readonly slots: RedisSemaphores;
  readonly rates: RedisRates;
  readonly approvals: RedisApprovals;
  readonly deliveries: RedisDeliveries;
  readonly sessions: RedisSessions;
  readonly connections: RedisConnections;

  constructor(
    readonly redis: RedisClient,
    prefix: string,
    /**
     * `events`: where the scripts' durations (and slow ones) are announced. `waitForReplica` (a Sentinel-managed
     * primary): a task is acknowledged created, and its end final, only once a replica has it too (WAIT), so a
     * failover right after loses neither; replication is asynchronous otherwise.
     */
    options: { resultGraceMs?: number; events?: GatewayEvents; waitForReplica?: boolean } = {},
  ) {
    const keys = (this.keys = redisKeys(prefix));
    const run = timedScripts(defineScripts(redis), options.events ?? NO_EVENTS);
    this.events = new TaskEvents(redis, keys, { deliver: (channel, payload) => this.bus.deliver(channel, payload), read: (taskId) => this.tasks.get(taskId) });
    this.bus = new RedisTopics(redis, keys, () => this.events.connection());
    this.approvals = new RedisApprovals(run, keys, redis, (taskId) => this.tasks.get(taskId));
    this.tasks = new RedisTasks({
      run,
      keys,
      redis,
      events: this.events,
      approvals: this.approvals,
      cursors: () => this.cursorCodec(),
      resultGraceMs: options.resultGraceMs,
      waitForReplica: options.waitForReplica,
    });
    this.leases = new RedisLeases(run, keys);
    this.upstreamSessions = new RedisUpstreamSessions(run, keys, redis);
    this.slots = new RedisSemaphores(run, keys);
    this.rates = new RedisRates(run, keys);
    this.deliveries = new RedisDeliveries(run, keys, redis);
    this.sessions = new RedisSessions(run, keys, redis);
    this.connections = new RedisConnections(run, keys, redis);
    // Subscribe from the start: a watcher added for a new task must not miss its first events while a lazy
    // subscription is still being set up.
    this.events.connection();
  }

  /** Resolves once the event subscription is active (a watcher added before then could miss an event). */
  ready(): Promise<void> {
    return this.events.ready();
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
    this.bus.close();
    await this.events.close();
    await closeConnection(this.redis);
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
