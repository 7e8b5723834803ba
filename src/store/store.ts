import { Redis } from 'ioredis';
import type { StoreConfig } from '../config/types.js';
import { NO_EVENTS, type GatewayEvents } from '../events.js';
import { MemoryTaskStore } from './memory-task-store.js';
import { RedisTaskStore } from './redis-task-store.js';
import { watchConnection } from './store-events.js';
import type { TaskStore } from './task-store.js';

export type { TaskStore } from './task-store.js';

/**
 * The configured store. Redis commands issued while the connection is down fail after one reconnection attempt
 * (or 5 s) instead of queueing without bound: a caller gets a prompt error, not a hang. Outages and slow
 * operations are announced on `events`.
 */
export function createStore(config: StoreConfig, events: GatewayEvents = NO_EVENTS): TaskStore {
  if (config.type === 'memory') return new MemoryTaskStore();
  // Reconnect attempts at most 500 ms apart: after an outage every replica is back within about that much of
  // the others, inside the two lease periods they get to renew before anyone is declared lost (leases.ts).
  const redis = new Redis(config.url, { maxRetriesPerRequest: 1, commandTimeout: 5000, retryStrategy: (times) => Math.min(times * 50, 500) });
  redis.on('error', () => undefined); // reported through ping(), readiness and store.unavailable, not as crashes
  watchConnection(redis, events);
  return new RedisTaskStore(redis, config.prefix, { events });
}
