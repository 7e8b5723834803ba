// Webhook metrics (issue 34): tries by endpoint and outcome, dead letters, dropped deliveries and each endpoint's queue
// depth. `endpoint` is the endpoint's id (webhooks[].id, or the one derived from its URL), never its URL; the
// configuration bounds it, and it is capped all the same.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { GatewayEvents } from '../events.js';
import { BoundedLabel } from './metrics-labels.js';

/** Seconds: an endpoint that answers at once takes milliseconds; webhookDelivery.timeoutMs is 10 s by default. */
const ATTEMPT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export function subscribeWebhookMetrics(registry: Registry, events: GatewayEvents): () => void {
  const registers = [registry];
  const endpoint = new BoundedLabel(() => true, 100);
  const deliveries = new Counter({
    name: 'taskgate_webhook_deliveries_total',
    help: 'Webhook delivery tries this replica made, by endpoint and outcome (delivered, failed: a non-2xx answer, timeout, error: no answer).',
    labelNames: ['endpoint', 'outcome'],
    registers,
  });
  const duration = new Histogram({ name: 'taskgate_webhook_delivery_duration_seconds', help: 'How long webhook delivery tries took, by endpoint.', labelNames: ['endpoint'], buckets: ATTEMPT_BUCKETS, registers });
  const dead = new Counter({ name: 'taskgate_webhook_dead_letters_total', help: 'Webhook deliveries given up on (past webhookDelivery.maxAgeMs), by endpoint.', labelNames: ['endpoint'], registers });
  const dropped = new Counter({
    name: 'taskgate_webhook_dropped_total',
    help: 'Webhook deliveries never queued, by endpoint and reason (queue_full: the newest dropped; too_large; backlog_full: the store did not keep up).',
    labelNames: ['endpoint', 'reason'],
    registers,
  });
  const depth = new Gauge({ name: 'taskgate_webhook_queue_depth', help: "Deliveries in an endpoint's queue (every replica's, waiting or in flight), as this replica last saw it.", labelNames: ['endpoint'], registers });
  const stops = [
    events.on('webhook.attempt', (e) => {
      const label = endpoint.of(e.endpoint);
      deliveries.inc({ endpoint: label, outcome: e.outcome });
      duration.observe({ endpoint: label }, e.durationMs / 1000);
    }),
    events.on('webhook.dead_lettered', (e) => dead.inc({ endpoint: endpoint.of(e.endpoint) })),
    events.on('webhook.dropped', (e) => dropped.inc({ endpoint: endpoint.of(e.endpoint), reason: e.reason })),
    events.on('webhook.queue', (e) => depth.set({ endpoint: endpoint.of(e.endpoint) }, e.depth)),
  ];
  return () => {
    for (const stop of stops) stop();
  };
}
