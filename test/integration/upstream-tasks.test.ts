// Upstreams that run tools as tasks of their own (2025-11-25 `execution.taskSupport`): the gateway never advertises
// less than the upstream requires, and waits on the upstream's task (augmented call, tasks/result, tasks/get,
// tasks/cancel) for every client: a 2025 client's task, a 2026-07-28 task through ext-tasks, and plain calls.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { Client as StatelessClient, StreamableHTTPClientTransport as Rev2026Transport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, type ApplicationInputRequest, type ApplicationInputResult } from '@modelcontextprotocol/ext-tasks/client';
import type { JsonValue } from '@modelcontextprotocol/ext-tasks/core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema, ElicitRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { freePort, nodeArgs, REPO_ROOT, startChild } from '../fixtures/spawn.js';
import { eventually, suiteScope, testScope, textOf, type Json, type TestGateway, type TestScope } from '../helpers/harness.js';
import { sendRev2026, rev2026Request, STATELESS_VERSION, sseMessages, TASKS_EXTENSION } from '../helpers/stateless-wire.js';

const require = createRequire(import.meta.url);
const EVERYTHING = require.resolve('@modelcontextprotocol/server-everything/dist/index.js');
const TASKS_FIXTURE = { transport: 'stdio', command: process.execPath, args: nodeArgs(join(REPO_ROOT, 'test/fixtures/tasks-server.ts')), cwd: REPO_ROOT };
const RELATED_TASK = 'io.modelcontextprotocol/related-task';
const RESEARCH = 'simulate-research-query';

/** A 2025-11-25 SDK client (closed with `scope`) whose elicitation answer picks `interpretation`; it records what it was asked. */
async function rev2025Client(scope: TestScope, url: string): Promise<{ client: Client; asked: Json[] }> {
  const asked: Json[] = [];
  const client = new Client({ name: 'upstream-tasks-test', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params as Json);
    return { action: 'accept', content: { interpretation: 'historical' } };
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  scope.defer(() => client.close());
  return { client, asked };
}

/** Runs a 2025 task through the SDK's stream: the task id, every status seen, and the final result. */
async function runAsTask(client: Client, name: string, args: Json): Promise<{ taskId: string; statuses: { status: string; statusMessage?: string }[]; result: CallToolResult }> {
  let taskId = '';
  const statuses: { status: string; statusMessage?: string }[] = [];
  for await (const message of client.experimental.tasks.callToolStream({ name, arguments: args })) {
    if (message.type === 'taskCreated') taskId = message.task.taskId;
    else if (message.type === 'taskStatus') statuses.push(message.task);
    else if (message.type === 'result') return { taskId, statuses, result: message.result as CallToolResult };
    else if (message.type === 'error') throw message.error;
  }
  throw new Error('the stream ended without a result');
}

/** A 2025-06-18 session written by hand: such clients know nothing of tasks. */
async function oldSession(url: string): Promise<(method: string, params?: Json) => Promise<Json>> {
  let sessionId = '';
  let id = 0;
  const post = async (method: string, params: Json = {}): Promise<Json> => {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
    if (sessionId !== '') headers['mcp-session-id'] = sessionId;
    const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }) });
    sessionId ||= response.headers.get('mcp-session-id') ?? '';
    const text = await response.text();
    const messages = text.startsWith('{') ? [JSON.parse(text) as Json] : sseMessages(text);
    return messages.find((m) => m.id === id) ?? {};
  };
  await post('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'old-host', version: '1' } });
  return post;
}

/** The v2 client with ext-tasks, as applications use the Tasks extension; it answers elicitations with `content`. */
async function extTasksSession(url: string, content: Json) {
  const info = { name: 'upstream-tasks-ext', version: '1.0.0' };
  const client = new StatelessClient(info, { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: STATELESS_VERSION } } });
  await client.connect(new Rev2026Transport(new URL(url)));
  const asked: ApplicationInputRequest[] = [];
  const session = createTaskSessionFromClient(client, {
    endpointId: 'upstream-tasks',
    rawDispatch: async (request: JsonValue) => {
      const { method, params = {} } = request as { method: string; params?: Json };
      const { _meta: meta, ...rest } = params;
      const answer = await sendRev2026(url, method, rest, { meta: meta as Json });
      if (answer.error !== undefined) return { kind: 'error' as const, error: answer.error as never };
      return { kind: 'result' as const, result: answer.result as JsonValue };
    },
    v2RequestFraming: { protocolVersion: STATELESS_VERSION, clientInfo: info, clientCapabilities: { elicitation: { form: {} }, extensions: { [TASKS_EXTENSION]: {} } } },
    onInputRequest: async <T extends ApplicationInputRequest>(request: T): Promise<ApplicationInputResult<T>> => {
      asked.push(request);
      return { action: 'accept', content } as unknown as ApplicationInputResult<T>;
    },
  });
  return {
    session,
    asked,
    close: async () => {
      await session.close();
      await client.close();
    },
  };
}

for (const transport of ['stdio', 'streamable-http'] as const) {
  describe(`server-everything's ${RESEARCH} (taskSupport: required) over ${transport}`, () => {
    const scope = suiteScope();
    let gateway: TestGateway;

    before(async () => {
      let upstream: Json = { transport: 'stdio', command: process.execPath, args: [EVERYTHING, 'stdio'] };
      if (transport === 'streamable-http') {
        const port = await freePort();
        const child = startChild(process.execPath, [EVERYTHING, 'streamableHttp'], { env: { ...process.env, PORT: String(port) } });
        scope.defer(() => child.kill());
        const deadline = Date.now() + 20_000;
        while (!/listening|running/i.test(child.stderr() + child.stdout()) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
        upstream = { transport: 'streamable-http', url: `http://127.0.0.1:${port}/mcp` };
      }
      gateway = await scope.gateway({ upstreams: { everything: upstream }, tasks: { defaults: { mode: 'optional', pollIntervalMs: 100 } } });
    });

    test('a 2025 client sees it required, runs it as a task, answers its question, and gets the report', async (t) => {
      const { client, asked } = await rev2025Client(testScope(t), gateway.url);
      const tool = (await client.listTools()).tools.find((t) => t.name === RESEARCH);
      assert.equal(tool?.execution?.taskSupport, 'required', 'the gateway advertises what the upstream requires, not its own optional');
      const { taskId, statuses, result } = await runAsTask(client, RESEARCH, { topic: 'python', ambiguous: true });
      // The upstream's question reached the client, marked with the gateway's task (never the upstream's id).
      assert.equal(asked.length, 1, JSON.stringify(asked));
      assert.deepEqual((asked[0]?._meta as Json)[RELATED_TASK], { taskId });
      assert.match(textOf(result), /# Research Report: python \(historical\)/);
      assert.deepEqual((result._meta as Json)[RELATED_TASK], { taskId });
      // The upstream task's status messages are the gateway task's.
      const messages = statuses.map((s) => s.statusMessage);
      assert.ok(messages.some((m) => m !== undefined && /Gathering sources|Analyzing content|Generating report/.test(m)), JSON.stringify(statuses));
      // The SDK stops polling once it sees input_required (it then waits on tasks/result), so the statuses it
      // saw may end there: the task itself must have ended completed.
      assert.equal((await client.experimental.tasks.getTask(taskId)).status, 'completed', JSON.stringify(statuses));
    });

    test('a plain call from a 2025-11-25 client is refused as the spec says for required tools (-32601)', async (t) => {
      const { client } = await rev2025Client(testScope(t), gateway.url);
      // client.request, not callTool: the SDK would refuse a required tool itself, before asking.
      const error = await client.request({ method: 'tools/call', params: { name: RESEARCH, arguments: { topic: 'x' } } }, CallToolResultSchema).then(
        () => undefined,
        (e: { code?: number; message: string }) => e,
      );
      assert.equal(error?.code, -32601);
      assert.match(String(error?.message), /upstream 'everything' runs it only as a task/);
    });

    test('a client of an older revision (no tasks) calls it plainly: the gateway waits on the upstream task', async () => {
      const post = await oldSession(gateway.url);
      const tools = ((await post('tools/list')).result as { tools: Json[] }).tools;
      assert.equal(tools.find((t) => t.name === RESEARCH)?.execution, undefined, 'no task support shown to a client without tasks');
      const answer = await post('tools/call', { name: RESEARCH, arguments: { topic: 'rust' } });
      assert.equal(answer.error, undefined, JSON.stringify(answer));
      assert.match(textOf(answer.result), /# Research Report: rust/);
      assert.equal(((answer.result as Json)._meta as Json | undefined)?.[RELATED_TASK], undefined, 'the upstream task id stays inside');
    });

    test('a 2026-07-28 client without the Tasks extension gets the report from a plain callTool', async (t) => {
      const client = new StatelessClient({ name: 'plain-2026', version: '1.0.0' }, { capabilities: {}, versionNegotiation: { mode: { pin: STATELESS_VERSION } } });
      await client.connect(new Rev2026Transport(new URL(gateway.url)));
      testScope(t).defer(() => client.close());
      assert.equal(client.getProtocolEra(), 'modern');
      assert.ok((await client.listTools()).tools.some((t) => t.name === RESEARCH));
      const result = await client.callTool({ name: RESEARCH, arguments: { topic: 'go' } });
      assert.match(textOf(result), /# Research Report: go/);
      assert.notEqual(result.isError, true);
    });

    test('ext-tasks (2026-07-28 Tasks extension) runs it as a task, its question answered through tasks/update', async (t) => {
      const ext = await extTasksSession(gateway.url, { interpretation: 'current' });
      testScope(t).defer(() => ext.close());
      const execution = await ext.session.callTool(RESEARCH, { topic: 'python', ambiguous: true });
      assert.equal(execution.kind, 'task');
      const { outcome } = await execution.settle();
      assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
      assert.equal(ext.asked.length, 1, JSON.stringify(ext.asked));
      assert.match(textOf((outcome as { result: Json }).result), /# Research Report: python \(current\)/);
    });
  });
}

describe('an upstream with tasks of its own, observed from its side', () => {
  const scope = suiteScope();
  let gateway: TestGateway;
  let observer: Client;
  const events = async (): Promise<string[]> =>
    ((await observer.callTool({ name: 'fixture_events', arguments: {} })).structuredContent as { events: string[] }).events;

  before(async () => {
    gateway = await scope.gateway({
      upstreams: { own: TASKS_FIXTURE },
      tasks: { defaults: { mode: 'optional', pollIntervalMs: 100 }, rules: [{ match: 'own_wait', mode: 'forbidden' }] },
    });
    observer = (await rev2025Client(scope, gateway.url)).client;
  });

  test('an optional tool: a plain call stays plain upstream, a gateway task runs as the upstream\'s task with its status', async (t) => {
    const { client } = await rev2025Client(testScope(t), gateway.url);
    const tools = (await client.listTools()).tools;
    assert.equal(tools.find((t) => t.name === 'own_work')?.execution?.taskSupport, 'optional');
    // The policy says forbidden; the upstream requires a task: the upstream wins.
    assert.equal(tools.find((t) => t.name === 'own_wait')?.execution?.taskSupport, 'required');
    const plain = await client.callTool({ name: 'own_work', arguments: { ms: 50 } });
    assert.equal(textOf(plain), 'worked 50 ms');
    const { statuses, result } = await runAsTask(client, 'own_work', { ms: 600 });
    assert.deepEqual(result.structuredContent, { ms: 600 });
    assert.ok(statuses.some((s) => s.statusMessage === 'step 2 of 2'), JSON.stringify(statuses));
    const seen = await events();
    assert.deepEqual(seen.filter((e) => e.startsWith('call:own_work')), ['call:own_work:plain', 'call:own_work:task']);
  });

  test('cancelling a 2025 task cancels the upstream\'s task', async (t) => {
    const { client } = await rev2025Client(testScope(t), gateway.url);
    const created = await client.request({ method: 'tools/call', params: { name: 'own_wait', arguments: {}, task: {} } }, CreateTaskResultSchema);
    const taskId = created.task.taskId;
    await eventually(async () => (await events()).includes('call:own_wait:task'));
    await client.experimental.tasks.cancelTask(taskId);
    await eventually(async () => {
      const seen = await events();
      return seen.includes('cancel') && seen.includes('stopped:own_wait');
    });
  });

  test('a 2026-07-28 plain call whose client goes away cancels the upstream\'s task', async () => {
    const before = (await events()).filter((e) => e === 'stopped:own_wait').length;
    const abort = new AbortController();
    const { body, headers } = rev2026Request('tools/call', { name: 'own_wait', arguments: {} });
    const call = fetch(gateway.url, { method: 'POST', headers, body: JSON.stringify(body), signal: abort.signal }).then((r) => r.text()).catch(() => 'aborted');
    await eventually(async () => (await events()).filter((e) => e === 'call:own_wait:task').length >= 2);
    abort.abort();
    assert.equal(await call, 'aborted');
    await eventually(async () => (await events()).filter((e) => e === 'stopped:own_wait').length > before);
  });

  test('policy may ask for more: an optional upstream tool made required is refused without a task', async (t) => {
    const scope = testScope(t);
    const strict = await scope.gateway({ upstreams: { own: TASKS_FIXTURE }, tasks: { rules: [{ match: 'own_work', mode: 'required' }] } });
    const { client } = await rev2025Client(scope, strict.url);
    const tool = (await client.listTools()).tools.find((t) => t.name === 'own_work');
    assert.equal(tool?.execution?.taskSupport, 'required');
    const error = await client.request({ method: 'tools/call', params: { name: 'own_work', arguments: { ms: 10 } } }, CallToolResultSchema).then(() => undefined, (e: { code?: number; message: string }) => e);
    assert.equal(error?.code, -32601);
    assert.match(String(error?.message), /task policy: required/);
    const { result } = await runAsTask(client, 'own_work', { ms: 10 });
    assert.equal(textOf(result), 'worked 10 ms');
  });
});
