import type { FastifyInstance } from 'fastify';
import { buildFront } from './compose/front.js';
import { startFoundation } from './compose/foundation.js';
import { startMetrics, startObservers } from './compose/observers.js';
import { serveRevisions, type ServedRevisions } from './compose/revisions.js';
import { listenAndAnnounce, startReplicaLink } from './compose/serving.js';
import { buildGatewaySessions, type GatewaySessions } from './compose/sessions.js';
import { startTaskCore, type TaskCore } from './compose/task-core.js';
import { buildUpstreamSet, upstreamRoster, type UpstreamRoster, type UpstreamSet } from './compose/upstream-set.js';
import type { GatewayConfig } from './config/types.js';
import type { GatewayEvents } from './events.js';
import type { ReloadResult } from './gateway/reload.js';
import { drainReplica } from './gateway/drain.js';
import type { ReplicaLink } from './gateway/replicas.js';
import { Lifecycle, RETRY_ELSEWHERE_MS } from './lifecycle.js';
import type { Logger } from './log.js';
import { taskToolDefinitions } from './protocol/task-tool-definitions.js';

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
  // Built in dependency order and passed in; the builders that start a part start it as they build it, so the order
  // of the calls below is the start order. Where two parts need each other (sessions and the relay between replicas;
  // the relay and the revisions that cancel calls; sessions and what releases their upstream connections; the task
  // core and the revisions that resume its tasks, and the upstreams they run on), one reaches the other through a
  // closure here, called only once both exist.
  const observers = await startObservers(life, logger);
  const { events } = observers;
  const roster = upstreamRoster();
  const ownTools = new Set(taskToolDefinitions(config.tasks.taskTools).map((tool) => String(tool.name)));
  const metrics = await startMetrics(life, config, events, (name) => ownTools.has(name) || roster.catalog.tool(name) !== undefined);
  const foundation = await startFoundation(life, { config, logger, events });
  const sessions = buildGatewaySessions({
    config,
    logger,
    events,
    store: foundation.store,
    replicas: foundation.replicas,
    cancelHere: (session, params) => revisions.cancelHere(session, params),
    onEnd: (session) => void upstreamSet.messages.release(session),
  });
  const taskCore = await startTaskCore(life, {
    config,
    logger,
    events,
    foundation,
    upstream: (name) => upstreamSet.reloader.upstream(name),
    creatorOf: (task) => revisions.creatorOf(task),
  });
  const revisions = serveRevisions({ config, logger, events, foundation, catalog: roster.catalog, sessions, taskCore });
  const upstreamSet = buildUpstreamSet({ config, logger, events, roster, foundation, sessions: sessions.sessions, revisions, taskCore });
  // An upstream that acts as each user waits for a first connected user to read its catalog with: it is tried again
  // the moment one connects, on whichever replica (issue 41).
  foundation.consent?.onConnected(({ upstream }) => void upstreamSet.reloader.upstream(upstream)?.retryNow());
  /** Until every configured upstream has made its first attempt, this replica is not ready. */
  let starting = true;
  const initializing = (): string[] => (starting ? upstreamSet.reloader.starting() : []);
  const app = buildFront({ config, logger, life, observers, metrics, foundation, sessions, revisions, taskCore, upstreamSet, initializing });

  await startServing(life, { roster, upstreamSet, app, sessions, replicas: foundation.replicas, revisions, taskCore, logger });
  // Stopping it refuses new requests (isShuttingDown) and gives running tasks and calls in flight
  // replicas.drainTimeoutMs to finish (gateway/drain.ts); the task engine's close then hands over or fails what
  // remains, before the client streams get their retry hint and its sessions' upstream connections go.
  const drainParts = { tasks: taskCore.tasks, calls: upstreamSet.calls, logger };
  const url = await life.start({ name: 'listener', start: () => listenAndAnnounce(app, config, logger), stop: () => drainReplica(drainParts, upstreamSet.reloader.config.replicas.drainTimeoutMs) });
  const gateway: RunningGateway = { url, events, reload: (next) => upstreamSet.reloader.reload(next), close: () => life.close() };
  options.onListening?.(gateway);
  if (life.closing) return gateway; // stopped as it began to listen
  // Upstreams still connecting have no calls to finish: the first to stop (a child stuck in initialize included).
  const joined = await life.start({ name: 'upstream joins', start: () => ({ collisions: upstreamSet.reloader.startUpstreams() }), stop: () => upstreamSet.reloader.stopJoining() });
  const collisions = await joined.collisions;
  starting = false;
  if (life.closing) return gateway; // stopped while its upstreams started
  if (collisions.length > 0) throw new StartupConfigError(`${config.source}: upstream names collide:\n  ${collisions.join('\n  ')}`);
  logger.info({ upstreams: upstreamSet.status() }, 'upstreams started');
  return gateway;
}

interface ServedParts {
  roster: UpstreamRoster;
  upstreamSet: UpstreamSet;
  app: FastifyInstance;
  sessions: GatewaySessions;
  replicas: ReplicaLink;
  revisions: ServedRevisions;
  taskCore: TaskCore;
  logger: Logger;
}

/**
 * What runs, each stopped after everything started later (close: the last first). Upstream connections outlast the
 * HTTP server (calls in flight finish); the server outlasts what it serves: sessions end their streams, and tasks
 * still running fail with a reason, before it closes.
 */
async function startServing(life: Lifecycle, parts: ServedParts): Promise<void> {
  const { roster: { upstreams, firstAttempts }, upstreamSet: { reloader }, app, replicas, taskCore: { tasks } } = parts;
  const { sessions } = parts.sessions;
  const revisions = parts.revisions.entries;
  await life.start({ name: 'upstreams', start: () => upstreams, stop: () => Promise.all([...upstreams.map((u) => u.close()), reloader.closeJoins()]) });
  await life.start({ name: 'http server', start: () => app, stop: () => app.close() });
  await life.start({ name: 'sessions', start: () => sessions.start(), stop: () => sessions.endAll() });
  await life.start({ name: 'replica link', start: () => startReplicaLink(replicas, parts.logger), stop: () => replicas.close() });
  await life.start({ name: 'revisions', start: () => revisions, stop: () => revisions.forEach(({ runtime }) => runtime.close()) });
  // Upstreams a reload retired: their runs ended with the others.
  await life.start({ name: 'retired upstreams', start: () => reloader, stop: () => reloader.settled() });
  // Once the tasks are handed over or ended, each open stream tells its client when to reconnect (to another
  // replica: this one refuses requests), before the revisions and sessions close them.
  await life.start({ name: 'client streams', start: () => parts.sessions.streamBudget, stop: (streams) => streams.hintRetry(RETRY_ELSEWHERE_MS) });
  await life.start({ name: 'task engine', start: () => tasks.start(), stop: () => tasks.close() });
  // A gateway stopped before its upstreams started keeps no list waiting for them (begin is once: no-op otherwise).
  await life.start({ name: 'first attempts', start: () => firstAttempts, stop: () => firstAttempts.begin([]) });
}
