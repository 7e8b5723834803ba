// `serve --workers`: the count (flag, TASKGATE_WORKERS, auto), the memory store refused (also when
// TASKGATE_REDIS_URL replaces it: then accepted), and how the group's /metrics combines each worker's registry.
// The processes themselves are test/heavy/workers.test.ts.
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { describe, test } from 'node:test';
import { Counter, Gauge, Registry } from 'prom-client';
import { parseConfig } from '../../src/config/load.js';
import { aggregate } from '../../src/observability/cluster-metrics.js';
import { workerCount, workersRefusal } from '../../src/workers.js';

describe('workers: the count', () => {
  test('1 without the option or the variable; the flag wins over the variable', () => {
    assert.deepEqual(workerCount(undefined, {}), { count: 1 });
    assert.deepEqual(workerCount(undefined, { TASKGATE_WORKERS: '' }), { count: 1 });
    assert.deepEqual(workerCount(undefined, { TASKGATE_WORKERS: '3' }), { count: 3 });
    assert.deepEqual(workerCount('2', { TASKGATE_WORKERS: '3' }), { count: 2 });
  });

  test("'auto' is one per CPU this process may use", () => {
    assert.deepEqual(workerCount('auto', {}), { count: availableParallelism() });
    assert.deepEqual(workerCount(undefined, { TASKGATE_WORKERS: 'AUTO' }), { count: availableParallelism() });
  });

  test('anything else is refused, naming where it came from', () => {
    for (const bad of ['0', '-1', '1.5', 'two', '']) {
      const result = workerCount(bad, {});
      assert.ok('error' in result && result.error.startsWith('--workers must be'), `${bad}: ${JSON.stringify(result)}`);
    }
    const fromEnv = workerCount(undefined, { TASKGATE_WORKERS: 'x' });
    assert.ok('error' in fromEnv && fromEnv.error.startsWith('TASKGATE_WORKERS must be'), JSON.stringify(fromEnv));
  });
});

describe('workers: the store', () => {
  const memory = 'store: { type: memory }\nupstreams:\n  fx: { command: node }\n';
  test('the memory store is refused for more than one worker, and fine for one', () => {
    const config = parseConfig(memory, 'test.yaml', {});
    assert.match(workersRefusal(config, 2) ?? '', /memory store/);
    assert.equal(workersRefusal(config, 1), undefined);
  });

  test('TASKGATE_REDIS_URL replacing the memory store makes it a shared store', () => {
    const config = parseConfig(memory, 'test.yaml', { TASKGATE_REDIS_URL: 'redis://127.0.0.1:6379' });
    assert.equal(workersRefusal(config, 4), undefined);
  });
});

describe('workers: the group’s metrics', () => {
  /** One worker's registry as the gateway's metrics would hold it. */
  function workerRegistry(calls: number, storeUp: number, queueDepth: number): Registry {
    const registry = new Registry();
    new Counter({ name: 'taskgate_calls_total', help: 'h', registers: [registry] }).inc(calls);
    new Gauge({ name: 'taskgate_store_up', help: 'h', registers: [registry] }).set(storeUp);
    new Gauge({ name: 'taskgate_sessions', help: 'h', registers: [registry] }).set(calls);
    new Gauge({ name: 'taskgate_webhook_queue_depth', help: 'h', labelNames: ['endpoint'], registers: [registry] }).set({ endpoint: 'ops' }, queueDepth);
    new Gauge({ name: 'taskgate_build_info', help: 'h', labelNames: ['version'], registers: [registry] }).set({ version: '1.2.3' }, 1);
    return registry;
  }

  test('counters and holdings sum; up is the least; a queue every worker sees is not counted twice; info once', async () => {
    const a = await workerRegistry(3, 1, 7).getMetricsAsJSON();
    const b = await workerRegistry(4, 0, 5).getMetricsAsJSON();
    const text = await aggregate([a, b]);
    assert.match(text, /^taskgate_calls_total 7$/m);
    assert.match(text, /^taskgate_sessions 7$/m);
    assert.match(text, /^taskgate_store_up 0$/m);
    assert.match(text, /^taskgate_webhook_queue_depth\{endpoint="ops"\} 7$/m);
    assert.match(text, /^taskgate_build_info\{version="1.2.3"\} 1$/m);
  });
});
