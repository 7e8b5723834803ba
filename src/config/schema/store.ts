// The `store` section of the config schema: memory, or Redis as one server, a Sentinel-managed primary or a Cluster.
import { z } from 'zod';
import { DEFAULTS } from './defaults.js';
import { isUrlWithProtocol } from './fields.js';

const redisUrl = z
  .string()
  .refine((v) => isUrlWithProtocol(v, ['redis:', 'rediss:']), { error: 'expected a redis:// or rediss:// URL' });

export const MemoryStoreSchema = z.strictObject({ type: z.literal('memory') });
// Sentinel and Cluster take their options as ioredis does: `tls` is `true` or node's TLS options (ca, cert, key,
// servername, rejectUnauthorized, ...), handed to ioredis as they are.
const redisNodes = z.array(redisUrl).min(1, { error: 'at least one node URL is required' });
const redisAccess = {
  username: z.string().min(1).optional(),
  password: z.string().min(1).optional(),
  tls: z.union([z.boolean(), z.record(z.string(), z.unknown())]).optional(),
};
export const RedisSentinelSchema = z.strictObject({
  /** The primary's name as the sentinels know it (`sentinel monitor <name> ...`). */
  name: z.string().min(1),
  nodes: redisNodes,
  ...redisAccess,
  sentinelUsername: z.string().min(1).optional(),
  sentinelPassword: z.string().min(1).optional(),
});
export const RedisClusterSchema = z.strictObject({ nodes: redisNodes, ...redisAccess });
export const RedisStoreSchema = z
  .strictObject({
    type: z.literal('redis'),
    url: redisUrl.default(DEFAULTS.redisUrl),
    prefix: z.string().min(1).default(DEFAULTS.redisPrefix),
    commandTimeoutMs: z.number().int().min(100).default(DEFAULTS.redisCommandTimeoutMs),
    sentinel: RedisSentinelSchema.optional(),
    cluster: RedisClusterSchema.optional(),
  })
  .superRefine((v, ctx) => {
    if (v.sentinel !== undefined && v.cluster !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['cluster'], input: v.cluster, message: 'a store is either sentinel or cluster, not both' });
    }
  });
export const StoreSchema = z.discriminatedUnion('type', [MemoryStoreSchema, RedisStoreSchema]);
