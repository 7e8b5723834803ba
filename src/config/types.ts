// The effective, validated configuration. Produced only by load.ts (defaults applied, `${ENV}` interpolated,
// deep-frozen); everything else in the gateway reads these types and never the raw YAML.
import type { IdentityConfig, PrincipalChildSettings, UpstreamAuthConfig } from './identity.js';

export type TaskMode = 'forbidden' | 'optional' | 'required';

/**
 * What a tools/call that does not ask for a task gets (2025 clients without `params.task`, 2026 clients without
 * the Tasks extension): `wait` answers when the upstream does (with keep-alive progress); `background` runs it as
 * a task and, past `taskAfterMs`, answers with a tool result naming the task and the task tools.
 */
export type PlainCalls = 'wait' | 'background';

export interface ListenConfig {
  host: string;
  port: number;
  /** The MCP endpoint path (POST/GET/DELETE). */
  path: string;
  /** Largest accepted request body; larger ones get HTTP 413 with a JSON-RPC error. */
  maxBodyBytes: number;
  /** Most messages in one JSON-RPC batch (2025-03-26 sessions only: later revisions have no batches). */
  maxBatchSize: number;
  /** Deepest nesting of arrays and objects accepted in a request body. */
  maxJsonDepth: number;
  /** The whole request (headers and body) must arrive within this; else HTTP 408 and the connection closes. */
  requestTimeoutMs: number;
  /** The request headers must arrive within this (slow-header clients); else HTTP 408. */
  headersTimeoutMs: number;
  /**
   * Client connections open at once. Near it (90%), idle keep-alive connections are closed to make room, those
   * that never presented valid credentials first; past it a new connection is closed. 0 = unlimited.
   */
  maxConnections: number;
  /** Client connections open at once from one remote address; more are closed as they arrive. 0 = unlimited. */
  maxConnectionsPerAddress: number;
  /** A keep-alive connection with no request for this long is closed. */
  keepAliveTimeoutMs: number;
  /**
   * Bytes of request bodies the gateway holds at once (from reading a body until what it carried is let go: the
   * answer of a forwarded call, the end of a task's upstream call), over all principals; past it new requests
   * get HTTP 503 + Retry-After. 0 = unlimited.
   */
  maxInflightBytes: number;
  /** The same per principal (without `auth`, all clients are one principal). 0 = unlimited. */
  maxInflightBytesPerPrincipal: number;
  /**
   * Origins accepted in the `Origin` header (compared as parsed origins, or "*"). Requests without an Origin
   * header are always accepted (non-browser clients). Empty = only loopback origins when bound to loopback,
   * anything otherwise.
   */
  allowedOrigins: readonly string[];
  /**
   * Accepted `Host` header values (host or host:port, compared with the parsed header). Loopback names are
   * always accepted (a DNS-rebinding page cannot send them). Empty = when bound to loopback, only loopback
   * names; otherwise no check.
   */
  allowedHosts: readonly string[];
  /** CORS on the MCP endpoint, for browser-based clients on other origins; absent = none. */
  cors?: CorsConfig;
}

export interface CorsConfig {
  /**
   * Origins whose pages may call the MCP endpoint: "*", exact origins, or globs (`https://*.example.com`,
   * `http://localhost:*`). They also pass the Origin guard, whatever `allowedOrigins` says.
   */
  origins: readonly string[];
  /** Access-Control-Allow-Credentials (cookies, TLS client certificates); an Authorization header needs none. */
  credentials: boolean;
  /** How long a browser may keep a preflight's answer (Access-Control-Max-Age). */
  maxAgeSeconds: number;
}

/** How to reach and authenticate to Redis nodes, in ioredis' shapes (`tls`: true or node's TLS options). */
export interface RedisAccessConfig {
  username?: string;
  password?: string;
  tls?: boolean | Record<string, unknown>;
}

/** A Sentinel-managed primary: the sentinels are asked where it is, and again after a failover. */
export interface RedisSentinelConfig extends RedisAccessConfig {
  /** The primary's name as the sentinels monitor it. */
  name: string;
  /** The sentinels (redis://host:port). */
  nodes: readonly string[];
  sentinelUsername?: string;
  sentinelPassword?: string;
}

/** A Redis Cluster: any of its nodes (redis://host:port); the rest are discovered. */
export interface RedisClusterConfig extends RedisAccessConfig {
  nodes: readonly string[];
}

export type StoreConfig =
  | { type: 'memory' }
  /** `url` is the single server, used only when neither `sentinel` nor `cluster` is given. */
  /** `commandTimeoutMs`: how long a command may go unanswered before it fails as the store being slow (the schema fills it in). */
  | { type: 'redis'; url: string; prefix: string; commandTimeoutMs?: number; sentinel?: RedisSentinelConfig; cluster?: RedisClusterConfig };

/**
 * Which of an upstream's names it exposes: absent `include` means all; `exclude` wins over `include`. Globs (`*`
 * any run of characters, `?` one) match the upstream's own names.
 */
export interface NameSelection {
  include?: readonly string[];
  exclude: readonly string[];
}

/** What clients see of one upstream tool instead of the upstream's own name, title and description. */
export interface ToolOverride {
  /** Replaces the upstream's name; the upstream's prefix still applies. */
  name?: string;
  title?: string;
  description?: string;
}

export interface ToolSelection extends NameSelection {
  /** By the upstream's own tool name. */
  overrides: Readonly<Record<string, ToolOverride>>;
}

export interface UpstreamCommon {
  /** The key under `upstreams:`. */
  name: string;
  /** Prepended to the upstream's tool and prompt names as exposed to clients. */
  prefix: string;
  /** Which tools are exposed, and under which names. Absent: all, as the upstream names them. */
  tools?: ToolSelection;
  /** Which prompts (by name) are exposed. Absent: all. */
  prompts?: NameSelection;
  /** Which resources (by URI) and resource templates (by uriTemplate) are exposed. Absent: all. */
  resources?: NameSelection;
  /** Deadline for requests other than tools/call (list, read, get, complete, ...). 0 = none. */
  requestTimeoutMs: number;
  /** Deadline for the handshake (`initialize`, `server/discover`) of every connection to the upstream; at least 1. */
  initializeTimeoutMs: number;
  /** Tasks running on this upstream at once; more wait, queued in order. 0 = unlimited. */
  taskConcurrency: number;
  /**
   * Largest message accepted from the upstream (a stdio line, an SSE event, a JSON body), in bytes. A larger one
   * is dropped as it streams, and the call it answers fails.
   */
  maxMessageBytes: number;
  /**
   * Upstream connections of their own (one per client session: an HTTP upstream session, a per-session child)
   * this replica keeps open to the upstream at once; at the bound the least recently used idle one is closed, and
   * when none is idle a new client session's request is refused. 0 = unbounded. Always set by the loader; optional
   * for configs built in code (tests), which get the default.
   */
  maxSessions?: number;
}

export interface StdioUpstreamConfig extends UpstreamCommon, PrincipalChildSettings {
  transport: 'stdio';
  command: string;
  args: readonly string[];
  env: Readonly<Record<string, string>>;
  cwd?: string;
  /**
   * `shared`: one child process multiplexed over all client sessions (ids rewritten; per-session log level and
   * subscriptions kept by the gateway). `per-session`: one child per client session, for servers that keep
   * per-client state or ask the client for input while several clients call them at once. `per-principal`: see
   * PrincipalChildSettings.
   */
  isolation: 'shared' | 'per-session' | 'per-principal';
  restart: { initialDelayMs: number; maxDelayMs: number };
  /** How long a child (its process group) has between SIGTERM and SIGKILL when the gateway stops it. */
  stopGraceMs: number;
}

export interface HttpUpstreamConfig extends UpstreamCommon {
  transport: 'streamable-http' | 'sse';
  url: string;
  headers: Readonly<Record<string, string>>;
  /** How the gateway authenticates to it beyond `headers` (issue 33). Absent: `headers` alone. */
  auth?: UpstreamAuthConfig;
  /**
   * Where `auth` tells callers apart, the clients that share one upstream session (2026-07-28) get one per
   * principal: such a session with no call for this long is ended. 0 = never. A client session's own upstream
   * session ends with its client session instead.
   */
  idleTimeoutMs: number;
  /** TCP/TLS connect deadline. */
  connectTimeoutMs: number;
  /** Deadline for response headers. 0 = none (a long tool call must never be cut by a transport default). */
  headersTimeoutMs: number;
  /** Deadline between body chunks. 0 = none (SSE streams may stay idle for a long time). */
  bodyTimeoutMs: number;
  /**
   * Which revisions the gateway speaks to it. `auto`: asks on connect (`server/discover` for 2026-07-28, then
   * `initialize` for the session revisions) and speaks to each client in the client's own revision where the
   * upstream speaks it. `legacy`: sessions only. `modern`: 2026-07-28 only.
   */
  protocol: 'auto' | 'legacy' | 'modern';
}

export type UpstreamConfig = StdioUpstreamConfig | HttpUpstreamConfig;

export interface TaskPolicy {
  mode: TaskMode;
  /** Default task TTL granted when the client asks for none. */
  ttlMs: number;
  /** Largest TTL granted; a client's larger request is clamped. */
  maxTtlMs: number;
  pollIntervalMs: number;
  /** Hard deadline for the upstream call of a task. 0 = none. */
  maxRunMs: number;
  /** For 2026-07-28 clients: how long to wait for the upstream before answering with a task. */
  taskAfterMs: number;
  /** Running tasks per tool across the gateway. 0 = unlimited. */
  concurrency: number;
  /** Non-terminal tasks one principal may hold. 0 = unlimited. */
  maxTasksPerPrincipal: number;
  /** What happens to a task whose replica died mid-call. */
  retry: RetryPolicy;
  /**
   * A plain tools/call (not run as a task) whose caller sent a progressToken gets progress at least this often
   * while the upstream is silent, so hosts that reset their timeout on progress keep waiting. 0 = off.
   */
  keepAliveProgressMs: number;
  /** Plain calls (no task asked for): answered when done, or run in the background. `mode: forbidden` wins. */
  plainCalls: PlainCalls;
  /** Calls held until a person approves them (rules only; absent: calls run at once). */
  approval?: ApprovalPolicy;
}

/**
 * Who must approve a call to the tools a rule matches before it reaches the upstream, and for how long the call
 * waits: principals by glob (as `auth.access` names them), or credentials carrying any of `scopes`.
 */
export interface ApprovalPolicy {
  approvers: readonly string[];
  scopes: readonly string[];
  /** How long a held call waits for a decision; past it, its task fails saying the approval expired. */
  timeoutMs: number;
  /** Whether the caller may approve their own call (if they are an approver). */
  allowSelf: boolean;
  /**
   * What a plain caller's leaving (its request cancelled, timed out or disconnected under `plainCalls: wait`) does
   * to its held call: `keep` it for the approvers (its result is fetched later), or `cancel` it.
   */
  onCallerGone: 'keep' | 'cancel';
}

export interface RetryPolicy {
  /**
   * Run the call again (on the replica that noticed) when its replica was lost, instead of failing the task.
   * Only for tools that are safe to run twice: the lost call may have done its work already.
   */
  onLoss: boolean;
  /** Upstream executions a task may take in all, the first included. */
  maxAttempts: number;
}

export interface TaskRule extends Partial<TaskPolicy> {
  /** Glob on the exposed tool name (`*` any run of characters, `?` one character). */
  match: string;
}

export interface TasksConfig {
  defaults: TaskPolicy;
  rules: readonly TaskRule[];
  /**
   * Text sent as `_meta["io.modelcontextprotocol/model-immediate-response"]` with a new task, for hosts that hand
   * control back to the model while the task runs. Empty = not sent.
   */
  immediateResponse: string;
  taskTools: TaskToolsConfig;
  /** Bytes of finished tasks' results (and stored errors) one principal may hold in the store; 0 = no budget. */
  maxStoredBytesPerPrincipal: number;
  /** Bytes of finished tasks' results all principals together may hold in the store; 0 = no budget. */
  maxStoredBytes: number;
  /** The largest single result (or error) a task stores; a larger one fails its task instead. */
  maxResultBytes: number;
  /** Calls one principal may have waiting for approval at once, across all replicas; 0 = no cap. */
  maxPendingApprovalsPerPrincipal: number;
}

/** The gateway's own tools through which hosts without tasks reach background tasks. */
export interface TaskToolsConfig {
  /** Listed and callable; at load, `auto` became whether any rule (or the defaults) uses `plainCalls: background`. */
  enabled: boolean;
  /** The exposed names. */
  names: TaskToolNames;
  /** How long a task_result call waits for the task to end when it does not say (`waitSeconds`). */
  waitSeconds: number;
  /** The longest a task_result call waits, whatever it asks: keep it under the hosts' request timeouts. */
  maxWaitSeconds: number;
}

export interface TaskToolNames {
  result: string;
  status: string;
  cancel: string;
  list: string;
  delete: string;
}

export interface SessionsConfig {
  /** A session unused this long is ended; its id then gets 404. */
  idleTimeoutMs: number;
  /**
   * Sessions one principal may hold open at once, across replicas; `initialize` beyond that is refused. Without
   * authentication every client is the same principal, so this caps all sessions. 0 = unlimited.
   */
  maxPerPrincipal: number;
  /**
   * SSE streams one principal may hold open on this replica (2025 GET streams and POST answers that may stream,
   * 2026-07-28 subscriptions/listen); a new one beyond it gets HTTP 429. 0 = unlimited.
   */
  maxStreamsPerPrincipal: number;
}

export interface SseConfig {
  /** Interval of `: keep-alive` comments on open SSE streams. */
  keepAliveMs: number;
  /** Events kept per stream for `Last-Event-ID` replay. */
  replayBufferSize: number;
  /**
   * A forwarded call whose answer comes within this window, with nothing to stream before it, is answered as
   * plain JSON; otherwise the response becomes an SSE stream (priming event first, resumable). 0 = always SSE.
   */
  jsonWindowMs: number;
  /**
   * Bytes one stream may hold for a client that has not taken them (queued in the response and kept for replay);
   * past it progress coalesces, logs are dropped and the calls behind the stream are held back upstream.
   */
  maxBufferedBytesPerStream: number;
  /** The same over every SSE stream of the replica together. 0 = no total bound. */
  maxBufferedBytes: number;
}

export interface MrtrConfig {
  /**
   * A synchronous call whose upstream waits on input (an InputRequiredResult went to the client) is kept this
   * long for the client's retry, then cancelled upstream.
   */
  parkTimeoutMs: number;
}

export interface ReplicasConfig {
  /**
   * How long a replica may go without a heartbeat before its tasks are lost: each replica heartbeats every third
   * of this (one store write, however many tasks it runs) and sweeps as often; when a replica stops (crash,
   * kill -9, lost machine), another takes its tasks between 1 and 4/3 × leaseMs after its last heartbeat. Slot
   * tickets (concurrency, maxTasksPerPrincipal) are leased for 3 × leaseMs.
   */
  leaseMs: number;
  /**
   * On SIGTERM the replica stops taking requests and gives running tasks this long to finish; what still runs
   * then fails with a message saying the gateway shut down. Keep it below shutdownTimeoutMs.
   */
  drainTimeoutMs: number;
  /**
   * Tasks this replica runs at once (waiting in line for a slot included); new ones beyond are refused with a
   * retryable error (HTTP 503 + Retry-After for 2026-07-28 clients). Tasks taken over from a lost replica are not
   * refused. 0 = unlimited.
   */
  maxRunningTasks: number;
}

export interface LogConfig {
  level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

export interface ListsConfig {
  /**
   * Most items in one page of an aggregated list (tools, prompts, resources, templates): every upstream is asked
   * at once and their items come in one page up to this size; past it, or where an upstream paginates itself,
   * a signed cursor continues.
   */
  pageSize: number;
}

/** A static bearer token for machines and simple setups. */
export interface ApiKeyConfig {
  /** Who presents it: tasks, sessions, limits and access rules are this principal's. */
  principal: string;
  /** SHA-256 of the key, hex: the key itself (`key:` in the file) is hashed at load and never kept. */
  sha256: string;
  /** Scopes the key carries, for access rules that name scopes. */
  scopes: readonly string[];
}

/** Access tokens (JWT) issued by an OAuth 2.1 / OIDC authorization server for this endpoint. */
export interface OAuthConfig {
  issuer: string;
  /** Where its signing keys are; discovered from the issuer's metadata (RFC 8414, then OIDC) when absent. */
  jwksUri: string | undefined;
  /** What `aud` must contain; the resource URI unless set. */
  audience: string;
  /** Scopes every token must carry (403 insufficient_scope otherwise). */
  requiredScopes: readonly string[];
  /** Clock skew allowed between the issuer and the gateway for `exp`, `nbf` and `iat`, in seconds. */
  clockToleranceSeconds: number;
}

/**
 * One access rule: who (principals by glob, or tokens carrying any of the scopes) may use which tools, prompts
 * and resources (globs on exposed names and URIs). Rules only grant; with rules present, what none grants is denied.
 */
export interface AccessRule {
  principals: readonly string[];
  scopes: readonly string[];
  tools: readonly string[];
  prompts: readonly string[];
  resources: readonly string[];
}

/** Per-principal rates, counted in the store across replicas; 0 = unlimited. */
export interface RateLimits {
  requestsPerSecond: number;
  taskCreationsPerMinute: number;
}

/** Rates for the principals matching `principals` (globs): the first matching rule's fields replace the defaults. */
export interface RateLimitRule extends Partial<RateLimits> {
  principals: readonly string[];
}

/**
 * Who may read /metrics and use the dashboard when auth is on: principals by glob, or credentials carrying any of
 * the scopes. Without it, those endpoints refuse every caller (403) while auth is on.
 */
export interface AdminAccess {
  principals: readonly string[];
  scopes: readonly string[];
}

/** Prometheus text on `path`. */
export interface MetricsConfig {
  enabled: boolean;
  path: string;
  /** Adds a `principal` label to the task and denial counters (one series per principal: off by default). */
  principalLabels: boolean;
}

/** The task dashboard: a page at `path`, its JSON API under `path`/api. */
export interface DashboardConfig {
  enabled: boolean;
  path: string;
}

export interface AuthConfig {
  /** The canonical URI of this MCP endpoint: tokens must be issued for it, and clients find the metadata from it. */
  resource: string;
  apiKeys: readonly ApiKeyConfig[];
  oauth: OAuthConfig | undefined;
  /** Undefined: every authenticated principal may use everything. */
  access: readonly AccessRule[] | undefined;
  rateLimits: RateLimits & { rules: readonly RateLimitRule[] };
  /** Undefined: nobody may read /metrics or use the dashboard (see AdminAccess). */
  admin: AdminAccess | undefined;
}

export interface GatewayConfig {
  /** Absolute path of the file this was loaded from (for messages). */
  source: string;
  listen: ListenConfig;
  store: StoreConfig;
  upstreams: readonly UpstreamConfig[];
  tasks: TasksConfig;
  sessions: SessionsConfig;
  sse: SseConfig;
  mrtr: MrtrConfig;
  lists: ListsConfig;
  replicas: ReplicasConfig;
  log: LogConfig;
  metrics: MetricsConfig;
  dashboard: DashboardConfig;
  /** Undefined: no authentication (the gateway is for loopback or a trusted network). */
  auth: AuthConfig | undefined;
  /** The gateway's own issuer, signing and sealing keys (issue 33). Absent: none configured. */
  identity?: IdentityConfig;
  /** Endpoints told of task and approval events (issue 34); empty: none. */
  webhooks: readonly WebhookConfig[];
  webhookDelivery: WebhookDeliveryConfig;
  /** Milliseconds allowed for graceful shutdown on SIGTERM before the process exits anyway; 0 = no deadline. */
  shutdownTimeoutMs: number;
}

/** A task or approval event a webhook endpoint may subscribe to (the `type` of its deliveries). */
export type WebhookEventType = 'task.created' | 'task.completed' | 'task.failed' | 'task.cancelled' | 'task.input_required' | 'approval.requested' | 'approval.decided';

/** One endpoint told of task and approval events, signed as Standard Webhooks. */
export interface WebhookConfig {
  /** Names its queue in the store and its metrics: configured, or derived from the URL. */
  id: string;
  /** The only URL its deliveries go to (redirects are not followed). */
  url: string;
  events: readonly WebhookEventType[];
  /** `whsec_` + base64 key; never logged. */
  secret: string;
  /** Globs on exposed tool names; absent: every tool. */
  tools?: readonly string[];
  /** Principal globs as `auth.access` names them; absent: every principal. */
  principals?: readonly string[];
  /** The task's result (or error) goes in `data.result` of ended tasks' deliveries. */
  includeResult: boolean;
}

/** How deliveries are made, for every endpoint. */
export interface WebhookDeliveryConfig {
  /** One try may take this long (connect to the end of the response headers); longer is a failed try. */
  timeoutMs: number;
  /** A delivery not acknowledged this long after its event is dead-lettered (no further try). */
  maxAgeMs: number;
  /** The wait before the second try; doubled for each next try (with jitter) up to maxBackoffMs. */
  initialBackoffMs: number;
  maxBackoffMs: number;
  /** Deliveries an endpoint's queue holds (waiting or in flight); a new event past it is dropped for that endpoint. */
  maxQueuedPerEndpoint: number;
  /** Bytes of bodies (results included) an endpoint's queue holds; a new event past it is dropped for that endpoint. */
  maxQueuedBytesPerEndpoint: number;
  /** Largest body; a result that would make it larger is left out (`data.resultOmitted`). */
  maxBodyBytes: number;
  /** Tries in flight to one endpoint at once, across every replica. */
  concurrency: number;
}
