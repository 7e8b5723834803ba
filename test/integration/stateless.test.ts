// The 2026-07-28 front end, driven by hand-written stateless requests (undici) on the same /mcp
// endpoint that serves 2025-11-25 sessions: envelope and header validation, server/discover, proxying over a
// 2025-11-25 upstream, MRTR bridging, the Tasks extension (SEP-2663), subscriptions/listen, one task engine for both
// eras, and upstreams that speak 2026-07-28 themselves.
// One file because its groups speak the 2026-07-28 wire through the same hand-written helpers at its top (assertError,
// callTool, tasksGet, untilTask, createTask), and several share one gateway started once in their `before`.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { before, describe, test } from 'node:test';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { request } from 'undici';
import { startStatelessServer, type StatelessServerHandle } from '../fixtures/stateless-server.js';
import { eventually, fixtureUpstream, suiteScope, testScope, textOf, type Json, type TestGateway, type TestScope } from '../helpers/harness.js';
import { sendRev2026, rev2026Request, STATELESS_VERSION, openListen, TASKS_CAPABILITIES, TASKS_EXTENSION, type Rev2026Options, type Rev2026Response } from '../helpers/stateless-wire.js';

const SERVER_INFO = 'io.modelcontextprotocol/serverInfo';
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
const RELATED = 'io.modelcontextprotocol/related-task';
const ASKS: Json = { elicitation: {} };
const ASKS_EXT: Json = { elicitation: {}, extensions: { [TASKS_EXTENSION]: {} } };
const MISSING_TASKS_DATA = { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } };
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/;

const TASKS_CONFIG = {
  defaults: { mode: 'optional', taskAfterMs: 250, pollIntervalMs: 100 },
  rules: [
    { match: 'greet', mode: 'forbidden' },
    { match: 'failing_job', mode: 'required' },
    { match: 'test_tool_with_task', mode: 'required' },
    { match: 'test_simple_text', taskAfterMs: 0 },
  ],
};

function show(r: Rev2026Response): string {
  return `HTTP ${r.status}: ${JSON.stringify(r.messages)}`;
}

/** An error answer: HTTP status, JSON-RPC code, and the request id echoed. */
function assertError(r: Rev2026Response, status: number, code: number, id?: string | number): void {
  assert.equal(r.status, status, show(r));
  assert.equal(r.error?.code, code, show(r));
  assert.equal(typeof r.error?.message, 'string');
  assert.equal(r.result, undefined);
  if (id !== undefined) assert.equal(r.response.id, id, show(r));
}

function assertComplete(r: Rev2026Response): Json {
  assert.equal(r.error, undefined, show(r));
  assert.equal(r.result?.resultType, 'complete', show(r));
  return r.result as Json;
}

function callTool(url: string, name: string, args: Json = {}, options: Rev2026Options = {}, extra: Json = {}): Promise<Rev2026Response> {
  return sendRev2026(url, 'tools/call', { name, arguments: args, ...extra }, options);
}

async function tasksGet(url: string, taskId: string): Promise<Json> {
  const r = await sendRev2026(url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES });
  return assertComplete(r);
}

/** Polls tasks/get (bounded) until the task has one of `statuses`. */
async function untilTask(url: string, taskId: string, statuses: string[], check: (task: Json) => boolean = () => true): Promise<Json> {
  let task: Json = {};
  await eventually(async () => {
    task = await tasksGet(url, taskId);
    return statuses.includes(task.status as string) && check(task);
  }, 15_000);
  return task;
}

/** A task created by a tools/call, asserted to be a flat CreateTaskResult. */
async function createTask(url: string, name: string, args: Json, capabilities: Json = TASKS_CAPABILITIES): Promise<string> {
  const r = await callTool(url, name, args, { capabilities });
  assert.equal(r.result?.resultType, 'task', show(r));
  assert.equal(typeof r.result?.taskId, 'string');
  return r.result?.taskId as string;
}

interface Whoami {
  calls: number;
  cancelled: { tool: string; requestId: string | number }[];
}

/** The stdio fixture's own account (calls on its connection, calls it saw cancelled); never a task. */
async function whoami(url: string): Promise<Whoami> {
  const r = await callTool(url, 'whoami', {}, { capabilities: {} });
  return JSON.parse(textOf(assertComplete(r))) as Whoami;
}

/** Answers for the inputRequests of ask_twice, chosen by the question asked. */
function askTwiceAnswers(inputRequests: Json, only?: 'First question?' | 'Second question?'): Json {
  const answers: Json = {};
  for (const [key, value] of Object.entries(inputRequests)) {
    const message = ((value as Json).params as Json).message;
    if (only !== undefined && message !== only) continue;
    const field = message === 'First question?' ? 'first' : 'second';
    answers[key] = { action: 'accept', content: { [field]: `${field} answer` } };
  }
  return answers;
}

/** A gateway over the stdio fixture, closed with `scope`. */
async function stdioGateway(scope: TestScope, extra: Json = {}): Promise<TestGateway> {
  const upstream = await fixtureUpstream('stdio');
  return scope.gateway({ upstreams: { fx: upstream.config }, ...extra });
}

// ---------------------------------------------------------------------------------------------------------
describe('2026-07-28 over a 2025-11-25 upstream (stdio, shared isolation)', () => {
  const scope = suiteScope();
  let gateway: TestGateway;
  let url: string;

  before(async () => {
    gateway = await stdioGateway(scope);
    url = gateway.url;
  });

  test('dual era: a 2025-11-25 SDK client and 2026-07-28 requests are served by one running gateway', async (t) => {
    const { client } = await testScope(t).client(url);
    const rev2025Side = await client.callTool({ name: 'echo', arguments: { era: 'legacy' } });
    assert.deepEqual(rev2025Side.structuredContent, { era: 'legacy' });

    const discover = await sendRev2026(url, 'server/discover');
    assert.equal(discover.status, 200, show(discover));
    assert.equal(discover.headers['mcp-session-id'], undefined, 'no session on a 2026-07-28 answer');
    const r = await callTool(url, 'echo', { era: 'modern' });
    assert.equal(r.status, 200);
    assert.equal(assertComplete(r).resultType, 'complete');
    assert.deepEqual(r.result?.structuredContent, { era: 'modern' });
    assert.equal(r.headers['mcp-session-id'], undefined);

    // The session is untouched by the stateless traffic.
    const again = await client.callTool({ name: 'echo', arguments: { era: '2025-11-25 again' } });
    assert.deepEqual(again.structuredContent, { era: '2025-11-25 again' });
    assert.equal(client.getServerVersion()?.name, 'taskgate');
  });

  test('server/discover: versions, capabilities with the tasks extension, serverInfo in _meta, caching hints', async () => {
    const r = await sendRev2026(url, 'server/discover', {}, { capabilities: {} });
    assert.equal(r.status, 200);
    assert.equal(r.sse, false);
    const result = assertComplete(r);
    const versions = result.supportedVersions as string[];
    for (const v of ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26']) assert.ok(versions.includes(v), `supportedVersions lacks ${v}`);
    const capabilities = result.capabilities as Json;
    assert.deepEqual((capabilities.extensions as Json)[TASKS_EXTENSION], {});
    assert.equal('tasks' in capabilities, false, 'no capabilities.tasks in 2026-07-28');
    assert.ok(capabilities.tools, 'tools advertised');
    const serverInfo = (result._meta as Json)[SERVER_INFO] as Json;
    assert.equal(serverInfo.name, 'taskgate');
    assert.equal(typeof serverInfo.version, 'string');
    assert.equal('serverInfo' in result, false, 'serverInfo goes in _meta only');
    assert.ok(Number.isInteger(result.ttlMs) && (result.ttlMs as number) >= 0, `ttlMs ${String(result.ttlMs)}`);
    assert.ok(result.cacheScope === 'private' || result.cacheScope === 'public', `cacheScope ${String(result.cacheScope)}`);
  });

  test('envelope: missing _meta or clientCapabilities is 400 -32602 echoing the id; clientInfo is optional', async () => {
    assertError(await sendRev2026(url, 'server/discover', {}, { meta: null, id: 101 }), 400, -32602, 101);
    assertError(
      await sendRev2026(url, 'server/discover', {}, { meta: { 'io.modelcontextprotocol/protocolVersion': undefined }, id: 102 }),
      400,
      -32602,
      102,
    );
    assertError(
      await sendRev2026(url, 'server/discover', {}, { meta: { 'io.modelcontextprotocol/clientCapabilities': undefined }, id: 104 }),
      400,
      -32602,
      104,
    );
    const noInfo = await sendRev2026(url, 'server/discover', {}, { meta: { 'io.modelcontextprotocol/clientInfo': undefined }, id: 105 });
    assert.equal(noInfo.status, 200);
    assert.equal(assertComplete(noInfo).resultType, 'complete');
    assert.equal(noInfo.response.id, 105);
  });

  test('protocol version: missing header or header ≠ envelope is 400 -32020; unsupported is 400 -32022 with supported/requested', async () => {
    assertError(await sendRev2026(url, 'server/discover', {}, { omitHeaders: ['MCP-Protocol-Version'], id: 201 }), 400, -32020, 201);
    assertError(
      await sendRev2026(url, 'server/discover', {}, { meta: { 'io.modelcontextprotocol/protocolVersion': '2099-01-01' }, headers: { 'MCP-Protocol-Version': STATELESS_VERSION }, id: 302 }),
      400,
      -32020,
      302,
    );
    const unsupported = await sendRev2026(url, 'server/discover', {}, { meta: { 'io.modelcontextprotocol/protocolVersion': '2099-01-01' }, id: 301 });
    assertError(unsupported, 400, -32022, 301);
    const data = unsupported.error?.data as { supported: string[]; requested: string };
    assert.ok(Array.isArray(data.supported) && data.supported.includes('2026-07-28'), JSON.stringify(data));
    assert.equal(data.requested, '2099-01-01');
    const discovered = assertComplete(await sendRev2026(url, 'server/discover')).supportedVersions as string[];
    for (const v of data.supported) assert.ok(discovered.includes(v), `${v} is not in server/discover's supportedVersions`);
  });

  test('routing headers: Mcp-Method missing, different or differently cased and Mcp-Name different or badly encoded are 400 -32020; base64 Mcp-Name is decoded', async () => {
    assertError(await sendRev2026(url, 'tools/list', {}, { omitHeaders: ['Mcp-Method'], id: 'm1' }), 400, -32020, 'm1');
    assertError(await sendRev2026(url, 'tools/list', {}, { headers: { 'Mcp-Method': 'prompts/list' }, id: 'm2' }), 400, -32020, 'm2');
    assertError(await sendRev2026(url, 'tools/list', {}, { headers: { 'Mcp-Method': 'TOOLS/LIST' }, id: 'm3' }), 400, -32020, 'm3');
    assert.equal(assertComplete(await sendRev2026(url, 'tools/list', {}, { headers: { 'MCP-METHOD': 'tools/list' } })).resultType, 'complete');

    const args = { n: 1 };
    assertError(await callTool(url, 'echo', args, { headers: { 'Mcp-Name': 'wrong_tool_name' }, id: 'n1' }), 400, -32020, 'n1');
    assertError(await callTool(url, 'echo', args, { omitHeaders: ['Mcp-Name'], id: 'n2' }), 400, -32020, 'n2');
    const encoded = `=?base64?${Buffer.from('echo').toString('base64')}?=`;
    const ok = await callTool(url, 'echo', args, { headers: { 'Mcp-Name': encoded } });
    assert.equal(ok.status, 200);
    assert.deepEqual(assertComplete(ok).structuredContent, args);
    assertError(await callTool(url, 'echo', args, { headers: { 'Mcp-Name': '=?base64?ZWNobw?=' }, id: 'n3' }), 400, -32020, 'n3'); // bad padding
    assertError(await callTool(url, 'echo', args, { headers: { 'Mcp-Name': '=?base64?ZW!!bw==?=' }, id: 'n4' }), 400, -32020, 'n4'); // bad characters
    // On tasks/get too, before any lookup.
    assertError(await sendRev2026(url, 'tasks/get', { taskId: 'some-task' }, { capabilities: TASKS_CAPABILITIES, headers: { 'Mcp-Name': 'another-task' }, id: 'n5' }), 400, -32020, 'n5');
  });

  test('unknown and removed methods are 404 -32601', async () => {
    const probes: [string, Json][] = [
      ['unknown/method', {}],
      ['initialize', {}],
      ['ping', {}],
      ['logging/setLevel', { level: 'info' }],
      ['resources/subscribe', { uri: 'test://static-text' }],
      ['resources/unsubscribe', { uri: 'test://static-text' }],
      ['tasks/result', { taskId: 'tasks-conformance-isolation-probe' }],
      ['tasks/list', {}],
    ];
    for (const [method, params] of probes) {
      const r = await sendRev2026(url, method, params, { capabilities: TASKS_CAPABILITIES, id: 500 });
      assert.equal(r.status, 404, `${method}: ${show(r)}`);
      assert.equal(r.error?.code, -32601, `${method}: ${show(r)}`);
      assert.equal(r.response.id, 500);
    }
  });

  test('a batch array is rejected with 400 and one JSON-RPC error', async () => {
    const one = rev2026Request('server/discover', {}, { id: 1 });
    const two = rev2026Request('tools/list', {}, { id: 2 });
    const answer = await request(url, { method: 'POST', headers: one.headers, body: JSON.stringify([one.body, two.body]) });
    const body = JSON.parse(await answer.body.text()) as Json;
    assert.equal(answer.statusCode, 400, JSON.stringify(body));
    assert.equal(Array.isArray(body), false);
    assert.equal((body.error as Json).code, -32600, JSON.stringify(body));
  });

  test('tools/list: resultType and caching hints on the upstream\'s list', async () => {
    const r = await sendRev2026(url, 'tools/list');
    assert.equal(r.status, 200);
    const result = assertComplete(r);
    assert.ok(Number.isInteger(result.ttlMs) && (result.ttlMs as number) >= 0);
    assert.ok(result.cacheScope === 'private' || result.cacheScope === 'public');
    const names = (result.tools as Json[]).map((t) => t.name);
    for (const name of ['echo', 'ask_twice', 'whoami', 'test_tool_with_task', 'log_burst']) assert.ok(names.includes(name), `tools/list lacks ${name}`);
  });

  test('tools/call: the upstream result with resultType complete and nothing else changed', async () => {
    const args = { text: 'hi', nested: { n: 1 } };
    const r = await callTool(url, 'echo', args);
    assert.equal(r.status, 200);
    const result = assertComplete(r);
    assert.deepEqual(result.content, [{ type: 'text', text: JSON.stringify(args) }]);
    assert.deepEqual(result.structuredContent, args);
    assert.deepEqual(result.fixtureExtra, { preserved: true });
    assert.ok(((result._meta as Json)['fixture.taskgate.dev/echo'] as Json).instanceId);
  });

  test('progress: notifications with the client\'s progressToken on the SSE answer, before the response', async () => {
    const r = await callTool(url, 'test_tool_with_progress', {}, { meta: { progressToken: 'progress-test-1' } });
    assert.equal(r.status, 200);
    assert.equal(r.sse, true, show(r));
    assertComplete(r);
    const progress = r.messages.filter((m) => m.method === 'notifications/progress');
    assert.deepEqual(progress.map((m) => (m.params as Json).progress), [0, 50, 100], show(r));
    for (const m of progress) {
      assert.equal((m.params as Json).progressToken, 'progress-test-1');
      assert.equal('id' in m, false);
    }
    const responseAt = r.messages.indexOf(r.response);
    assert.equal(responseAt, r.messages.length - 1, 'the response ends the stream');
    assert.ok(r.messages.every((m, i) => i === responseAt || typeof m.method === 'string'));
  });

  test('logs: none without …/logLevel; with it, only at or above that level', async () => {
    const levels = (r: Rev2026Response): unknown[] => r.messages.filter((m) => m.method === 'notifications/message').map((m) => (m.params as Json).level);
    const none = await callTool(url, 'log_burst', {});
    assertComplete(none);
    assert.deepEqual(levels(none), [], show(none));
    const warning = await callTool(url, 'log_burst', {}, { logLevel: 'warning' });
    assertComplete(warning);
    assert.deepEqual(levels(warning), ['warning', 'error'], show(warning));
    const debug = await callTool(url, 'log_burst', {}, { logLevel: 'debug' });
    assertComplete(debug);
    assert.deepEqual(levels(debug), ['debug', 'info', 'warning', 'error'], show(debug));
    // An unknown level is invalid params (the revision pins no HTTP status for it).
    const banana = await callTool(url, 'log_burst', {}, { logLevel: 'banana', id: 'lvl' });
    assert.equal(banana.error?.code, -32602, show(banana));
    assert.equal(banana.response.id, 'lvl');
  });

  test('resources/read and prompts/get pass through with resultType (and hints on the read)', async () => {
    const read = await sendRev2026(url, 'resources/read', { uri: 'test://static-text' });
    const contents = assertComplete(read).contents as Json[];
    assert.deepEqual(contents, [{ uri: 'test://static-text', mimeType: 'text/plain', text: 'This is the content of the static text resource.' }]);
    assert.ok(Number.isInteger(read.result?.ttlMs));
    assert.ok(read.result?.cacheScope === 'private' || read.result?.cacheScope === 'public');

    const prompt = await sendRev2026(url, 'prompts/get', { name: 'test_prompt_with_arguments', arguments: { arg1: 'a', arg2: 'b' } });
    const messages = assertComplete(prompt).messages as Json[];
    assert.deepEqual(messages, [{ role: 'user', content: { type: 'text', text: "Prompt with arguments: arg1='a', arg2='b'" } }]);
  });

  test('resources/read of an unknown resource: -32602 with data.uri, never -32002', async () => {
    const uri = 'test://nonexistent-resource-for-conformance-testing';
    const r = await sendRev2026(url, 'resources/read', { uri });
    assert.equal(r.result, undefined, show(r));
    assert.equal(r.error?.code, -32602, show(r));
    assert.equal(r.error?.data?.uri, uri, show(r));
  });

  // ---- MRTR: the upstream's questions become InputRequiredResults, the retry resumes the parked call ----

  test('MRTR: an elicitation becomes input_required with a clean inputRequest; the retry completes the call', async () => {
    const first = await callTool(url, 'test_tool_with_task', { workMs: 10 }, { capabilities: ASKS });
    assert.equal(first.status, 200);
    assert.equal(first.result?.resultType, 'input_required', show(first));
    const inputRequests = first.result?.inputRequests as Json;
    const keys = Object.keys(inputRequests);
    assert.equal(keys.length, 1);
    const asked = inputRequests[keys[0] as string] as Json;
    assert.deepEqual(Object.keys(asked).sort(), ['method', 'params']);
    assert.equal(asked.method, 'elicitation/create');
    assert.equal((asked.params as Json).message, 'What is your name?');
    assert.equal('_meta' in (asked.params as Json), false, 'no related-task or other relay _meta');
    assert.equal(typeof first.result?.requestState, 'string');
    assert.equal('content' in (first.result as Json), false);

    const retry = await callTool(url, 'test_tool_with_task', { workMs: 10 }, { capabilities: ASKS }, {
      inputResponses: { [keys[0] as string]: { action: 'accept', content: { name: 'Alice' } } },
      requestState: first.result?.requestState,
    });
    assert.equal(textOf(assertComplete(retry)), 'Hello, Alice!');
  });

  test('MRTR: two concurrent questions come in ONE InputRequiredResult; both answers complete the call', async () => {
    const first = await callTool(url, 'ask_twice', {}, { capabilities: ASKS });
    assert.equal(first.result?.resultType, 'input_required', show(first));
    const inputRequests = first.result?.inputRequests as Json;
    assert.deepEqual(
      Object.values(inputRequests).map((r) => ((r as Json).params as Json).message).sort(),
      ['First question?', 'Second question?'],
    );
    for (const r of Object.values(inputRequests)) assert.equal((r as Json).method, 'elicitation/create');
    const retry = await callTool(url, 'ask_twice', {}, { capabilities: ASKS }, {
      inputResponses: askTwiceAnswers(inputRequests),
      requestState: first.result?.requestState,
    });
    assert.deepEqual(assertComplete(retry).structuredContent, {
      first: { action: 'accept', content: { first: 'first answer' } },
      second: { action: 'accept', content: { second: 'second answer' } },
    });
  });

  test('MRTR: a retry answering one of two questions gets another input_required for the other', async () => {
    const first = await callTool(url, 'ask_twice', {}, { capabilities: ASKS });
    assert.equal(first.result?.resultType, 'input_required', show(first));
    const all = first.result?.inputRequests as Json;
    const partial = await callTool(url, 'ask_twice', {}, { capabilities: ASKS }, {
      inputResponses: askTwiceAnswers(all, 'First question?'),
      requestState: first.result?.requestState,
    });
    assert.equal(partial.result?.resultType, 'input_required', show(partial));
    const rest = partial.result?.inputRequests as Json;
    assert.deepEqual(Object.values(rest).map((r) => ((r as Json).params as Json).message), ['Second question?']);
    const secondKey = Object.keys(all).find((k) => ((all[k] as Json).params as Json).message === 'Second question?');
    assert.deepEqual(Object.keys(rest), [secondKey]);
    assert.equal(typeof partial.result?.requestState, 'string');
    assert.notEqual(partial.result?.requestState, first.result?.requestState);
    const done = await callTool(url, 'ask_twice', {}, { capabilities: ASKS }, {
      inputResponses: askTwiceAnswers(rest),
      requestState: partial.result?.requestState,
    });
    assert.deepEqual(assertComplete(done).structuredContent, {
      first: { action: 'accept', content: { first: 'first answer' } },
      second: { action: 'accept', content: { second: 'second answer' } },
    });
  });

  test('MRTR: tampered requestState and requestState replayed on another tool are -32602 (the call stays resumable)', async () => {
    const first = await callTool(url, 'ask_twice', {}, { capabilities: ASKS });
    assert.equal(first.result?.resultType, 'input_required', show(first));
    const state = first.result?.requestState as string;
    const answers = askTwiceAnswers(first.result?.inputRequests as Json);

    const tampered = await callTool(url, 'ask_twice', {}, { capabilities: ASKS }, { inputResponses: answers, requestState: `${state}-TAMPERED` });
    assert.equal(tampered.error?.code, -32602, show(tampered));
    const [body, signature] = state.split('.');
    const flipped = `${(body as string).slice(0, -2)}${(body as string).slice(-2) === 'AA' ? 'AB' : 'AA'}.${signature as string}`;
    const forged = await callTool(url, 'ask_twice', {}, { capabilities: ASKS }, { inputResponses: answers, requestState: flipped });
    assert.equal(forged.error?.code, -32602, show(forged));
    const replayed = await callTool(url, 'test_tool_with_task', {}, { capabilities: ASKS }, { inputResponses: answers, requestState: state });
    assert.equal(replayed.error?.code, -32602, show(replayed));

    const done = await callTool(url, 'ask_twice', {}, { capabilities: ASKS }, { inputResponses: answers, requestState: state });
    assertComplete(done);
  });

  test('MRTR: a retry whose arguments differ from the parked call\'s is -32602 (the call stays resumable with its own)', async () => {
    // The answers were given to a question about a.txt: they must not resume the call for b.txt, nor (silently) start
    // a new call with them. The spec binds requestState to "a digest of its salient parameters".
    const first = await callTool(url, 'confirm_delete', { filename: 'a.txt', delayMs: 0 }, { capabilities: ASKS });
    assert.equal(first.result?.resultType, 'input_required', show(first));
    const [key] = Object.keys(first.result?.inputRequests as Json);
    const retry = { inputResponses: { [key as string]: { action: 'accept', content: { confirm: true } } }, requestState: first.result?.requestState };
    const other = await callTool(url, 'confirm_delete', { filename: 'b.txt', delayMs: 0 }, { capabilities: ASKS }, retry);
    assert.equal(other.status, 200, show(other));
    assert.equal(other.error?.code, -32602, show(other));
    assert.match(String(other.error?.message), /Invalid requestState: it was issued for the same request with other params/);
    const extra = await callTool(url, 'confirm_delete', { filename: 'a.txt', delayMs: 0, force: true }, { capabilities: ASKS }, retry);
    assert.equal(extra.error?.code, -32602, show(extra));
    // The same arguments in another key order, with a progress token of the retry's own, are the same request.
    const done = await callTool(url, 'confirm_delete', { delayMs: 0, filename: 'a.txt' }, { capabilities: ASKS, meta: { progressToken: 'retry-1' } }, retry);
    assert.match(textOf(assertComplete(done)), /Deleted a\.txt/);
  });

  test('MRTR: a requestState used once cannot resume the call again (-32602)', async () => {
    const first = await callTool(url, 'ask_twice', {}, { capabilities: ASKS });
    assert.equal(first.result?.resultType, 'input_required', show(first));
    const retry = { inputResponses: askTwiceAnswers(first.result?.inputRequests as Json), requestState: first.result?.requestState };
    assertComplete(await callTool(url, 'ask_twice', {}, { capabilities: ASKS }, retry));
    const again = await callTool(url, 'ask_twice', {}, { capabilities: ASKS }, retry);
    assert.equal(again.error?.code, -32602, show(again));
  });

  test('MRTR: an upstream sampling request for a client without sampling is HTTP 400 -32021 naming sampling', async () => {
    const r = await callTool(url, 'sample', { prompt: 'hello' }, { capabilities: ASKS, id: 'needs-sampling' });
    assertError(r, 400, -32021, 'needs-sampling');
    assert.deepEqual(r.error?.data, { requiredCapabilities: { sampling: {} } });
  });

  test('MRTR: a roots/list for a client without roots is refused to the upstream; the call goes on', async () => {
    // Roots are context servers ask for at any time (right after connecting too): not a reason to fail a call.
    const r = await callTool(url, 'list_roots', {}, { capabilities: ASKS, id: 'roots-not-declared' });
    assert.equal(r.status, 200, show(r));
    assert.equal(r.result?.resultType, 'complete', show(r));
    assert.equal(r.result?.isError, true, show(r));
    assert.match(JSON.stringify(r.result?.content), /does not support roots\/list/);
  });

  // ---- subscriptions/listen ----

  test('listen: the first event acknowledges with the listen id and the honoured filter', async () => {
    const listener = await openListen(url, { toolsListChanged: true, promptsListChanged: true, notAFilter: true }, { id: 'listen-ack-1' });
    try {
      assert.equal(listener.status, 200);
      assert.match(String(listener.headers['content-type']), /text\/event-stream/);
      const ack = await listener.next(() => true);
      assert.deepEqual(ack, {
        jsonrpc: '2.0',
        method: 'notifications/subscriptions/acknowledged',
        params: { _meta: { [SUBSCRIPTION_ID]: 'listen-ack-1' }, notifications: { toolsListChanged: true, promptsListChanged: true } },
      });
    } finally {
      listener.close();
    }
  });

  test('listen: an upstream tools list change reaches toolsListChanged listeners only', async () => {
    const tools = await openListen(url, { toolsListChanged: true }, { id: 'listen-tools' });
    const prompts = await openListen(url, { promptsListChanged: true }, { id: 'listen-prompts' });
    try {
      await tools.next((e) => e.method === 'notifications/subscriptions/acknowledged');
      await prompts.next((e) => e.method === 'notifications/subscriptions/acknowledged');
      assertComplete(await callTool(url, 'change_tools', { action: 'add' }));
      const changed = await tools.next((e) => e.method === 'notifications/tools/list_changed');
      assert.equal(((changed.params as Json)._meta as Json)[SUBSCRIPTION_ID], 'listen-tools');
      // The same broadcast would have reached the other stream by now; give its bytes a moment to arrive.
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.deepEqual(prompts.events.map((e) => e.method), ['notifications/subscriptions/acknowledged']);
      for (const e of tools.events) assert.equal(((e.params as Json)._meta as Json)[SUBSCRIPTION_ID], 'listen-tools');
    } finally {
      tools.close();
      prompts.close();
      await callTool(url, 'change_tools', { action: 'remove' });
    }
  });

  test('listen: taskIds without the tasks extension is 400 -32021', async () => {
    const r = await sendRev2026(url, 'subscriptions/listen', { notifications: { taskIds: ['some-task'] } }, { capabilities: {}, id: 'listen-no-ext' });
    assertError(r, 400, -32021, 'listen-no-ext');
    assert.deepEqual(r.error?.data, MISSING_TASKS_DATA);
  });

  // ---- request lifetime ----

  test('closing the response of a synchronous call cancels the upstream call', async () => {
    const baseline = await whoami(url);
    const before = baseline.cancelled.filter((c) => c.tool === 'slow_compute').length;
    const { body, headers } = rev2026Request('tools/call', { name: 'slow_compute', arguments: { seconds: 30, label: 'abandoned' } });
    const abort = new AbortController();
    const response = fetch(url, { method: 'POST', headers, body: JSON.stringify(body), signal: abort.signal }).catch(() => undefined);
    // The call is running once the fixture counted it beyond the whoami polls themselves; then the client goes away.
    let polls = 0;
    await eventually(async () => (await whoami(url)).calls >= baseline.calls + ++polls + 1);
    abort.abort();
    await response;
    await eventually(async () => (await whoami(url)).cancelled.filter((c) => c.tool === 'slow_compute').length === before + 1, 10_000);
  });
});

// ---------------------------------------------------------------------------------------------------------
describe('MRTR: a parked call nobody resumes', () => {
  test('is cancelled upstream after mrtr.parkTimeoutMs, and its requestState no longer resumes anything', async (t) => {
    const gateway = await stdioGateway(testScope(t), { mrtr: { parkTimeoutMs: 300 } });
    const first = await callTool(gateway.url, 'test_tool_with_task', {}, { capabilities: ASKS });
    assert.equal(first.result?.resultType, 'input_required', show(first));
    let who: Whoami | undefined;
    await eventually(async () => {
      who = await whoami(gateway.url);
      return who.cancelled.some((c) => c.tool === 'test_tool_with_task');
    }, 10_000);
    assert.equal(who?.cancelled.filter((c) => c.tool === 'test_tool_with_task').length, 1);
    const key = Object.keys(first.result?.inputRequests as Json)[0] as string;
    const late = await callTool(gateway.url, 'test_tool_with_task', {}, { capabilities: ASKS }, {
      inputResponses: { [key]: { action: 'accept', content: { name: 'Late' } } },
      requestState: first.result?.requestState,
    });
    assert.equal(late.error?.code, -32602, show(late));
  });
});

// ---------------------------------------------------------------------------------------------------------
describe('Tasks extension (io.modelcontextprotocol/tasks) over a 2025-11-25 upstream', () => {
  const scope = suiteScope();
  let gateway: TestGateway;
  let url: string;

  before(async () => {
    gateway = await stdioGateway(scope, { tasks: TASKS_CONFIG });
    url = gateway.url;
  });

  test('a call outlasting taskAfterMs becomes a flat CreateTaskResult; tasks/get shows it working, then completed', async () => {
    const r = await callTool(url, 'slow_compute', { seconds: 1.5, label: 'create' }, { capabilities: TASKS_CAPABILITIES });
    assert.equal(r.status, 200);
    const created = r.result as Json;
    assert.equal(created.resultType, 'task', show(r));
    assert.equal(typeof created.taskId, 'string');
    assert.equal(created.status, 'working');
    assert.match(created.createdAt as string, ISO);
    assert.match(created.lastUpdatedAt as string, ISO);
    assert.ok(Number.isInteger(created.ttlMs) && (created.ttlMs as number) > 0, `ttlMs ${String(created.ttlMs)}`);
    assert.equal(created.pollIntervalMs, 100);
    for (const absent of ['task', 'ttl', 'pollInterval', 'requestState', 'result', 'error', 'inputRequests', 'content']) {
      assert.equal(absent in created, false, `CreateTaskResult has ${absent}`);
    }
    const taskId = created.taskId as string;

    const working = await tasksGet(url, taskId);
    assert.equal(working.taskId, taskId);
    assert.equal(working.status, 'working');
    for (const absent of ['result', 'error', 'inputRequests', 'requestState']) assert.equal(absent in working, false, `working task has ${absent}`);

    const done = await untilTask(url, taskId, ['completed', 'failed', 'cancelled']);
    assert.equal(done.status, 'completed');
    assert.equal(done.resultType, 'complete');
    const result = done.result as Json;
    assert.equal(textOf(result), 'slow_compute (create) finished after 1.5s');
    assert.deepEqual(result.structuredContent, { seconds: 1.5, label: 'create' });
    assert.equal(RELATED in ((result._meta as Json | undefined) ?? {}), false, 'no related-task _meta on the inlined result');
    assert.equal(result.resultType, 'complete', 'the inlined result is a 2026-07-28 CallToolResult');
    assert.equal('requestState' in done, false);
  });

  test('taskAfterMs: 0 makes even a fast tool a task at once; a fast call inside the window gets the plain result', async () => {
    const taskId = await createTask(url, 'test_simple_text', {});
    const done = await untilTask(url, taskId, ['completed', 'failed', 'cancelled']);
    assert.equal(done.status, 'completed');
    assert.ok(textOf(done.result).length > 0);

    const plain = await callTool(url, 'echo', { fast: true }, { capabilities: TASKS_CAPABILITIES });
    const result = assertComplete(plain);
    assert.deepEqual(result.structuredContent, { fast: true });
    assert.equal('taskId' in result, false);
  });

  test('failing_job (isError) is completed with the result inlined; protocol_error_job (JSON-RPC error) is failed with error', async () => {
    const failing = await createTask(url, 'failing_job', {});
    const toolError = await untilTask(url, failing, ['completed', 'failed', 'cancelled']);
    assert.equal(toolError.status, 'completed');
    assert.equal((toolError.result as Json).isError, true);
    assert.equal((toolError.result as Json).resultType, 'complete');
    assert.match(textOf(toolError.result), /failing_job/);
    assert.equal('error' in toolError, false);

    const protocol = await createTask(url, 'protocol_error_job', {});
    const failed = await untilTask(url, protocol, ['completed', 'failed', 'cancelled']);
    assert.equal(failed.status, 'failed');
    const error = failed.error as Json;
    assert.equal(error.code, -32603);
    assert.match(error.message as string, /protocol_error_job: simulated internal failure/);
    assert.equal('result' in failed, false);
  });

  test('input during a task: input_required with inputRequests; tasks/update answers it and the task completes', async () => {
    const taskId = await createTask(url, 'confirm_delete', { filename: 'mrtr-resume.txt' }, ASKS_EXT);
    const waiting = await untilTask(url, taskId, ['input_required', 'completed', 'failed', 'cancelled']);
    assert.equal(waiting.status, 'input_required');
    const inputRequests = waiting.inputRequests as Json;
    const keys = Object.keys(inputRequests);
    assert.equal(keys.length, 1);
    const asked = inputRequests[keys[0] as string] as Json;
    assert.equal(asked.method, 'elicitation/create');
    assert.match((asked.params as Json).message as string, /Delete mrtr-resume\.txt\?/);
    assert.equal('_meta' in (asked.params as Json), false);

    const ack = await sendRev2026(url, 'tasks/update', { taskId, inputResponses: { [keys[0] as string]: { action: 'accept', content: { confirm: true } } } }, { capabilities: TASKS_CAPABILITIES });
    assert.equal(ack.status, 200);
    assert.deepEqual(ack.result, { resultType: 'complete' });
    const done = await untilTask(url, taskId, ['completed', 'failed', 'cancelled']);
    assert.equal(done.status, 'completed');
    assert.equal(textOf(done.result), 'Deleted mrtr-resume.txt');
    assert.equal('inputRequests' in done, false);
  });

  test('partial tasks/update: the task stays input_required with only the unanswered key; unknown keys are ignored', async () => {
    const taskId = await createTask(url, 'multi_input', {}, ASKS_EXT);
    const waiting = await untilTask(url, taskId, ['input_required', 'completed', 'failed', 'cancelled'], (t) => Object.keys((t.inputRequests as Json | undefined) ?? {}).length >= 2);
    assert.equal(waiting.status, 'input_required');
    const [k1, k2] = Object.keys(waiting.inputRequests as Json) as [string, string];

    const ignored = await sendRev2026(url, 'tasks/update', { taskId, inputResponses: { 'unknown-key': { ignored: true } } }, { capabilities: TASKS_CAPABILITIES });
    assert.deepEqual(ignored.result, { resultType: 'complete' });
    assert.deepEqual(Object.keys((await tasksGet(url, taskId)).inputRequests as Json), [k1, k2]);

    const first = await sendRev2026(url, 'tasks/update', { taskId, inputResponses: { [k1]: { action: 'accept', content: { name: 'partial-1', confirm: true } } } }, { capabilities: TASKS_CAPABILITIES });
    assert.deepEqual(first.result, { resultType: 'complete' });
    const between = await tasksGet(url, taskId);
    assert.equal(between.status, 'input_required');
    assert.deepEqual(Object.keys(between.inputRequests as Json), [k2]);

    const second = await sendRev2026(url, 'tasks/update', { taskId, inputResponses: { [k2]: { action: 'accept', content: { name: 'partial-2', confirm: true } } } }, { capabilities: TASKS_CAPABILITIES });
    assert.deepEqual(second.result, { resultType: 'complete' });
    const done = await untilTask(url, taskId, ['completed', 'failed', 'cancelled']);
    assert.equal(done.status, 'completed');
    const answers = ((done.result as Json).structuredContent as { answers: Json[] }).answers;
    assert.deepEqual(answers.map((a) => (a.content as Json).name).sort(), ['partial-1', 'partial-2']);
  });

  test('tasks/cancel acknowledges with {resultType:"complete"} only, cancels the upstream call, and acks again on the terminal task', async () => {
    const before = (await whoami(url)).cancelled.filter((c) => c.tool === 'slow_compute').length;
    const taskId = await createTask(url, 'slow_compute', { seconds: 60, label: 'cancel' });
    const ack = await sendRev2026(url, 'tasks/cancel', { taskId }, { capabilities: TASKS_CAPABILITIES });
    assert.equal(ack.status, 200);
    assert.deepEqual(ack.result, { resultType: 'complete' });
    assert.equal((await tasksGet(url, taskId)).status, 'cancelled');
    await eventually(async () => (await whoami(url)).cancelled.filter((c) => c.tool === 'slow_compute').length === before + 1, 10_000);
    const again = await sendRev2026(url, 'tasks/cancel', { taskId }, { capabilities: TASKS_CAPABILITIES });
    assert.deepEqual(again.result, { resultType: 'complete' });
    assert.equal((await tasksGet(url, taskId)).status, 'cancelled');
  });

  test('tasks/get of an unknown task id is -32602', async () => {
    const r = await sendRev2026(url, 'tasks/get', { taskId: 'tasks-conformance-nonexistent-12345' }, { capabilities: TASKS_CAPABILITIES, id: 'unknown-task' });
    assert.equal(r.error?.code, -32602, show(r));
    assert.equal(r.response.id, 'unknown-task');
  });

  test('tasks/* without the extension are 400 -32021 with requiredCapabilities.extensions', async () => {
    for (const [method, params] of [
      ['tasks/get', { taskId: 'gate-test' }],
      ['tasks/update', { taskId: 'gate-test', inputResponses: {} }],
      ['tasks/cancel', { taskId: 'gate-test' }],
    ] as [string, Json][]) {
      const r = await sendRev2026(url, method, params, { capabilities: ASKS, id: method });
      assertError(r, 400, -32021, method);
      assert.deepEqual(r.error?.data, MISSING_TASKS_DATA, method);
    }
  });

  test('a required tool without the extension is 400 -32021 and the upstream is not called', async () => {
    const before = (await whoami(url)).calls;
    const r = await callTool(url, 'failing_job', {}, { capabilities: ASKS, id: 'required-no-ext' });
    assertError(r, 400, -32021, 'required-no-ext');
    assert.deepEqual(r.error?.data, MISSING_TASKS_DATA);
    assert.equal((await whoami(url)).calls, before + 1, 'only the second whoami reached the upstream');
  });

  test('the 2025-11-25 params.task hint is ignored', async () => {
    const forbidden = await callTool(url, 'greet', { name: 'rev2025-hint' }, { capabilities: TASKS_CAPABILITIES }, { task: { ttl: 60_000, pollInterval: 100 } });
    const result = assertComplete(forbidden);
    assert.equal(textOf(result), 'Hello, rev2025-hint!');
    assert.equal('taskId' in result, false);
    const optional = await callTool(url, 'slow_compute', { seconds: 0.5, label: 'hint' }, { capabilities: {} }, { task: { ttl: 60_000 } });
    assert.equal(textOf(assertComplete(optional)), 'slow_compute (hint) finished after 0.5s');
  });

  test('MRTR before the task exists: round 1 input_required, round 2 with the answer becomes a task that completes', async () => {
    const first = await callTool(url, 'test_tool_with_task', {}, { capabilities: ASKS_EXT });
    assert.equal(first.result?.resultType, 'input_required', show(first));
    assert.equal('taskId' in (first.result as Json), false);
    const key = Object.keys(first.result?.inputRequests as Json)[0] as string;
    const second = await callTool(url, 'test_tool_with_task', {}, { capabilities: ASKS_EXT }, {
      inputResponses: { [key]: { action: 'accept', content: { name: 'Alice' } } },
      requestState: first.result?.requestState,
    });
    assert.equal(second.result?.resultType, 'task', show(second));
    assert.equal('requestState' in (second.result as Json), false);
    assert.equal('inputRequests' in (second.result as Json), false);
    const done = await untilTask(url, second.result?.taskId as string, ['completed', 'failed', 'cancelled']);
    assert.equal(done.status, 'completed');
    assert.equal(textOf(done.result), 'Hello, Alice!');
  });

  test('listen with taskIds: notifications/tasks carries the DetailedTask (completed, result inlined) and the subscriptionId', async () => {
    const taskId = await createTask(url, 'slow_compute', { seconds: 2, label: 'listen' });
    const listener = await openListen(url, { taskIds: [taskId] }, { capabilities: TASKS_CAPABILITIES, id: 77 });
    try {
      const ack = await listener.next(() => true);
      assert.equal(ack.method, 'notifications/subscriptions/acknowledged');
      assert.deepEqual(ack.params, { _meta: { [SUBSCRIPTION_ID]: 77 }, notifications: { taskIds: [taskId] } });
      const completed = await listener.next((e) => e.method === 'notifications/tasks' && (e.params as Json).status === 'completed', 15_000);
      const params = completed.params as Json;
      assert.equal(params.taskId, taskId);
      assert.equal((params._meta as Json)[SUBSCRIPTION_ID], 77);
      assert.equal(textOf(params.result), 'slow_compute (listen) finished after 2s');
      assert.equal('id' in completed, false);
      for (const e of listener.events) assert.equal((((e.params as Json)._meta as Json) ?? {})[SUBSCRIPTION_ID], 77);
    } finally {
      listener.close();
    }
  });

  // ---- one engine for both eras ----

  test('a task a 2025-11-25 client created is readable by a 2026-07-28 tasks/get', async (t) => {
    const { client } = await testScope(t).client(url);
    const created = (await client.request(
      { method: 'tools/call', params: { name: 'slow_compute', arguments: { seconds: 1, label: 'rev2025-made' }, task: {} } },
      CreateTaskResultSchema,
    )) as { task: { taskId: string } };
    const taskId = created.task.taskId;
    const seen = await tasksGet(url, taskId);
    assert.equal(seen.taskId, taskId);
    assert.ok(['working', 'completed'].includes(seen.status as string), String(seen.status));
    const done = await untilTask(url, taskId, ['completed', 'failed', 'cancelled']);
    assert.equal(done.status, 'completed');
    assert.equal(textOf(done.result), 'slow_compute (rev2025-made) finished after 1s');
    assert.equal(RELATED in (((done.result as Json)._meta as Json | undefined) ?? {}), false);
  });

  test('an isError task is failed to the 2025-11-25 client and completed to the 2026-07-28 client', async (t) => {
    const { client } = await testScope(t).client(url);
    const created = (await client.request(
      { method: 'tools/call', params: { name: 'failing_job', arguments: {}, task: {} } },
      CreateTaskResultSchema,
    )) as { task: { taskId: string } };
    const taskId = created.task.taskId;
    await eventually(async () => ['completed', 'failed', 'cancelled'].includes((await client.experimental.tasks.getTask(taskId)).status), 15_000);
    assert.equal((await client.experimental.tasks.getTask(taskId)).status, 'failed');
    const rev2025Result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    assert.equal(rev2025Result.isError, true);
    const seen = await tasksGet(url, taskId);
    assert.equal(seen.status, 'completed');
    assert.equal((seen.result as Json).isError, true);
    assert.equal('error' in seen, false);
  });
});

// ---------------------------------------------------------------------------------------------------------
describe('2026-07-28 request lifetime and task limits', () => {
  test('maxTasksPerPrincipal holds for 2026-07-28 tasks; a finished task frees its place', async (t) => {
    const gateway = await stdioGateway(testScope(t), {
      tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100, maxTasksPerPrincipal: 1 } },
    });
    const first = await createTask(gateway.url, 'slow_compute', { seconds: 0.5, label: 'held' });
    const refused = await callTool(gateway.url, 'slow_compute', { seconds: 0.1, label: 'refused' }, { capabilities: TASKS_CAPABILITIES });
    assert.match(String(refused.error?.message), /Too many unfinished tasks.*maxTasksPerPrincipal: 1/, show(refused));
    await untilTask(gateway.url, first, ['completed', 'failed', 'cancelled']);
    await eventually(async () => (await callTool(gateway.url, 'slow_compute', { seconds: 0.1, label: 'again' }, { capabilities: TASKS_CAPABILITIES })).result?.resultType === 'task');
  });

  test('a listen stream carries keep-alive comments while nothing happens', async (t) => {
    const gateway = await stdioGateway(testScope(t), { sse: { keepAliveMs: 50 } });
    const { body, headers } = rev2026Request('subscriptions/listen', { notifications: { toolsListChanged: true } });
    const abort = new AbortController();
    const response = await fetch(gateway.url, { method: 'POST', headers, body: JSON.stringify(body), signal: abort.signal });
    assert.equal(response.status, 200);
    assert.match(String(response.headers.get('content-type')), /text\/event-stream/);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    while (!text.includes(': keep-alive')) {
      const chunk = await reader.read();
      if (chunk.done) break;
      text += Buffer.from(chunk.value).toString('utf8');
    }
    abort.abort();
    assert.match(text, /notifications\/subscriptions\/acknowledged[\s\S]*: keep-alive/);
  });

  test('concurrency holds for 2026-07-28 tasks: the second waits in working with a status message, then runs', async (t) => {
    const gateway = await stdioGateway(testScope(t), {
      tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 }, rules: [{ match: 'slow_compute', concurrency: 1 }] },
    });
    const first = await createTask(gateway.url, 'slow_compute', { seconds: 1, label: 'first' });
    const second = await createTask(gateway.url, 'slow_compute', { seconds: 0.2, label: 'second' });
    const queued = await tasksGet(gateway.url, second);
    assert.equal(queued.status, 'working');
    assert.match(String(queued.statusMessage), /Queued behind 1 .*at most 1 at once/);
    const done = await untilTask(gateway.url, second, ['completed', 'failed', 'cancelled']);
    assert.equal(done.status, 'completed');
    const firstDone = await tasksGet(gateway.url, first);
    assert.equal(firstDone.status, 'completed', 'the first task finished before the queued one could');
    assert.ok(Date.parse(String(firstDone.lastUpdatedAt)) <= Date.parse(String(done.lastUpdatedAt)));
  });
});

describe('Tasks extension with the Redis store', () => {
  // Two gateways on one Redis prefix, shared by the tests that need no other config: each makes tasks of its own.
  describe('two gateways with the same task rules', () => {
    const scope = suiteScope();
    let first: TestGateway;
    let second: TestGateway;
    before(async () => {
      const store = { type: 'redis', url: 'redis://127.0.0.1:6379', prefix: `taskgate-rev2026-${process.pid}-${randomBytes(4).toString('hex')}` };
      first = await stdioGateway(scope, { store, tasks: TASKS_CONFIG });
      second = await stdioGateway(scope, { store, tasks: TASKS_CONFIG });
    });

    test('a task created on one gateway is readable (tasks/get) on another sharing the Redis prefix', async () => {
      const taskId = await createTask(first.url, 'slow_compute', { seconds: 1, label: 'replica' });
      const elsewhere = await tasksGet(second.url, taskId);
      assert.equal(elsewhere.taskId, taskId);
      assert.ok(['working', 'completed'].includes(elsewhere.status as string), String(elsewhere.status));
      const done = await untilTask(second.url, taskId, ['completed', 'failed', 'cancelled']);
      assert.equal(done.status, 'completed');
      assert.equal(textOf(done.result), 'slow_compute (replica) finished after 1s');
    });

    test('tasks/cancel through another gateway stops the upstream call where the task runs', async () => {
      const before = (await whoami(first.url)).cancelled.filter((c) => c.tool === 'slow_compute').length;
      const taskId = await createTask(first.url, 'slow_compute', { seconds: 30, label: 'cancel-elsewhere' });
      const ack = await sendRev2026(second.url, 'tasks/cancel', { taskId }, { capabilities: TASKS_CAPABILITIES });
      assert.deepEqual(ack.result, { resultType: 'complete' });
      assert.equal((await tasksGet(first.url, taskId)).status, 'cancelled');
      await eventually(async () => (await whoami(first.url)).cancelled.filter((c) => c.tool === 'slow_compute').length === before + 1, 10_000);
    });
  });

  test('an MRTR retry reaching another gateway resumes the call parked on the first; tasks/update through another gateway reaches the task', async (t) => {
    const store = { type: 'redis', url: 'redis://127.0.0.1:6379', prefix: `taskgate-rev2026-${process.pid}-${randomBytes(4).toString('hex')}` };
    const tasks = { ...TASKS_CONFIG, rules: [...TASKS_CONFIG.rules.filter((r) => r.match !== 'test_tool_with_task'), { match: 'test_tool_with_task', mode: 'optional' }] };
    const scope = testScope(t);
    const first = await stdioGateway(scope, { store, tasks });
    const second = await stdioGateway(scope, { store, tasks });
    const round1 = await callTool(first.url, 'test_tool_with_task', {}, { capabilities: ASKS });
    assert.equal(round1.result?.resultType, 'input_required', show(round1));
    const [key] = Object.keys(round1.result?.inputRequests as Json);
    const round2 = await callTool(second.url, 'test_tool_with_task', {}, { capabilities: ASKS }, {
      inputResponses: { [key as string]: { action: 'accept', content: { name: 'Alice' } } },
      requestState: round1.result?.requestState,
    });
    assert.equal(textOf(assertComplete(round2)), 'Hello, Alice!');

    const taskId = await createTask(first.url, 'confirm_delete', { filename: 'elsewhere.txt' }, ASKS_EXT);
    const waiting = await untilTask(second.url, taskId, ['input_required']);
    const ack = await sendRev2026(second.url, 'tasks/update', { taskId, inputResponses: Object.fromEntries(Object.keys(waiting.inputRequests as Json).map((k) => [k, { action: 'accept', content: { confirm: true } }])) }, { capabilities: ASKS_EXT });
    assert.deepEqual(ack.result, { resultType: 'complete' });
    const done = await untilTask(second.url, taskId, ['completed', 'failed', 'cancelled']);
    assert.equal(textOf(done.result), 'Deleted elsewhere.txt');
  });

});

// ---------------------------------------------------------------------------------------------------------
describe('an upstream that speaks 2026-07-28 (stateless fixture, dual era)', () => {
  const scope = suiteScope();
  let fixture: StatelessServerHandle;
  let gateway: TestGateway;
  let url: string;

  before(async () => {
    fixture = await startStatelessServer();
    scope.defer(() => fixture.close());
    gateway = await scope.gateway({ upstreams: { mx: { transport: 'streamable-http', url: fixture.url } } });
    url = gateway.url;
  });

  test('rev2026_echo through a 2026-07-28 client', async () => {
    const r = await callTool(url, 'rev2026_echo', { text: 'hello 2026-07-28' });
    assert.equal(r.status, 200);
    assert.deepEqual(assertComplete(r).content, [{ type: 'text', text: 'hello 2026-07-28' }]);
  });

  test('rev2026_ask: the upstream\'s InputRequiredResult and requestState pass through; the retry completes upstream', async () => {
    const direct = await callTool(fixture.url, 'rev2026_ask', { question: 'Favourite number?' }, { capabilities: ASKS });
    assert.equal(direct.result?.resultType, 'input_required', show(direct));

    const first = await callTool(url, 'rev2026_ask', { question: 'Favourite number?' }, { capabilities: ASKS });
    assert.equal(first.result?.resultType, 'input_required', show(first));
    assert.deepEqual(Object.keys(first.result?.inputRequests as Json), ['answer']);
    assert.deepEqual(first.result?.inputRequests, direct.result?.inputRequests);
    assert.equal(typeof first.result?.requestState, 'string');

    const retry = await callTool(url, 'rev2026_ask', { question: 'Favourite number?' }, { capabilities: ASKS }, {
      inputResponses: { answer: { action: 'accept', content: { answer: '42' } } },
      requestState: first.result?.requestState,
    });
    assert.equal(textOf(assertComplete(retry)), JSON.stringify({ answer: '42' }));
  });

  test('/readyz shows the upstream\'s protocols', async () => {
    const answer = await request(`${gateway.origin}/readyz`);
    const body = (await answer.body.json()) as { upstreams: Json[] };
    assert.equal(answer.statusCode, 200);
    const mx = body.upstreams.find((u) => u.name === 'mx') as Json;
    assert.equal(mx.state, 'ready');
    assert.deepEqual(mx.protocols, ['2026-07-28', '2025-11-25']);
  });
});

describe('an upstream that speaks ONLY 2026-07-28', () => {
  const scope = suiteScope();
  let fixture: StatelessServerHandle;
  let gateway: TestGateway;

  before(async () => {
    fixture = await startStatelessServer({ rev2025Side: false });
    scope.defer(() => fixture.close());
    gateway = await scope.gateway({ upstreams: { mx: { transport: 'streamable-http', url: fixture.url } } });
  });

  test('a 2025-11-25 client gets rev2026_ask translated: asked by elicitation, answered with the final result', async () => {
    const connected = await scope.client(gateway.url);
    const client = connected.client;
    const result = await client.callTool({ name: 'rev2026_ask', arguments: { question: 'Favourite colour?' } });
    assert.equal(result.isError, undefined);
    assert.equal(textOf(result), JSON.stringify({ answer: 'answer to Favourite colour?' }));
    assert.equal(connected.log.elicitations.length, 1);
    assert.equal((connected.log.elicitations[0] as Json).message, 'Favourite colour?');
    assert.equal('resultType' in result, false, 'a 2025-11-25 result carries no resultType');
  });

  test('/readyz shows it speaks 2026-07-28 only', async () => {
    const answer = await request(`${gateway.origin}/readyz`);
    const body = (await answer.body.json()) as { upstreams: Json[] };
    const mx = body.upstreams.find((u) => u.name === 'mx') as Json;
    assert.equal(mx.state, 'ready');
    assert.deepEqual(mx.protocols, ['2026-07-28']);
  });
});
