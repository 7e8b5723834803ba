// The task store going away and coming back, with a Redis of the test's own (AOF on, so a restart keeps what
// was acknowledged): prompt errors meanwhile, nothing lost afterwards.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventually, testScope, textOf, type Json } from '../helpers/harness.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';
import { ownRedis } from '../helpers/redis-server.js';

test('Redis stopped and restarted mid-task: prompt store errors meanwhile, the result is written when it is back', async (t) => {
  const scope = testScope(t);
  const redis = await ownRedis(scope);
  const upstream = await scope.upstream('stdio');
  const gateway = await scope.gateway({
    store: { type: 'redis', url: redis.url, prefix: 'faults' },
    upstreams: { fx: upstream.config },
    tasks: { defaults: { mode: 'optional', taskAfterMs: 0 } },
    replicas: { leaseMs: 1000, drainTimeoutMs: 0 },
  });
  const created = await sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 1.5, label: 'outage' } }, { capabilities: TASKS_CAPABILITIES });
  const taskId = created.result?.taskId as string;
  assert.equal(created.result?.resultType, 'task', JSON.stringify(created.messages));

  await redis.stop();
  const during = await sendRev2026(gateway.url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES });
  assert.match(String(during.error?.message), /task store is unavailable/, JSON.stringify(during.messages));
  // The upstream finishes while Redis is down; the gateway keeps the outcome.
  await new Promise((resolve) => setTimeout(resolve, 2500));

  await redis.restart();
  let task: Json | undefined;
  await eventually(async () => {
    const r = await sendRev2026(gateway.url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES });
    task = r.result;
    return task?.status === 'completed';
  });
  assert.equal(textOf(task?.result), 'slow_compute (outage) finished after 1.5s');
});
