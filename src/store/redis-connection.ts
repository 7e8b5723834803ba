// The Redis connection the store runs on, in the configured topology: one server (`url`), a Sentinel-managed
// primary (`sentinel`) or a Redis Cluster (`cluster`). All three are ioredis clients that take the same commands;
// the store asks `isCluster` only where a cluster answers differently (commands of several slots, PUBSUB counts).
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis, type ClusterOptions, type Command, type RedisOptions } from 'ioredis';
import { DEFAULTS } from '../config/schema/defaults.js';
import type { RedisAccessConfig, StoreConfig } from '../config/types.js';

export type RedisClient = Redis | Cluster;

/**
 * Commands issued while the connection is down fail after one reconnection attempt instead of queueing without
 * bound, and any command fails after store.commandTimeoutMs without an answer (a Redis blocked by a slow script or
 * DEBUG SLEEP): a caller gets a prompt error, not a hang.
 */
function commandLimits(config: Extract<StoreConfig, { type: 'redis' }>): RedisOptions {
  return { maxRetriesPerRequest: 1, commandTimeout: config.commandTimeoutMs ?? DEFAULTS.redisCommandTimeoutMs };
}

// Reconnect attempts at most 500 ms apart: after an outage every replica is back within about that much of the
// others, inside the two lease periods they get to renew before anyone is declared lost (leases.ts).
const reconnectDelay = (times: number): number => Math.min(times * 50, 500);

export function isCluster(client: RedisClient): client is Cluster {
  return client instanceof Cluster;
}

/** A client for the configured topology; nothing is connected yet when it returns (ioredis connects on its own). */
export function connectRedis(config: Extract<StoreConfig, { type: 'redis' }>, onTimeout?: CommandTimeoutListener): RedisClient {
  return withDisconnectedTimeoutsTold(createClient(config), onTimeout);
}

/** Told of each command that timed out (`command`: its name), and whether the connection was up meanwhile. */
export type CommandTimeoutListener = (command: string, connected: boolean) => void;

/** What a command that timed out without a connection rejects with (errors.ts tells it from a slow store). */
export const NO_CONNECTION_TIMEOUT = 'No connection to Redis within the command timeout';

/**
 * ioredis rejects a command unanswered after `commandTimeout` with "Command timed out" whether the server was slow
 * to answer or the command waited in the offline queue while the client reconnected. Only the first is a slow store:
 * a timeout that fires while the client is not connected is relabelled, so the client hears "unavailable", not
 * "slow". Done on each command's own reject (an instance field ioredis calls when the timer fires).
 */
function withDisconnectedTimeoutsTold<C extends RedisClient>(client: C, onTimeout: CommandTimeoutListener | undefined): C {
  const send = client.sendCommand.bind(client) as (command: Command, ...rest: unknown[]) => unknown;
  // A cluster sends a redirected command (MOVED, ASK) through here again: its reject is wrapped once.
  const wrapped = new WeakSet<Command>();
  client.sendCommand = ((command: Command, ...rest: unknown[]) => {
    if (wrapped.has(command)) return send(command, ...rest);
    wrapped.add(command);
    const reject = command.reject;
    command.reject = (error: Error) => {
      const timedOut = error.message === 'Command timed out';
      const connected = client.status === 'ready';
      if (timedOut) onTimeout?.(command.name, connected);
      reject(timedOut && !connected ? new Error(`${NO_CONNECTION_TIMEOUT} (${client.status})`) : error);
    };
    return send(command, ...rest);
  }) as C['sendCommand'];
  return client;
}

function createClient(config: Extract<StoreConfig, { type: 'redis' }>): RedisClient {
  if (config.cluster !== undefined) {
    const options: ClusterOptions = {
      clusterRetryStrategy: reconnectDelay,
      // Commands of one tick go to each node as one pipeline: a listing's reads of many slots cost one round trip
      // per node, as a pipeline does on one server.
      enableAutoPipelining: true,
      redisOptions: { ...commandLimits(config), ...access(config.cluster, config.cluster.nodes) },
    };
    return new Cluster(config.cluster.nodes.map(hostAndPort), options);
  }
  if (config.sentinel !== undefined) {
    const { sentinel } = config;
    const sentinelTls = sentinel.nodes.some((url) => url.startsWith('rediss:'));
    return new Redis({
      ...commandLimits(config),
      ...access(sentinel, []),
      retryStrategy: reconnectDelay,
      name: sentinel.name,
      sentinels: sentinel.nodes.map(hostAndPort),
      ...(sentinel.sentinelUsername === undefined ? {} : { sentinelUsername: sentinel.sentinelUsername }),
      ...(sentinel.sentinelPassword === undefined ? {} : { sentinelPassword: sentinel.sentinelPassword }),
      ...(sentinelTls ? { enableTLSForSentinelMode: true, sentinelTLS: tlsOptions(sentinel.tls) ?? {} } : {}),
      // A primary demoted while still reachable (a manual failover, a partition healed) answers writes with
      // READONLY: reconnect (the sentinels name the new primary) and send the command again. A dead primary needs
      // nothing: its connection fails and ioredis asks the sentinels anew. (ioredis' failoverDetector is left off:
      // its +switch-master arrives after the client has already moved and drops the new connection once more.)
      reconnectOnError: (error) => (error.message.startsWith('READONLY') ? 2 : false),
    });
  }
  return new Redis(config.url, { ...commandLimits(config), retryStrategy: reconnectDelay });
}

/** A client's states in which it holds a socket (connected, or connecting): closing it ends with an 'end' event. */
const WITH_SOCKET = new Set(['connecting', 'connect', 'ready', 'monitoring']);

/**
 * Closes a client for good: QUIT lets replies in flight arrive; the disconnect after it makes sure nothing reconnects
 * (a Sentinel client with ioredis' failover detector kept reconnecting to its sentinels after QUIT). Resolves once a
 * server or Sentinel client's socket is closed (ioredis' 'end'), so that nothing of it outlasts the store's close; a
 * Cluster's once its nodes answered QUIT.
 */
export async function closeConnection(client: RedisClient): Promise<void> {
  await client.quit().catch(() => undefined);
  // Asked after QUIT: a client that lost its server meanwhile is reconnecting, holds no socket and will not say 'end'.
  const ended = !isCluster(client) && WITH_SOCKET.has(client.status) ? new Promise<void>((resolve) => client.once('end', () => resolve())) : undefined;
  client.disconnect();
  await ended;
}

/**
 * A second connection to the same deployment for SUBSCRIBE. It waits for Redis however long it is away (offline
 * queue, no retry limit) and ioredis renews its subscriptions after reconnects: watchers must not fail because
 * Redis is slow or restarting.
 */
export function subscriberConnection(client: RedisClient): RedisClient {
  if (isCluster(client)) {
    // One more connection per master for the topics' shard channels (RedisTopics.subscribe).
    return client.duplicate([], { enableOfflineQueue: true, shardedSubscribers: true, redisOptions: { ...client.options.redisOptions, maxRetriesPerRequest: null } });
  }
  return client.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null });
}

/** Credentials and TLS for the data nodes; `rediss://` among `nodes` turns TLS on when `tls` does not say. */
function access(config: RedisAccessConfig, nodes: readonly string[]): Pick<RedisOptions, 'username' | 'password' | 'tls'> {
  const tls = tlsOptions(config.tls ?? (nodes.some((url) => url.startsWith('rediss:')) ? true : undefined));
  return {
    ...(config.username === undefined ? {} : { username: config.username }),
    ...(config.password === undefined ? {} : { password: config.password }),
    ...(tls === undefined ? {} : { tls }),
  };
}

/** `tls: true` is TLS with node's defaults; an object is node's TLS options as they are. */
function tlsOptions(tls: RedisAccessConfig['tls']): ConnectionOptions | undefined {
  if (tls === undefined || tls === false) return undefined;
  return tls === true ? {} : (tls as ConnectionOptions);
}

function hostAndPort(url: string): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: parsed.port === '' ? 6379 : Number(parsed.port) };
}
