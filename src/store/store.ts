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
  const redis = connectRedis(config);
  redis.on('error', () => undefined); // reported through ping(), readiness and store.unavailable, not as crashes
  watchConnection(redis, events);
  return new RedisTaskStore(redis, config.prefix, { events, waitForReplica: config.sentinel !== undefined });
}
