// Finished results are bounded (issue 31, item 3), seen from outside: a gateway process on each store, the abusive
// fixture upstream (its `big_result` answers as many bytes as asked), SDK v1 clients for 2025-11-25 sessions and
// hand-written 2026-07-28 requests, two principals by API key. A result over tasks.maxResultBytes fails its task
// with a message saying so; a principal whose stored results fill its budget is refused new tasks with a retryable
// error (HTTP 503 + Retry-After) while another principal is served; deleting a result serves it again.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, CreateTaskResultSchema, EmptyResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { abusiveFixtureCommand, type GatewayChild } from '../fixtures/spawn.js';
import { eventually, suiteScope, textOf, type Json } from '../helpers/harness.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';
import { bearer } from '../helpers/auth-requests.js';
import { Redis } from 'ioredis';
import { TASK_OVERHEAD_BYTES } from '../../src/store/task-store.js';
import { redisPrefixMemory } from '../helpers/redis-memory.js';
import { sharedRedisStore, TEST_REDIS_URL } from '../helpers/shared-redis.js';

const ALICE = 'alice-key-0123456789abcdef';
const BOB = 'bob-key-0123456789abcdef';
const CAROL = 'carol-key-0123456789abcdef';
const DAVE = 'dave-key-0123456789abcdef';
/** The tiny-task flood's budget: some thirty tasks' overhead, nothing like a result's size. */
const FLOOD_BUDGET = 100 * 1024;
/**
 * What a flooding principal's tasks may hold in Redis beyond its budget (docs/limits.md): the task that filled it
 * ends after the check and adds its outcome, and a task's real cost is below TASK_OVERHEAD_BYTES but for the
 * ledgers' and listings' own keys, which a principal has once.
 */
const FLOOD_SLACK = 2 * TASK_OVERHEAD_BYTES;
/** Small budgets: two results of RESULT bytes fit a principal's budget, the third fills it. */
const MAX_RESULT = 200_000;
const PER_PRINCIPAL = 300_000;
const RESULT = 120_000;
const TOO_LARGE = /Task result too large: upstream 'abuse' answered \d+ bytes, more than tasks\.maxResultBytes \(200000 bytes\)/;
const FULL = /Your stored tasks and results fill tasks\.maxStoredBytesPerPrincipal \(\d+ of 300000 bytes stored\)/;

/** Starts a task of `big_result` answering `bytes` (2025-11-25, params.task) and returns its id. */
async function startTask(client: Client, bytes: number): Promise<string> {
  const created = await client.request({ method: 'tools/call', params: { name: 'big_result', arguments: { bytes }, task: {} } }, CreateTaskResultSchema);
  return created.task.taskId;
}

/** A task's result as tasks/result gives it (it waits for the end): the result's length, or the error's message. */
async function resultOf(client: Client, taskId: string): Promise<{ length: number } | { error: string }> {
  try {
    const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    return { length: textOf(result).length };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

/** A 2026-07-28 task's state once terminal, read with tasks/get. */
async function rev2026End(url: string, key: string, taskId: string): Promise<Json> {
  let task: Json = {};
  await eventually(async () => {
    task = (await sendRev2026(url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES, headers: bearer(key) })).result ?? {};
    return ['completed', 'failed', 'cancelled'].includes(String(task.status));
  }, 20_000);
  return task;
}

for (const kind of ['memory', 'redis'] as const) {
  describe(`stored results are bounded (${kind} store)`, () => {
    const scope = suiteScope();
    let gateway: GatewayChild;
    const client = async (key: string): Promise<Client> => scope.plainClient(gateway.url, { capabilities: { tasks: {} }, headers: bearer(key) });

    before(async () => {
      gateway = await scope.spawnGateway({
        config: {
          upstreams: { abuse: { transport: 'stdio', ...abusiveFixtureCommand() } },
          store: kind === 'redis' ? sharedRedisStore(scope, 'stored') : { type: 'memory' },
          auth: {
            resource: 'http://gateway.example/mcp',
            apiKeys: [{ principal: 'alice', key: ALICE }, { principal: 'bob', key: BOB }, { principal: 'carol', key: CAROL }],
          },
          tasks: {
            defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 },
            maxResultBytes: MAX_RESULT,
            maxStoredBytesPerPrincipal: PER_PRINCIPAL,
            maxStoredBytes: 64 * 1024 * 1024,
          },
        },
      });
    });

    test('a result over tasks.maxResultBytes fails its task with a message saying so, in both revisions; one under it is stored', async () => {
      const carol = await client(CAROL);
      const big = await startTask(carol, MAX_RESULT + 50_000);
      const answer = await resultOf(carol, big);
      assert.ok('error' in answer && TOO_LARGE.test(answer.error), JSON.stringify(answer));
      const task = await carol.experimental.tasks.getTask(big);
      assert.equal(task.status, 'failed');
      assert.match(String(task.statusMessage), TOO_LARGE);
      const fits = await startTask(carol, 1000);
      assert.deepEqual(await resultOf(carol, fits), { length: 1000 });

      const created = await sendRev2026(gateway.url, 'tools/call', { name: 'big_result', arguments: { bytes: MAX_RESULT + 50_000 } }, { capabilities: TASKS_CAPABILITIES, headers: bearer(CAROL) });
      assert.equal(created.result?.resultType, 'task', JSON.stringify(created.response));
      const ended = await rev2026End(gateway.url, CAROL, String(created.result?.taskId));
      assert.equal(ended.status, 'failed');
      assert.match(String((ended.error as Json | undefined)?.message), TOO_LARGE);
      assert.equal(ended.result, undefined, 'nothing of the result was kept');
    });

    test('at its budget a principal is refused new tasks (503, Retry-After, the budget named) while another is served; a deleted result makes room', async () => {
      const alice = await client(ALICE);
      const stored: string[] = [];
      // Three results: the first two leave room, the third fills the budget (a running task may always end).
      for (let i = 0; i < 3; i++) {
        const taskId = await startTask(alice, RESULT);
        assert.deepEqual(await resultOf(alice, taskId), { length: RESULT });
        stored.push(taskId);
      }
      await assert.rejects(startTask(alice, 10), (error: Error & { code?: unknown }) => {
        assert.equal(error.code, 503, 'the SDK\'s StreamableHTTPError carries the HTTP status');
        assert.match(error.message, FULL);
        return true;
      });
      const refused = await sendRev2026(gateway.url, 'tools/call', { name: 'big_result', arguments: { bytes: 10 } }, { capabilities: TASKS_CAPABILITIES, headers: bearer(ALICE) });
      assert.equal(refused.status, 503, JSON.stringify(refused.response));
      assert.match(String(refused.error?.message), FULL);
      assert.equal(refused.error?.data?.budget, 'tasks.maxStoredBytesPerPrincipal');
      assert.ok(Number(refused.headers['retry-after']) > 0, `Retry-After: ${String(refused.headers['retry-after'])}`);
      // What she stored is still there (kept until its TTL), and a plain call stores nothing, so it is served.
      assert.deepEqual(await resultOf(alice, stored[0] as string), { length: RESULT });
      const plain = await alice.callTool({ name: 'echo', arguments: { text: 'still served' } });
      assert.match(textOf(plain), /still served/);

      // Another principal is served meanwhile, in both revisions.
      const bob = await client(BOB);
      assert.deepEqual(await resultOf(bob, await startTask(bob, RESULT)), { length: RESULT });
      const bobs = await sendRev2026(gateway.url, 'tools/call', { name: 'big_result', arguments: { bytes: 100 } }, { capabilities: TASKS_CAPABILITIES, headers: bearer(BOB) });
      assert.equal(bobs.result?.resultType, 'task', JSON.stringify(bobs.response));
      assert.equal((await rev2026End(gateway.url, BOB, String(bobs.result?.taskId))).status, 'completed');

      // tasks/delete: another principal's task is unknown to her; her own goes, and frees its bytes.
      const bobsTask = await startTask(bob, 10);
      await resultOf(bob, bobsTask);
      await assert.rejects(alice.request({ method: 'tasks/delete', params: { taskId: bobsTask } }, EmptyResultSchema), /Task not found/);
      assert.deepEqual(await alice.request({ method: 'tasks/delete', params: { taskId: stored[0] as string } }, EmptyResultSchema), {});
      await assert.rejects(alice.experimental.tasks.getTask(stored[0] as string), /Task not found/);
      const again = await startTask(alice, 10);
      assert.deepEqual(await resultOf(alice, again), { length: 10 });
    });
  });
}

for (const kind of ['memory', 'redis'] as const) {
  describe(`a flood of tiny keyed tasks is bounded by the stored budget (${kind} store)`, () => {
    const scope = suiteScope();
    let gateway: GatewayChild;
    let prefix = '';

    before(async () => {
      const store = kind === 'redis' ? sharedRedisStore(scope, 'flood') : { type: 'memory' as const };
      if (store.type === 'redis') prefix = store.prefix;
      gateway = await scope.spawnGateway({
        config: {
          upstreams: { abuse: { transport: 'stdio', ...abusiveFixtureCommand() } },
          store,
          auth: { resource: 'http://gateway.example/mcp', apiKeys: [{ principal: 'dave', key: DAVE }, { principal: 'bob', key: BOB }] },
          tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 }, maxStoredBytesPerPrincipal: FLOOD_BUDGET },
        },
      });
    });

    test('tasks of a few bytes each are refused once their records fill the budget (not hundreds of budgets later); keyed resends still answer; the store holds the budget plus a task', async () => {
      const redis = kind === 'redis' ? new Redis(TEST_REDIS_URL) : undefined;
      scope.defer(() => redis?.quit());
      const before = redis === undefined ? undefined : await redisPrefixMemory(redis, prefix);
      const keyed = (key: string) => ({ ...bearer(DAVE), 'idempotency-key': `"${key}"` });
      const accepted: string[] = [];
      let refused: Awaited<ReturnType<typeof sendRev2026>> | undefined;
      // Before this budget counted records, 10x its size in tasks went in; now about budget / overhead do.
      const most = Math.ceil(FLOOD_BUDGET / TASK_OVERHEAD_BYTES) + 1;
      for (let i = 0; i < 10 * most && refused === undefined; i++) {
        const answer = await sendRev2026(gateway.url, 'tools/call', { name: 'echo', arguments: { text: `t${i}` } }, { capabilities: TASKS_CAPABILITIES, headers: keyed(`flood-${i}`) });
        if (answer.status === 503) refused = answer;
        else {
          assert.equal(answer.result?.resultType, 'task', JSON.stringify(answer.response));
          accepted.push(String(answer.result?.taskId));
        }
      }
      assert.ok(refused !== undefined, `refused within ${10 * most} tasks`);
      assert.ok(accepted.length <= most && accepted.length >= most - 2, `${accepted.length} tasks went in (${most} at most)`);
      assert.match(String(refused.error?.message), /Your stored tasks and results fill tasks\.maxStoredBytesPerPrincipal/);
      assert.equal(refused.error?.data?.budget, 'tasks.maxStoredBytesPerPrincipal');
      assert.ok(Number(refused.headers['retry-after']) > 0);
      for (const taskId of accepted) assert.equal((await rev2026End(gateway.url, DAVE, taskId)).status, 'completed');
      // A keyed resend is answered with the task its key made, full or not: nothing new is stored for it.
      const resent = await sendRev2026(gateway.url, 'tools/call', { name: 'echo', arguments: { text: 't0' } }, { capabilities: TASKS_CAPABILITIES, headers: keyed('flood-0') });
      assert.equal(resent.result?.taskId, accepted[0], JSON.stringify(resent.response));
      if (redis !== undefined && before !== undefined) {
        const after = await redisPrefixMemory(redis, prefix);
        const held = after.bytes - before.bytes;
        assert.ok(held <= FLOOD_BUDGET + FLOOD_SLACK, `the flood holds ${held} bytes in Redis (${after.keys - before.keys} keys), budget ${FLOOD_BUDGET} + ${FLOOD_SLACK}`);
      }
      // Another principal is served; a deleted task makes room again.
      const bobs = await sendRev2026(gateway.url, 'tools/call', { name: 'echo', arguments: { text: 'bob' } }, { capabilities: TASKS_CAPABILITIES, headers: bearer(BOB) });
      assert.equal(bobs.result?.resultType, 'task', JSON.stringify(bobs.response));
      const dave = await scope.plainClient(gateway.url, { capabilities: { tasks: {} }, headers: bearer(DAVE) });
      assert.deepEqual(await dave.request({ method: 'tasks/delete', params: { taskId: accepted[1] as string } }, EmptyResultSchema), {});
      const again = await sendRev2026(gateway.url, 'tools/call', { name: 'echo', arguments: { text: 'again' } }, { capabilities: TASKS_CAPABILITIES, headers: keyed('flood-again') });
      assert.equal(again.result?.resultType, 'task', JSON.stringify(again.response));
    });
  });
}

describe('stored results without auth: every client is counted together, as for unfinished tasks', () => {
  const scope = suiteScope();
  let gateway: GatewayChild;

  before(async () => {
    gateway = await scope.spawnGateway({
      config: {
        upstreams: { abuse: { transport: 'stdio', ...abusiveFixtureCommand() } },
        tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 }, maxResultBytes: MAX_RESULT, maxStoredBytesPerPrincipal: PER_PRINCIPAL },
      },
    });
  });

  test('one session fills the budget; a new session is refused too, and a 2026-07-28 client; a delete makes room for all', async () => {
    const first = await scope.plainClient(gateway.url, { capabilities: { tasks: {} } });
    const stored: string[] = [];
    for (let i = 0; i < 3; i++) {
      const taskId = await startTask(first, RESULT);
      assert.deepEqual(await resultOf(first, taskId), { length: RESULT });
      stored.push(taskId);
    }
    const together = /Stored tasks and results of clients without authentication \(counted together\) fill tasks\.maxStoredBytesPerPrincipal/;
    const second = await scope.plainClient(gateway.url, { capabilities: { tasks: {} } });
    await assert.rejects(startTask(second, 10), together);
    const refused = await sendRev2026(gateway.url, 'tools/call', { name: 'big_result', arguments: { bytes: 10 } }, { capabilities: TASKS_CAPABILITIES });
    assert.equal(refused.status, 503);
    assert.match(String(refused.error?.message), together);
    await first.request({ method: 'tasks/delete', params: { taskId: stored[0] as string } }, EmptyResultSchema);
    assert.deepEqual(await resultOf(second, await startTask(second, 10)), { length: 10 });
  });
});
