// The upstreams behind the gateway. Their live list and what they offer are built first, empty (metrics and lists
// read them); what makes, feeds and replaces upstreams is built once the parts it reaches exist, and from then on
// the reloader owns the set: upstreams join the live list as each connects.
import type { GatewayConfig, UpstreamConfig } from '../config/types.js';
import type { GatewayEvents } from '../events.js';
import { FirstAttempts } from '../gateway/first-attempts.js';
import { MergedCatalog } from '../gateway/merged-catalog.js';
import { ConfigReloader } from '../gateway/reload.js';
import type { SessionRegistry } from '../gateway/sessions.js';
import { UpstreamMessages } from '../gateway/upstream-messages.js';
import type { JsonObject } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import { UPSTREAM_ADAPTERS } from '../protocol/revisions.js';
import { taskToolDefinitions } from '../protocol/task-tool-definitions.js';
import { CallsInFlight } from '../upstream/life/calls-in-flight.js';
import { Upstream, type UpstreamMessageSink, type UpstreamSessionLedger } from '../upstream/life/upstream.js';
import { VERSION } from '../version.js';
import type { Foundation } from './foundation.js';
import type { ServedRevisions } from './revisions.js';
import type { TaskCore } from './task-core.js';

export interface UpstreamRoster {
  /** The live list, changed in place (by a reload at once, as upstreams join). */
  upstreams: Upstream[];
  /** Until the start's upstreams have made their first attempts, lists and lookups wait for them (bounded). */
  firstAttempts: FirstAttempts;
  catalog: MergedCatalog;
}

export function upstreamRoster(): UpstreamRoster {
  const upstreams: Upstream[] = [];
  const firstAttempts = new FirstAttempts();
  return { upstreams, firstAttempts, catalog: new MergedCatalog(upstreams, undefined, firstAttempts) };
}

export interface UpstreamSetDeps {
  config: GatewayConfig;
  logger: Logger;
  events: GatewayEvents;
  roster: UpstreamRoster;
  foundation: Foundation;
  sessions: SessionRegistry;
  revisions: ServedRevisions;
  taskCore: TaskCore;
}

export interface UpstreamSet {
  /** What upstreams send toward clients (the upstream→client direction). */
  messages: UpstreamMessages;
  /** Starts, joins, replaces and retires upstreams; applies a reload to every part that holds settings. */
  reloader: ConfigReloader;
  /** Every upstream's status, live or joining. */
  status(): JsonObject[];
  /** Calls under way at every upstream: what a drain waits for, beside the task runs. */
  calls: CallsInFlight;
}

export function buildUpstreamSet(deps: UpstreamSetDeps): UpstreamSet {
  const { config, logger, events, roster, foundation, revisions, taskCore } = deps;
  const messages = new UpstreamMessages(roster.catalog, deps.sessions, revisions, logger);
  const sessionLedger = sessionLedgerOf(deps);
  const calls = new CallsInFlight();
  const createUpstream = (upstreamConfig: UpstreamConfig, sink: UpstreamMessageSink): Upstream =>
    new Upstream(upstreamConfig, logger, sink, { version: VERSION, events, adapters: UPSTREAM_ADAPTERS, identity: foundation.identity, calls, ...(sessionLedger === undefined ? {} : { sessionLedger }) });
  const reloader = new ConfigReloader(
    config,
    {
      ...roster,
      createUpstream,
      upstreamSink: messages,
      tasks: taskCore.tasks,
      taskTools: taskCore.taskTools,
      lists: revisions.lists,
      ownTools: taskToolDefinitions,
      revisions: revisions.entries.map(({ runtime }) => runtime),
      authenticator: foundation.authenticator,
      rateLimiter: foundation.rateLimiter,
      webhooks: taskCore.webhooks,
    },
    events,
    logger,
  );
  return { messages, reloader, calls, status: () => [...roster.upstreams.map((u) => u.status()), ...reloader.joiningStatus()] };
}

/**
 * Upstream sessions are recorded where other replicas look, so that the one that sweeps this replica ends them if it
 * dies without doing so. The embedded store has no other replica to do it.
 */
function sessionLedgerOf({ config, logger, foundation: { store, replicas } }: UpstreamSetDeps): UpstreamSessionLedger | undefined {
  if (store.kind === 'memory') return undefined;
  return {
    opened: (session) =>
      void store.upstreamSessions.record(replicas.id, session, config.replicas.leaseMs).catch((error: unknown) => {
        logger.warn({ err: error, upstream: session.upstream }, 'could not record an upstream session: if this replica dies, it stays open at the upstream');
      }),
    closed: (session) => store.upstreamSessions.forget(replicas.id, session).catch(() => undefined),
  };
}
