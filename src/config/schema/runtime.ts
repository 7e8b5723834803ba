// The config schema's sections of one short map each: how the running gateway keeps sessions, SSE streams, calls
// parked across 2026-07-28 round trips (mrtr), list pages and replicas, and what it shows of itself (log, metrics,
// dashboard).
import { z } from 'zod';
import { DEFAULTS } from './defaults.js';
import { int } from './fields.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const SessionsSchema = z.strictObject({
  idleTimeoutMs: int(1)
    .default(DEFAULTS.idleTimeoutMs)
    .describe('A session unused this long on every replica is ended; its id then gets 404.'),
  maxPerPrincipal: int(0).default(DEFAULTS.maxSessionsPerPrincipal).describe(`Sessions open at once per principal,
    across replicas (without auth every client is one principal: all sessions); \`initialize\` beyond: HTTP 429. 0 =
    unlimited.`),
  maxStreamsPerPrincipal: int(0).default(DEFAULTS.maxStreamsPerPrincipal).describe(`SSE streams one principal holds
    open on this replica (2025 GET streams and POSTs that may answer as a stream, 2026-07-28 \`subscriptions/listen\`;
    without auth: all clients together); beyond: HTTP 429, \`Retry-After: 5\`, -32600 naming the key. 0 = unlimited.`),
});
export const SseSchema = z.strictObject({
  keepAliveMs: int(1).default(DEFAULTS.keepAliveMs).describe(`\`: keep-alive\` comments on open SSE streams this often,
    so idle-timeout proxies do not cut long calls.`),
  replayBufferSize: int(0).default(DEFAULTS.replayBufferSize).describe(`Events kept per stream for \`Last-Event-ID\`
    resumption (and within \`maxBufferedBytesPerStream\`).`),
  jsonWindowMs: int(0).default(DEFAULTS.jsonWindowMs).describe(`A forwarded call answered within this window, with
    nothing to stream first, gets plain JSON; otherwise its answer becomes a resumable SSE stream (priming event
    first). 0 = always SSE.`),
  maxBufferedBytesPerStream: int(1).default(DEFAULTS.maxBufferedBytesPerStream).describe(`Bytes one SSE stream (2025
    POST or GET stream, 2026-07-28 response or listen stream) may hold for a client that has not taken them: waiting,
    queued in the response, kept for replay. Past it the client gets coalesced progress and a warning counting the
    logs dropped; the call's upstream is not read until the client reads, or on a shared stdio upstream the call
    fails (-32603).`),
  maxBufferedBytes: int(0).default(DEFAULTS.maxBufferedBytes).describe(`The same for all streams of the replica
    together; past it every stream with messages waiting counts as full. 0 = no total bound.`),
});
export const ReplicasSchema = z.strictObject({
  leaseMs: int(100).default(DEFAULTS.leaseMs).describe(`How long a replica may go without a heartbeat (it beats every
    leaseMs/3: one Redis write, however many tasks it runs). When a replica dies, another fails its tasks ("The
    gateway lost the call ...") or re-runs them (\`retry.onLoss\`) between 1 and 7/6 × leaseMs after its last
    heartbeat, plus settling them. Slot tickets (\`concurrency\`, \`maxTasksPerPrincipal\`) are leased for 3 ×
    leaseMs.`),
  drainTimeoutMs: int(0).default(DEFAULTS.drainTimeoutMs).describe(`On SIGTERM: no new requests (503 + \`Retry-After\`);
    task runs whose call reached the upstream and calls in flight get this long to finish (it ends as soon as none is
    left). Then tasks another replica can carry on are handed over to it within one sweep (those whose call never
    reached the upstream: held for approval, waiting for consent or a slot; and those with \`retry.onLoss\` attempts
    left), and the rest fail ("The gateway shut down while the task was running"). Less than \`shutdownTimeoutMs\`.
    Also how long an upstream removed by a config reload keeps its running tasks.`),
  maxRunningTasks: int(0).default(DEFAULTS.maxRunningTasks).describe(`Tasks this replica runs at once (those waiting
    for a slot included); a new task beyond is refused, retryably: -32603 \`This gateway replica already runs N tasks
    (replicas.maxRunningTasks: M); try again shortly\` with \`data.retryAfterMs\` (1000), in HTTP 503 + \`Retry-After:
    1\`. Tasks taken over from a lost replica are not refused. 0 = unlimited.`),
});
export const MrtrSchema = z.strictObject({
  parkTimeoutMs: int(1).default(DEFAULTS.parkTimeoutMs).describe(`A call waiting for the client's retry (after an
    \`InputRequiredResult\`) is cancelled upstream when no retry comes within this time.`),
});
export const ListsSchema = z.strictObject({
  pageSize: int(1)
    .default(DEFAULTS.listPageSize)
    .describe('Most items in one page of an aggregated list; past it a signed cursor continues.'),
});
export const LogSchema = z.strictObject({
  level: z.enum(LOG_LEVELS).default(DEFAULTS.logLevel).describe('`TASKGATE_LOG_LEVEL` overrides it. Audit events are logged at `info`.'),
});
const endpointPath = z.string().regex(/^\/[A-Za-z0-9._~/-]*$/, { error: 'expected an absolute URL path such as /metrics' });
const noRoute = '`false`: no route at all (404).';
export const MetricsSchema = z.strictObject({
  enabled: z.boolean().default(true).describe(noRoute),
  path: endpointPath.default(DEFAULTS.metricsPath).describe(`Where it is served, an absolute path (letters, digits,
    \`._~/-\`); must differ from \`listen.path\`, \`/healthz\`, \`/readyz\` and \`dashboard.path\`.`),
  principalLabels: z.boolean().default(false).describe(`\`true\`: a \`principal\` label on the task and denial counters
    (at most 500 values, then \`other\`).`),
});
export const DashboardSchema = z.strictObject({
  enabled: z.boolean().default(true).describe(noRoute),
  path: endpointPath.default(DEFAULTS.dashboardPath).describe(`The page, an absolute path (letters, digits, \`._~/-\`);
    its JSON API is under \`<path>/api/\`. Must differ from \`listen.path\`, \`/healthz\`, \`/readyz\` and
    \`metrics.path\`.`),
});
