// Hosts that do not speak tasks, under `plainCalls: background`: a plain call that outlives taskAfterMs is
// answered with an ordinary tool result naming its task, and the gateway's task tools return the upstream's real
// result later. Real SDK v1 clients without any task support, hand-written 2025 and 2026 requests.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { suiteScope, testScope, textOf, type Json, type TestGateway } from '../helpers/harness.js';
import { sendRev2026, sseMessages, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';
import { SessionWire } from '../helpers/session-wire.js';

const RELATED_TASK = 'io.modelcontextprotocol/related-task';
const RESULT_TOOL = 'taskgate_task_result';

/** A plain SDK client: no task capability, no handlers beyond what a test adds. */
function plainClient(url: string, t: Parameters<typeof testScope>[0], options: { elicitation?: boolean } = {}): Promise<Client> {
  return testScope(t).plainClient(url, { capabilities: options.elicitation === true ? { elicitation: {} } : {} });
}

/** The task id a background answer names (in its text and its related-task marker, which must agree). */
function handleOf(result: Json): string {
  const taskId = ((result._meta as Json | undefined)?.[RELATED_TASK] as Json | undefined)?.taskId;
  assert.equal(typeof taskId, 'string', `a background answer: ${JSON.stringify(result)}`);
  assert.ok(textOf(result).includes(taskId as string), textOf(result));
  return taskId as string;
}

describe('plainCalls: background', () => {
  const scope = suiteScope();
  let gateway: TestGateway;

  before(async () => {
    // One upstream process per session: several sessions' calls ask their own clients at once.
    const upstream = await scope.upstream('stdio', { isolation: 'per-session' });
    gateway = await scope.gateway({
      upstreams: { fx: upstream.config },
      tasks: {
        rules: [
          { match: 'slow_compute', plainCalls: 'background', taskAfterMs: 1_000 },
          { match: 'report', plainCalls: 'background', taskAfterMs: 300 },
          { match: 'confirm_delete', plainCalls: 'background', taskAfterMs: 300 },
          { match: 'failing_job', plainCalls: 'background', taskAfterMs: 200 },
          { match: 'protocol_error_job', plainCalls: 'background', taskAfterMs: 200 },
          { match: 'greet', plainCalls: 'background', mode: 'forbidden' },
        ],
      },
    });
  });

  test('the task tools are listed with the upstream tools; a background tool does not promise its outputSchema', async (t) => {
    const client = await plainClient(gateway.url, t);
    const { tools } = await client.listTools();
    const names = tools.map((tool) => tool.name);
    for (const kind of ['result', 'status', 'cancel', 'list']) assert.ok(names.includes(`taskgate_task_${kind}`), names.join(', '));
    const result = tools.find((tool) => tool.name === RESULT_TOOL);
    assert.match(result?.description ?? '', /background/);
    assert.deepEqual(result?.inputSchema.required, ['taskId']);
    assert.equal(tools.find((tool) => tool.name === 'report')?.outputSchema, undefined);
    assert.ok(names.includes('slow_compute'));
  });

  test('a call that ends within taskAfterMs gets its own result; a longer one a handle, then the real result from task_result', async (t) => {
    const client = await plainClient(gateway.url, t);
    const quick = (await client.callTool({ name: 'slow_compute', arguments: { seconds: 0, label: 'quick' } })) as Json;
    assert.match(textOf(quick), /slow_compute \(quick\) finished after 0s/);
    assert.equal((quick._meta as Json | undefined)?.[RELATED_TASK], undefined);

    const started = Date.now();
    const answer = (await client.callTool({ name: 'slow_compute', arguments: { seconds: 3, label: 'long' } })) as Json;
    const answeredAfter = Date.now() - started;
    assert.ok(answeredAfter >= 900 && answeredAfter < 2_500, `answered at taskAfterMs, after ${answeredAfter} ms`);
    assert.notEqual(answer.isError, true);
    assert.equal(answer.structuredContent, undefined);
    const taskId = handleOf(answer);
    assert.match(textOf(answer), new RegExp(RESULT_TOOL));

    const status = (await client.callTool({ name: 'taskgate_task_status', arguments: { taskId } })) as Json;
    assert.equal((status.structuredContent as Json).status, 'working', JSON.stringify(status));
    assert.equal((status.structuredContent as Json).tool, 'slow_compute');

    // A short wait says it still runs; a long enough one returns exactly what the upstream answered.
    const early = (await client.callTool({ name: RESULT_TOOL, arguments: { taskId, waitSeconds: 0 } })) as Json;
    assert.notEqual(early.isError, true);
    assert.match(textOf(early), /still running/);
    const final = (await client.callTool({ name: RESULT_TOOL, arguments: { taskId, waitSeconds: 10 } })) as Json;
    assert.match(textOf(final), /slow_compute \(long\) finished after 3s/);
    assert.deepEqual(final.structuredContent, { seconds: 3, label: 'long' });
    assert.equal(((final._meta as Json)[RELATED_TASK] as Json).taskId, taskId);

    const listed = (await client.callTool({ name: 'taskgate_task_list', arguments: {} })) as Json;
    const tasks = (listed.structuredContent as { tasks: Json[] }).tasks;
    assert.deepEqual(tasks.map((task) => [task.taskId, task.status]), [[taskId, 'completed']], 'only the calls that became tasks, only this session\'s');
  });

  test('a tool with an outputSchema: the handle carries no structuredContent; task_result returns the tool\'s', async (t) => {
    const client = await plainClient(gateway.url, t);
    await client.listTools();
    const answer = (await client.callTool({ name: 'report', arguments: { ms: 1_000 } })) as Json;
    assert.equal(answer.structuredContent, undefined, JSON.stringify(answer));
    const final = (await client.callTool({ name: RESULT_TOOL, arguments: { taskId: handleOf(answer) } })) as Json;
    assert.deepEqual(final.structuredContent, { summary: 'report ready after 1000 ms', ms: 1000 });
  });

  test('tool errors and JSON-RPC errors come back from task_result as error results', async (t) => {
    const client = await plainClient(gateway.url, t);
    const failing = handleOf((await client.callTool({ name: 'failing_job', arguments: { delayMs: 600 } })) as Json);
    const failed = (await client.callTool({ name: RESULT_TOOL, arguments: { taskId: failing } })) as Json;
    assert.equal(failed.isError, true);
    assert.match(textOf(failed), /the job ran and failed/);
    const broken = handleOf((await client.callTool({ name: 'protocol_error_job', arguments: { delayMs: 600 } })) as Json);
    const error = (await client.callTool({ name: RESULT_TOOL, arguments: { taskId: broken } })) as Json;
    assert.equal(error.isError, true);
    assert.match(textOf(error), /simulated internal failure \(error -32603\)/);
  });

  test('task_cancel stops the upstream call; unknown ids and bad arguments are error results', async (t) => {
    const client = await plainClient(gateway.url, t);
    const taskId = handleOf((await client.callTool({ name: 'slow_compute', arguments: { seconds: 30, label: 'cancel-me' } })) as Json);
    const cancelled = (await client.callTool({ name: 'taskgate_task_cancel', arguments: { taskId } })) as Json;
    assert.equal((cancelled.structuredContent as Json).status, 'cancelled', JSON.stringify(cancelled));
    const result = (await client.callTool({ name: RESULT_TOOL, arguments: { taskId } })) as Json;
    assert.equal(result.isError, true);
    assert.match(textOf(result), /was cancelled/);
    const again = (await client.callTool({ name: 'taskgate_task_cancel', arguments: { taskId } })) as Json;
    assert.match(textOf(again), /had already ended \(cancelled\)/);

    for (const [name, args] of [[RESULT_TOOL, { taskId: 'no-such-task' }], ['taskgate_task_status', {}], [RESULT_TOOL, { taskId, waitSeconds: -1 }]] as const) {
      const bad = (await client.callTool({ name, arguments: args })) as Json;
      assert.equal(bad.isError, true, `${name} ${JSON.stringify(args)}: ${JSON.stringify(bad)}`);
    }
    assert.match(textOf(await client.callTool({ name: RESULT_TOOL, arguments: { taskId: 'no-such-task' } })), /no task no-such-task you can use/);
  });

  test('mode: forbidden wins: the call stays synchronous', async (t) => {
    const client = await plainClient(gateway.url, t);
    assert.match(textOf(await client.callTool({ name: 'greet', arguments: { name: 'sync' } })), /Hello, sync!/);
  });

  test('a question during a background task reaches a client listening on its GET stream; the answer goes upstream', async (t) => {
    const client = await plainClient(gateway.url, t, { elicitation: true });
    const asked: string[] = [];
    client.setRequestHandler(ElicitRequestSchema, (request) => {
      asked.push(String(request.params.message));
      return { action: 'accept', content: { confirm: true } };
    });
    const taskId = handleOf((await client.callTool({ name: 'confirm_delete', arguments: { filename: 'a.txt', delayMs: 800 } })) as Json);
    const final = (await client.callTool({ name: RESULT_TOOL, arguments: { taskId } })) as Json;
    assert.match(textOf(final), /Deleted a\.txt/);
    assert.deepEqual(asked, ['Delete a.txt? This cannot be undone.']);
  });

  test('a client listening nowhere: task_status says what is asked; task_result puts the question on its own stream', async () => {
    const wire = new SessionWire({ elicitation: {} });
    await wire.initialize(gateway.url);
    const answer = await wire.request(gateway.url, 'tools/call', { name: 'confirm_delete', arguments: { filename: 'b.txt', delayMs: 800 } });
    const taskId = handleOf(answer.result as Json);
    // The question comes while no request of the session is open (a poll would be a way to reach it).
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const status = ((await wire.request(gateway.url, 'tools/call', { name: 'taskgate_task_status', arguments: { taskId } })).result as Json).structuredContent as Json;
    assert.equal(status.status, 'input_required', JSON.stringify(status));
    assert.deepEqual(status.waitingFor, ["the user's answer to a question: Delete b.txt? This cannot be undone."]);

    const waiting = await wire.start(gateway.url, 'tools/call', { name: RESULT_TOOL, arguments: { taskId } });
    const question = await waiting.next((m) => m.method === 'elicitation/create');
    assert.equal((((question.params as Json)._meta as Json)[RELATED_TASK] as Json).taskId, taskId);
    await wire.respond(gateway.url, question.id, { action: 'decline' });
    const response = await waiting.next((m) => 'result' in m);
    assert.match(textOf(response.result), /Kept b\.txt \(action=decline\)/);
    await wire.end(gateway.url);
  });

  test('a 2025-06-18 session (no tasks in its revision) gets the same handle and task tools', async () => {
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
    const init = await fetch(gateway.url, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'old-host', version: '1' } } }),
    });
    const sessionId = init.headers.get('mcp-session-id') ?? '';
    assert.equal(((await init.json()) as { result: Json }).result.protocolVersion, '2025-06-18');
    const post = async (id: number, method: string, params: Json): Promise<Json> => {
      const response = await fetch(gateway.url, { method: 'POST', headers: { ...headers, 'mcp-session-id': sessionId }, body: JSON.stringify({ jsonrpc: '2.0', id, method, params }) });
      const text = await response.text();
      const messages = (response.headers.get('content-type') ?? '').includes('text/event-stream') ? sseMessages(text) : [JSON.parse(text) as Json];
      return messages.find((m) => m.id === id)?.result as Json;
    };
    const tools = ((await post(2, 'tools/list', {})).tools as Json[]).map((tool) => tool.name);
    assert.ok(tools.includes(RESULT_TOOL), tools.join(', '));
    const taskId = handleOf(await post(3, 'tools/call', { name: 'slow_compute', arguments: { seconds: 2, label: 'old' } }));
    assert.deepEqual((await post(4, 'tools/call', { name: RESULT_TOOL, arguments: { taskId, waitSeconds: 10 } })).structuredContent, { seconds: 2, label: 'old' });
    await fetch(gateway.url, { method: 'DELETE', headers: { ...headers, 'mcp-session-id': sessionId } });
  });

  test('2026-07-28 without the extension: a handle at taskAfterMs, task_result with the real result; input through MRTR', async () => {
    const listed = ((await sendRev2026(gateway.url, 'tools/list', {})).result?.tools as Json[]) ?? [];
    assert.ok(listed.some((tool) => tool.name === RESULT_TOOL));
    assert.equal(listed.find((tool) => tool.name === 'report')?.outputSchema, undefined, 'called plainly: no outputSchema');
    const withTasks = ((await sendRev2026(gateway.url, 'tools/list', {}, { capabilities: TASKS_CAPABILITIES })).result?.tools as Json[]) ?? [];
    assert.notEqual(withTasks.find((tool) => tool.name === 'report')?.outputSchema, undefined, 'a task client gets tasks, and the schema');

    const answer = await sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 2, label: 'modern' } });
    assert.equal(answer.result?.resultType, 'complete', JSON.stringify(answer.response));
    const taskId = handleOf(answer.result as Json);
    const final = await sendRev2026(gateway.url, 'tools/call', { name: RESULT_TOOL, arguments: { taskId, waitSeconds: 10 } });
    assert.equal(final.result?.resultType, 'complete');
    assert.deepEqual(final.result?.structuredContent, { seconds: 2, label: 'modern' });

    const capabilities = { elicitation: {} };
    const asking = await sendRev2026(gateway.url, 'tools/call', { name: 'confirm_delete', arguments: { filename: 'c.txt', delayMs: 600 } }, { capabilities });
    const asked = handleOf(asking.result as Json);
    const round = await sendRev2026(gateway.url, 'tools/call', { name: RESULT_TOOL, arguments: { taskId: asked } }, { capabilities });
    assert.equal(round.result?.resultType, 'input_required', JSON.stringify(round.response));
    const [key, request] = Object.entries(round.result?.inputRequests as Json)[0] as [string, Json];
    assert.equal(request.method, 'elicitation/create');
    const done = await sendRev2026(gateway.url, 'tools/call', { name: RESULT_TOOL, arguments: { taskId: asked }, inputResponses: { [key]: { action: 'accept', content: { confirm: true } } } }, { capabilities });
    assert.match(textOf(done.result), /Deleted c\.txt/);

    // A client that cannot answer the question: the upstream hears so at once, and the task ends with that.
    const unable = handleOf((await sendRev2026(gateway.url, 'tools/call', { name: 'confirm_delete', arguments: { filename: 'd.txt', delayMs: 600 } })).result as Json);
    const ended = await sendRev2026(gateway.url, 'tools/call', { name: RESULT_TOOL, arguments: { taskId: unable } });
    assert.equal(ended.result?.resultType, 'complete', JSON.stringify(ended.response));
    assert.notEqual(textOf(ended.result), '');
  });
});

describe('task_result keeps a waiting host alive with progress', () => {
  const scope = suiteScope();
  let gateway: TestGateway;

  before(async () => {
    const upstream = await scope.upstream('stdio');
    gateway = await scope.gateway({
      upstreams: { fx: upstream.config },
      // keepAliveProgressMs of task_result is its own rule's (here the defaults'), as for any exposed tool; the hosts'
      // timeouts below are five keep-alive intervals, so a busy machine does not cut a wait the keep-alives cover.
      tasks: { defaults: { keepAliveProgressMs: 500 }, rules: [{ match: 'slow_compute', plainCalls: 'background', taskAfterMs: 200 }] },
    });
  });

  test('a host with a 2.5 s timeout that resets on progress gets the result of a 4 s wait; progress only increases', async (t) => {
    const client = await plainClient(gateway.url, t);
    const taskId = handleOf((await client.callTool({ name: 'slow_compute', arguments: { seconds: 4, label: 'kept' } })) as Json);
    const progress: number[] = [];
    const final = (await client.callTool({ name: RESULT_TOOL, arguments: { taskId, waitSeconds: 30 } }, undefined, {
      timeout: 2_500,
      resetTimeoutOnProgress: true,
      onprogress: (p) => progress.push(p.progress),
    })) as Json;
    assert.deepEqual(final.structuredContent, { seconds: 4, label: 'kept' }, JSON.stringify(final));
    assert.ok(progress.length >= 3, `keep-alives while task_result waited: ${JSON.stringify(progress)}`);
    for (let i = 1; i < progress.length; i++) assert.ok((progress[i] as number) > (progress[i - 1] as number), JSON.stringify(progress));
    // Without a progress token nothing is sent, and the same timeout cuts the wait.
    const other = handleOf((await client.callTool({ name: 'slow_compute', arguments: { seconds: 4, label: 'cut' } })) as Json);
    await assert.rejects(client.callTool({ name: RESULT_TOOL, arguments: { taskId: other, waitSeconds: 30 } }, undefined, { timeout: 2_500 }), /timed out/i);
  });

  test('2026-07-28: the same keep-alives on task_result\'s stream, with the request\'s token, then the result', async () => {
    const taskId = handleOf((await sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 2, label: 'kept-rev2026' } })).result as Json);
    const answer = await sendRev2026(gateway.url, 'tools/call', { name: RESULT_TOOL, arguments: { taskId, waitSeconds: 30 } }, { meta: { progressToken: 'wait-1' } });
    assert.equal(answer.sse, true, JSON.stringify(answer.messages));
    const values = answer.notifications.filter((n) => n.method === 'notifications/progress').map((n) => (n.params as Json).progress as number);
    assert.ok(values.length >= 2, JSON.stringify(answer.notifications));
    for (let i = 1; i < values.length; i++) assert.ok((values[i] as number) > (values[i - 1] as number), JSON.stringify(values));
    assert.ok(answer.notifications.every((n) => (n.params as Json).progressToken === 'wait-1'));
    assert.deepEqual(answer.result?.structuredContent, { seconds: 2, label: 'kept-rev2026' }, JSON.stringify(answer.response));
  });
});

describe('task tools: configuration and principals', () => {
  const scope = suiteScope();
  let gateway: TestGateway;

  before(async () => {
    const upstream = await scope.upstream('stdio');
    gateway = await scope.gateway({
      upstreams: { fx: upstream.config },
      auth: {
        resource: 'http://127.0.0.1/mcp',
        apiKeys: [
          { principal: 'alice', key: 'alice-key-0123456789' },
          { principal: 'bob', key: 'bob-key-0123456789' },
        ],
      },
      tasks: {
        defaults: { plainCalls: 'background', taskAfterMs: 200 },
        taskTools: { prefix: 'gw.', names: { result: 'fetch_result' } },
      },
    });
  });

  function keyed(key: string, t: Parameters<typeof testScope>[0]): Promise<Client> {
    return testScope(t).plainClient(gateway.url, { headers: { authorization: `Bearer ${key}` } });
  }

  test('names from the config; another principal\'s task is an unknown id to every task tool, and is not listed', async (t) => {
    const alice = await keyed('alice-key-0123456789', t);
    const bob = await keyed('bob-key-0123456789', t);
    const names = (await alice.listTools()).tools.map((tool) => tool.name);
    for (const name of ['fetch_result', 'gw.task_status', 'gw.task_cancel', 'gw.task_list']) assert.ok(names.includes(name), names.join(', '));
    const answer = (await alice.callTool({ name: 'slow_compute', arguments: { seconds: 1, label: 'alice' } })) as Json;
    assert.match(textOf(answer), /call fetch_result/);
    const taskId = handleOf(answer);
    for (const name of ['fetch_result', 'gw.task_status', 'gw.task_cancel']) {
      const foreign = (await bob.callTool({ name, arguments: { taskId } })) as Json;
      assert.equal(foreign.isError, true, name);
      assert.match(textOf(foreign), /no task .* you can use/);
    }
    assert.deepEqual(((await bob.callTool({ name: 'gw.task_list', arguments: {} })).structuredContent as { tasks: unknown[] }).tasks, []);
    // Alice's other session sees it: tasks are the principal's, not the session's.
    const again = await keyed('alice-key-0123456789', t);
    assert.match(textOf(await again.callTool({ name: 'fetch_result', arguments: { taskId } })), /slow_compute \(alice\) finished after 1s/);
    assert.equal(((await again.callTool({ name: 'gw.task_list', arguments: {} })).structuredContent as { tasks: Json[] }).tasks[0]?.taskId, taskId);
  });
});
