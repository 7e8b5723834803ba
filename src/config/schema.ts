// The one schema of the YAML file: shapes, defaults and cross-field rules. It validates the file as written
// (upstreams still a map keyed by name, task rules still partial); load.ts turns the result into GatewayConfig.
import { z } from 'zod';
import { isOriginPattern, ORIGIN_PATTERN_HINT } from './origins.js';
import { backgroundSetting } from './policy.js';
import type { LogConfig, TaskMode, TaskPolicy } from './types.js';

export const DEFAULT_POLICY: Readonly<TaskPolicy> = Object.freeze({
  mode: 'optional',
  ttlMs: 3_600_000,
  maxTtlMs: 86_400_000,
  pollIntervalMs: 1_000,
  maxRunMs: 0,
  taskAfterMs: 2_000,
  concurrency: 0,
  maxTasksPerPrincipal: 1_000,
  retry: Object.freeze({ onLoss: false, maxAttempts: 1 }),
  keepAliveProgressMs: 10_000,
  plainCalls: 'wait',
});

export const DEFAULTS = Object.freeze({
  host: '127.0.0.1',
  port: 8080,
  path: '/mcp',
  maxBodyBytes: 4 * 1024 * 1024,
  maxBatchSize: 20,
  maxJsonDepth: 64,
  clientRequestTimeoutMs: 30_000,
  clientHeadersTimeoutMs: 10_000,
  maxConnections: 1_024,
  maxConnectionsPerAddress: 256,
  clientKeepAliveTimeoutMs: 5_000,
  maxInflightBytes: 256 * 1024 * 1024,
  maxInflightBytesPerPrincipal: 64 * 1024 * 1024,
  maxSessionsPerPrincipal: 1_000,
  maxStreamsPerPrincipal: 100,
  redisUrl: 'redis://127.0.0.1:6379',
  redisPrefix: 'taskgate',
  requestTimeoutMs: 60_000,
  isolation: 'shared',
  restartInitialDelayMs: 500,
  restartMaxDelayMs: 30_000,
  connectTimeoutMs: 10_000,
  headersTimeoutMs: 0,
  bodyTimeoutMs: 0,
  idleTimeoutMs: 1_800_000,
  keepAliveMs: 15_000,
  replayBufferSize: 1_000,
  jsonWindowMs: 50,
  maxBufferedBytesPerStream: 8 * 1024 * 1024,
  maxBufferedBytes: 256 * 1024 * 1024,
  immediateResponse:
    'The tool is running as a background task. Its result will be available when the task completes; you can continue meanwhile.',
  logLevel: 'info',
  shutdownTimeoutMs: 10_000,
  parkTimeoutMs: 300_000,
  taskToolPrefix: 'taskgate_',
  metricsPath: '/metrics',
  dashboardPath: '/ui',
  taskToolWaitSeconds: 20,
  taskToolMaxWaitSeconds: 50,
  listPageSize: 1_000,
  clockToleranceSeconds: 5,
  leaseMs: 3_000,
  drainTimeoutMs: 5_000,
  maxRunningTasks: 10_000,
  protocol: 'auto',
  maxMessageBytes: 16 * 1024 * 1024,
  corsMaxAgeSeconds: 600,
} as const);

export const UPSTREAM_NAME = /^[A-Za-z0-9_-]+$/;
// Characters MCP allows in tool names; a prefix becomes part of every exposed tool name.
const PREFIX = /^[A-Za-z0-9_.\-/]*$/;
const prefix = z.string().regex(PREFIX, { error: 'a prefix may contain only letters, digits, "_", "-", "." and "/"' });
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// eslint-disable-next-line no-control-regex
const CONTROL_CHARS = /[\u0000-\u0008\u000a-\u001f\u007f]/;

export const TRANSPORTS = ['stdio', 'streamable-http', 'sse'] as const;
export const TASK_MODES = ['forbidden', 'optional', 'required', 'always', 'never'] as const;
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const satisfies readonly LogConfig['level'][];

/**
 * A non-negative (or >= min) integer. Digit strings are accepted too, because `${VAR}` interpolation always yields
 * a string: `port: ${PORT:-8080}` must work.
 */
function int(min: number, max: number = Number.MAX_SAFE_INTEGER) {
  return z.preprocess(
    (v) => (typeof v === 'string' && /^\s*-?\d+\s*$/.test(v) ? Number(v) : v),
    z.number().int().min(min).max(max),
  );
}

/** Env values, args and header values: YAML turns `3001` or `true` into non-strings; an operator means the text. */
const text = z.preprocess((v) => (typeof v === 'number' || typeof v === 'boolean' ? String(v) : v), z.string());

function isUrlWithProtocol(value: string, protocols: readonly string[]): boolean {
  try {
    const url = new URL(value);
    return protocols.includes(url.protocol) && url.host !== '';
  } catch {
    return false;
  }
}

const ORIGIN_HINT = 'expected "*" or an origin: scheme://host[:port] with no path, e.g. "https://app.example.com"';
function isOrigin(value: string): boolean {
  if (value === '*') return true;
  try {
    const url = new URL(value);
    return url.origin !== 'null' && url.origin === value;
  } catch {
    return false;
  }
}

const httpUrl = z.string().refine((v) => isUrlWithProtocol(v, ['http:', 'https:']), { error: 'expected an http(s) URL' });
const redisUrl = z
  .string()
  .refine((v) => isUrlWithProtocol(v, ['redis:', 'rediss:']), { error: 'expected a redis:// or rediss:// URL' });

const mode = z.enum(TASK_MODES).transform((m): TaskMode => (m === 'always' ? 'required' : m === 'never' ? 'forbidden' : m));

// Every field optional: used for `tasks.defaults` (merged onto DEFAULT_POLICY) and for rules (merged onto defaults).
const policyShape = {
  mode: mode.optional(),
  ttlMs: int(1).optional(),
  maxTtlMs: int(1).optional(),
  pollIntervalMs: int(1).optional(),
  maxRunMs: int(0).optional(),
  taskAfterMs: int(0).optional(),
  concurrency: int(0).optional(),
  maxTasksPerPrincipal: int(0).optional(),
  keepAliveProgressMs: int(0).optional(),
  plainCalls: z.enum(['wait', 'background']).optional(),
  // Retrying on loss means two attempts unless said otherwise.
  retry: z
    .strictObject({ onLoss: z.boolean(), maxAttempts: int(1).optional() })
    .transform((r) => ({ onLoss: r.onLoss, maxAttempts: r.maxAttempts ?? (r.onLoss ? 2 : 1) }))
    .optional(),
};

export const CorsSchema = z
  .strictObject({
    origins: z.array(z.string().refine(isOriginPattern, { error: ORIGIN_PATTERN_HINT })).min(1, { error: 'list at least one origin (or leave cors out)' }),
    credentials: z.boolean().default(false),
    // Browsers cap it themselves (Chromium at 7200 s); a day is Firefox's cap and the most any browser keeps.
    maxAgeSeconds: int(0, 86_400).default(DEFAULTS.corsMaxAgeSeconds),
  })
  .superRefine((cors, ctx) => {
    // Credentialed CORS for any origin would let every page on the web act with the user's cookies.
    const any = cors.origins.indexOf('*');
    if (cors.credentials && any >= 0) {
      ctx.addIssue({ code: 'custom', path: ['origins', any], input: '*', message: 'must name origins when credentials is true: "*" with credentials would let any page act as the user' });
    }
  });

export const ListenSchema = z.strictObject({
  host: z.string().min(1).default(DEFAULTS.host),
  port: int(0, 65535).default(DEFAULTS.port),
  path: z
    .string()
    .regex(/^\/[^\s?#]*$/, { error: 'expected a path starting with "/" (no spaces, query or fragment)' })
    .default(DEFAULTS.path),
  maxBodyBytes: int(1).default(DEFAULTS.maxBodyBytes),
  maxBatchSize: int(1).default(DEFAULTS.maxBatchSize),
  maxJsonDepth: int(2, 1_000).default(DEFAULTS.maxJsonDepth),
  requestTimeoutMs: int(1).default(DEFAULTS.clientRequestTimeoutMs),
  headersTimeoutMs: int(1).default(DEFAULTS.clientHeadersTimeoutMs),
  maxConnections: int(0).default(DEFAULTS.maxConnections),
  maxConnectionsPerAddress: int(0).default(DEFAULTS.maxConnectionsPerAddress),
  keepAliveTimeoutMs: int(1).default(DEFAULTS.clientKeepAliveTimeoutMs),
  maxInflightBytes: int(0).default(DEFAULTS.maxInflightBytes),
  maxInflightBytesPerPrincipal: int(0).default(DEFAULTS.maxInflightBytesPerPrincipal),
  // Compared exactly with the Origin header, which never has a path or trailing slash: catch those here.
  allowedOrigins: z.array(z.string().refine(isOrigin, { error: ORIGIN_HINT })).default(() => []),
  allowedHosts: z
    .array(
      z
        .string()
        .regex(/^[^\s/@]+$/, { error: 'expected a host or host:port as sent in the Host header, not a URL' })
        .transform((h) => h.toLowerCase()), // Host is case-insensitive; the front end compares lowercase
    )
    .default(() => []),
  // Absent: no CORS at all (browsers on other origins cannot read any answer).
  cors: CorsSchema.optional(),
});

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
    sentinel: RedisSentinelSchema.optional(),
    cluster: RedisClusterSchema.optional(),
  })
  .superRefine((v, ctx) => {
    if (v.sentinel !== undefined && v.cluster !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['cluster'], input: v.cluster, message: 'a store is either sentinel or cluster, not both' });
    }
  });
const StoreSchema = z.discriminatedUnion('type', [MemoryStoreSchema, RedisStoreSchema]);

const TOOL_NAME = /^[A-Za-z0-9_.\-/]{1,128}$/;
const toolName = z.string().regex(TOOL_NAME, { error: 'a tool name is 1-128 letters, digits, "_", "-", "." or "/"' });

// What an upstream exposes (`upstreams.<name>.tools|prompts|resources`). Globs match the upstream's own names
// (tool and prompt names before prefix and rename, resource URIs and templates' uriTemplate text).
const globList = z.array(z.string().min(1, { error: 'expected a non-empty glob' }));
const selectionShape = { include: globList.optional(), exclude: globList.default(() => []) };
export const NameSelectionSchema = z.strictObject(selectionShape);
export const ToolOverrideSchema = z.strictObject({
  name: toolName.optional(),
  title: text.optional(),
  description: text.optional(),
});
export const ToolSelectionSchema = z
  .strictObject({ ...selectionShape, overrides: z.record(z.string().min(1), ToolOverrideSchema).default(() => ({})) })
  .superRefine((selection, ctx) => {
    // Two tools of one upstream renamed alike would be one exposed name with two meanings.
    const claimed = new Map<string, string>();
    for (const [tool, override] of Object.entries(selection.overrides)) {
      if (override.name === undefined) continue;
      const first = claimed.get(override.name);
      if (first !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['overrides', tool, 'name'], input: override.name, message: `'${override.name}' is already the new name of tool '${first}'` });
      } else claimed.set(override.name, tool);
    }
  });

const upstreamCommon = {
  prefix: prefix.optional(),
  tools: ToolSelectionSchema.optional(),
  prompts: NameSelectionSchema.optional(),
  resources: NameSelectionSchema.optional(),
  requestTimeoutMs: int(0).default(DEFAULTS.requestTimeoutMs),
  taskConcurrency: int(0).default(0),
  // At least 64 KiB (a smaller one is a unit mistake: initialize and tools/list need more); at most 512 MiB, about the
  // longest string V8 can hold, which a message must become to be parsed.
  maxMessageBytes: int(64 * 1024, 512 * 1024 * 1024).default(DEFAULTS.maxMessageBytes),
};

export const RestartSchema = z
  .strictObject({
    initialDelayMs: int(1).default(DEFAULTS.restartInitialDelayMs),
    maxDelayMs: int(1).default(DEFAULTS.restartMaxDelayMs),
  })
  .superRefine((v, ctx) => {
    if (v.maxDelayMs < v.initialDelayMs) {
      ctx.addIssue({ code: 'custom', path: ['maxDelayMs'], input: v.maxDelayMs, message: `must be >= initialDelayMs (${v.initialDelayMs})` });
    }
  });

export const StdioUpstreamSchema = z.strictObject({
  transport: z.literal('stdio'),
  ...upstreamCommon,
  command: z.string().min(1),
  args: z.array(text).default(() => []),
  env: z.record(z.string().min(1), text).default(() => ({})),
  cwd: z.string().min(1).optional(),
  isolation: z.enum(['shared', 'per-session']).default(DEFAULTS.isolation),
  restart: RestartSchema.prefault({}),
});

const headerValue = text.refine((v) => !CONTROL_CHARS.test(v), { error: 'header values may not contain control characters' });
const httpShape = {
  ...upstreamCommon,
  url: httpUrl,
  headers: z
    .record(z.string().regex(HEADER_NAME, { error: 'not a valid HTTP header name' }), headerValue)
    .default(() => ({})),
  connectTimeoutMs: int(0).default(DEFAULTS.connectTimeoutMs),
  headersTimeoutMs: int(0).default(DEFAULTS.headersTimeoutMs),
  bodyTimeoutMs: int(0).default(DEFAULTS.bodyTimeoutMs),
  protocol: z.enum(['auto', 'legacy', 'modern']).default(DEFAULTS.protocol),
};
export const StreamableHttpUpstreamSchema = z.strictObject({ transport: z.literal('streamable-http'), ...httpShape });
export const SseUpstreamSchema = z.strictObject({ transport: z.literal('sse'), ...httpShape });

/** `transport` may be left out when obvious: `command` means stdio, `url` means streamable-http. */
function inferTransport(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || 'transport' in value) return value;
  if ('command' in value) return { transport: 'stdio', ...value };
  if ('url' in value) return { transport: 'streamable-http', ...value };
  return value;
}

const UpstreamSchema = z.preprocess(
  inferTransport,
  z.discriminatedUnion('transport', [StdioUpstreamSchema, StreamableHttpUpstreamSchema, SseUpstreamSchema]),
);

export const PolicyDefaultsSchema = z.strictObject(policyShape);
export const RuleSchema = z.strictObject({
  match: z.string().trim().min(1, { error: 'expected a non-empty glob on the exposed tool name' }),
  ...policyShape,
});

// MCP tool names: 1-128 of these characters.

export const TaskToolsSchema = z
  .strictObject({
    // `auto`: listed when any rule (or the defaults) says plainCalls: background.
    enabled: z.union([z.boolean(), z.literal('auto')]).default('auto'),
    prefix: prefix.default(DEFAULTS.taskToolPrefix),
    names: z
      .strictObject({ result: toolName.optional(), status: toolName.optional(), cancel: toolName.optional(), list: toolName.optional() })
      .prefault({}),
    waitSeconds: int(0).default(DEFAULTS.taskToolWaitSeconds),
    maxWaitSeconds: int(1, 3_600).default(DEFAULTS.taskToolMaxWaitSeconds),
  })
  .superRefine((tools, ctx) => {
    if (tools.waitSeconds > tools.maxWaitSeconds) {
      ctx.addIssue({ code: 'custom', path: ['waitSeconds'], input: tools.waitSeconds, message: `must not exceed maxWaitSeconds (${tools.maxWaitSeconds})` });
    }
  });

export const TasksSchema = z
  .strictObject({
    defaults: PolicyDefaultsSchema.prefault({}),
    rules: z.array(RuleSchema).default(() => []),
    immediateResponse: z.string().default(DEFAULTS.immediateResponse),
    taskTools: TaskToolsSchema.prefault({}),
  })
  .superRefine((tasks, ctx) => {
    // A rule is checked merged onto the defaults, because that is the policy a tool actually gets.
    const defaults = { ...DEFAULT_POLICY, ...stripUndefined(tasks.defaults) };
    if (defaults.ttlMs > defaults.maxTtlMs) {
      const key = tasks.defaults.ttlMs !== undefined ? 'ttlMs' : 'maxTtlMs';
      ctx.addIssue({
        code: 'custom',
        path: ['defaults', key],
        input: defaults[key],
        message: `ttlMs (${defaults.ttlMs}) must not exceed maxTtlMs (${defaults.maxTtlMs})`,
      });
    }
    // A background call's answer names the task tools: without them its result could never be fetched.
    const background = backgroundSetting(defaults, tasks.rules);
    if (tasks.taskTools.enabled === false && background !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['taskTools', 'enabled'],
        input: false,
        message: `plainCalls: background (${background}) needs the task tools: its callers fetch their results with them`,
      });
    }
    tasks.rules.forEach((rule, i) => {
      const merged = { ...defaults, ...stripUndefined(rule) };
      if ((rule.ttlMs !== undefined || rule.maxTtlMs !== undefined) && merged.ttlMs > merged.maxTtlMs) {
        const key = rule.ttlMs !== undefined ? 'ttlMs' : 'maxTtlMs';
        ctx.addIssue({
          code: 'custom',
          path: ['rules', i, key],
          input: merged[key],
          message: `ttlMs (${merged.ttlMs}) must not exceed maxTtlMs (${merged.maxTtlMs}) for tools matching "${rule.match}"`,
        });
      }
    });
  });

export const SessionsSchema = z.strictObject({
  idleTimeoutMs: int(1).default(DEFAULTS.idleTimeoutMs),
  maxPerPrincipal: int(0).default(DEFAULTS.maxSessionsPerPrincipal),
  maxStreamsPerPrincipal: int(0).default(DEFAULTS.maxStreamsPerPrincipal),
});
export const SseSchema = z.strictObject({
  keepAliveMs: int(1).default(DEFAULTS.keepAliveMs),
  replayBufferSize: int(0).default(DEFAULTS.replayBufferSize),
  jsonWindowMs: int(0).default(DEFAULTS.jsonWindowMs),
  maxBufferedBytesPerStream: int(1).default(DEFAULTS.maxBufferedBytesPerStream),
  maxBufferedBytes: int(0).default(DEFAULTS.maxBufferedBytes),
});
export const ReplicasSchema = z.strictObject({
  leaseMs: int(100).default(DEFAULTS.leaseMs),
  drainTimeoutMs: int(0).default(DEFAULTS.drainTimeoutMs),
  maxRunningTasks: int(0).default(DEFAULTS.maxRunningTasks),
});
export const MrtrSchema = z.strictObject({ parkTimeoutMs: int(1).default(DEFAULTS.parkTimeoutMs) });
export const ListsSchema = z.strictObject({ pageSize: int(1).default(DEFAULTS.listPageSize) });
export const LogSchema = z.strictObject({ level: z.enum(LOG_LEVELS).default(DEFAULTS.logLevel) });
const endpointPath = z.string().regex(/^\/[A-Za-z0-9._~/-]*$/, { error: 'expected an absolute URL path such as /metrics' });
export const MetricsSchema = z.strictObject({
  enabled: z.boolean().default(true),
  path: endpointPath.default(DEFAULTS.metricsPath),
  principalLabels: z.boolean().default(false),
});
export const DashboardSchema = z.strictObject({ enabled: z.boolean().default(true), path: endpointPath.default(DEFAULTS.dashboardPath) });

const glob = z.string().min(1);
export const ApiKeySchema = z
  .strictObject({
    principal: z
      .string()
      .min(1)
      .refine((p) => !/^(key|oauth):/.test(p), { error: 'a principal name may not start with "key:" or "oauth:" (rules read those as qualifiers)' }),
    key: z.string().min(16, { error: 'an API key needs at least 16 characters' }).optional(),
    sha256: z.string().regex(/^[0-9a-fA-F]{64}$/, { error: 'expected the SHA-256 of the key as 64 hex digits' }).optional(),
    scopes: z.array(z.string().min(1)).default([]),
  })
  .refine((k) => (k.key === undefined) !== (k.sha256 === undefined), { error: 'give either key or sha256 (the key\'s SHA-256, hex), not both' });
export const OAuthSchema = z.strictObject({
  // RFC 8414 §2: an issuer has no query or fragment (principals end the issuer at its first "#").
  issuer: httpUrl.refine((v) => !v.includes('#') && !v.includes('?'), { error: 'an issuer URL has no query or fragment (RFC 8414)' }),
  jwksUri: httpUrl.optional(),
  audience: z.string().min(1).optional(),
  requiredScopes: z.array(z.string().min(1)).default([]),
  clockToleranceSeconds: int(0, 300).default(DEFAULTS.clockToleranceSeconds),
});
export const AccessRuleSchema = z
  .strictObject({
    principals: z.array(glob).default([]),
    scopes: z.array(z.string().min(1)).default([]),
    tools: z.array(glob).default([]),
    prompts: z.array(glob).default([]),
    resources: z.array(glob).default([]),
  })
  .refine((r) => r.principals.length > 0 || r.scopes.length > 0, { error: 'a rule names principals or scopes (or both)' });
const rates = { requestsPerSecond: int(0).optional(), taskCreationsPerMinute: int(0).optional() };
export const RateLimitRuleSchema = z.strictObject({ principals: z.array(glob).min(1), ...rates });
export const RateLimitsSchema = z.strictObject({
  requestsPerSecond: int(0).default(0),
  taskCreationsPerMinute: int(0).default(0),
  rules: z.array(RateLimitRuleSchema).default([]),
});
export const AdminSchema = z
  .strictObject({ principals: z.array(glob).default([]), scopes: z.array(z.string().min(1)).default([]) })
  .refine((r) => r.principals.length > 0 || r.scopes.length > 0, { error: 'admin names principals or scopes (or both)' });
export const AuthSchema = z
  .strictObject({
    resource: httpUrl,
    apiKeys: z.array(ApiKeySchema).default([]),
    oauth: OAuthSchema.optional(),
    access: z.array(AccessRuleSchema).optional(),
    rateLimits: RateLimitsSchema.prefault({}),
    admin: AdminSchema.optional(),
  })
  .refine((a) => a.apiKeys.length > 0 || a.oauth !== undefined, { error: 'auth needs apiKeys, oauth, or both' });

export const RawConfigSchema = z.strictObject({
  listen: ListenSchema.prefault({}),
  store: StoreSchema.prefault({ type: 'memory' }),
  upstreams: z
    .record(
      z.string().regex(UPSTREAM_NAME, { error: 'upstream names may contain only letters, digits, "_" and "-"' }),
      UpstreamSchema,
    )
    .refine((m) => Object.keys(m).length > 0, { error: 'at least one upstream is required' }),
  tasks: TasksSchema.prefault({}),
  sessions: SessionsSchema.prefault({}),
  sse: SseSchema.prefault({}),
  mrtr: MrtrSchema.prefault({}),
  lists: ListsSchema.prefault({}),
  replicas: ReplicasSchema.prefault({}),
  log: LogSchema.prefault({}),
  metrics: MetricsSchema.prefault({}),
  dashboard: DashboardSchema.prefault({}),
  auth: AuthSchema.optional(),
  shutdownTimeoutMs: int(0).default(DEFAULTS.shutdownTimeoutMs),
}).superRefine((config, ctx) => {
  const { headersTimeoutMs, requestTimeoutMs } = config.listen;
  if (headersTimeoutMs > requestTimeoutMs) {
    ctx.addIssue({
      code: 'custom',
      path: ['listen', 'headersTimeoutMs'],
      input: headersTimeoutMs,
      message: `must be <= listen.requestTimeoutMs (${requestTimeoutMs}): the headers are part of the request`,
    });
  }
  // A budget smaller than that could never admit a request of the largest size: it would be refused as
  // "retry later" forever.
  for (const key of ['maxInflightBytes', 'maxInflightBytesPerPrincipal'] as const) {
    const budget = config.listen[key];
    if (budget > 0 && budget < 2 * config.listen.maxBodyBytes) {
      ctx.addIssue({
        code: 'custom',
        path: ['listen', key],
        input: budget,
        message: `must be 0 (unlimited) or at least 2 × listen.maxBodyBytes (${2 * config.listen.maxBodyBytes}): a body of the largest size must fit, with room left for small requests`,
      });
    }
  }
  // Each endpoint needs a path of its own (health and readiness are fixed).
  const taken = new Map<string, string>([['/healthz', 'the liveness check'], ['/readyz', 'the readiness check'], [config.listen.path, 'listen.path']]);
  for (const key of ['metrics', 'dashboard'] as const) {
    const { enabled, path } = config[key];
    const owner = enabled ? taken.get(path) : undefined;
    if (owner !== undefined) ctx.addIssue({ code: 'custom', path: [key, 'path'], input: path, message: `must differ from ${owner} (${path})` });
    if (enabled) taken.set(path, `${key}.path`);
  }
  const { drainTimeoutMs } = config.replicas;
  if (config.shutdownTimeoutMs > 0 && drainTimeoutMs >= config.shutdownTimeoutMs) {
    ctx.addIssue({
      code: 'custom',
      path: ['replicas', 'drainTimeoutMs'],
      input: drainTimeoutMs,
      message: `must be < shutdownTimeoutMs (${config.shutdownTimeoutMs}): the drain must end before the process is stopped`,
    });
  }
});

export type RawConfig = z.output<typeof RawConfigSchema>;

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

type Shape = Record<string, unknown>;
const keysOf = (schema: { shape: Shape }): string[] => Object.keys(schema.shape);

/**
 * The keys allowed in the map at `path` (raw, as in the file), for unknown-key messages and did-you-mean.
 * `value` is the map itself, which picks the variant of a store or upstream.
 */
export function allowedKeysAt(path: readonly PropertyKey[], value: unknown): string[] | undefined {
  const at = (i: number) => path[i];
  const obj = value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : {};
  switch (path.length) {
    case 0:
      return keysOf(RawConfigSchema);
    case 1:
      switch (at(0)) {
        case 'listen':
          return keysOf(ListenSchema);
        case 'store':
          return obj.type === 'redis' ? keysOf(RedisStoreSchema) : keysOf(MemoryStoreSchema);
        case 'tasks':
          return ['defaults', 'rules', 'immediateResponse', 'taskTools'];
        case 'sessions':
          return keysOf(SessionsSchema);
        case 'sse':
          return keysOf(SseSchema);
        case 'mrtr':
          return keysOf(MrtrSchema);
        case 'lists':
          return keysOf(ListsSchema);
        case 'replicas':
          return keysOf(ReplicasSchema);
        case 'log':
          return keysOf(LogSchema);
        case 'metrics':
          return keysOf(MetricsSchema);
        case 'dashboard':
          return keysOf(DashboardSchema);
        case 'auth':
          return keysOf(AuthSchema);
      }
      return undefined;
    case 2:
      if (at(0) === 'upstreams') return upstreamKeys(obj.transport);
      if (at(0) === 'tasks' && at(1) === 'defaults') return keysOf(PolicyDefaultsSchema);
      if (at(0) === 'tasks' && at(1) === 'taskTools') return keysOf(TaskToolsSchema);
      if (at(0) === 'auth' && at(1) === 'oauth') return keysOf(OAuthSchema);
      if (at(0) === 'auth' && at(1) === 'rateLimits') return keysOf(RateLimitsSchema);
      if (at(0) === 'auth' && at(1) === 'admin') return keysOf(AdminSchema);
      if (at(0) === 'listen' && at(1) === 'cors') return keysOf(CorsSchema);
      if (at(0) === 'store' && at(1) === 'sentinel') return keysOf(RedisSentinelSchema);
      if (at(0) === 'store' && at(1) === 'cluster') return keysOf(RedisClusterSchema);
      return undefined;
    case 3:
      if (at(0) === 'upstreams' && at(2) === 'restart') return ['initialDelayMs', 'maxDelayMs'];
      if (at(0) === 'upstreams' && at(2) === 'tools') return keysOf(ToolSelectionSchema);
      if (at(0) === 'upstreams' && (at(2) === 'prompts' || at(2) === 'resources')) return keysOf(NameSelectionSchema);
      if (at(0) === 'tasks' && at(1) === 'rules') return keysOf(RuleSchema);
      if (at(0) === 'tasks' && at(1) === 'taskTools' && at(2) === 'names') return ['result', 'status', 'cancel', 'list'];
      if (at(0) === 'auth' && at(1) === 'apiKeys') return keysOf(ApiKeySchema);
      if (at(0) === 'auth' && at(1) === 'access') return keysOf(AccessRuleSchema);
      return undefined;
    case 4:
      if (at(0) === 'auth' && at(1) === 'rateLimits' && at(2) === 'rules') return keysOf(RateLimitRuleSchema);
      return undefined;
    case 5:
      if (at(0) === 'upstreams' && at(2) === 'tools' && at(3) === 'overrides') return keysOf(ToolOverrideSchema);
      return undefined;
  }
  return undefined;
}

export function upstreamKeys(transport: unknown): string[] {
  if (transport === 'stdio') return keysOf(StdioUpstreamSchema);
  if (transport === 'sse') return keysOf(SseUpstreamSchema);
  return keysOf(StreamableHttpUpstreamSchema);
}
