import { DEFAULTS } from '../config/schema/defaults.js';
import type { StoreConfig } from '../config/types.js';
import { NO_EVENTS, type GatewayEvents } from '../events.js';
import { MemoryTaskStore } from './memory-task-store.js';
import { connectRedis } from './redis-connection.js';
import { RedisTaskStore } from './redis-task-store.js';
import { watchConnection } from './store-events.js';
import type { TaskStore } from './task-store.js';

export type { TaskStore } from './task-store.js';

/** The configured store. Outages and slow operations are announced on `events`. */
export function createStore(config: StoreConfig, events: GatewayEvents = NO_EVENTS): TaskStore {
  if (config.type === 'memory') return new MemoryTaskStore();
  // A command that timed out on a live connection is the store being slow: announced as such (a script's own timing,
  // by its name, is announced by timedScripts already).
  const timeoutMs = config.commandTimeoutMs ?? DEFAULTS.redisCommandTimeoutMs;
  const redis = connectRedis(config, (command, connected) => {
    if (connected && command !== 'evalsha' && command !== 'eval') events.emit('store.slow', { operation: command, durationMs: timeoutMs });
  });
  redis.on('error', () => undefined); // reported through ping(), readiness and store.unavailable, not as crashes
  watchConnection(redis, events);
  return new RedisTaskStore(redis, config.prefix, { events, waitForReplica: config.sentinel !== undefined });
}
