// Prometheus metrics, as a subscriber of the event seam. Each gateway has its own registry (several gateways in
// one process, as tests run them, never share series); names start with `taskgate_`; labels are bounded
// (metrics-labels.ts). Everything counts what this replica saw: counters and histograms sum across replicas, and
// so do the gauges of what a replica holds (task runs, sessions, streams). In a worker of `serve --workers N`,
// /metrics serves the whole group's, aggregated by the primary (cluster-metrics.ts).
import { collectDefaultMetrics, Registry } from 'prom-client';
import type { GatewayEvents } from '../events.js';
import { clusterSource } from './cluster-metrics.js';
import { metricLabels } from './metrics-context.js';
import { subscribeCredentialMetrics } from './metrics-credentials.js';
import { subscribeHealthMetrics } from './metrics-health.js';
import { subscribeRequestMetrics } from './metrics-requests.js';
import { subscribeTaskMetrics } from './metrics-tasks.js';
import { subscribeApprovalMetrics } from './metrics-approvals.js';
import { subscribeConnectionMetrics } from './metrics-connections.js';
import { subscribeWebhookMetrics } from './metrics-webhooks.js';

export interface GatewayMetricsOptions {
  events: GatewayEvents;
  /** `metrics.principalLabels`: a principal label on the task and denial counters. */
  principalLabels: boolean;
  /**
   * Every method MCP defines in the revisions the gateway speaks (the codecs', by the registry:
   * src/protocol/revisions.ts, above this layer, so handed in): named as they are, anything else is "other".
   */
  methods: ReadonlySet<string>;
  /** Whether the gateway exposes a tool of this name (others are labelled "other"). */
  knownTool: (name: string) => boolean;
}

/** What the /metrics endpoint serves. */
export interface MetricsSource {
  contentType: string;
  render(): Promise<string>;
}

export class GatewayMetrics implements MetricsSource {
  readonly registry = new Registry();
  private readonly stops: (() => void)[];
  /** Undefined unless this process is one worker of several: then the group's metrics. */
  private readonly cluster = clusterSource(this.registry);

  constructor(options: GatewayMetricsOptions) {
    const { events } = options;
    const labels = metricLabels(options);
    // Process metrics (CPU, memory, event loop lag, GC, handles), under the same prefix.
    collectDefaultMetrics({ register: this.registry, prefix: 'taskgate_' });
    this.stops = [
      subscribeRequestMetrics(this.registry, events, labels),
      subscribeTaskMetrics(this.registry, events, labels),
      subscribeApprovalMetrics(this.registry, events, labels),
      subscribeHealthMetrics(this.registry, events, labels),
      subscribeCredentialMetrics(this.registry, events, labels),
      subscribeConnectionMetrics(this.registry, events, labels),
      subscribeWebhookMetrics(this.registry, events),
    ];
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    return this.cluster?.render() ?? this.registry.metrics();
  }

  /** Stops listening (the series stay as they are). */
  close(): void {
    this.cluster?.release();
    for (const stop of this.stops.splice(0)) stop();
  }
}
