// The HTTP front: fastify with one plugin per concern, registered in the order their hooks must run. A new
// endpoint is a new plugin in this list; the MCP endpoint serves the revisions it is handed (mcp-endpoint.ts).
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyPluginAsync } from 'fastify';
import type { AdminAccess, GatewayConfig } from '../config/types.js';
import type { GatewayEvents } from '../events.js';
import type { JsonObject } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import type { InflightBytes } from '../tasks/inflight-bytes.js';
import type { RateLimiter } from '../tasks/rate-limits.js';
import type { SessionRegistry } from '../gateway/sessions.js';
import { Admission } from './admission.js';
import { ConnectionGuard } from './connections.js';
import { corsPlugin } from './cors.js';
import { credentialsGuard } from './credentials-guard.js';
import type { Authenticator } from './credentials.js';
import { errorHandlerPlugin } from './error-handler.js';
import { originGuardPlugin } from './guards.js';
import { healthPlugin } from './health.js';
import { jsonBodyPlugin } from './json-body.js';
import { mcpEndpointPlugin, refusalFor, type EndpointRevision } from './mcp-endpoint.js';
import { oauthMetadataPlugin } from './oauth-metadata.js';
import { lazyRequestLogger } from './request-logger.js';
import { jwksEndpointPlugin, type JwksEndpointOptions } from './jwks-endpoint.js';
import { metricsEndpoint, type MetricsEndpointOptions } from './metrics-endpoint.js';
import { adminAccess } from './admin-access.js';
import { dashboardPlugin, type DashboardOptions } from './dashboard.js';
import { approvalsApiPlugin, type ApprovalsApiOptions } from './approvals-api.js';
import { registerConsentHttp, type ConsentHttpDeps } from './consent/register.js';

/** What the front end needs from the rest of the gateway. */
export interface FrontEndDeps {
  config: GatewayConfig;
  logger: Logger;
  /** The protocol revisions served, in the registry's order (protocol/revisions.ts). */
  revisions: readonly EndpointRevision[];
  /** Client sessions: a message on a live session's id is that session's revision's. */
  sessions: Pick<SessionRegistry, 'peek'>;
  readiness(): Promise<{ ready: boolean; body: JsonObject }>;
  isShuttingDown(): boolean;
  /** Undefined without an `auth` section: every request is served, as the only principal there is. */
  authenticator: Authenticator | undefined;
  /** Per-principal request rate (with `auth`). */
  rateLimiter: RateLimiter | undefined;
  /** The budgets of request bytes in flight (shared with the task core, whose runs hold what requests carried). */
  inflight: InflightBytes;
  /** What GET metrics.path serves; absent when metrics are disabled (no route). */
  metrics?: MetricsEndpointOptions['source'];
  /** Where the front announces refusals (access.denied, rate.limited) and the streams it opens. */
  events: GatewayEvents;
  /** Registered before everything else, so that it sees every request from its first hook (tracing). */
  instrumentation?: FastifyPluginAsync;
  /** `auth.admin` as it is now (a config reload may change it); the start's config when absent. */
  admin?: () => AdminAccess | undefined;
  /** The task dashboard's own parts (the front adds credentials and admin access); absent: dashboard.enabled is false. */
  dashboard?: Pick<DashboardOptions, 'path' | 'store' | 'tasks' | 'upstreams' | 'upstreamConfig'>;
  /** Calls held for approval, for the approvers' API (GET /approvals, POST /approvals/{taskId}); absent: no such routes. */
  approvals?: ApprovalsApiOptions['approvals'];
  /** The public keys of `identity.keys` as configured now (GET /.well-known/jwks.json); absent: no such route. */
  jwks?: JwksEndpointOptions['jwks'];
  /** Per-user consent's browser side (issue 41: /connect, /oauth/*, /connections); absent: no upstream needs it. */
  consent?: Omit<ConsentHttpDeps, 'authenticator' | 'events' | 'logger' | 'rateLimiter'>;
}

export function createFrontEnd(deps: FrontEndDeps): FastifyInstance {
  const { config, logger, events, authenticator } = deps;
  const listen = config.listen;
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    // Per-request access logs would double the log volume of a busy gateway; errors are still logged.
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: lazyRequestLogger,
    bodyLimit: listen.maxBodyBytes,
    forceCloseConnections: true,
    // fastify's own default (72 s) lets idle keep-alive connections hold slots long after their last request.
    keepAliveTimeout: listen.keepAliveTimeoutMs,
    // A request that never finishes arriving (slow headers, an unfinished body) holds a connection and a parser
    // forever unless something ends it: Node answers 408 and closes. Only the arrival of the request is timed;
    // a long answer (a tool call, an SSE stream) is not. Node checks at this interval, so it must be short.
    requestTimeout: listen.requestTimeoutMs,
    http: {
      headersTimeout: listen.headersTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, Math.max(50, Math.floor(listen.headersTimeoutMs / 4))),
    },
  });
  if (deps.instrumentation !== undefined) void app.register(deps.instrumentation);
  // Not server.maxConnections: Node refuses at the cap before anything could make room by closing idle ones.
  const connections = new ConnectionGuard(listen, authenticator !== undefined, logger, events);
  connections.attach(app.server);
  const { revisions } = deps;
  const admission = new Admission({
    inflight: deps.inflight,
    refusalFor: (headers) => refusalFor(revisions, headers),
    maxBodyBytes: listen.maxBodyBytes,
    maxStreamsPerPrincipal: config.sessions.maxStreamsPerPrincipal,
    logger,
    events,
  });

  // What fails before any revision has the request (fastify's own refusals) is answered in the registry's last.
  void app.register(errorHandlerPlugin, { listen, refusal: refusalFor(revisions, {}) });
  void app.register(jsonBodyPlugin, { listen, admission });
  // The Origin/Host guard's hook first, then CORS's: a refused origin is refused before any of CORS.
  void app.register(originGuardPlugin, { listen });
  void app.register(corsPlugin, { listen });
  void app.register(healthPlugin, { readiness: deps.readiness });
  // Operator endpoints: with auth, only auth.admin's principals and scopes (Prometheus sends a key).
  const admin = deps.admin ?? config.auth?.admin;
  if (deps.metrics !== undefined) {
    const onRequest = adminAccess({ authenticator, admin, events, logger, endpoint: 'metrics', listen });
    void app.register(metricsEndpoint, { path: config.metrics.path, source: deps.metrics, onRequest });
  }
  if (deps.dashboard !== undefined) void app.register(dashboardPlugin, { ...deps.dashboard, authenticator, admin, events, logger, listen });
  if (deps.approvals !== undefined) void app.register(approvalsApiPlugin, { approvals: deps.approvals, authenticator, listen, events, logger });
  // After the approvals API, so that the Origin and Host guard covers these routes as it does the others.
  if (deps.consent !== undefined && authenticator !== undefined) registerConsentHttp(app, { ...deps.consent, authenticator, events, logger, rateLimiter: deps.rateLimiter });
  if (authenticator !== undefined) void app.register(oauthMetadataPlugin, { authenticator, path: listen.path });
  if (deps.jwks !== undefined) void app.register(jwksEndpointPlugin, { jwks: deps.jwks });
  void app.register(mcpEndpointPlugin, {
    path: listen.path,
    revisions,
    admission,
    credentials: authenticator === undefined ? undefined : credentialsGuard({ authenticator, rateLimiter: deps.rateLimiter, connections, events, logger }),
    isShuttingDown: deps.isShuttingDown,
    isKnownSession: (sessionId) => deps.sessions.peek(sessionId) !== undefined,
  });
  return app;
}
