import type { AddressInfo } from 'node:net';
import type { GatewayConfig, UpstreamConfig } from './config/types.js';
import { MergedCatalog } from './gateway/merged-catalog.js';
import { ListCursors, ListPages } from './gateway/list-pages.js';
import { ReplicaLink } from './gateway/replicas.js';
import type { GatewayParts, RevisionRuntime } from './protocol/revision.js';
import { REVISIONS } from './protocol/revisions.js';
import { UPSTREAM_ADAPTERS } from './protocol/upstream-adapters.js';
import { StreamBudget } from './protocol/stream-budget.js';
import { TaskTools, taskToolDefinitions } from './protocol/task-tools.js';
import { SessionRegistry } from './gateway/sessions.js';
import { SessionRelay } from './gateway/session-relay.js';
import { UpstreamMessages } from './gateway/upstream-messages.js';
import { ConfigReloader, type ReloadResult } from './gateway/reload.js';
import { GatewayEvents } from './events.js';
import { Authenticator } from './http/credentials.js';
import { isLoopbackHostname } from './http/guards.js';
import { createFrontEnd } from './http/server.js';
import type { JsonObject, JsonRpcNotification } from './jsonrpc.js';
import type { Era } from './store/task-store.js';
import type { Logger } from './log.js';
import { subscribeAuditLog } from './observability/audit.js';
import { subscribeLeniencyLog } from './observability/leniency-log.js';
import { GatewayMetrics } from './observability/metrics.js';
import { startTracing } from './observability/tracing.js';
import { createStore } from './store/store.js';
import { CursorCodec } from './store/task-store.js';
import { TaskEngine, type RecoveryDeps } from './tasks/engine.js';
import { InflightBytes } from './tasks/inflight-bytes.js';
import { ANONYMOUS_PRINCIPAL } from './tasks/principals.js';
import { RateLimiter } from './tasks/rate-limits.js';
import { Upstream, type UpstreamMessageSink, type UpstreamSessionLedger } from './upstream/upstream.js';
import { VERSION } from './version.js';

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
 * reached yet don't stop the start: they are retried in the background and reported by /readyz.
 */
export async function startGateway(config: GatewayConfig, logger: Logger, options: StartOptions = {}): Promise<RunningGateway> {
  // Built in dependency order and passed in. Where two parts need each other (sessions and the relay between
  // replicas; the relay and the revision that cancels calls; sessions and what releases their upstream
  // connections; the task core and the revisions that resume its tasks), one reaches the other through a closure,
  // called only once both exist. Every protocol revision of the registry is served from the same shared parts.
  // One seam for the whole gateway: the core announces; tracing, the audit log and metrics listen (DESIGN.md §10).
  // Tracing starts first, so that it sees everything emitted.
  const events = new GatewayEvents(logger);
  const tracing = await startTracing(events, logger);
  const stopAudit = subscribeAuditLog(events, logger);
  const stopLeniencyLog = subscribeLeniencyLog(events, logger);
  const store = createStore(config.store, events);
  const rateLimiter = config.auth === undefined ? undefined : new RateLimiter(config.auth.rateLimits, store, events);
  const inflight = new InflightBytes({ total: config.listen.maxInflightBytes, perPrincipal: config.listen.maxInflightBytesPerPrincipal });
  const replicas = new ReplicaLink(store, logger);
  const upstreams: Upstream[] = [];
  const catalog = new MergedCatalog(upstreams);
  const ownTools = new Set(taskToolDefinitions(config.tasks.taskTools).map((tool) => String(tool.name)));
  const metrics = config.metrics.enabled
    ? new GatewayMetrics({ events, principalLabels: config.metrics.principalLabels, knownTool: (name) => ownTools.has(name) || catalog.tool(name) !== undefined })
    : undefined;
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
    events,
  });
  const recovery: RecoveryDeps = {
    upstream: (name) => reloader.upstream(name),
    // A lost task runs again for whoever created it, as the revision it was created in says; its call runs under
    // the identity it was stored with (or one that revision gives it).
    resume: async (task) => {
      const stored = { clientInfo: undefined, ...task.call.identity };
      // Its arguments are held here again: charged to whom its request was (whatever the budgets say: it was accepted).
      const bytes = inflight.force(config.auth === undefined ? ANONYMOUS_PRINCIPAL : task.principal, Buffer.byteLength(JSON.stringify(task.call.params)));
      return { ...(await revisionOfTask(task.era).resume(task, stored)), bytes };
    },
    lost: (task) => revisionOfTask(task.era).lost(task),
  };
  const callers = { authenticated: config.auth !== undefined, rateLimiter };
  const tasks: TaskEngine = new TaskEngine({ store, config: config.tasks, logger, replica: config.replicas, peers: replicas, recovery, callers, events });
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
    rateLimiter,
    signingSecret,
    version: VERSION,
  };
  const revisions = REVISIONS.map((revision) => ({ revision, runtime: revision.serve(parts) }));
  const revisionOfTask = (era: Era): RevisionRuntime => {
    const created = revisions.find(({ revision }) => revision.taskEra === era);
    if (created === undefined) throw new Error(`no protocol revision served here creates tasks of era '${era}'`);
    return created.runtime;
  };
  const closeRevisions = (): void => {
    for (const { runtime } of revisions) runtime.close();
  };
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
            void store.recordUpstreamSession(replicas.id, session, config.replicas.leaseMs).catch((error: unknown) => {
              logger.warn({ err: error, upstream: session.upstream }, 'could not record an upstream session: if this replica dies, it stays open at the upstream');
            }),
          closed: (session) => store.forgetUpstreamSession(replicas.id, session).catch(() => undefined),
        };
  const createUpstream = (upstreamConfig: UpstreamConfig, sink: UpstreamMessageSink): Upstream =>
    new Upstream(upstreamConfig, logger, sink, { version: VERSION, events, adapters: UPSTREAM_ADAPTERS, ...(sessionLedger === undefined ? {} : { sessionLedger }) });

  tasks.start();
  // A store outage must not stop the start (readiness reports it): the subscriptions complete when it is back.
  const subscribed = replicas.start().catch((error: Error) => logger.warn({ err: error }, 'replica messaging is not available'));
  await Promise.race([subscribed, new Promise((resolve) => setTimeout(resolve, 2000).unref())]);

  // One authenticator for the MCP endpoint and the admin endpoints (one cache of verified tokens), reconfigured on reload.
  const authenticator = config.auth === undefined ? undefined : new Authenticator(config.auth, logger);
  // Owns the set of upstreams from here on: they join the live list (`upstreams`) as each connects.
  const reloader: ConfigReloader = new ConfigReloader(config, {
    upstreams,
    catalog,
    createUpstream,
    upstreamSink: upstreamMessages,
    tasks,
    taskTools,
    lists,
    ownTools: taskToolDefinitions,
    revisions: revisions.map(({ runtime }) => runtime),
    authenticator,
    rateLimiter,
  }, events, logger);

  let shuttingDown = false;
  /** Until every configured upstream has made its first attempt, this replica is not ready. */
  let starting = true;
  const upstreamStatus = (): JsonObject[] => [...upstreams.map((u) => u.status()), ...reloader.joiningStatus()];
  const app = createFrontEnd({
    config,
    logger,
    revisions: revisions.map(({ revision, runtime }) => ({ ...revision, front: runtime.front })),
    sessions,
    authenticator,
    ...(config.dashboard.enabled
      ? {
          dashboard: { path: config.dashboard.path, store, tasks, upstreams: upstreamStatus },
        }
      : {}),
    rateLimiter,
    inflight,
    ...(metrics === undefined ? {} : { metrics }),
    admin: () => reloader.config.auth?.admin,
    events,
    isShuttingDown: () => shuttingDown,
    instrumentation: tracing?.instrumentation,
    readiness: async () => {
      const storeStatus: JsonObject = { type: store.kind, ok: true };
      try {
        await store.ping();
      } catch (error) {
        storeStatus.ok = false;
        storeStatus.error = (error as Error).message;
      }
      // A replica whose lease renewals fail is about to have its tasks declared lost by the others (even while
      // the store answers PING: a full Redis refuses the writes).
      const { leases, running, maxRunningTasks } = tasks.health();
      // Only the start waits for upstreams: one a reload adds must not take every replica out of rotation at once.
      const initializing = starting ? reloader.starting() : [];
      const ready = storeStatus.ok === true && leases.ok && !shuttingDown && initializing.length === 0;
      const body: JsonObject = { ready, store: storeStatus, leases, tasks: { running, maxRunningTasks }, upstreams: upstreamStatus(), sessions: sessions.size };
      if (initializing.length > 0) body.initializing = initializing;
      if (initializing.length > 0) body.reason = `the gateway is starting: upstream${initializing.length === 1 ? '' : 's'} ${initializing.map((name) => `'${name}'`).join(', ')} still initializing`;
      return { ready, body };
    },
  });

  try {
    await app.listen({ host: config.listen.host, port: config.listen.port });
  } catch (error) {
    await tasks.close();
    await store.close();
    await tracing?.close();
    throw error;
  }
  const address = app.server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}${config.listen.path}`;
  // Its upstreams connect next: 'upstreams started' says how each came up.
  logger.info({ url, upstreams: config.upstreams.map((u) => u.name), auth: config.auth !== undefined }, 'taskgate listening');
  if (config.auth === undefined && !isLoopbackHostname(config.listen.host)) {
    logger.warn(
      { host: config.listen.host },
      'listening beyond loopback without an auth section: anyone who reaches the port uses every upstream, and a task id is all it takes to read a task; configure auth (docs/security.md: Authentication)',
    );
  }

  let closing: Promise<void> | undefined;
  const close = async (): Promise<void> => {
    shuttingDown = true;
    // Upstreams still connecting have no calls to finish: stopped at once (a child stuck in initialize included).
    const joinsClosed = reloader.closeJoins();
    // New requests are refused from here on; running tasks get replicas.drainTimeoutMs to finish. What still
    // runs then fails, with a message that says why, before its sessions' upstream connections go.
    await tasks.drain(reloader.config.replicas.drainTimeoutMs);
    await tasks.close();
    await reloader.settled(); // upstreams a reload retired: their runs ended with the others
    closeRevisions();
    replicas.close();
    sessions.endAll(); // ends open SSE streams, which would otherwise hold the server open
    await app.close();
    // Each waits until its children's process groups are gone.
    await Promise.all([...upstreams.map((u) => u.close()), joinsClosed]);
    await store.close();
    metrics?.close();
    stopAudit();
    stopLeniencyLog();
    await tracing?.close(); // last: the spans of the shutdown itself are exported too
  };
  const gateway: RunningGateway = {
    url,
    events,
    reload: (next) => reloader.reload(next),
    close: () => (closing ??= close()),
  };
  options.onListening?.(gateway);

  const collisions = await reloader.startUpstreams();
  starting = false;
  if (closing !== undefined) return gateway; // stopped while its upstreams started
  if (collisions.length > 0) {
    await gateway.close();
    throw new StartupConfigError(`${config.source}: upstream names collide:\n  ${collisions.join('\n  ')}`);
  }
  logger.info({ upstreams: upstreamStatus() }, 'upstreams started');
  return gateway;
}
