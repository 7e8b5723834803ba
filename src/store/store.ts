import { Redis } from 'ioredis';
import type { StoreConfig } from '../config/types.js';

/**
 * The gateway's state store. This is the connection and health half every store shares; task records,
 * sessions and events build on it.
 */
export interface Store {
  readonly kind: StoreConfig['type'];
  /** Resolves when the store answers; rejects with a reason otherwise. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

class MemoryStore implements Store {
  readonly kind = 'memory' as const;
  async ping(): Promise<void> {}
  async close(): Promise<void> {}
}

class RedisStore implements Store {
  readonly kind = 'redis' as const;
  readonly redis: Redis;

  constructor(url: string) {
    // No offline queue: while Redis is unreachable, commands fail at once instead of piling up and hanging.
    this.redis = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1 });
    this.redis.on('error', () => undefined); // reported through ping() and readiness, not as crashes
    this.redis.connect().catch(() => undefined);
  }

  async ping(): Promise<void> {
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('Redis did not answer within 1 s')), 1000).unref());
    await Promise.race([this.redis.ping(), timeout]);
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

export function createStore(config: StoreConfig): Store {
  return config.type === 'redis' ? new RedisStore(config.url) : new MemoryStore();
}
