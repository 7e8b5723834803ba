// The state gauges read at scrape time (src/observability/metrics-state.ts), from state handed in: each scrape asks
// again, the approvals deadline is time left from the clock given, and a store that fails or does not answer makes
// it unknown (NaN) rather than holding the scrape. The gateway's own wiring is test/integration/metrics-state.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { registerStateMetrics, type ScrapedState } from '../../src/observability/metrics-state.js';
import { parsePrometheus, sampleValue, type Sample } from '../helpers/prometheus-text.js';

const NOW = 1_700_000_000_000;

function setUp(state: Partial<ScrapedState>): { registry: Registry; scrape: () => Promise<Sample[]>; unregister: () => void } {
  const registry = new Registry();
  const full: ScrapedState = { ready: async () => true, leasesRenewing: () => true, soonestApprovalDeadline: async () => undefined, ...state };
  const unregister = registerStateMetrics(registry, full, () => NOW);
  return { registry, scrape: async () => parsePrometheus(await registry.metrics()), unregister };
}

describe('state metrics', () => {
  it('reads readiness and lease health on every scrape', async () => {
    let ready = true;
    let renewing = true;
    const { scrape } = setUp({ ready: async () => ready, leasesRenewing: () => renewing });
    const before = await scrape();
    assert.deepEqual([sampleValue(before, 'taskgate_ready'), sampleValue(before, 'taskgate_task_leases_renewing')], [1, 1]);
    ready = false;
    renewing = false;
    const after = await scrape();
    assert.deepEqual([sampleValue(after, 'taskgate_ready'), sampleValue(after, 'taskgate_task_leases_renewing')], [0, 0]);
  });

  it('the soonest approval deadline as seconds left; +Inf with none pending; NaN when the store fails', async () => {
    let deadline: number | undefined = NOW + 90_500;
    let fails = false;
    const { scrape } = setUp({ soonestApprovalDeadline: async () => (fails ? Promise.reject(new Error('no connection')) : deadline) });
    assert.equal(sampleValue(await scrape(), 'taskgate_approval_expiry_seconds'), 90.5);
    deadline = NOW - 2_000;
    assert.equal(sampleValue(await scrape(), 'taskgate_approval_expiry_seconds'), -2, 'overdue, not yet expired by the sweep');
    deadline = undefined;
    assert.equal(sampleValue(await scrape(), 'taskgate_approval_expiry_seconds'), Number.POSITIVE_INFINITY);
    fails = true;
    assert.ok(Number.isNaN(sampleValue(await scrape(), 'taskgate_approval_expiry_seconds')));
  });

  it('a store that does not answer makes the deadline unknown after its bound instead of holding the scrape', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { registry } = setUp({ soonestApprovalDeadline: () => new Promise<number>(() => undefined) });
    const text = registry.metrics();
    // Let the collectors start their reads (and their bounds' timers: setImmediate is not mocked), then pass the bound.
    await new Promise((resolve) => setImmediate(resolve));
    t.mock.timers.tick(1_000);
    assert.ok(Number.isNaN(sampleValue(parsePrometheus(await text), 'taskgate_approval_expiry_seconds')));
  });

  it('unregisters its gauges', async () => {
    const { registry, unregister } = setUp({});
    unregister();
    assert.deepEqual(registry.getMetricsAsArray(), []);
  });
});
