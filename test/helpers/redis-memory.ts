// What a key prefix holds in Redis, as Redis itself counts it: the sum of MEMORY USAGE over every key under the
// prefix (each key's own allocation, values and encoding included; not the server's fixed or shared costs). Tests
// and the stress script compare it to the stored-bytes budgets, which are meant to bound it.
import type { Redis } from 'ioredis';

export async function redisPrefixMemory(redis: Redis, prefix: string): Promise<{ bytes: number; keys: number }> {
  let bytes = 0;
  let keys = 0;
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    // SAMPLES 0: every element of a large set or hash is counted, not estimated from a sample.
    const sizes = await Promise.all(batch.map((key) => redis.memory('USAGE', key, 'SAMPLES', 0)));
    for (const size of sizes) {
      if (size === null) continue; // gone meanwhile
      bytes += Number(size);
      keys++;
    }
  } while (cursor !== '0');
  return { bytes, keys };
}
