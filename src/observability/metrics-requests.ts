// Request metrics: every MCP request a client sends (the `mcp.request` scope) and every request the gateway sends
// an upstream (`upstream.request`), as latency histograms whose `_count` is the request count. The wrappers keep
// to one branch on each request's promise and look their histogram child up in nested maps: no key strings, no label
// objects per call.
import { Histogram, type Registry } from 'prom-client';
import type { GatewayEvents, GatewayScopeMap, Outcome, ScopeWrapper } from '../events.js';
import { ChildCache } from './metrics-labels.js';
import type { MetricLabels } from './metrics-context.js';

/** Seconds: from a ping to a long synchronous tool call (a task's own duration has its own histogram). */
const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

type Observer = { observe(value: number): void };

export function subscribeRequestMetrics(registry: Registry, events: GatewayEvents, labels: MetricLabels): () => void {
  const requests = new Histogram({
    name: 'taskgate_request_duration_seconds',
    help: 'MCP requests from clients by method, tool (tools/call), upstream and outcome; _count counts them. Per replica.',
    labelNames: ['method', 'tool', 'upstream', 'outcome'],
    buckets: REQUEST_BUCKETS,
    registers: [registry],
  });
  const upstreamRequests = new Histogram({
    name: 'taskgate_upstream_request_duration_seconds',
    help: 'Requests the gateway sent to upstreams, by upstream, method, tool (tools/call) and outcome; _count counts them. Per replica.',
    labelNames: ['upstream', 'method', 'tool', 'outcome'],
    buckets: REQUEST_BUCKETS,
    registers: [registry],
  });
  const requestChildren = new ChildCache<Observer>((method, tool, upstream, outcome) => requests.labels(method, tool, upstream, outcome));
  const upstreamChildren = new ChildCache<Observer>((upstream, method, tool, outcome) => upstreamRequests.labels(upstream, method, tool, outcome));

  const observeRequest = (info: GatewayScopeMap['mcp.request'], seconds: number, failed: boolean): void => {
    const method = labels.method.of(info.method);
    const tool = info.method === 'tools/call' ? labels.tool.of(info.target) : '';
    requestChildren.get(method, tool, labels.upstream.of(info.upstream), outcomeOf(info.outcome, failed)).observe(seconds);
  };
  const observeUpstream = (info: GatewayScopeMap['upstream.request'], seconds: number, failed: boolean): void => {
    const method = labels.method.of(info.method);
    upstreamChildren.get(labels.upstream.of(info.upstream), method, labels.tool.of(info.tool), outcomeOf(info.outcome, failed)).observe(seconds);
  };

  const stops = [events.around('mcp.request', timed<'mcp.request'>(observeRequest)), events.around('upstream.request', timed<'upstream.request'>(observeUpstream))];
  return () => {
    for (const stop of stops) stop();
  };
}

/**
 * A scope wrapper that times the work and hands the duration (and whether it threw) to `observe`. It returns the
 * work's own promise and observes on a branch of it rather than awaiting it in an async frame: an upstream call
 * lasts as long as its tool (a task's, hours), and a suspended frame per call in flight is a generator, its
 * registers and a promise more (issue 23).
 */
function timed<K extends 'mcp.request' | 'upstream.request'>(observe: (info: GatewayScopeMap[K], seconds: number, failed: boolean) => void): ScopeWrapper<K> {
  return (info, next) => {
    const started = performance.now();
    const work = next();
    work.then(
      () => observe(info, (performance.now() - started) / 1000, false),
      () => observe(info, (performance.now() - started) / 1000, true),
    );
    return work;
  };
}

/** The outcome the core wrote; when it wrote none, whether the work threw says it. */
function outcomeOf(outcome: Outcome | undefined, failed: boolean): Outcome {
  return outcome ?? (failed ? 'error' : 'ok');
}
