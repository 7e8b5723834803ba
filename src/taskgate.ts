import type { GatewayConfig, UpstreamConfig } from './config/types.js';
import { FirstAttempts } from './gateway/first-attempts.js';
import { MergedCatalog } from './gateway/merged-catalog.js';
import { ListCursors, ListPages } from './gateway/list-pages.js';
import { ReplicaLink } from './gateway/replicas.js';
import type { GatewayParts, RevisionRuntime } from './protocol/revision.js';
import { creatorOf, MCP_METHODS, notifiedTaskId, REVISIONS, SUPPORTED_VERSIONS, UPSTREAM_ADAPTERS } from './protocol/revisions.js';
import { StreamBudget } from './streams/stream-budget.js';
import { TaskTools, taskToolDefinitions } from './protocol/task-tools.js';
import { SessionRegistry } from './gateway/sessions.js';
import { SessionRelay } from './gateway/session-relay.js';
import { UpstreamMessages } from './gateway/upstream-messages.js';
import { ConfigReloader, type ReloadResult } from './gateway/reload.js';
import { listenAndAnnounce, readinessOf, startReplicaLink } from './compose/serving.js';
import { GatewayEvents } from './events.js';
import { Authenticator } from './http/credentials.js';
import { createFrontEnd } from './http/server.js';
import { publishedJwks } from './identity/signer.js';
import type { JsonObject, JsonRpcNotification } from './jsonrpc.js';
import { Lifecycle } from './lifecycle.js';
import type { TaskRecord } from './store/task-store.js';
import type { Logger } from './log.js';
import { subscribeAuditLog } from './observability/audit.js';
import { subscribeLeniencyLog } from './observability/leniency-log.js';
import { GatewayMetrics } from './observability/metrics.js';
import { startTracing } from './observability/tracing.js';
import { createStore } from './store/store.js';
import { CursorCodec } from './store/task-store.js';
import { TaskEngine, type RecoveryDeps } from './tasks/engine.js';
import { InflightBytes } from './tasks/inflight-bytes.js';
import { ANONYMOUS_PRINCIPAL } from './principals.js';
import { RateLimiter } from './tasks/rate-limits.js';
import { ActingCallers } from './tasks/acting-callers.js';
import { createGatewayIdentity } from './identity/parts.js';
import { subscribeCredentialStatus } from './observability/credential-health.js';
import { Upstream, type UpstreamMessageSink, type UpstreamSessionLedger } from './upstream/life/upstream.js';
import { VERSION } from './version.js';
import { Webhooks } from './webhooks/webhooks.js';

export interface RunningGateway {
  /** The MCP endpoint URL, with the port actually bound. */
  url: string;
  /** Where the gateway announces what happens (subscribers: audit log, metrics, traces, tests). */
  events: GatewayEvents;
  /**
   * Applies a validated configuration (config reload): see gateway/reload.ts. Rejects, with the running
   * configuration kept, when upstream names would collide.
   */
  reload(config: GatewayConfig): Promise<ReloadResult>;
  close(): Promise<void>;
}

export interface StartOptions {
  /**
   * Called once the gateway listens, before its upstreams have made their first connection attempt (startGateway
   * resolves after that): from here on close() stops it, children of upstreams still initializing included.
   */
  onListening?(gateway: RunningGateway): void;
}

/** Thrown for problems the operator fixes in the configuration (the CLI exits 2). */
export class StartupConfigError extends Error {
  readonly code = 'CONFIG';
}

/**
 * Starts serving, then connects the upstreams: /healthz answers at once, /readyz says 503 naming the upstreams still
 * initializing until each has made its first attempt (bounded by its initializeTimeoutMs). Resolves then, or
 * rejects with StartupConfigError (everything stopped again) when their names collide. Upstreams that cannot be
 * reached yet don't stop the start: they are retried in the background and reported by /readyz. Whatever fails
 * on the way (tracing, listen, colliding names) stops what had started, as close() does.
 */
export async function startGateway(config: GatewayConfig, logger: Logger, options: StartOptions = {}): Promise<RunningGateway> {
  const life = new Lifecycle(logger);
  try {
    return await startParts(config, logger, options, life);
  } catch (error) {
    await life.close();
    throw error;
  }
}

async function startParts(config: GatewayConfig, logger: Logger, options: StartOptions, life: Lifecycle): Promise<RunningGateway> {
  // Built in dependency order and passed in. Where two parts need each other (sessions and the relay between
  // replicas; the relay and the revision that cancels calls; sessions and what releases their upstream
  // connections; the task core and the revisions that resume its tasks), one reaches the other through a closure,
  // called only once both exist. Every protocol revision of the registry is served from the same shared parts.
  // One seam for the whole gateway: the core announces; tracing, the audit log and metrics listen (DESIGN.md §10).
  // Tracing starts first, so that it sees everything emitted, and stops last, so that the shutdown's spans go out too.
  const events = new GatewayEvents(logger);
  const tracing = await life.start({ name: 'tracing', start: () => startTracing(events, logger), stop: (started) => started?.close() });
  await life.start({ name: 'audit log', start: () => subscribeAuditLog(events, logger), stop: (unsubscribe) => unsubscribe() });
  await life.start({ name: 'leniency log', start: () => subscribeLeniencyLog(events, logger), stop: (unsubscribe) => unsubscribe() });
  const upstreams: Upstream[] = [];
  // Until the start's upstreams have made their first attempts, lists and lookups wait for them (bounded).
  const firstAttempts = new FirstAttempts();
  const catalog = new MergedCatalog(upstreams, undefined, firstAttempts);
  const ownTools = new Set(taskToolDefinitions(config.tasks.taskTools).map((tool) => String(tool.name)));
  const metrics = config.metrics.enabled
    ? await life.start({
        name: 'metrics',
        start: () => new GatewayMetrics({ events, methods: MCP_METHODS, principalLabels: config.metrics.principalLabels, knownTool: (name) => ownTools.has(name) || catalog.tool(name) !== undefined }),
        stop: (started) => started.close(),
      })
    : undefined;
  const store = await life.start({ name: 'store', start: () => createStore(config.store, events), stop: (started) => started.close() });
  const rateLimiter = config.auth === undefined ? undefined : new RateLimiter(config.auth.rateLimits, store, events);
  const inflight = new InflightBytes({ total: config.listen.maxInflightBytes, perPrincipal: config.listen.maxInflightBytesPerPrincipal });
  const replicas = new ReplicaLink(store, logger);
  // Signed with the store's shared secret, so any replica recognises what another handed out (and none can forge it).
  let secret: Promise<Buffer> | undefined;
  const signingSecret = (): Promise<Buffer> => (secret ??= store.signingSecret().catch((error: unknown) => {
    secret = undefined;
    throw error;
  }));
  const lists = new ListPages({
    catalog,
    logger,
    pageSize: config.lists.pageSize,
    cursors: new ListCursors(async () => new CursorCodec(await signingSecret())),
    ownTools: taskToolDefinitions(config.tasks.taskTools),
  });
  const relay = new SessionRelay({
    store,
    link: replicas,
    sessions: { peek: (sessionId) => sessions.peek(sessionId), endHere: (sessionId, reason) => sessions.endHere(sessionId, reason) },
    sessionTtlMs: config.sessions.idleTimeoutMs,
    logger,
    cancelHere: (session, params) => revisions.some(({ runtime }) => runtime.cancelInflight(session, params)),
  });
  // One budget for every SSE stream of the replica, of either revision: what clients that do not read may cost.
  const streamBudget = new StreamBudget(config.sse.maxBufferedBytesPerStream, config.sse.maxBufferedBytes, logger);
  const sessions: SessionRegistry = new SessionRegistry({
    config: config.sessions,
    sse: config.sse,
    store,
    peers: relay,
    onEnd: (session) => void upstreamMessages.release(session),
    budget: streamBudget,
    notifiedTaskId,
    events,
  });
  const recovery: RecoveryDeps = {
    upstream: (name) => reloader.upstream(name),
    // A lost task runs again for whoever created it, as the revision it was created in says; its call runs under
    // the identity it was stored with (or one that revision gives it). A task of an era no revision here serves
    // cannot: the throw fails it as lost (leases.ts logs why), before any of its bytes are held.
    resume: async (task) => {
      const created = revisionOfTask(task);
      const stored = { clientInfo: undefined, ...task.call.identity };
      // Its arguments are held here again: charged to whom its request was (whatever the budgets say: it was accepted).
      const bytes = inflight.force(config.auth === undefined ? ANONYMOUS_PRINCIPAL : task.principal, Buffer.byteLength(JSON.stringify(task.call.params)));
      return { ...(await created.resume(task, stored)), bytes };
    },
    lost: (task) => {
      try {
        revisionOfTask(task).lost(task);
      } catch (error) {
        logger.error({ task: task.taskId, err: error }, 'a lost task was failed, but no revision here can tell whom it concerns');
      }
    },
  };
  const callers = { authenticated: config.auth !== undefined, rateLimiter };
  // Who the gateway is to upstreams (issue 33): token caches, signer and sealer, shared by every upstream and the tasks.
  const identity = createGatewayIdentity(config.identity, {}, events);
  const credentialHealth = await life.start({ name: 'credential status', start: () => subscribeCredentialStatus(events), stop: (status) => status.close() });
  const acting = new ActingCallers(identity.sealer);
  // Deliveries of task and approval events (issue 34): subscribed before anything can emit one, stopped after the
  // tasks drained (their ends are queued too).
  const webhooks = new Webhooks({ webhooks: config.webhooks, webhookDelivery: config.webhookDelivery }, { store, events, logger, replica: replicas.id, leaseMs: config.replicas.leaseMs });
  await life.start({ name: 'webhooks', start: () => webhooks.start(), stop: () => webhooks.close() });
  const tasks: TaskEngine = new TaskEngine({ store, config: config.tasks, logger, replica: config.replicas, peers: replicas, recovery, callers, events, acting });
  const taskTools = new TaskTools(tasks, config.tasks.taskTools, logger, events);
  const parts: GatewayParts = {
    config,
    logger,
    events,
    store,
    engine: tasks,
    catalog,
    lists,
    taskTools,
    replicas,
    sessions,
    relay,
    streamBudget,
    notifiedTaskId,
    supportedVersions: SUPPORTED_VERSIONS,
    rateLimiter,
    signingSecret,
    version: VERSION,
  };
  const revisions = REVISIONS.map((revision) => ({ revision, runtime: revision.serve(parts) }));
  // A task's era is the id of the revision that created it: any other is an error (creatorOf names the task and era).
  const revisionOfTask = (task: TaskRecord): RevisionRuntime => creatorOf(revisions, task).runtime;
  // Clients without a session hear list changes and resource updates through their revision (listen streams).
  const broadcast = { broadcast: (message: JsonRpcNotification) => revisions.forEach(({ runtime }) => runtime.broadcast(message)) };
  const upstreamMessages = new UpstreamMessages(catalog, sessions, broadcast, logger);
  // Upstream sessions are recorded where other replicas look, so that the one that sweeps this replica ends them if
  // it dies without doing so. The embedded store has no other replica to do it.
  const sessionLedger: UpstreamSessionLedger | undefined =
    store.kind === 'memory'
      ? undefined
      : {
          opened: (session) =>
            void store.upstreamSessions.record(replicas.id, session, config.replicas.leaseMs).catch((error: unknown) => {
              logger.warn({ err: error, upstream: session.upstream }, 'could not record an upstream session: if this replica dies, it stays open at the upstream');
            }),
          closed: (session) => store.upstreamSessions.forget(replicas.id, session).catch(() => undefined),
        };
  const createUpstream = (upstreamConfig: UpstreamConfig, sink: UpstreamMessageSink): Upstream =>
    new Upstream(upstreamConfig, logger, sink, { version: VERSION, events, adapters: UPSTREAM_ADAPTERS, identity, ...(sessionLedger === undefined ? {} : { sessionLedger }) });

  // One authenticator for the MCP endpoint and the admin endpoints (one cache of verified tokens), reconfigured on reload.
  const authenticator = config.auth === undefined ? undefined : new Authenticator(config.auth, logger);
  // Owns the set of upstreams from here on: they join the live list (`upstreams`) as each connects.
  const reloader: ConfigReloader = new ConfigReloader(config, {
    upstreams,
    catalog,
    firstAttempts,
    createUpstream,
    upstreamSink: upstreamMessages,
    tasks,
    taskTools,
    lists,
    ownTools: taskToolDefinitions,
    revisions: revisions.map(({ runtime }) => runtime),
    authenticator,
    rateLimiter,
    webhooks,
  }, events, logger);

  /** Until every configured upstream has made its first attempt, this replica is not ready. */
  let starting = true;
  const upstreamStatus = (): JsonObject[] => [...upstreams.map((u) => u.status()), ...reloader.joiningStatus()];
  const app = createFrontEnd({
    config,
    logger,
    revisions: revisions.map(({ revision, runtime }) => ({ ...revision, front: runtime.front })),
    sessions,
    authenticator,
    ...(config.dashboard.enabled ? { dashboard: { path: config.dashboard.path, store, tasks: tasks.runs, upstreams: upstreamStatus, upstreamConfig: (name: string) => reloader.config.upstreams.find((u) => u.name === name) } } : {}),
    approvals: tasks.approvals,
    rateLimiter,
    inflight,
    ...(metrics === undefined ? {} : { metrics }),
    admin: () => reloader.config.auth?.admin,
    jwks: () => publishedJwks(reloader.config.identity),
    events,
    isShuttingDown: () => life.closing,
    instrumentation: tracing?.instrumentation,
    // Only the start waits for upstreams: one a reload adds must not take every replica out of rotation at once.
    readiness: readinessOf({ store, tasks, sessions, upstreams: upstreamStatus, credentials: () => credentialHealth.credentialStatus(), initializing: () => (starting ? reloader.starting() : []), shuttingDown: () => life.closing }),
  });

  // What runs, each stopped after everything started later (close: the last first). Upstream connections outlast the
  // HTTP server (calls in flight finish); the server outlasts what it serves: sessions end their streams, and tasks
  // still running fail with a reason, before it closes.
  await life.start({ name: 'upstreams', start: () => upstreams, stop: () => Promise.all([...upstreams.map((u) => u.close()), reloader.closeJoins()]) });
  await life.start({ name: 'http server', start: () => app, stop: () => app.close() });
  await life.start({ name: 'sessions', start: () => sessions.start(), stop: () => sessions.endAll() });
  await life.start({ name: 'replica link', start: () => startReplicaLink(replicas, logger), stop: () => replicas.close() });
  await life.start({ name: 'revisions', start: () => revisions, stop: () => revisions.forEach(({ runtime }) => runtime.close()) });
  // Upstreams a reload retired: their runs ended with the others.
  await life.start({ name: 'retired upstreams', start: () => reloader, stop: () => reloader.settled() });
  await life.start({ name: 'task engine', start: () => tasks.start(), stop: () => tasks.close() });
  // A gateway stopped before its upstreams started keeps no list waiting for them (begin is once: no-op otherwise).
  await life.start({ name: 'first attempts', start: () => firstAttempts, stop: () => firstAttempts.begin([]) });
  // Stopping it refuses new requests (isShuttingDown) and gives running tasks replicas.drainTimeoutMs to finish;
  // what still runs then fails, with a message that says why, before its sessions' upstream connections go.
  const url = await life.start({ name: 'listener', start: () => listenAndAnnounce(app, config, logger), stop: () => tasks.drain(reloader.config.replicas.drainTimeoutMs) });

  const gateway: RunningGateway = { url, events, reload: (next) => reloader.reload(next), close: () => life.close() };
  options.onListening?.(gateway);
  if (life.closing) return gateway; // stopped as it began to listen
  // Upstreams still connecting have no calls to finish: the first to stop (a child stuck in initialize included).
  const joined = await life.start({ name: 'upstream joins', start: () => ({ collisions: reloader.startUpstreams() }), stop: () => reloader.stopJoining() });
  const collisions = await joined.collisions;
  starting = false;
  if (life.closing) return gateway; // stopped while its upstreams started
  if (collisions.length > 0) throw new StartupConfigError(`${config.source}: upstream names collide:\n  ${collisions.join('\n  ')}`);
  logger.info({ upstreams: upstreamStatus() }, 'upstreams started');
  return gateway;
}
