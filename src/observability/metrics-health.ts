// Health metrics: upstreams up or down and restarts, the store's latency and outages, sessions and open streams,
// refusals (access rules, credentials, rate limits and other bounds), requests let off on purpose, and config
// reloads. All per replica.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { GatewayEvents } from '../events.js';
import { BoundedLabel, ChildCache } from './metrics-labels.js';
import type { MetricLabels } from './metrics-context.js';

/** Seconds: a healthy store answers in well under a millisecond. */
const STORE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5];

export function subscribeHealthMetrics(registry: Registry, events: GatewayEvents, labels: MetricLabels): () => void {
  const registers = [registry];
  const byPrincipal = labels.principal === undefined ? [] : ['principal'];
  const principal = (who: string | undefined): Record<string, string> => (labels.principal === undefined ? {} : { principal: labels.principal.of(who) });
  // Names chosen by the core (limits, denial kinds, store operations), capped all the same.
  const limitName = new BoundedLabel(() => true, 50);
  const kindName = new BoundedLabel(() => true, 50);
  const operationName = new BoundedLabel(() => true, 50);

  const upstreamUp = new Gauge({ name: 'taskgate_upstream_up', help: 'Whether this replica is connected to the upstream (1) or not (0).', labelNames: ['upstream'], registers });
  const restarts = new Counter({ name: 'taskgate_upstream_restarts_total', help: 'Times a stdio upstream ran again after its child exited.', labelNames: ['upstream'], registers });
  const violations = new Counter({ name: 'taskgate_upstream_violations_total', help: 'Protocol violations by upstream, each counted (the log warns once a minute per kind).', labelNames: ['upstream'], registers });

  const storeUp = new Gauge({ name: 'taskgate_store_up', help: 'Whether the store answers this replica (0 during an outage).', registers });
  const outage = new Counter({ name: 'taskgate_store_outage_seconds_total', help: 'Time the store was unavailable to this replica, counted when it comes back.', registers });
  const storeOps = new Histogram({
    name: 'taskgate_store_operation_duration_seconds',
    help: 'Store operations (Redis scripts) by operation; _count counts them.',
    labelNames: ['operation'],
    buckets: STORE_BUCKETS,
    registers,
  });
  const slow = new Counter({ name: 'taskgate_store_slow_operations_total', help: 'Store operations slower than 100 ms, by operation.', labelNames: ['operation'], registers });
  const opChildren = new ChildCache((operation) => storeOps.labels(operation));
  storeUp.set(1);

  const sessions = new Gauge({ name: 'taskgate_sessions', help: 'Sessions (2025-11-25) this replica holds now; a session used through several replicas counts on each.', registers });
  const sessionsCreated = new Counter({ name: 'taskgate_sessions_created_total', help: 'Sessions created (initialize) on this replica.', registers });
  const sessionsClosed = new Counter({ name: 'taskgate_sessions_closed_total', help: 'Sessions this replica stopped holding, by reason (deleted, idle, shutdown, evicted).', labelNames: ['reason'], registers });
  const streams = new Gauge({ name: 'taskgate_streams_open', help: 'SSE streams open to clients on this replica, by kind (get, post, listen).', labelNames: ['kind'], registers });

  const denied = new Counter({ name: 'taskgate_access_denied_total', help: 'Refusals by access rules or credentials, by kind (tools, prompts, resources, credentials, …).', labelNames: ['kind', ...byPrincipal], registers });
  const limited = new Counter({ name: 'taskgate_rate_limited_total', help: 'Requests refused at a rate limit or bound, by limit.', labelNames: ['limit', ...byPrincipal], registers });
  const lenient = new Counter({
    name: 'taskgate_lenient_requests_total',
    help: 'Client requests accepted though they bent their revision where the gateway is lenient on purpose, by kind (missing_mcp_name) and method.',
    labelNames: ['kind', 'method'],
    registers,
  });
  const reloads = new Counter({ name: 'taskgate_config_reloads_total', help: 'Configuration reloads, by result (applied, rejected).', labelNames: ['result'], registers });

  const stops = [
    events.on('upstream.up', (e) => upstreamUp.set({ upstream: labels.upstream.of(e.upstream) }, 1)),
    events.on('upstream.down', (e) => upstreamUp.set({ upstream: labels.upstream.of(e.upstream) }, 0)),
    events.on('upstream.restarted', (e) => restarts.inc({ upstream: labels.upstream.of(e.upstream) })),
    events.on('upstream.violation', (e) => violations.inc({ upstream: labels.upstream.of(e.upstream) })),
    events.on('store.unavailable', () => storeUp.set(0)),
    events.on('store.back', (e) => {
      storeUp.set(1);
      outage.inc(e.outageMs / 1000);
    }),
    events.on('store.operation', (e) => opChildren.get(operationName.of(e.operation)).observe(e.durationMs / 1000)),
    events.on('store.slow', (e) => slow.inc({ operation: operationName.of(e.operation) })),
    events.on('session.opened', (e) => {
      sessions.inc();
      if (e.resumed !== true) sessionsCreated.inc();
    }),
    events.on('session.closed', (e) => {
      sessions.dec();
      sessionsClosed.inc({ reason: e.reason });
    }),
    events.on('stream.opened', (e) => streams.inc({ kind: e.kind })),
    events.on('stream.closed', (e) => streams.dec({ kind: e.kind })),
    events.on('access.denied', (e) => denied.inc({ kind: kindName.of(e.kind), ...principal(e.principal) })),
    events.on('rate.limited', (e) => limited.inc({ limit: limitName.of(e.limit), ...principal(e.principal) })),
    // Both labels come from fixed sets (the kind from the core, the method from the few that may be lenient).
    events.on('request.lenient', (e) => lenient.inc({ kind: e.kind, method: labels.method.of(e.method) })),
    events.on('config.reloaded', () => reloads.inc({ result: 'applied' })),
    events.on('config.rejected', () => reloads.inc({ result: 'rejected' })),
  ];
  return () => {
    for (const stop of stops) stop();
  };
}
