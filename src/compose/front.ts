// The HTTP front: every revision's front behind the one MCP endpoint, the admin endpoints, the dashboard, health
// and readiness (built here, listening only once every part it serves has started).
import type { FastifyInstance } from 'fastify';
import type { GatewayConfig } from '../config/types.js';
import { createFrontEnd, type FrontEndDeps } from '../http/server.js';
import { publishedJwks } from '../identity/signer.js';
import type { Lifecycle } from '../lifecycle.js';
import type { Logger } from '../log.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import { registerStateMetrics } from '../observability/metrics-state.js';
import type { Foundation } from './foundation.js';
import type { Observers } from './observers.js';
import type { ServedRevisions } from './revisions.js';
import { readinessOf } from './serving.js';
import type { GatewaySessions } from './sessions.js';
import type { TaskCore } from './task-core.js';
import type { UpstreamSet } from './upstream-set.js';

export interface FrontDeps {
  config: GatewayConfig;
  logger: Logger;
  /** Its closing says the gateway is shutting down: new requests are refused and readiness says 503. */
  life: Lifecycle;
  observers: Observers;
  metrics: GatewayMetrics | undefined;
  foundation: Foundation;
  sessions: GatewaySessions;
  revisions: ServedRevisions;
  taskCore: TaskCore;
  upstreamSet: UpstreamSet;
  /**
   * The upstreams readiness waits for. Only the start waits for upstreams: one a reload adds must not take every
   * replica out of rotation at once.
   */
  initializing(): string[];
}

export function buildFront(deps: FrontDeps): FastifyInstance {
  const { config, life, metrics } = deps;
  const { events, tracing } = deps.observers;
  const { store, authenticator, rateLimiter, inflight, credentialHealth } = deps.foundation;
  const { sessions } = deps.sessions;
  const { tasks } = deps.taskCore;
  const { reloader, status: upstreams } = deps.upstreamSet;
  const dashboard = { path: config.dashboard.path, store, tasks: tasks.runs, upstreams, upstreamConfig: (name: string) => reloader.config.upstreams.find((u) => u.name === name) };
  const readiness = readinessOf({ store, tasks, sessions, upstreams, credentials: () => credentialHealth.credentialStatus(), initializing: () => deps.initializing(), shuttingDown: () => life.closing });
  const app = createFrontEnd({
    config,
    logger: deps.logger,
    revisions: deps.revisions.entries.map(({ revision, runtime }) => ({ ...revision, front: runtime.front })),
    sessions,
    authenticator,
    ...(config.dashboard.enabled ? { dashboard } : {}),
    approvals: tasks.approvals,
    rateLimiter,
    inflight,
    ...(metrics === undefined ? {} : { metrics }),
    admin: () => reloader.config.auth?.admin,
    jwks: () => publishedJwks(reloader.config.identity),
    ...consentFront(deps),
    events,
    isShuttingDown: () => life.closing,
    instrumentation: tracing?.instrumentation,
    readiness,
  });
  if (metrics !== undefined) {
    // Scraped through this front, so they go with it: the store they read closes after it.
    const unregister = registerStateMetrics(metrics.registry, {
      ready: async () => (await readiness()).ready,
      leasesRenewing: () => tasks.health().leases.ok,
      soonestApprovalDeadline: async () => (await store.approvals.pending({ limit: 1 }))[0]?.deadlineMs,
    });
    app.addHook('onClose', async () => unregister());
  }
  return app;
}

/** Per-user consent's browser side, when some upstream needs it (issue 41). */
function consentFront(deps: FrontDeps): { consent: NonNullable<FrontEndDeps['consent']> } | Record<string, never> {
  const { consent: connections, store, identity } = deps.foundation;
  const { reloader } = deps.upstreamSet;
  if (connections === undefined || identity.sealer === undefined) return {};
  return {
    consent: {
      connections,
      store,
      config: () => reloader.config,
      sealer: identity.sealer,
    },
  };
}
