// The gateway's observers. One seam for the whole gateway: the core announces; tracing, the audit and leniency logs
// and metrics listen (DESIGN.md §10). They start first, so that they see everything emitted.
import type { GatewayConfig } from '../config/types.js';
import { GatewayEvents } from '../events.js';
import type { Lifecycle } from '../lifecycle.js';
import type { Logger } from '../log.js';
import { subscribeAuditLog } from '../observability/audit.js';
import { subscribeLeniencyLog } from '../observability/leniency-log.js';
import { GatewayMetrics } from '../observability/metrics.js';
import { startTracing, type Tracing } from '../observability/tracing.js';
import { MCP_METHODS } from '../protocol/revisions.js';

export interface Observers {
  events: GatewayEvents;
  /** Undefined unless tracing is configured (OTEL_* environment). */
  tracing: Tracing | undefined;
}

/** Tracing first, and so stopped last: the shutdown's spans go out too. Then the audit and leniency logs. */
export async function startObservers(life: Lifecycle, logger: Logger): Promise<Observers> {
  const events = new GatewayEvents(logger);
  const tracing = await life.start({ name: 'tracing', start: () => startTracing(events, logger), stop: (started) => started?.close() });
  await life.start({ name: 'audit log', start: () => subscribeAuditLog(events, logger), stop: (unsubscribe) => unsubscribe() });
  await life.start({ name: 'leniency log', start: () => subscribeLeniencyLog(events, logger), stop: (unsubscribe) => unsubscribe() });
  return { events, tracing };
}

/** Prometheus metrics, when enabled. `knownTool`: a tool clients can call (any other name is labelled "other"). */
export async function startMetrics(life: Lifecycle, config: GatewayConfig, events: GatewayEvents, knownTool: (name: string) => boolean): Promise<GatewayMetrics | undefined> {
  if (!config.metrics.enabled) return undefined;
  return life.start({
    name: 'metrics',
    start: () => new GatewayMetrics({ events, methods: MCP_METHODS, principalLabels: config.metrics.principalLabels, knownTool }),
    stop: (started) => started.close(),
  });
}
