// 2025-11-25 tasks through the gateway, driven by the SDK v1 client against the session fixture upstream,
// with both stores.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, CreateTaskResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { eventually, suiteScope, testScope, textOf, type ClientLog, type TestGateway } from '../helpers/harness.js';
import { createdTaskId, SessionWire } from '../helpers/session-wire.js';

const RELATED = 'io.modelcontextprotocol/related-task';
const TASK_RULES = {
  defaults: { mode: 'optional', ttlMs: 60_000, maxTtlMs: 120_000, pollIntervalMs: 100 },
  rules: [
    { match: 'echo', mode: 'forbidden' },
    { match: 'fail_tool', mode: 'required' },
    { match: 'slow', maxRunMs: 3000 },
  ],
  immediateResponse: 'Working on it in the background.',
};

interface WireTask {
  taskId: string;
  status: string;
  ttl: number;
  pollInterval: number;
  createdAt: string;
  lastUpdatedAt: string;
  statusMessage?: string;
}

async function createTask(client: Client, name: string, args: Record<string, unknown>, ttl?: number): Promise<{ task: WireTask; _meta?: Record<string, unknown> }> {
  const result = await client.request(
    { method: 'tools/call', params: { name, arguments: args, task: ttl === undefined ? {} : { ttl } } },
    CreateTaskResultSchema.passthrough(),
  );
  return result as unknown as { task: WireTask; _meta?: Record<string, unknown> };
}

async function untilStatus(client: Client, taskId: string, statuses: string[]): Promise<WireTask> {
  let task: WireTask | undefined;
  await eventually(async () => {
    task = (await client.experimental.tasks.getTask(taskId)) as unknown as WireTask;
    return statuses.includes(task.status);
  }, 10_000);
  return task as WireTask;
}

const stores: Record<string, () => Record<string, unknown>> = {
  memory: () => ({ type: 'memory' }),
  redis: () => ({ type: 'redis', url: 'redis://127.0.0.1:6379', prefix: `taskgate-test-${process.pid}-${randomBytes(4).toString('hex')}` }),
};

for (const [storeKind, storeConfig] of Object.entries(stores)) {
  describe(`2025-11-25 tasks (${storeKind} store)`, () => {
    const scope = suiteScope();
    let gateway: TestGateway;
    let client: Client;
    let log: ClientLog;

    before(async () => {
      const upstream = await scope.upstream('streamable-http');
      gateway = await scope.gateway({ store: storeConfig(), upstreams: { fx: upstream.config }, tasks: TASK_RULES });
      ({ client, log } = await scope.client(gateway.url));
    });

    test('initialize declares tasks; tools/list shows each tool\'s policy as taskSupport', async () => {
      const caps = client.getServerCapabilities() as Record<string, unknown>;
      assert.deepEqual(caps.tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } });
      const { tools } = await client.listTools();
      const support = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport]));
      assert.equal(support.echo, 'forbidden');
      assert.equal(support.fail_tool, 'required');
      assert.equal(support.slow, 'optional');
    });

    test('policy: a task on a forbidden tool and a plain call of a required tool get -32601 saying why', async () => {
      await assert.rejects(createTask(client, 'echo', {}), (e: { code: number; message: string }) => e.code === -32601 && /forbidden/.test(e.message));
      await assert.rejects(
        client.request({ method: 'tools/call', params: { name: 'fail_tool', arguments: {} } }, CallToolResultSchema),
        (e: { code: number; message: string }) => e.code === -32601 && /required/.test(e.message),
      );
    });

    test('creation: durable CreateTaskResult with the granted (clamped) ttl and the immediate-response hint', async () => {
      const created = await createTask(client, 'slow', { ms: 200 }, 10_000_000);
      assert.equal(created.task.status, 'working');
      assert.equal(created.task.ttl, 120_000);
      assert.equal(created.task.pollInterval, 100);
      assert.ok(Date.parse(created.task.createdAt) > 0);
      assert.equal(created._meta?.['io.modelcontextprotocol/model-immediate-response'], 'Working on it in the background.');
      const read = (await client.experimental.tasks.getTask(created.task.taskId)) as unknown as WireTask;
      assert.equal(read.taskId, created.task.taskId);
      const done = await untilStatus(client, created.task.taskId, ['completed']);
      assert.equal(done.status, 'completed');
    });

    test('tasks/result blocks until the task ends and returns the upstream result with related-task _meta', async (t) => {
      const created = await createTask(client, 'slow', { ms: 300 });
      const result = (await client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema.passthrough())) as Record<string, unknown>;
      assert.match(textOf(result), /.+/);
      assert.deepEqual((result._meta as Record<string, unknown>)[RELATED], { taskId: created.task.taskId });
      // ... and again after completion, from another client polling the same task.
      const other = await testScope(t).client(gateway.url);
      const again = (await other.client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema.passthrough())) as Record<string, unknown>;
      assert.deepEqual(again.content, result.content);
    });

    test('one upstream execution per task, however often it is polled or its result fetched', async (t) => {
      const fresh = await testScope(t).client(gateway.url); // its own upstream session: the fixture counts calls per session
      const created = await createTask(fresh.client, 'slow', { ms: 100 });
      for (let i = 0; i < 3; i++) await fresh.client.experimental.tasks.getTask(created.task.taskId);
      await fresh.client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
      await fresh.client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
      const who = JSON.parse(textOf(await fresh.client.callTool({ name: 'whoami', arguments: {} }))) as { calls: number };
      assert.equal(who.calls, 2, 'slow once, then this whoami');
    });

    test('callToolStream: the SDK client sees the task created and its result', async () => {
      await client.listTools(); // the SDK client decides from the listed taskSupport to call as a task
      const kinds: string[] = [];
      let final: unknown;
      for await (const message of client.experimental.tasks.callToolStream({ name: 'slow', arguments: { ms: 200 } })) {
        kinds.push(message.type);
        if (message.type === 'result') final = message.result;
      }
      assert.equal(kinds[0], 'taskCreated');
      assert.equal(kinds.at(-1), 'result');
      assert.ok((final as { content: unknown[] }).content.length > 0);
    });

    test('progress of a task reaches the client with its token, and stops once the task is terminal', async () => {
      await client.listTools(); // the SDK client decides from the listed taskSupport to call as a task
      const seen: number[] = [];
      let taskId = '';
      for await (const message of client.experimental.tasks.callToolStream({ name: 'slow', arguments: { ms: 300, steps: 3 } }, CallToolResultSchema, {
        onprogress: (progress) => seen.push(progress.progress),
      })) {
        if (message.type === 'taskCreated') taskId = message.task.taskId;
      }
      assert.deepEqual(seen, [1, 2, 3]);
      const task = (await client.experimental.tasks.getTask(taskId)) as unknown as WireTask;
      assert.equal(task.status, 'completed');
    });

    test('isError results make the task failed, and tasks/result still returns the result', async () => {
      const created = await createTask(client, 'fail_tool', { message: 'nope' });
      const failed = await untilStatus(client, created.task.taskId, ['failed']);
      assert.match(failed.statusMessage ?? '', /nope/);
      const result = (await client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema)) as { isError?: boolean };
      assert.equal(result.isError, true);
    });

    test('JSON-RPC errors make the task failed, and tasks/result returns that error unchanged', async () => {
      const created = await createTask(client, 'jsonrpc_error', {});
      await untilStatus(client, created.task.taskId, ['failed']);
      await assert.rejects(client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema), (e: { code: number; data: unknown }) => {
        assert.equal(e.code, -32042);
        assert.deepEqual(e.data, { why: 'fixture' });
        return true;
      });
    });

    test('cancel: cancelled before the answer, the upstream is told, it stays cancelled; cancelling again is -32602', async () => {
      const created = await createTask(client, 'slow', { ms: 2500 });
      await new Promise((resolve) => setTimeout(resolve, 200));
      const cancelled = (await client.experimental.tasks.cancelTask(created.task.taskId)) as unknown as WireTask;
      assert.equal(cancelled.status, 'cancelled');
      await assert.rejects(client.experimental.tasks.cancelTask(created.task.taskId), (e: { code: number }) => e.code === -32602);
      let seen: unknown[] = [];
      await eventually(async () => {
        seen = (JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} }))) as { cancelled: unknown[] }).cancelled;
        return seen.length > 0;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(((await client.experimental.tasks.getTask(created.task.taskId)) as unknown as WireTask).status, 'cancelled');
    });

    test('unknown task ids get -32602 with the spec\'s message', async () => {
      for (const call of [
        () => client.experimental.tasks.getTask('no-such-task'),
        () => client.experimental.tasks.getTaskResult('no-such-task', CallToolResultSchema),
        () => client.experimental.tasks.cancelTask('no-such-task'),
      ]) {
        await assert.rejects(call(), (e: { code: number; message: string }) => e.code === -32602 && /Task not found/.test(e.message));
      }
    });

    test('input during a task: input_required, requests carry related-task _meta, answers reach the upstream', async () => {
      const created = await createTask(client, 'ask_twice', {});
      const before = log.elicitations.length;
      const result = await client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
      assert.match(textOf(result), /answer to First question\?/);
      assert.match(textOf(result), /answer to Second question\?/);
      const asked = log.elicitations.slice(before) as { _meta?: Record<string, unknown> }[];
      assert.equal(asked.length, 2);
      for (const params of asked) assert.deepEqual(params._meta?.[RELATED], { taskId: created.task.taskId });
      // notifications/tasks/status reach the session on every transition (on its GET stream, so asynchronously).
      const statuses = (): string[] =>
        log.notifications
          .filter((n) => n.method === 'notifications/tasks/status' && (n.params as WireTask).taskId === created.task.taskId)
          .map((n) => (n.params as WireTask).status);
      await eventually(async () => statuses().at(-1) === 'completed');
      assert.ok(statuses().includes('input_required'), `statuses seen: ${statuses().join(',')}`);
    });

    test('input while the client listens nowhere: the task waits in input_required; its next tasks/result gets the requests', async () => {
      // A hand-written session with no GET stream (the SDK client opens one): the upstream's questions find no way
      // to the client, and must not fail the task ("no open stream") but wait for tasks/result, as the spec says.
      const wire = new SessionWire({ elicitation: {} });
      await wire.initialize(gateway.url);
      const taskId = createdTaskId(await wire.request(gateway.url, 'tools/call', { name: 'ask_twice', arguments: {}, task: {} }));
      await eventually(async () => ((await wire.request(gateway.url, 'tasks/get', { taskId })).result as WireTask).status === 'input_required', 10_000);
      const waiting = await wire.start(gateway.url, 'tasks/result', { taskId });
      const asked = await Promise.all(['First question?', 'Second question?'].map((question) => waiting.next((m) => m.method === 'elicitation/create' && (m.params as { message?: string }).message === question)));
      for (const request of asked) {
        assert.deepEqual(((request.params as { _meta?: Record<string, unknown> })._meta ?? {})[RELATED], { taskId });
        const field = (request.params as { message: string }).message.startsWith('First') ? 'first' : 'second';
        assert.equal(await wire.respond(gateway.url, request.id, { action: 'accept', content: { [field]: `wire ${field}` } }), 202);
      }
      const response = await waiting.next((m) => 'result' in m || 'error' in m);
      assert.match(textOf(response.result), /wire first/, JSON.stringify(response));
      assert.match(textOf(response.result), /wire second/, JSON.stringify(response));
      assert.equal(((await wire.request(gateway.url, 'tasks/get', { taskId })).result as WireTask).status, 'completed');
      await wire.end(gateway.url);
    });

    test('cancel while input_required: the task is cancelled at once and tasks/result answers with the cancellation', async (t) => {
      const waiting = await testScope(t).client(gateway.url);
      let unblock: () => void = () => undefined;
      const blocked = new Promise<void>((resolve) => (unblock = resolve));
      waiting.client.setRequestHandler(ElicitRequestSchema, async () => {
        await blocked;
        return { action: 'decline' };
      });
      const created = await createTask(waiting.client, 'ask_twice', {});
      const pendingResult = waiting.client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema).then(
        () => undefined,
        (error: Error) => error,
      );
      await untilStatus(waiting.client, created.task.taskId, ['input_required']);
      const cancelled = (await waiting.client.experimental.tasks.cancelTask(created.task.taskId)) as unknown as WireTask;
      assert.equal(cancelled.status, 'cancelled');
      const error = await pendingResult;
      assert.match(error?.message ?? 'tasks/result succeeded', /cancelled/);
      unblock();
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(((await waiting.client.experimental.tasks.getTask(created.task.taskId)) as unknown as WireTask).status, 'cancelled');
    });

    test('sampling during a task is relayed with related-task _meta', async () => {
      const created = await createTask(client, 'sample', { prompt: 'hello' });
      const before = log.samplings.length;
      const result = await client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
      assert.match(textOf(result), /sampled by the test client/);
      const asked = log.samplings.slice(before) as { _meta?: Record<string, unknown> }[];
      assert.equal(asked.length, 1);
      assert.deepEqual(asked[0]?._meta?.[RELATED], { taskId: created.task.taskId });
    });

    test('maxRunMs: a task that runs too long is failed with a message that says so', async () => {
      const created = await createTask(client, 'slow', { ms: 20_000 });
      const failed = await untilStatus(client, created.task.taskId, ['failed']);
      assert.match(failed.statusMessage ?? '', /maximum run time of 3000 ms/);
    });

    test('tasks/list: newest first, paginated, only this session\'s tasks', async (t) => {
      const mine = await testScope(t).client(gateway.url);
      const ids: string[] = [];
      for (let i = 0; i < 250; i++) ids.push((await createTask(mine.client, 'test_simple_text', {})).task.taskId);
      const listed: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await mine.client.experimental.tasks.listTasks(cursor);
        listed.push(...page.tasks.map((t) => t.taskId));
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      assert.deepEqual(listed, [...ids].reverse());
      await assert.rejects(mine.client.experimental.tasks.listTasks('forged.cursor'), (e: { code: number }) => e.code === -32602);
    });

    // The same gateway serves older revisions: its task rules apply to 2025-11-25 sessions only.
    test('older protocol revisions are served without tasks: 2025-06-18: no tasks capability, no taskSupport decoration, tasks/* not found, a task hint is ignored', async () => {
      const { request } = await import('undici');
      const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
      const post = async (body: unknown, extra: Record<string, string> = {}): Promise<{ headers: Record<string, unknown>; json: Record<string, unknown> }> => {
        const response = await request(gateway.url, { method: 'POST', headers: { ...headers, ...extra }, body: JSON.stringify(body) });
        const text = await response.body.text();
        const data = text.startsWith('{') ? text : (/^data: (\{.*\})$/m.exec(text)?.[1] ?? '{}');
        return { headers: response.headers, json: JSON.parse(data) as Record<string, unknown> };
      };
      const init = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'old', version: '1' } } });
      const session = { 'mcp-session-id': init.headers['mcp-session-id'] as string, 'mcp-protocol-version': '2025-06-18' };
      assert.equal(((init.json.result as Record<string, unknown>).capabilities as Record<string, unknown>).tasks, undefined);
      const tools = ((await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, session)).json.result as { tools: { name: string; execution?: { taskSupport?: string } }[] }).tools;
      // The upstream's own tool entry passes through; the gateway's policy ('required' here) is not applied.
      assert.notEqual(tools.find((t) => t.name === 'fail_tool')?.execution?.taskSupport, 'required');
      const get = await post({ jsonrpc: '2.0', id: 3, method: 'tasks/get', params: { taskId: 'x' } }, session);
      assert.equal((get.json.error as { code: number }).code, -32601);
      const call = await post({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'slow', arguments: { ms: 10 }, task: {} } }, session);
      assert.ok((call.json.result as Record<string, unknown>).content, 'answered synchronously');
    });
  });
}

describe('2025-11-25 tasks with Redis survive a gateway restart', () => {
  test('create, restart the gateway, fetch the result from a new session', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('streamable-http');
    const store = stores.redis!();
    const first = await scope.gateway({ store, upstreams: { fx: upstream.config }, tasks: TASK_RULES });
    const one = await scope.client(first.url);
    const created = await createTask(one.client, 'slow', { ms: 100 });
    await untilStatus(one.client, created.task.taskId, ['completed']);
    await one.client.close();
    await first.close();

    const second = await scope.gateway({ store, upstreams: { fx: upstream.config }, tasks: TASK_RULES });
    const two = await scope.client(second.url);
    const task = (await two.client.experimental.tasks.getTask(created.task.taskId)) as unknown as WireTask;
    assert.equal(task.status, 'completed');
    const result = await two.client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
    assert.ok(result.content.length > 0);
  });
});

describe('2025-11-25 tasks when the store is unreachable', () => {
  test('creating a task fails at once with an error saying the task store is unavailable; sync calls still work', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('streamable-http');
    const { freePort } = await import('../fixtures/spawn.js');
    const gateway = await scope.gateway({
      store: { type: 'redis', url: `redis://127.0.0.1:${await freePort()}` },
      upstreams: { fx: upstream.config },
      tasks: TASK_RULES,
    });
    const { client } = await scope.client(gateway.url);
    await assert.rejects(createTask(client, 'slow', { ms: 10 }), (e: { code: number; message: string }) => {
      assert.equal(e.code, -32603);
      assert.match(e.message, /task store is unavailable/);
      return true;
    });
    await assert.rejects(client.experimental.tasks.getTask('whatever'), /task store is unavailable/);
    const sync = await client.callTool({ name: 'slow', arguments: { ms: 10 } });
    assert.equal(sync.isError, undefined);
  });
});

describe('2025-11-25 task limits', () => {
  test('concurrency per tool: extra tasks wait in working with a status message saying they are queued', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('streamable-http');
    const gateway = await scope.gateway({
      upstreams: { fx: upstream.config },
      tasks: { defaults: { pollIntervalMs: 100 }, rules: [{ match: 'slow', concurrency: 1 }] },
    });
    const { client } = await scope.client(gateway.url);
    const first = await createTask(client, 'slow', { ms: 600 });
    const second = await createTask(client, 'slow', { ms: 50 });
    await eventually(async () => /Queued/.test(((await client.experimental.tasks.getTask(second.task.taskId)) as unknown as WireTask).statusMessage ?? ''));
    const queued = (await client.experimental.tasks.getTask(second.task.taskId)) as unknown as WireTask;
    assert.equal(queued.status, 'working');
    assert.match(queued.statusMessage ?? '', /tool 'slow' runs at most 1 at once/);
    assert.equal(((await client.experimental.tasks.getTask(first.task.taskId)) as unknown as WireTask).status, 'working');
    // Another tool is not held up.
    const other = await createTask(client, 'test_simple_text', {});
    await untilStatus(client, other.task.taskId, ['completed']);
    const done = await untilStatus(client, second.task.taskId, ['completed']);
    assert.equal(done.statusMessage, undefined);
    assert.equal(((await client.experimental.tasks.getTask(first.task.taskId)) as unknown as WireTask).status, 'completed');
  });

  test('concurrency per upstream (taskConcurrency), and a queued task can be cancelled', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('streamable-http');
    const gateway = await scope.gateway({ upstreams: { fx: { ...upstream.config, taskConcurrency: 1 } }, tasks: { defaults: { pollIntervalMs: 100 } } });
    const { client } = await scope.client(gateway.url);
    const running = await createTask(client, 'slow', { ms: 500 });
    const waiting = await createTask(client, 'test_simple_text', {});
    await eventually(async () => /upstream 'fx' runs at most 1 tasks at once/.test(((await client.experimental.tasks.getTask(waiting.task.taskId)) as unknown as WireTask).statusMessage ?? ''));
    const cancelled = (await client.experimental.tasks.cancelTask(waiting.task.taskId)) as unknown as WireTask;
    assert.equal(cancelled.status, 'cancelled');
    const next = await createTask(client, 'test_simple_text', {});
    await untilStatus(client, running.task.taskId, ['completed']);
    await untilStatus(client, next.task.taskId, ['completed']);
    assert.equal(((await client.experimental.tasks.getTask(waiting.task.taskId)) as unknown as WireTask).status, 'cancelled');
  });

  test('maxTasksPerPrincipal: one more unfinished task than allowed is refused with a clear error', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('streamable-http');
    const gateway = await scope.gateway({ upstreams: { fx: upstream.config }, tasks: { defaults: { maxTasksPerPrincipal: 2 } } });
    const { client } = await scope.client(gateway.url);
    const a = await createTask(client, 'slow', { ms: 2000 });
    await createTask(client, 'slow', { ms: 2000 });
    const full = /Too many unfinished tasks: clients without authentication \(counted together\) already have 2 \(maxTasksPerPrincipal: 2\)/;
    await assert.rejects(createTask(client, 'slow', { ms: 10 }), full);
    // Without auth every session is the same principal for the cap: a new session opens no new room.
    const otherClient = await scope.client(gateway.url);
    await assert.rejects(createTask(otherClient.client, 'slow', { ms: 10 }), full);
    await client.experimental.tasks.cancelTask(a.task.taskId);
    await createTask(otherClient.client, 'slow', { ms: 10 });
  });
});

describe('2025-11-25 tasks across a graceful shutdown', () => {
  test('a task still running when the gateway shuts down is failed with a message that says so', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('streamable-http');
    const store = stores.redis!();
    const first = await scope.gateway({ store, upstreams: { fx: upstream.config } });
    const one = await scope.client(first.url);
    const created = await createTask(one.client, 'slow', { ms: 10_000 });
    await first.close();
    const second = await scope.gateway({ store, upstreams: { fx: upstream.config } });
    const two = await scope.client(second.url);
    const task = (await two.client.experimental.tasks.getTask(created.task.taskId)) as unknown as WireTask;
    assert.equal(task.status, 'failed');
    assert.equal(task.statusMessage, 'The gateway shut down while the task was running');
    await assert.rejects(two.client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema), /shut down/);
  });
});
