// A 2026-07-28 upstream that runs tasks itself ("native tasks": it declares the Tasks extension in
// server/discover) behind two gateway replicas sharing one Redis store. A 2026-07-28 client's call passes through
// unchanged, the upstream's own task id comes back, and tasks/get|update|cancel for that id are routed to the
// upstream by whichever replica receives them (the routing record lives in Redis). 2025-11-25 clients get the
// tool's plain result, and a clear error for the native id. Requests are written by hand (undici): the
// envelope in params._meta, MCP-Protocol-Version / Mcp-Method / Mcp-Name headers.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { GetTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { startStatelessServer, type StatelessServerHandle, type StatelessServerOptions } from '../fixtures/stateless-server.js';
import { eventually, suiteScope, textOf, type TestGateway } from '../helpers/harness.js';
import { twoReplicas } from '../helpers/replicas.js';
import { sharedRedisStore, TEST_REDIS_URL } from '../helpers/shared-redis.js';

type Json = Record<string, unknown>;

const VERSION = '2026-07-28';
const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
const WITH_TASKS: Json = { extensions: { [TASKS_EXTENSION]: {} } };
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/;
const NATIVE_ID = /^native-\d+$/;

interface Answer {
  status: number;
  /** The JSON-RPC response with the request's id (from a JSON body or an SSE stream). */
  response: Json;
  result: Json | undefined;
  error: { code: number; message: string; data?: unknown } | undefined;
}

let ids = 0;

/** The body field each method mirrors into `Mcp-Name`. */
function mcpName(method: string, params: Json): unknown {
  if (method === 'tools/call') return params.name;
  if (method.startsWith('tasks/')) return params.taskId;
  return undefined;
}

/** One stateless 2026-07-28 request: the envelope in `_meta`, the routing headers mirrored from the body. */
async function send(url: string, method: string, params: Json, capabilities: Json = WITH_TASKS): Promise<Answer> {
  const id = ++ids;
  const _meta = {
    'io.modelcontextprotocol/protocolVersion': VERSION,
    'io.modelcontextprotocol/clientCapabilities': capabilities,
    'io.modelcontextprotocol/clientInfo': { name: 'taskgate-rev2026-upstream-test', version: '1.0.0' },
  };
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': VERSION,
    'mcp-method': method,
  };
  const name = mcpName(method, params);
  if (typeof name === 'string') headers['mcp-name'] = name;
  const answer = await request(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta } }),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await answer.body.text();
  const sse = String(answer.headers['content-type'] ?? '').includes('text/event-stream');
  const messages = sse
    ? text
        .split(/\r?\n\r?\n/)
        .map((event) => event.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n'))
        .filter((data) => data.trim() !== '')
        .map((data) => JSON.parse(data) as Json)
    : text.trim() === '' ? [] : [JSON.parse(text) as Json];
  const response = messages.find((m) => m.id === id) ?? messages.find((m) => 'error' in m) ?? {};
  return { status: answer.statusCode, response, result: response.result as Json | undefined, error: response.error as Answer['error'] };
}

function show(a: Answer): string {
  return `HTTP ${a.status}: ${JSON.stringify(a.response)}`;
}

/** native_slow from a client declaring the extension: the upstream's own CreateTaskResult, checked flat. */
async function startNative(url: string, ms: number): Promise<Json> {
  const a = await send(url, 'tools/call', { name: 'native_slow', arguments: { ms } });
  assert.equal(a.status, 200, show(a));
  assert.equal(a.error, undefined, show(a));
  const created = a.result as Json;
  assert.equal(created.resultType, 'task', show(a));
  assert.match(String(created.taskId), NATIVE_ID, `the upstream's own task id, unchanged: ${show(a)}`);
  assert.equal(created.status, 'working', show(a));
  assert.match(String(created.createdAt), ISO);
  assert.match(String(created.lastUpdatedAt), ISO);
  // The fixture's own TTL and poll interval (the gateway's policy would say 3600000 / 1000).
  assert.equal(created.ttlMs, 600_000, show(a));
  assert.equal(created.pollIntervalMs, 100, show(a));
  for (const absent of ['task', 'result', 'error', 'inputRequests', 'requestState', 'ttl', 'pollInterval']) {
    assert.equal(absent in created, false, `CreateTaskResult must not carry '${absent}': ${show(a)}`);
  }
  return created;
}

async function tasksGet(url: string, taskId: string): Promise<Json> {
  const a = await send(url, 'tasks/get', { taskId });
  assert.equal(a.error, undefined, show(a));
  const task = a.result as Json;
  assert.equal(task.resultType, 'complete', show(a));
  assert.equal(task.taskId, taskId, show(a));
  assert.equal('requestState' in task, false, show(a));
  return task;
}

/** Polls tasks/get (bounded) until the task leaves `working`. */
async function untilSettled(url: string, taskId: string): Promise<Json> {
  let task: Json = {};
  await eventually(async () => {
    task = await tasksGet(url, taskId);
    return task.status !== 'working';
  }, 10_000);
  return task;
}

/** A tasks/update or tasks/cancel ack: `{resultType:"complete"}` and nothing of the task. */
function assertAck(a: Answer): void {
  assert.equal(a.status, 200, show(a));
  assert.equal(a.error, undefined, show(a));
  assert.equal(a.result?.resultType, 'complete', show(a));
  for (const absent of ['taskId', 'status', 'result', 'error', 'inputRequests']) {
    assert.equal(absent in (a.result as Json), false, `ack must not carry '${absent}': ${show(a)}`);
  }
}

/**
 * The same expectations for a dual-era upstream (the fixture's default: its 2025-11-25 side is the session
 * fixture, which has no native_slow) and for one that speaks only 2026-07-28.
 */
function nativeTasksSuite(title: string, fixtureOptions: StatelessServerOptions): void {
  describe(title, () => {
    const scope = suiteScope();
    let prefix: string;
    let fixture: StatelessServerHandle;
    let first: TestGateway;
    let second: TestGateway;
    let redis: Redis;

    before(async () => {
      // The keys go last, once nothing is left to write them.
      const store = sharedRedisStore(scope, 'rev2026-upstream');
      prefix = store.prefix;
      fixture = await startStatelessServer({ ...fixtureOptions, nativeTasks: true });
      scope.defer(() => fixture.close());
      [first, second] = await twoReplicas(scope, { store, upstreams: { nt: { transport: 'streamable-http', url: fixture.url } } });
      redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
      scope.defer(() => redis.disconnect());
      await redis.connect();
    });

    test('the gateway sees the upstream\'s native tasks and lists native_slow', async () => {
      const direct = await send(fixture.url, 'server/discover', {});
      assert.deepEqual((direct.result?.capabilities as Json).extensions, { [TASKS_EXTENSION]: {} }, show(direct));
      const tools = await send(first.url, 'tools/list', {});
      const names = ((tools.result?.tools ?? []) as Json[]).map((t) => t.name);
      assert.ok(names.includes('native_slow'), show(tools));
    });

    test('(a) the upstream\'s task id comes back unchanged; tasks/get|update|cancel go to the upstream', async () => {
      const created = await startNative(first.url, 1500);
      const taskId = created.taskId as string;

      const working = await tasksGet(first.url, taskId);
      assert.equal(working.status, 'working', JSON.stringify(working));
      assert.equal(working.ttlMs, 600_000, `the upstream's DetailedTask: ${JSON.stringify(working)}`);
      assert.equal(working.pollIntervalMs, 100, JSON.stringify(working));
      assert.equal('result' in working, false, JSON.stringify(working));

      assertAck(await send(first.url, 'tasks/update', { taskId, inputResponses: { 'unknown-key': { ignored: true } } }));

      const done = await untilSettled(first.url, taskId);
      assert.equal(done.status, 'completed', JSON.stringify(done));
      assert.deepEqual(done.result, { content: [{ type: 'text', text: 'native done after 1500 ms' }] }, JSON.stringify(done));

      const long = (await startNative(first.url, 30_000)).taskId as string;
      assert.notEqual(long, taskId);
      assertAck(await send(first.url, 'tasks/cancel', { taskId: long }));
      const cancelled = await tasksGet(first.url, long);
      assert.equal(cancelled.status, 'cancelled', JSON.stringify(cancelled));
      assert.equal('result' in cancelled, false, JSON.stringify(cancelled));
      // Cancel of a terminal task is the same ack in this revision, and the task stays as it ended.
      assertAck(await send(first.url, 'tasks/cancel', { taskId }));
      assert.equal((await tasksGet(first.url, taskId)).status, 'completed');
    });

    test('(b) a second gateway on the same Redis store routes the native id to the upstream', async () => {
      const taskId = (await startNative(first.url, 1000)).taskId as string;
      // The routing record is in Redis under this run's prefix, marked native.
      const record = await redis.hgetall(`${prefix}:task:{${taskId}}`);
      assert.equal(record.native, '1', `Redis record of ${taskId}: ${JSON.stringify(record)}`);
      assert.equal(record.upstream, 'nt', JSON.stringify(record));

      const elsewhere = await tasksGet(second.url, taskId);
      assert.equal(elsewhere.status, 'working', JSON.stringify(elsewhere));
      assert.equal(elsewhere.ttlMs, 600_000, `the upstream's DetailedTask: ${JSON.stringify(elsewhere)}`);
      const done = await untilSettled(second.url, taskId);
      assert.equal(done.status, 'completed', JSON.stringify(done));
      assert.deepEqual(done.result, { content: [{ type: 'text', text: 'native done after 1000 ms' }] });

      const long = (await startNative(first.url, 30_000)).taskId as string;
      assertAck(await send(second.url, 'tasks/update', { taskId: long, inputResponses: {} }));
      assertAck(await send(second.url, 'tasks/cancel', { taskId: long }));
      assert.equal((await tasksGet(first.url, long)).status, 'cancelled');
      assert.equal((await tasksGet(second.url, long)).status, 'cancelled');
    });

    test('(c) a 2025-11-25 client calling native_slow gets the plain synchronous result', async () => {
      const { client } = await scope.client(first.url);
      const result = await client.callTool({ name: 'native_slow', arguments: { ms: 100 } });
      assert.equal(result.isError, undefined, JSON.stringify(result));
      assert.equal(textOf(result), 'native done after 100 ms', JSON.stringify(result));
      for (const absent of ['resultType', 'task', 'taskId']) assert.equal(absent in result, false, JSON.stringify(result));
    });

    test('(d) a 2025-11-25 client\'s tasks/get on a native id says the upstream runs it', async () => {
      const taskId = (await startNative(first.url, 30_000)).taskId as string;
      try {
        const { client } = await scope.client(second.url);
        await assert.rejects(
          client.request({ method: 'tasks/get', params: { taskId } }, GetTaskResultSchema),
          (error: Error & { code?: number }) => {
            assert.equal(error.code, -32602, error.message);
            assert.match(error.message, new RegExp(`${taskId}.*run by upstream 'nt'`), error.message);
            return true;
          },
        );
      } finally {
        await send(first.url, 'tasks/cancel', { taskId });
      }
    });
  });
}

nativeTasksSuite('a dual-era upstream (2026-07-28 with tasks of its own, and 2025-11-25) behind two gateways on one Redis store', {});
nativeTasksSuite('a 2026-07-28-only upstream with tasks of its own behind two gateways on one Redis store', { rev2025Side: false });
