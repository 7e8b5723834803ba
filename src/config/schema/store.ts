// The `store` section of the config schema: memory, or Redis as one server, a Sentinel-managed primary or a Cluster.
import { z } from 'zod';
import { DEFAULTS } from './defaults.js';
import { isUrlWithProtocol } from './fields.js';

const redisUrl = z
  .string()
  .refine((v) => isUrlWithProtocol(v, ['redis:', 'rediss:']), { error: 'expected a redis:// or rediss:// URL' });

const STORE_TYPE = 'Which store: `memory` or `redis`.';
export const MemoryStoreSchema = z.strictObject({ type: z.literal('memory').describe(STORE_TYPE) });
// Sentinel and Cluster take their options as ioredis does: `tls` is `true` or node's TLS options (ca, cert, key,
// servername, rejectUnauthorized, ...), handed to ioredis as they are.
const redisNodes = z.array(redisUrl).min(1, { error: 'at least one node URL is required' });
/** `servers`: whom the credentials and TLS are for, as the reference says it. */
const redisAccess = (servers: string) => ({
  username: z.string().min(1).optional().describe(`Username for ${servers}.`),
  password: z.string().min(1).optional().describe(`Password for ${servers} (use \`\${ENV}\`; \`check-config\` hides it).`),
  tls: z
    .union([z.boolean(), z.record(z.string(), z.unknown())])
    .optional()
    .describe(`TLS to ${servers}: \`true\`, or node's TLS options (\`ca\`, \`cert\`, \`key\`, \`servername\`,
      \`rejectUnauthorized\`, ...), handed to ioredis as they are.`),
});
export const RedisSentinelSchema = z.strictObject({
  name: z.string().min(1).describe("The primary's name as the sentinels monitor it (`sentinel monitor <name> ...`)."),
  nodes: redisNodes.describe('The sentinels: `redis://host:port` (`rediss://` turns TLS on).'),
  ...redisAccess('the primary and its replicas'),
  sentinelUsername: z.string().min(1).optional().describe('Username for the sentinels themselves.'),
  sentinelPassword: z.string().min(1).optional().describe('Password for the sentinels themselves.'),
});
export const RedisClusterSchema = z.strictObject({
  nodes: redisNodes.describe(`Any of the cluster's nodes, \`redis://host:port\` (\`rediss://\` turns TLS on); the rest
    are discovered.`),
  ...redisAccess('the cluster nodes'),
});
export const RedisStoreSchema = z
  .strictObject({
    type: z.literal('redis').describe(STORE_TYPE),
    url: redisUrl.default(DEFAULTS.redisUrl).describe(`The Redis server: \`redis://[user:password@]host:port[/db]\`, or
      \`rediss://\` for TLS. Unused with \`sentinel\` or \`cluster\`.`),
    prefix: z.string().min(1).default(DEFAULTS.redisPrefix).describe(`Prefix of every Redis key and channel. Replicas
      serving one gateway share it; gateways that share a Redis keep apart by it.`),
    commandTimeoutMs: z.number().int().min(100).default(DEFAULTS.redisCommandTimeoutMs).describe(`How long a Redis
      command may go unanswered on a live connection before the request it serves fails with "the task store is slow"
      (HTTP 503 + \`Retry-After\` for 2026-07-28 clients) instead of waiting on a blocked or overloaded Redis. Long
      enough for the slowest script under load; far below a client's own timeout.`),
    sentinel: RedisSentinelSchema.optional().describe(`A Sentinel-managed primary instead of \`url\` (ioredis' own
      Sentinel support); not together with \`cluster\`. A task's creation and its end are acknowledged once a replica
      has them (\`WAIT 1\`, at most 500 ms).`),
    cluster: RedisClusterSchema.optional().describe(`A Redis Cluster (or Valkey) instead of \`url\`; not together with
      \`sentinel\`. Every Lua script touches the keys of one slot; replica messages use sharded pub/sub.`),
  })
  .superRefine((v, ctx) => {
    if (v.sentinel !== undefined && v.cluster !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['cluster'], input: v.cluster, message: 'a store is either sentinel or cluster, not both' });
    }
  });
export const StoreSchema = z.discriminatedUnion('type', [MemoryStoreSchema, RedisStoreSchema]);
