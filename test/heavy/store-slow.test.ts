// Slow is not down: a Redis of the test's own, blocked by DEBUG SLEEP (the connection stays up) and then stopped.
// Requests meanwhile fail promptly with HTTP 503 + Retry-After and say which it is; /readyz says it in a sentence of
// the gateway's own, never the Redis client's words; once Redis answers again, the gateway serves again.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { eventually, fixtureUpstream, testScope } from '../helpers/harness.js';
import { sendRev2026, TASKS_CAPABILITIES, type Rev2026Response } from '../helpers/stateless-wire.js';
import { ownRedis } from '../helpers/redis-server.js';

async function readyz(origin: string): Promise<{ status: number; body: { ready: boolean; store: { ok: boolean; error?: string } } }> {
  const answer = await request(`${origin}/readyz`);
  return { status: answer.statusCode, body: (await answer.body.json()) as never };
}

test('a Redis blocked by DEBUG SLEEP is slow, one stopped is unavailable: 503 + Retry-After, a readyz sentence, served again after', async (t) => {
  const scope = testScope(t);
  const redis = await ownRedis(scope, { volatile: true, extraArgs: ['--enable-debug-command', 'yes'] });
  const upstream = await fixtureUpstream('stdio');
  const gateway = await scope.gateway({
    store: { type: 'redis', url: redis.url, prefix: 'slow', commandTimeoutMs: 300 },
    upstreams: { fx: upstream.config },
    tasks: { defaults: { mode: 'optional', taskAfterMs: 0 } },
  });
  const created = await sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0.1, label: 'slow-store' } }, { capabilities: TASKS_CAPABILITIES });
  const taskId = created.result?.taskId as string;
  assert.equal(created.result?.resultType, 'task', JSON.stringify(created.messages));
  const get = (): Promise<Rev2026Response> => sendRev2026(gateway.url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES });
  assert.equal((await readyz(gateway.origin)).status, 200);

  const slowOnes: { operation: string; durationMs: number }[] = [];
  const stopWatching = gateway.events.on('store.slow', (e) => slowOnes.push(e));
  scope.defer(stopWatching);

  // Blocked on a connection of its own; its answer is the end of the sleep.
  const sleeper = new Redis({ port: redis.port, maxRetriesPerRequest: 0, retryStrategy: () => null });
  sleeper.on('error', () => undefined);
  scope.defer(() => sleeper.disconnect());
  const slept = sleeper.call('DEBUG', 'SLEEP', '10');
  // Until Redis has taken the sleep, a read may still be answered: ask until one is refused.
  let refused: Rev2026Response | undefined;
  await eventually(async () => {
    const answer = await get();
    if (answer.status !== 200) refused = answer;
    return refused !== undefined;
  }, 9_000);
  assert.equal(refused?.status, 503, JSON.stringify(refused?.messages));
  assert.equal(refused?.headers['retry-after'], '1');
  assert.equal(refused?.error?.code, -32603);
  assert.match(String(refused?.error?.message), /task store is slow/, JSON.stringify(refused?.messages));
  assert.doesNotMatch(String(refused?.error?.message), /no connection|max retries|timed out/i);
  // The command that timed out is announced as the store being slow (taskgate_store_slow_operations_total).
  assert.ok(slowOnes.some((e) => e.durationMs === 300 && e.operation !== 'evalsha'), JSON.stringify(slowOnes));
  const slowReady = await readyz(gateway.origin);
  assert.equal(slowReady.status, 503);
  assert.equal(slowReady.body.store.error, 'the store is connected but did not answer within 1000 ms', JSON.stringify(slowReady.body));

  await slept;
  await eventually(async () => (await get()).result?.status === 'completed');
  // Ready again once a lease renewal went through as well (the ones due during the sleep failed).
  await eventually(async () => (await readyz(gateway.origin)).status === 200);

  // A 2025-11-25 session made while Redis answers.
  const { client, transport } = await scope.client(gateway.url);
  const sessionId = transport.sessionId as string;

  // Stopped: no connection at all.
  await redis.stop();
  const down = await get();
  assert.equal(down.status, 503, JSON.stringify(down.messages));
  assert.equal(down.headers['retry-after'], '1');
  assert.match(String(down.error?.message), /task store is unavailable: no connection to Redis/, JSON.stringify(down.messages));
  const downReady = await readyz(gateway.origin);
  assert.equal(downReady.status, 503);
  assert.equal(downReady.body.store.error, 'no connection to the store (reconnecting)', JSON.stringify(downReady.body));

  // Within the session, a dispatched request's error is a JSON-RPC error (in a 200, as every error there) that says
  // when to retry; a refusal of the exchange itself (its DELETE) is a 503 with Retry-After.
  await assert.rejects(client.experimental.tasks.getTask(taskId), (error: { code?: number; message?: string; data?: { retryAfterMs?: number } }) => {
    assert.equal(error.code, -32603);
    assert.match(String(error.message), /task store is unavailable: no connection to Redis/);
    assert.equal(error.data?.retryAfterMs, 1000);
    return true;
  });
  const deleted = await request(gateway.url, { method: 'DELETE', headers: { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' } });
  const deletedBody = (await deleted.body.json()) as { error?: { message?: string } };
  assert.equal(deleted.statusCode, 503, JSON.stringify(deletedBody));
  assert.equal(deleted.headers['retry-after'], '1');
  assert.match(String(deletedBody.error?.message), /task store is unavailable/);
});
