// The state gauges read at scrape time (src/observability/metrics-state.ts) on real gateways: taskgate_ready says
// what /readyz says, taskgate_task_leases_renewing follows the lease heartbeats, and taskgate_approval_expiry_seconds
// follows the store's pending approval holds (a real hold made and cancelled through the MCP endpoint).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { freePort } from '../fixtures/spawn.js';
import { eventually, testScope, type Json, type TestGateway } from '../helpers/harness.js';
import { parsePrometheus, sampleValue, type Sample } from '../helpers/prometheus-text.js';
import { sharedRedisStore } from '../helpers/shared-redis.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';

const OPS_KEY = 'metrics-state-ops-key-0123456789';
const ALICE_KEY = 'metrics-state-alice-key-0123456789';
const APPROVAL_TIMEOUT_MS = 600_000;

async function scrape(gateway: TestGateway): Promise<Sample[]> {
  const response = await fetch(`${gateway.origin}/metrics`, { headers: { authorization: `Bearer ${OPS_KEY}` } });
  assert.equal(response.status, 200);
  return parsePrometheus(await response.text());
}

/** Scrapes until `check` holds (the gauges follow state as it changes; the bound is a hang guard only). */
async function scrapeUntil(gateway: TestGateway, check: (samples: Sample[]) => boolean): Promise<Sample[]> {
  let samples: Sample[] = [];
  await eventually(async () => check((samples = await scrape(gateway))), 15_000);
  return samples;
}

/** With auth on, and every call to `slow` held for ops' approval. */
function config(store: Json, upstream: Json): Json {
  return {
    store,
    upstreams: { fx: upstream },
    auth: {
      resource: 'http://127.0.0.1/mcp',
      apiKeys: [
        { principal: 'ops', key: OPS_KEY },
        { principal: 'alice', key: ALICE_KEY },
      ],
      admin: { principals: ['ops'] },
    },
    tasks: { defaults: { mode: 'optional', pollIntervalMs: 100 }, rules: [{ match: 'slow', approval: { approvers: ['ops'], timeoutMs: APPROVAL_TIMEOUT_MS } }] },
  };
}

describe('state gauges', () => {
  test('a ready replica: ready, leases renewing, no approval pending (+Inf); a held call shows its time left until it is cancelled', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.gateway(config(sharedRedisStore(scope, 'metrics-state'), upstream.config));
    const idle = await scrape(gateway);
    assert.equal(sampleValue(idle, 'taskgate_ready'), 1);
    assert.equal(sampleValue(idle, 'taskgate_task_leases_renewing'), 1);
    assert.equal(sampleValue(idle, 'taskgate_approval_expiry_seconds'), Number.POSITIVE_INFINITY);

    const headers = { authorization: `Bearer ${ALICE_KEY}` };
    const created = await sendRev2026(gateway.url, 'tools/call', { name: 'slow', arguments: { ms: 10 } }, { capabilities: TASKS_CAPABILITIES, headers });
    assert.equal(created.result?.resultType, 'task', JSON.stringify(created.messages));
    const taskId = String((created.result as Json).taskId ?? ((created.result as Json).task as Json | undefined)?.taskId);
    const held = await scrapeUntil(gateway, (s) => Number.isFinite(sampleValue(s, 'taskgate_approval_expiry_seconds')));
    const left = sampleValue(held, 'taskgate_approval_expiry_seconds');
    // Its deadline is the hold's: after now, and no later than the rule's timeout from now.
    assert.ok(left > 0 && left <= APPROVAL_TIMEOUT_MS / 1000, String(left));
    assert.equal(sampleValue(held, 'taskgate_approvals_pending', { tool: 'slow' }), 1);

    const cancelled = await sendRev2026(gateway.url, 'tasks/cancel', { taskId }, { capabilities: TASKS_CAPABILITIES, headers });
    assert.equal(cancelled.error, undefined, JSON.stringify(cancelled.messages));
    await scrapeUntil(gateway, (s) => sampleValue(s, 'taskgate_approval_expiry_seconds') === Number.POSITIVE_INFINITY);
  });

  test('a replica whose store is unreachable: not ready, leases not renewing, the approvals deadline unknown (NaN)', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const deadPort = await freePort();
    const gateway = await scope.gateway({ ...config({ type: 'redis', url: `redis://127.0.0.1:${deadPort}`, commandTimeoutMs: 200 }, upstream.config), replicas: { leaseMs: 600, drainTimeoutMs: 0 } });
    const samples = await scrapeUntil(gateway, (s) => sampleValue(s, 'taskgate_task_leases_renewing') === 0);
    assert.equal(sampleValue(samples, 'taskgate_ready'), 0);
    assert.ok(Number.isNaN(sampleValue(samples, 'taskgate_approval_expiry_seconds')));
  });
});
