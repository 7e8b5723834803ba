// Credential metrics (issue 33 item 5): what it costs to act for callers at upstreams. Token requests (and JWTs the
// gateway signs) by upstream, grant and outcome, with their latency; token cache lookups by result, whose hit rate
// says how often a call got its credential without asking anyone. Never a principal label, whatever
// metrics.principalLabels says: one series per caller and upstream would grow with the user base. Per replica.
import { Counter, Histogram, type Registry } from 'prom-client';
import type { GatewayEvents } from '../events.js';
import { ChildCache } from './metrics-labels.js';
import type { MetricLabels } from './metrics-context.js';

/** Seconds: from signing a JWT locally (well under a millisecond) to an authorization server at its timeout. */
const TOKEN_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

type Countable = { inc(): void };
type Observer = { observe(value: number): void };

export function subscribeCredentialMetrics(registry: Registry, events: GatewayEvents, labels: MetricLabels): () => void {
  const registers = [registry];
  const requests = new Counter({
    name: 'taskgate_upstream_token_requests_total',
    help: 'Credentials the gateway asked for to call upstreams (token requests, JWTs it signed), by upstream, grant (client_credentials, token_exchange, signed) and outcome (ok, error, timeout, refused).',
    labelNames: ['upstream', 'grant', 'outcome'],
    registers,
  });
  const latency = new Histogram({
    name: 'taskgate_upstream_token_request_seconds',
    help: 'How long obtaining a credential for an upstream took (discovery included), by upstream, grant and outcome.',
    labelNames: ['upstream', 'grant', 'outcome'],
    buckets: TOKEN_BUCKETS,
    registers,
  });
  const cache = new Counter({
    name: 'taskgate_upstream_token_cache_total',
    help: 'Token cache lookups and removals by upstream, grant and result (hit, refresh_ahead, miss, failure_cached, invalidated, evicted).',
    labelNames: ['upstream', 'grant', 'result'],
    registers,
  });
  const requestChildren = new ChildCache<Countable>((upstream, grant, outcome) => requests.labels(upstream, grant, outcome));
  const latencyChildren = new ChildCache<Observer>((upstream, grant, outcome) => latency.labels(upstream, grant, outcome));
  const cacheChildren = new ChildCache<Countable>((upstream, grant, result) => cache.labels(upstream, grant, result));

  const stops = [
    events.on('upstream.token', (e) => {
      const upstream = labels.upstream.of(e.upstream);
      requestChildren.get(upstream, e.grant, e.outcome).inc();
      latencyChildren.get(upstream, e.grant, e.outcome).observe(e.durationMs / 1000);
    }),
    // Once per proxied call that carries a token: a lookup in nested maps, nothing built.
    events.on('upstream.token.cache', (e) => cacheChildren.get(labels.upstream.of(e.upstream), e.grant, e.result).inc()),
  ];
  return () => {
    for (const stop of stops) stop();
  };
}
