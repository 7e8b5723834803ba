// The wire shapes of both revisions, from one stored task: what each era's client reads for every status and
// outcome, and the one codec contract (src/protocol/wire-codec.ts) as each revision implements it. Pure
// functions, so every shape is checked here; the integration tests check them through real clients.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { effectiveMode } from '../../src/config/policy.js';
import { mcpNameField, paramHeaders } from '../../src/mcp.js';
import * as rev2025 from '../../src/protocol/rev2025-11-25/codec.js';
import * as rev2026 from '../../src/protocol/rev2026-07-28/codec.js';
import { MCP_METHODS, WIRE_CODECS, WIRE_FIELDS } from '../../src/protocol/revisions.js';
import type { TaskRecord } from '../../src/store/task-store.js';
import { PendingInputs } from '../../src/tasks/pending-inputs.js';

const RELATED = 'io.modelcontextprotocol/related-task';
const T0 = Date.parse('2026-11-24T10:00:00.000Z');

function task(overrides: Partial<TaskRecord> = {}): TaskRecord {
  return {
    taskId: 'task-1',
    principal: 'session:s1',
    era: '2025-11-25',
    tool: 'slow',
    upstream: 'fx',
    status: 'working',
    createdMs: T0,
    createdUs: T0 * 1000,
    updatedMs: T0 + 500,
    retentionMs: 60_000,
    pollMs: 1000,
    ...overrides,
  };
}

const RESULT = { content: [{ type: 'text', text: 'done' }] };
const TOOL_ERROR = { content: [{ type: 'text', text: 'bad input' }], isError: true };
const RPC_ERROR = { code: -32603, message: 'upstream broke' };

describe('2025-11-25 codec', () => {
  it('a Task carries ttl and pollInterval, ISO times, and a status message only when there is one', () => {
    assert.deepEqual(rev2025.sessionTask(task()), {
      taskId: 'task-1',
      status: 'working',
      ttl: 60_000,
      createdAt: '2026-11-24T10:00:00.000Z',
      lastUpdatedAt: '2026-11-24T10:00:00.500Z',
      pollInterval: 1000,
    });
    assert.equal(rev2025.sessionTask(task({ status: 'input_required', message: 'asking' })).statusMessage, 'asking');
  });

  it('a tool error is failed in this era: the status is the store\'s', () => {
    assert.equal(rev2025.sessionTask(task({ status: 'failed', outcome: { result: TOOL_ERROR } })).status, 'failed');
  });

  it('CreateTaskResult wraps the Task; the immediate response goes in _meta only when configured', () => {
    assert.deepEqual(rev2025.createTaskResult(task(), undefined), { task: rev2025.sessionTask(task()) });
    assert.deepEqual(rev2025.createTaskResult(task(), ''), { task: rev2025.sessionTask(task()) });
    assert.deepEqual(rev2025.createTaskResult(task(), 'running')._meta, { 'io.modelcontextprotocol/model-immediate-response': 'running' });
  });

  it('tasks/result: the upstream result with the related-task marker added; a JSON-RPC error unchanged', () => {
    const answered = rev2025.taskPayload({ ...task({ status: 'completed' }), outcome: { result: { ...RESULT, _meta: { keep: 1 } } } });
    assert.deepEqual(answered, { result: { ...RESULT, _meta: { keep: 1, [RELATED]: { taskId: 'task-1' } } } });
    assert.deepEqual(rev2025.taskPayload({ ...task({ status: 'failed' }), outcome: { error: RPC_ERROR } }), { error: RPC_ERROR });
  });

  it('a request sent on a task\'s behalf carries the related-task marker, whatever _meta it had', () => {
    assert.deepEqual(rev2025.withRelatedTask(undefined, 't'), { _meta: { [RELATED]: { taskId: 't' } } });
    assert.deepEqual(rev2025.withRelatedTask({ message: 'm', _meta: { a: 1 } }, 't'), { message: 'm', _meta: { a: 1, [RELATED]: { taskId: 't' } } });
  });
});

describe('2026-07-28 codec', () => {
  it('every result gets resultType (the upstream\'s own is kept); lists and reads get private, stale caching hints', () => {
    assert.deepEqual(rev2026.statelessResult('tools/call', RESULT), { resultType: 'complete', ...RESULT });
    assert.equal(rev2026.statelessResult('tools/call', { resultType: 'input_required' }).resultType, 'input_required');
    assert.deepEqual(rev2026.statelessResult('tools/list', { tools: [] }), { resultType: 'complete', tools: [], ttlMs: 0, cacheScope: 'private' });
    assert.deepEqual(rev2026.statelessResult('resources/read', { contents: [], ttlMs: 5000, cacheScope: 'public' }), { resultType: 'complete', contents: [], ttlMs: 5000, cacheScope: 'public' });
  });

  it('the flat CreateTaskResult: resultType task, ttlMs and pollIntervalMs, no wrapper', () => {
    assert.deepEqual(rev2026.createTaskResult(task({ era: '2026-07-28' })), {
      resultType: 'task',
      taskId: 'task-1',
      status: 'working',
      createdAt: '2026-11-24T10:00:00.000Z',
      lastUpdatedAt: '2026-11-24T10:00:00.500Z',
      ttlMs: 60_000,
      pollIntervalMs: 1000,
    });
  });

  it('DetailedTask: a completed result is inlined as a 2026 CallToolResult, without the related-task marker', () => {
    const wire = rev2026.detailedTask(task({ status: 'completed', outcome: { result: { ...RESULT, _meta: { [RELATED]: { taskId: 'x' } } } } }));
    assert.equal(wire.status, 'completed');
    assert.deepEqual(wire.result, { resultType: 'complete', ...RESULT });
  });

  it('DetailedTask: a tool error is completed with the result; a JSON-RPC error is failed with the error', () => {
    const toolError = rev2026.detailedTask(task({ status: 'failed', outcome: { result: TOOL_ERROR } }));
    assert.equal(toolError.status, 'completed');
    assert.equal((toolError.result as { isError?: boolean }).isError, true);
    const rpcError = rev2026.detailedTask(task({ status: 'failed', outcome: { error: RPC_ERROR } }));
    assert.equal(rpcError.status, 'failed');
    assert.deepEqual(rpcError.error, RPC_ERROR);
    assert.equal(rpcError.result, undefined);
  });

  it('DetailedTask: outstanding input requests only while input_required; cancelled stays cancelled', () => {
    const inputRequests = { 'elicitation-1': { method: 'elicitation/create', params: { message: 'ok?' } } };
    assert.deepEqual(rev2026.detailedTask(task({ status: 'input_required', openRequests: inputRequests })).inputRequests, inputRequests);
    assert.equal(rev2026.detailedTask(task({ status: 'working', openRequests: inputRequests })).inputRequests, undefined);
    assert.equal(rev2026.statelessStatus(task({ status: 'cancelled' })), 'cancelled');
  });

  it('resource-not-found (-32002) does not exist in this revision: invalid params; other errors pass unchanged', () => {
    assert.deepEqual(rev2026.statelessOutcome('resources/read', { error: { code: -32002, message: 'Resource not found' } }), { error: { code: -32602, message: 'Resource not found' } });
    assert.deepEqual(rev2026.statelessOutcome('tools/call', { error: RPC_ERROR }), { error: RPC_ERROR });
  });

  it('an InputRequiredResult carries the questions and the signed state; acknowledgements are complete', () => {
    assert.deepEqual(rev2026.inputRequiredResult({ 'roots-1': { method: 'roots/list' } }, 'state'), { resultType: 'input_required', inputRequests: { 'roots-1': { method: 'roots/list' } }, requestState: 'state' });
    assert.deepEqual({ ...rev2026.ACK }, { resultType: 'complete' });
  });
});

describe('task modes', () => {
  const capable = { tasks: { requests: { tools: { call: {} } } } };
  it('an upstream\'s taskSupport counts only under its tasks capability for tool calls', () => {
    assert.equal(rev2025.upstreamTaskSupport(capable, { name: 't', execution: { taskSupport: 'required' } }), 'required');
    assert.equal(rev2025.upstreamTaskSupport(capable, { name: 't', execution: { taskSupport: 'optional' } }), 'optional');
    assert.equal(rev2025.upstreamTaskSupport({}, { name: 't', execution: { taskSupport: 'required' } }), 'forbidden');
    assert.equal(rev2025.upstreamTaskSupport(capable, { name: 't' }), 'forbidden');
    assert.equal(rev2025.upstreamTaskSupport(capable, undefined), 'forbidden');
  });

  it('clients see the policy\'s mode, raised to required where the upstream requires a task', () => {
    for (const policy of ['forbidden', 'optional', 'required'] as const) {
      assert.equal(effectiveMode(policy, 'required'), 'required');
      assert.equal(effectiveMode(policy, 'optional'), policy);
      assert.equal(effectiveMode(policy, 'forbidden'), policy);
    }
  });
});

describe('pending inputs', () => {
  it('keys by kind and counter, answers by key, ignores unknown keys and non-objects, cancels on abort', async () => {
    let changes = 0;
    const inputs = new PendingInputs(() => changes++);
    const abort = new AbortController();
    const first = inputs.ask({ method: 'elicitation/create', params: { message: 'a', _meta: { x: 1 } } }, new AbortController().signal);
    const second = inputs.ask({ method: 'sampling/createMessage' }, abort.signal);
    assert.deepEqual([first.key, second.key], ['elicitation-1', 'sampling-2']);
    assert.deepEqual(inputs.outstanding(), { 'elicitation-1': { method: 'elicitation/create', params: { message: 'a' } }, 'sampling-2': { method: 'sampling/createMessage' } });
    assert.equal(inputs.answer({ 'elicitation-1': { action: 'accept' }, 'nope-9': {}, 'sampling-2': 'not an object' }), 1);
    assert.deepEqual(await first.answer, { result: { action: 'accept' } });
    abort.abort();
    assert.equal(((await second.answer) as { error: { code: number } }).error.code, -32800);
    assert.equal(inputs.size, 0);
    assert.equal(changes, 4); // two added, one answered, one aborted
  });
});

describe('2026-07-28 headers that mirror the body (one table for the front end and the upstream client)', () => {
  it('Mcp-Name mirrors the name, the URI or the task id, per method', () => {
    assert.equal(mcpNameField('tools/call'), 'name');
    assert.equal(mcpNameField('prompts/get'), 'name');
    assert.equal(mcpNameField('resources/read'), 'uri');
    for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) assert.equal(mcpNameField(method), 'taskId');
    assert.equal(mcpNameField('tools/list'), undefined);
  });

  it('Mcp-Param-<Name> headers come from x-mcp-header in the input schema; empty or missing names ask for none', () => {
    const tool = { inputSchema: { properties: { region: { type: 'string', 'x-mcp-header': 'Region' }, n: { type: 'number', 'x-mcp-header': '' }, plain: { type: 'string' } } } };
    assert.deepEqual(paramHeaders(tool), [{ property: 'region', name: 'Region', header: 'mcp-param-region' }]);
    assert.deepEqual(paramHeaders(undefined), []);
    assert.deepEqual(paramHeaders({ inputSchema: 'not a schema' }), []);
  });
});

// The same questions of both codecs (WireCodec), answered in each revision's own field names.
const TASK = task();

describe('WireCodec', () => {
  it('both read the task id a tasks/* request names, unchecked', () => {
    for (const codec of [rev2025.codec, rev2026.codec]) {
      assert.equal(codec.taskIdOf({ taskId: 'task-1' }), 'task-1');
      assert.equal(codec.taskIdOf({ taskId: 7 }), 7);
      assert.equal(codec.taskIdOf({}), undefined);
    }
  });

  it('tasks/get and tasks/cancel: the Task in 2025-11-25, a DetailedTask and an empty ack in 2026-07-28', () => {
    assert.equal(rev2025.codec.taskResult(TASK).ttl, 60_000);
    assert.deepEqual(rev2025.codec.cancelResult({ ...TASK, status: 'cancelled' }), rev2025.codec.taskResult({ ...TASK, status: 'cancelled' }));
    assert.equal(rev2026.codec.taskResult(TASK).resultType, 'complete');
    assert.equal(rev2026.codec.taskResult(TASK).ttlMs, 60_000);
    assert.deepEqual(rev2026.codec.cancelResult(TASK), { resultType: 'complete' });
  });

  it('a task-creating tools/call: nested with the immediate response in 2025-11-25, flat without in 2026-07-28', () => {
    const rev2025Side = rev2025.codec.createTaskResult(TASK, 'started');
    assert.equal((rev2025Side.task as { taskId: string }).taskId, 'task-1');
    assert.ok(rev2025Side._meta !== undefined);
    const rev2026Side = rev2026.codec.createTaskResult(TASK, 'started');
    assert.equal(rev2026Side.resultType, 'task');
    assert.equal(rev2026Side.taskId, 'task-1');
    assert.equal(rev2026Side._meta, undefined);
  });

  it('a tool: 2025-11-25 shows the gateway mode (none to sessions without tasks); 2026-07-28 lists it as is', () => {
    const tool = { name: 't', inputSchema: { type: 'object' }, execution: { taskSupport: 'forbidden' } };
    assert.deepEqual(rev2025.codec.toolView(tool, 'optional'), { ...tool, execution: { taskSupport: 'optional' } });
    assert.deepEqual(rev2025.codec.toolView(tool, undefined), { name: 't', inputSchema: { type: 'object' } });
    const other = { ...tool, execution: { taskSupport: 'required', other: true } };
    assert.deepEqual(rev2025.codec.toolView(other, undefined), { ...tool, execution: { other: true } });
    assert.equal(rev2025.codec.toolView({ name: 'plain' }, undefined).execution, undefined);
    assert.equal(rev2026.codec.toolView(tool, 'optional'), tool);
  });

  it('a result: passed through in 2025-11-25; with resultType (and hints on lists) in 2026-07-28', () => {
    const result = { tools: [] };
    assert.equal(rev2025.codec.clientResult('tools/list', result), result);
    assert.deepEqual(rev2026.codec.clientResult('tools/list', result), { resultType: 'complete', tools: [], ttlMs: 0, cacheScope: 'private' });
    assert.deepEqual(rev2026.codec.clientResult('subscriptions/listen', {}), { resultType: 'complete' });
  });

  it("an upstream's own create-task result, in each revision's shape only", () => {
    assert.deepEqual(rev2025.codec.createdTask({ task: { taskId: 'up-1', ttl: 5000 } }), { taskId: 'up-1', retentionMs: 5000 });
    assert.deepEqual(rev2025.codec.createdTask({ task: { taskId: 'up-1' } }), { taskId: 'up-1', retentionMs: undefined });
    assert.equal(rev2025.codec.createdTask({ resultType: 'task', taskId: 'up-2' }), undefined);
    assert.deepEqual(rev2026.codec.createdTask({ resultType: 'task', taskId: 'up-2', ttlMs: 9000 }), { taskId: 'up-2', retentionMs: 9000 });
    assert.deepEqual(rev2026.codec.createdTask({ resultType: 'task', taskId: 'up-2', ttlMs: 0 }), { taskId: 'up-2', retentionMs: undefined });
    assert.equal(rev2026.codec.createdTask({ resultType: 'complete', taskId: 'up-2' }), undefined);
    assert.equal(rev2026.codec.createdTask({ task: { taskId: 'up-1' } }), undefined);
  });
});

describe('what each codec declares of its revision', () => {
  it('its id', () => {
    assert.equal(rev2025.codec.revision, '2025-11-25');
    assert.equal(rev2026.codec.revision, '2026-07-28');
    assert.deepEqual(WIRE_CODECS.map((codec) => codec.revision), ['2026-07-28', '2025-11-25']);
  });

  it('the methods metrics name are the union of the methods each revision defines', () => {
    assert.deepEqual([...MCP_METHODS].sort(), [
      'initialize', 'ping', 'server/discover', 'subscriptions/listen',
      'tools/list', 'tools/call', 'prompts/list', 'prompts/get',
      'resources/list', 'resources/templates/list', 'resources/read', 'resources/subscribe', 'resources/unsubscribe',
      'logging/setLevel', 'completion/complete',
      'tasks/get', 'tasks/result', 'tasks/list', 'tasks/cancel', 'tasks/update', 'tasks/delete',
      'sampling/createMessage', 'elicitation/create', 'roots/list',
      'notifications/initialized', 'notifications/cancelled', 'notifications/progress', 'notifications/message',
      'notifications/roots/list_changed', 'notifications/tools/list_changed', 'notifications/prompts/list_changed',
      'notifications/resources/list_changed', 'notifications/resources/updated', 'notifications/tasks/status',
      'notifications/tasks', 'notifications/elicitation/complete',
    ].sort());
    for (const codec of WIRE_CODECS) assert.equal(new Set(codec.methods).size, codec.methods.length, `${codec.revision} names each method once`);
  });

  it('each revision\'s methods: sessions and their tasks in 2025-11-25; discovery, listen and tasks/update in 2026-07-28', () => {
    const has = (codec: typeof rev2025.codec, method: string): boolean => codec.methods.includes(method);
    for (const method of ['initialize', 'ping', 'logging/setLevel', 'resources/subscribe', 'tasks/result', 'tasks/list', 'notifications/tasks/status', 'notifications/initialized']) {
      assert.ok(has(rev2025.codec, method) && !has(rev2026.codec, method), method);
    }
    for (const method of ['server/discover', 'subscriptions/listen', 'tasks/update', 'notifications/tasks']) {
      assert.ok(has(rev2026.codec, method) && !has(rev2025.codec, method), method);
    }
    for (const method of ['tools/call', 'tasks/get', 'tasks/cancel', 'elicitation/create', 'notifications/progress']) {
      assert.ok(has(rev2025.codec, method) && has(rev2026.codec, method), method);
    }
  });

  it('its wire field names, which the lint keeps inside it: every one its own shapes use', () => {
    assert.deepEqual([...rev2025.codec.wireFields].sort(), ['pollInterval', 'taskSupport', 'ttl']);
    assert.deepEqual([...rev2026.codec.wireFields].sort(), ['cacheScope', 'inputRequests', 'inputResponses', 'pollIntervalMs', 'requestState', 'resultType', 'ttlMs']);
    assert.deepEqual([...WIRE_FIELDS].sort(), [...rev2025.codec.wireFields, ...rev2026.codec.wireFields].sort());
    // The shapes themselves name them.
    const rev2025Side = rev2025.codec.toolView({ name: 't' }, 'optional');
    assert.ok(Object.keys(rev2025.sessionTask(task())).includes('ttl') && Object.keys(rev2025.sessionTask(task())).includes('pollInterval'));
    assert.deepEqual(rev2025Side.execution, { taskSupport: 'optional' });
    assert.ok(['resultType', 'ttlMs', 'pollIntervalMs'].every((field) => field in rev2026.createTaskResult(task())));
    assert.deepEqual(Object.keys(rev2026.inputRequiredResult({}, 'state')).sort(), ['inputRequests', 'requestState', 'resultType']);
    assert.ok('inputResponses' in rev2026.retryParams({}, {}, {}));
    assert.equal(rev2026.statelessResult('tools/list', {}).cacheScope, 'private');
  });
});
