// The shared test Redis (127.0.0.1:6379 in CI): key prefixes of a test's own, deleted when it is done, so that
// tests and parallel runs never see each other's keys.
import { randomBytes } from 'node:crypto';
import { after } from 'node:test';
import { Redis } from 'ioredis';
import type { TestScope } from './harness.js';

/** The shared test Redis (CI's, at 127.0.0.1:6379 unless TASKGATE_TEST_REDIS_URL says otherwise). */
export const TEST_REDIS_URL = process.env.TASKGATE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A prefix no other test or run uses: `name`, the process and random bits. */
export function uniqueRedisPrefix(name: string): string {
  return `taskgate-${name}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/** Deletes every key under each of `prefixes` on the shared test Redis (SCAN, so a large test does not block it). */
export async function deleteRedisPrefixes(prefixes: readonly string[]): Promise<void> {
  if (prefixes.length === 0) return;
  const redis = new Redis(TEST_REDIS_URL);
  try {
    for (const prefix of prefixes) {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) await redis.unlink(...keys);
      } while (cursor !== '0');
    }
  } finally {
    await redis.quit();
  }
}

/** A key prefix of this test file's own on the shared test Redis, whose keys are deleted when the file's tests are done. */
export function redisTestPrefix(name: string): string {
  const prefix = uniqueRedisPrefix(name);
  after(() => deleteRedisPrefixes([prefix]));
  return prefix;
}

/**
 * A `store` config on the shared test Redis under a prefix of its own, whose keys are deleted when `scope` closes.
 * Ask for it before starting the gateways that use it: the deletion then runs after they have closed.
 */
export function sharedRedisStore(scope: TestScope, name: string): { type: 'redis'; url: string; prefix: string } {
  const prefix = uniqueRedisPrefix(name);
  scope.defer(() => deleteRedisPrefixes([prefix]));
  return { type: 'redis', url: TEST_REDIS_URL, prefix };
}
