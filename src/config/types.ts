// The effective, validated configuration. Produced only by load.ts (defaults applied, `${ENV}` interpolated,
// deep-frozen); everything else in the gateway reads these types and never the raw YAML.
//
// Every type follows from the schema (src/config/schema/), where each key is written once with its meaning
// (`.describe()`, read in docs/configuration.md): a section the loader hands on as parsed is the schema's output;
// where build.ts turns the file's form into the running one (upstreams named and prefixed, task defaults completed,
// task tools named, API keys hashed, identity and upstream auth resolved), the type names only what changes.
import type { z } from 'zod';
import type { IdentityConfig, UpstreamAuthConfig } from './identity.js';
import type { Loaded } from './loaded.js';
import type {
  AccessRuleSchema,
  AdminSchema,
  ApiKeySchema,
  ApprovalSchema,
  CorsSchema,
  DashboardSchema,
  ListenSchema,
  ListsSchema,
  LogSchema,
  MemoryStoreSchema,
  MetricsSchema,
  MrtrSchema,
  NameSelectionSchema,
  OAuthSchema,
  PolicyDefaultsSchema,
  RateLimitRuleSchema,
  RawConfig,
  RedisClusterSchema,
  RedisSentinelSchema,
  RedisStoreSchema,
  ReplicasSchema,
  RuleSchema,
  SessionsSchema,
  SseSchema,
  TasksSchema,
  ToolOverrideSchema,
  ToolSelectionSchema,
  UpstreamSchema,
  WEBHOOK_EVENTS,
  WebhookDeliverySchema,
  WebhookSchema,
} from './schema.js';

import type { UpstreamCommonKey } from './schema/upstreams.js';

export type { PlainCalls } from './schema/background.js';
export type { TaskMode } from './schema/tasks.js';

/** A section as the schema parses it, frozen. */
type Parsed<S extends z.ZodType> = Loaded<z.output<S>>;

/**
 * `T` with the keys `K` optional: the loader always sets them, but configs built in code (tests, benches) may leave
 * them out, and their readers fall back to the schema's default.
 */
type SetByLoader<T, K extends keyof T> = Omit<T, K> & Partial<Pick<T, K>>;

export type ListenConfig = Parsed<typeof ListenSchema>;
export type CorsConfig = Parsed<typeof CorsSchema>;

/** A Sentinel-managed primary: the sentinels are asked where it is, and again after a failover. */
export type RedisSentinelConfig = Parsed<typeof RedisSentinelSchema>;
/** A Redis Cluster: any of its nodes; the rest are discovered. */
export type RedisClusterConfig = Parsed<typeof RedisClusterSchema>;
/** How to reach and authenticate to Redis nodes, in ioredis' shapes (`tls`: true or node's TLS options). */
export type RedisAccessConfig = Pick<RedisClusterConfig, 'username' | 'password' | 'tls'>;
export type StoreConfig = Parsed<typeof MemoryStoreSchema> | SetByLoader<Parsed<typeof RedisStoreSchema>, 'commandTimeoutMs'>;

export type NameSelection = Parsed<typeof NameSelectionSchema>;
export type ToolOverride = Parsed<typeof ToolOverrideSchema>;
export type ToolSelection = Parsed<typeof ToolSelectionSchema>;

type RawUpstream<T extends string> = Extract<z.output<typeof UpstreamSchema>, { transport: T }>;
/**
 * What build.ts sets on every upstream: its name (the key under `upstreams:`), its prefix (written or derived), its
 * `auth` with every default resolved, and `maxSessions` (see SetByLoader).
 */
interface UpstreamIdentity {
  name: string;
  prefix: string;
  auth?: UpstreamAuthConfig;
  maxSessions?: number;
}
type Upstream<T extends string> = Loaded<Omit<RawUpstream<T>, keyof UpstreamIdentity>> & UpstreamIdentity;
export type StdioUpstreamConfig = Upstream<'stdio'>;
export type HttpUpstreamConfig = Upstream<'streamable-http' | 'sse'>;
export type UpstreamConfig = StdioUpstreamConfig | HttpUpstreamConfig;
/** What every upstream has alike, whatever its transport. */
export type UpstreamCommon = Pick<StdioUpstreamConfig, UpstreamCommonKey | 'name'>;

/** Calls held until a person approves them (rules only). */
export type ApprovalPolicy = Parsed<typeof ApprovalSchema>;
/** A tool's whole policy: `tasks.defaults` merged onto DEFAULT_POLICY, a matching rule's keys onto that. */
export type TaskPolicy = Required<Parsed<typeof PolicyDefaultsSchema>> & { approval?: ApprovalPolicy };
export type RetryPolicy = TaskPolicy['retry'];
/** A rule keeps only the keys the file gives it (build.ts drops the rest): they override the defaults'. */
export type TaskRule = Parsed<typeof RuleSchema>;

type RawTasks = z.output<typeof TasksSchema>;
/** The task tools as they run: on or off (`auto` decided at load), each with its name. */
export type TaskToolsConfig = Loaded<Omit<RawTasks['taskTools'], 'enabled' | 'prefix' | 'names'>> & { enabled: boolean; names: TaskToolNames };
export type TaskToolNames = Required<RawTasks['taskTools']['names']>;
export type TasksConfig = Loaded<Omit<RawTasks, 'defaults' | 'taskTools'>> & { defaults: TaskPolicy; taskTools: TaskToolsConfig };

export type SessionsConfig = Parsed<typeof SessionsSchema>;
export type SseConfig = Parsed<typeof SseSchema>;
export type MrtrConfig = Parsed<typeof MrtrSchema>;
export type ReplicasConfig = Parsed<typeof ReplicasSchema>;
export type LogConfig = Parsed<typeof LogSchema>;
export type ListsConfig = Parsed<typeof ListsSchema>;
export type MetricsConfig = Parsed<typeof MetricsSchema>;
export type DashboardConfig = Parsed<typeof DashboardSchema>;

/** A static bearer token, kept only as its SHA-256 (hex, lowercase): the key itself is hashed at load. */
export type ApiKeyConfig = Loaded<Omit<z.output<typeof ApiKeySchema>, 'key' | 'sha256'>> & { sha256: string };
/** The OAuth resource server settings, `audience` resolved (the resource URI unless set). */
export type OAuthConfig = Loaded<Omit<z.output<typeof OAuthSchema>, 'audience'>> & { audience: string };
export type AccessRule = Parsed<typeof AccessRuleSchema>;
export type RateLimitRule = Parsed<typeof RateLimitRuleSchema>;
/** Per-principal rates; 0 = unlimited. */
export type RateLimits = Required<Omit<RateLimitRule, 'principals'>>;
export type AdminAccess = Parsed<typeof AdminSchema>;
type RawAuth = NonNullable<RawConfig['auth']>;
export type AuthConfig = Loaded<Omit<RawAuth, 'apiKeys' | 'oauth'>> & { apiKeys: readonly ApiKeyConfig[]; oauth: OAuthConfig | undefined };

/** A task or approval event a webhook endpoint may subscribe to (the `type` of its deliveries). */
export type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];
/** One endpoint, its `id` resolved (configured, or derived from its URL). */
export type WebhookConfig = Loaded<Omit<z.output<typeof WebhookSchema>, 'id'>> & { id: string };
export type WebhookDeliveryConfig = Parsed<typeof WebhookDeliverySchema>;

export type GatewayConfig = Loaded<Omit<RawConfig, 'store' | 'upstreams' | 'tasks' | 'auth' | 'identity' | 'webhooks'>> & {
  /** Absolute path of the file this was loaded from (for messages). */
  source: string;
  store: StoreConfig;
  /** In file order. */
  upstreams: readonly UpstreamConfig[];
  tasks: TasksConfig;
  /** Undefined: no authentication (the gateway is for loopback or a trusted network). */
  auth: AuthConfig | undefined;
  identity?: IdentityConfig;
  webhooks: readonly WebhookConfig[];
};
