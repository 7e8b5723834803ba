// What clients and upstreams nobody here wrote do, replayed from outside against a gateway process: a 2026-07-28
// client that leaves Mcp-Name off its tasks requests (Python `mcp` 2.3, the FastMCP Client) is served, counted and
// logged once; one that sends a mismatched Mcp-Name is still refused. A 2026-07-28 upstream that answers -32601 to
// subscriptions/listen is asked once, and its own tasks show running on it (dashboard, audit) until they end.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { startStatelessServer } from '../fixtures/stateless-server.js';
import { fixtureCommand } from '../fixtures/spawn.js';
import { eventually, type Json, logEntries, testScope, whenLogged } from '../helpers/harness.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';

/** One sample's value from Prometheus text (0 when the series is absent). */
async function sample(baseUrl: string, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await request(`${baseUrl}/metrics`)).body.text();
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const labelText = line.slice(name.length + 1, line.indexOf('}'));
    const have = labelText.split(',');
    if (wanted.every((w) => have.includes(w)) && have.length === wanted.length) return Number(line.slice(line.indexOf('}') + 1).trim());
  }
  return 0;
}

const CLIENT = (name: string): Json => ({ 'io.modelcontextprotocol/clientInfo': { name, version: '2.3.0' } });

test('tasks/get, tasks/update and tasks/cancel without Mcp-Name are served, counted, and logged once per client name', async (t) => {
  const scope = testScope(t);
  const gateway = await scope.spawnGateway({
    config: {
      upstreams: { fx: { transport: 'stdio', ...fixtureCommand('stdio') } },
      tasks: { defaults: { mode: 'optional', taskAfterMs: 0 } },
      log: { level: 'info' },
    },
  });
  const omit = { omitHeaders: ['mcp-name'], capabilities: TASKS_CAPABILITIES, meta: CLIENT('python-mcp-like') };
  const created = await sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 30, label: 'lenient' } }, { capabilities: TASKS_CAPABILITIES });
  const taskId = created.result?.taskId;
  assert.equal(typeof taskId, 'string', JSON.stringify(created.messages));

  const got = await sendRev2026(gateway.url, 'tasks/get', { taskId }, omit);
  assert.equal(got.status, 200, JSON.stringify(got.messages));
  assert.equal(got.result?.taskId, taskId);
  assert.equal(got.result?.status, 'working');
  const again = await sendRev2026(gateway.url, 'tasks/get', { taskId }, omit);
  assert.equal(again.status, 200, JSON.stringify(again.messages));
  const updated = await sendRev2026(gateway.url, 'tasks/update', { taskId, inputResponses: {} }, omit);
  assert.equal(updated.status, 200, JSON.stringify(updated.messages));
  assert.equal(updated.error, undefined, JSON.stringify(updated.messages));

  // A mismatched Mcp-Name is refused as before, on the tasks surface and elsewhere.
  const mismatched = await sendRev2026(gateway.url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES, headers: { 'mcp-name': 'another-task' } });
  assert.equal(mismatched.status, 400);
  assert.equal(mismatched.error?.code, -32020, JSON.stringify(mismatched.messages));
  // Where the published suite requires the header (tools/call, prompts/get, resources/read), a missing one still is.
  const plainCall = await sendRev2026(gateway.url, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { omitHeaders: ['mcp-name'] });
  assert.equal(plainCall.status, 400);
  assert.equal(plainCall.error?.code, -32020, JSON.stringify(plainCall.messages));

  // Another client name is told apart; the cancel ends the task.
  const cancelled = await sendRev2026(gateway.url, 'tasks/cancel', { taskId }, { ...omit, meta: CLIENT('fastmcp-client-like') });
  assert.equal(cancelled.status, 200, JSON.stringify(cancelled.messages));
  assert.equal(cancelled.error, undefined, JSON.stringify(cancelled.messages));
  const after = await sendRev2026(gateway.url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES });
  assert.equal(after.result?.status, 'cancelled', JSON.stringify(after.messages));

  const counted = (method: string): Promise<number> => sample(gateway.baseUrl, 'taskgate_lenient_requests_total', { kind: 'missing_mcp_name', method });
  assert.equal(await counted('tasks/get'), 2);
  assert.equal(await counted('tasks/update'), 1);
  assert.equal(await counted('tasks/cancel'), 1);
  const lines = logEntries(gateway).filter((entry) => entry.lenient === 'missing_mcp_name');
  assert.deepEqual(lines.map((entry) => entry.client).sort(), ['fastmcp-client-like', 'python-mcp-like'], JSON.stringify(lines));
});

test('a 2026-07-28 upstream without listen streams is asked once; its own task shows running on it, audited, until it ends', async (t) => {
  const scope = testScope(t);
  const upstream = await startStatelessServer({ rev2025Side: false, nativeTasks: true, noListen: true });
  scope.defer(() => upstream.close());
  const gateway = await scope.spawnGateway({
    config: { upstreams: { up: { transport: 'streamable-http', url: upstream.url } }, log: { level: 'info' } },
  });
  const noListenLines = (): Json[] => logEntries(gateway).filter((entry) => String(entry.msg).startsWith('upstream does not offer subscriptions/listen'));
  await whenLogged(gateway, () => noListenLines().length === 1);

  // The upstream's own task: the gateway routes its methods there and shows it running on it meanwhile.
  const created = await sendRev2026(gateway.url, 'tools/call', { name: 'native_slow', arguments: { ms: 1500 } }, { capabilities: TASKS_CAPABILITIES });
  const taskId = created.result?.taskId as string;
  assert.match(taskId, /^native-\d+$/, JSON.stringify(created.messages));
  const view = async (): Promise<Json> => (await (await request(`${gateway.baseUrl}/ui/api/tasks/${encodeURIComponent(taskId)}`)).body.json()) as Json;
  const running = (await view()).task as Json;
  assert.equal(running.status, 'working', JSON.stringify(running));
  assert.equal(running.native, true);
  assert.equal(running.upstream, 'up');
  assert.equal(running.message, "Runs on upstream 'up'");
  const audits = (): Json[] => logEntries(gateway).filter((entry) => entry.task === taskId && typeof entry.audit === 'string');
  await whenLogged(gateway, () => audits().some((entry) => entry.audit === 'task.created'));
  const creation = audits().find((entry) => entry.audit === 'task.created');
  assert.equal(creation?.native, true, JSON.stringify(creation));
  assert.equal(creation?.upstream, 'up');

  // Polled through the gateway to its end (the upstream says so): the record ends too, and the end is audited.
  await eventually(async () => (await sendRev2026(gateway.url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES })).result?.status === 'completed', 15_000);
  assert.equal(((await view()).task as Json).status, 'completed');
  await whenLogged(gateway, () => audits().some((entry) => entry.audit === 'task.completed'));

  // All that while (more than the old 1 s backoff), listen was asked once, and said once.
  assert.equal(upstream.requests('subscriptions/listen'), 1);
  assert.equal(noListenLines().length, 1);
});
