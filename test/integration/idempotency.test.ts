// Retry-safe task creation and deleting tasks (issue 34), from outside: two gateway replicas on one Redis in front
// of one HTTP upstream that counts its slow_compute runs per label, two API-key principals. A call repeated with
// the same idempotency key (header, the gateway's `_meta` key, or SEP-1686's client-chosen task id) on either
// replica yields one task and one upstream run; tasks/delete and the task_delete tool remove an ended task on
// every replica.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { eventually, fixtureExecutions, suiteScope, type Json, type TestGateway } from '../helpers/harness.js';
import { bearer, INITIALIZE, post } from '../helpers/auth-requests.js';
import { twoReplicas } from '../helpers/replicas.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';

const ALICE_KEY = 'alice-key-idempotency-0123456789';
const BOB_KEY = 'bob-key-idempotency-0123456789ab';
const OWN_META = 'taskgate/idempotency-key';
const SEP1686_META = 'modelcontextprotocol.io/task';

/** A 2025-11-25 session of one principal, spoken by hand so that each request may go to either replica with any header. */
class Session {
  private nextId = 10;

  private constructor(
    private readonly key: string,
    private readonly sessionId: string,
  ) {}

  static async open(url: string, key: string): Promise<Session> {
    const opened = await post(url, INITIALIZE, bearer(key));
    const sessionId = opened.headers.get('mcp-session-id');
    assert.ok(sessionId, JSON.stringify(opened.json));
    const session = new Session(key, sessionId);
    await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, session.headers());
    return session;
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...bearer(this.key), 'mcp-session-id': this.sessionId, 'mcp-protocol-version': '2025-11-25', ...extra };
  }

  /** The JSON-RPC response to one request (answered as plain JSON: these requests do not stream). */
  async request(url: string, method: string, params: Json, headers: Record<string, string> = {}): Promise<Json> {
    const answer = await post(url, { jsonrpc: '2.0', id: this.nextId++, method, params }, this.headers(headers));
    assert.ok(answer.json !== undefined, `${method}: HTTP ${answer.status} without JSON`);
    return answer.json;
  }

  /** A task-augmented slow_compute call; the response as it came. */
  createTask(url: string, args: Json, headers: Record<string, string> = {}, meta?: Json): Promise<Json> {
    return this.request(url, 'tools/call', { name: 'slow_compute', arguments: args, task: {}, ...(meta === undefined ? {} : { _meta: meta }) }, headers);
  }

  async status(url: string, taskId: string): Promise<string | undefined> {
    const answer = await this.request(url, 'tasks/get', { taskId });
    return (answer.result as Json | undefined)?.status as string | undefined;
  }
}

function taskIdOf(response: Json): string {
  const task = (response.result as Json | undefined)?.task as Json | undefined;
  assert.ok(typeof task?.taskId === 'string', JSON.stringify(response));
  return task.taskId;
}

function idempotencyKey(key: string): Record<string, string> {
  return { 'idempotency-key': `"${key}"` };
}

describe('retry-safe task creation: one idempotency key, one task, one upstream run', () => {
  const scope = suiteScope();
  let a: TestGateway;
  let b: TestGateway;
  let upstreamUrl: string;
  let alice: Session;
  let bob: Session;

  before(async () => {
    const upstream = await scope.upstream('streamable-http');
    upstreamUrl = upstream.config.url as string;
    [a, b] = await twoReplicas(scope, {
      upstreams: { fx: upstream.config },
      tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100, plainCalls: 'background' }, taskTools: { enabled: true } },
      auth: { resource: 'http://gateway.example/mcp', apiKeys: [{ principal: 'alice', key: ALICE_KEY }, { principal: 'bob', key: BOB_KEY }] },
    }, 'idempotency');
    alice = await Session.open(a.url, ALICE_KEY);
    bob = await Session.open(a.url, BOB_KEY);
  });

  const runs = async (label: string): Promise<number> => (await fixtureExecutions(upstreamUrl))[label] ?? 0;
  const completedOn = (session: Session, url: string, taskId: string): Promise<void> =>
    eventually(async () => (await session.status(url, taskId)) === 'completed', 10_000);

  test('2025-11-25: the same Idempotency-Key on either replica answers with the first task; the tool ran once', async () => {
    const args = { seconds: 0.3, label: 'idem-rev2025' };
    const first = taskIdOf(await alice.createTask(a.url, args, idempotencyKey('rev2025-1')));
    const again = taskIdOf(await alice.createTask(a.url, args, idempotencyKey('rev2025-1')));
    const elsewhere = taskIdOf(await alice.createTask(b.url, args, idempotencyKey('rev2025-1')));
    assert.equal(again, first);
    assert.equal(elsewhere, first);
    await completedOn(alice, b.url, first);
    // Asked once more after the end: still the same task (completed), still one run.
    const late = await alice.createTask(b.url, args, idempotencyKey('rev2025-1'));
    assert.equal(taskIdOf(late), first);
    assert.equal(((late.result as Json).task as Json).status, 'completed');
    assert.equal(await runs('idem-rev2025'), 1);
  });

  test('another principal\'s same key is its own: a task of its own, run on its own', async () => {
    const args = { seconds: 0.1, label: 'idem-principals' };
    const alices = taskIdOf(await alice.createTask(a.url, args, idempotencyKey('shared-key')));
    const bobs = taskIdOf(await bob.createTask(b.url, args, idempotencyKey('shared-key')));
    assert.notEqual(bobs, alices);
    await completedOn(alice, a.url, alices);
    await completedOn(bob, a.url, bobs);
    assert.equal(await runs('idem-principals'), 2);
    // Neither sees the other's: bob's key did not reach alice's task.
    assert.match(String(((await bob.request(a.url, 'tasks/get', { taskId: alices })).error as Json | undefined)?.message), /Task not found/);
  });

  test('the same key with other arguments (or another tool) is -32602, and runs nothing', async () => {
    const first = taskIdOf(await alice.createTask(a.url, { seconds: 0.1, label: 'idem-args' }, idempotencyKey('args-key')));
    const other = await alice.createTask(b.url, { seconds: 0.1, label: 'idem-args-other' }, idempotencyKey('args-key'));
    assert.equal((other.error as Json | undefined)?.code, -32602, JSON.stringify(other));
    assert.match(String((other.error as Json).message), /idempotency key was already used for a different call/);
    // Key order in the arguments is not a difference.
    assert.equal(taskIdOf(await alice.createTask(b.url, { label: 'idem-args', seconds: 0.1 }, idempotencyKey('args-key'))), first);
    await completedOn(alice, a.url, first);
    assert.equal(await runs('idem-args-other'), 0);
    assert.equal(await runs('idem-args'), 1);
  });

  test('callers that cannot set headers: the gateway\'s _meta key and SEP-1686\'s client-chosen task id are the same key', async () => {
    const args = { seconds: 0.1, label: 'idem-meta' };
    const chosen = 'c9a6c7c4-5f55-4f5e-9d0b-0c6b8b0f4a11';
    const seeded = taskIdOf(await alice.createTask(a.url, args, {}, { [SEP1686_META]: { taskId: chosen } }));
    assert.notEqual(seeded, chosen, 'task ids stay the gateway\'s own');
    assert.equal(taskIdOf(await alice.createTask(b.url, args, {}, { [OWN_META]: chosen })), seeded);
    assert.equal(taskIdOf(await alice.createTask(b.url, args, idempotencyKey(chosen))), seeded);
    await completedOn(alice, a.url, seeded);
    assert.equal(await runs('idem-meta'), 1);
    const conflicting = await alice.createTask(a.url, args, idempotencyKey('one'), { [OWN_META]: 'another' });
    assert.equal((conflicting.error as Json | undefined)?.code, -32602);
    assert.match(String((conflicting.error as Json).message), /name different idempotency keys/);
  });

  test('malformed and oversized keys are refused with a message that says what a key looks like', async () => {
    for (const [value, why] of [
      ['two words', /unexpected " words" after the key/],
      ['"open', /closing double quote is missing/],
      ['""', /must not be empty/],
      [`"${'k'.repeat(256)}"`, /at most 255/],
      ['"a", "b"', /unexpected/],
    ] as const) {
      const refused = await alice.createTask(a.url, { seconds: 0, label: 'idem-malformed' }, { 'idempotency-key': value });
      assert.equal((refused.error as Json | undefined)?.code, -32602, value);
      assert.match(String((refused.error as Json).message), why, value);
    }
    const accepted = await alice.createTask(a.url, { seconds: 0, label: 'idem-params' }, { 'idempotency-key': '"with-params";created=1;by="me"' });
    await completedOn(alice, a.url, taskIdOf(accepted));
    assert.equal(await runs('idem-malformed'), 0);
  });

  test('a bare-token Idempotency-Key (as Stripe-style clients send it) is the same key as its quoted form', async () => {
    const args = { seconds: 0.1, label: 'idem-bare' };
    const bare = taskIdOf(await alice.createTask(a.url, args, { 'idempotency-key': 'abc-bare-1' }));
    assert.equal(taskIdOf(await alice.createTask(b.url, args, { 'idempotency-key': '"abc-bare-1"' })), bare);
    assert.equal(taskIdOf(await alice.createTask(b.url, args, { 'idempotency-key': ' abc-bare-1;v=1' })), bare);
    // A UUID, which RFC 8941 would not read as a token (it starts with a digit).
    const uuid = '0b1c6f2e-8d7a-4c55-9e21-3f4a5b6c7d8e';
    const keyed = taskIdOf(await alice.createTask(a.url, args, { 'idempotency-key': uuid }));
    assert.equal(taskIdOf(await alice.createTask(b.url, args, idempotencyKey(uuid))), keyed);
    await completedOn(alice, a.url, bare);
    await completedOn(alice, a.url, keyed);
    assert.equal(await runs('idem-bare'), 2);
  });

  test('2026-07-28 (Tasks extension): the same key on either replica is one task and one run', async () => {
    const call = (url: string): ReturnType<typeof sendRev2026> =>
      sendRev2026(url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0.3, label: 'idem-rev2026' } }, { capabilities: TASKS_CAPABILITIES, headers: { ...bearer(ALICE_KEY), ...idempotencyKey('rev2026-1') } });
    const first = await call(a.url);
    assert.equal(first.result?.resultType, 'task', JSON.stringify(first.messages));
    const again = await call(b.url);
    assert.equal(again.result?.taskId, first.result?.taskId);
    await completedOn(alice, a.url, String(first.result?.taskId));
    assert.equal(await runs('idem-rev2026'), 1);
  });

  test('plain callers under plainCalls: background: the same key names the same background task', async () => {
    const call = (url: string): ReturnType<typeof sendRev2026> =>
      sendRev2026(url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0.3, label: 'idem-background' } }, { headers: { ...bearer(ALICE_KEY), ...idempotencyKey('background-1') } });
    const taskOf = (answer: Json | undefined): unknown => ((answer?._meta as Json | undefined)?.['io.modelcontextprotocol/related-task'] as Json | undefined)?.taskId;
    const first = await call(a.url);
    const taskId = taskOf(first.result);
    assert.ok(typeof taskId === 'string', JSON.stringify(first.messages));
    assert.equal(taskOf((await call(b.url)).result), taskId);
    await completedOn(alice, a.url, taskId);
    assert.equal(await runs('idem-background'), 1);
  });

  test('tasks/delete across replicas: made on A, deleted on B, gone on A; a running task must be cancelled first; another\'s is unknown', async () => {
    const args = { seconds: 0.1, label: 'idem-delete' };
    const taskId = taskIdOf(await alice.createTask(a.url, args, idempotencyKey('delete-me')));
    await completedOn(alice, a.url, taskId);
    const foreign = await bob.request(b.url, 'tasks/delete', { taskId });
    assert.equal((foreign.error as Json | undefined)?.code, -32602);
    assert.match(String((foreign.error as Json).message), /Task not found/);
    assert.deepEqual((await alice.request(b.url, 'tasks/delete', { taskId })).result, {});
    const gone = await alice.request(a.url, 'tasks/get', { taskId });
    assert.match(String((gone.error as Json | undefined)?.message), /Task not found/);
    // The key is retired with its task: its id never serves a new task (issue 39), for the same call or another,
    // on either replica, in either revision; nothing runs.
    for (const [url, callArgs] of [[a.url, args], [b.url, { seconds: 0.1, label: 'idem-delete-other' }]] as const) {
      const reused = await alice.createTask(url, callArgs, idempotencyKey('delete-me'));
      assert.equal((reused.error as Json | undefined)?.code, -32602, JSON.stringify(reused));
      assert.match(String((reused.error as Json).message), /this idempotency key's task was deleted, and its id is never used for another task; use a new key/);
    }
    const rev2026Reuse = await sendRev2026(b.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0.1, label: 'idem-delete-other' } }, { capabilities: TASKS_CAPABILITIES, headers: { ...bearer(ALICE_KEY), ...idempotencyKey('delete-me') } });
    assert.equal(rev2026Reuse.error?.code, -32602, JSON.stringify(rev2026Reuse.messages));
    assert.match(String(rev2026Reuse.error?.message), /task was deleted/);
    assert.equal(await runs('idem-delete'), 1);
    assert.equal(await runs('idem-delete-other'), 0);
    // A new key is a new task, with an id of its own.
    const remade = taskIdOf(await alice.createTask(a.url, args, idempotencyKey('delete-me-2')));
    assert.notEqual(remade, taskId);
    await completedOn(alice, b.url, remade);
    assert.equal(await runs('idem-delete'), 2);
    assert.equal((await alice.request(b.url, 'tasks/list', {})).result !== undefined, true);

    const running = taskIdOf(await alice.createTask(a.url, { seconds: 30, label: 'idem-delete-running' }));
    const refused = await alice.request(b.url, 'tasks/delete', { taskId: running });
    assert.equal((refused.error as Json | undefined)?.code, -32602);
    assert.match(String((refused.error as Json).message), /still running; cancel it first/);
    await alice.request(b.url, 'tasks/cancel', { taskId: running });
    assert.deepEqual((await alice.request(a.url, 'tasks/delete', { taskId: running })).result, {});
  });

  test('task_delete, for hosts without tasks: the same rules through a tool', async () => {
    const tool = async (url: string, session: Session, name: string, args: Json): Promise<Json> => (await session.request(url, 'tools/call', { name, arguments: args })).result as Json;
    const listed = ((await alice.request(a.url, 'tools/list', {})).result as Json).tools as Json[];
    const definition = listed.find((t) => t.name === 'taskgate_task_delete');
    assert.ok(definition !== undefined, listed.map((t) => t.name).join(', '));
    assert.equal((definition.annotations as Json).destructiveHint, true);

    const running = taskIdOf(await alice.createTask(a.url, { seconds: 30, label: 'idem-tool-running' }));
    const refused = await tool(b.url, alice, 'taskgate_task_delete', { taskId: running });
    assert.equal(refused.isError, true);
    assert.match(String((refused.content as Json[])[0]?.text), /still running: cancel it first with taskgate_task_cancel/);
    await tool(b.url, alice, 'taskgate_task_cancel', { taskId: running });

    const foreign = await tool(a.url, bob, 'taskgate_task_delete', { taskId: running });
    assert.equal(foreign.isError, true);
    assert.match(String((foreign.content as Json[])[0]?.text), /There is no task/);

    const deleted = await tool(a.url, alice, 'taskgate_task_delete', { taskId: running });
    assert.deepEqual(deleted.structuredContent, { taskId: running, deleted: true });
    const after = await tool(b.url, alice, 'taskgate_task_status', { taskId: running });
    assert.equal(after.isError, true);
    assert.match(String((after.content as Json[])[0]?.text), /There is no task/);
  });
});

describe('a deleted keyed hold: the same key never makes another hold with the same id (issue 39, finding 3)', () => {
  const scope = suiteScope();

  test('call under key K (held for approval), cancel, tasks/delete, K with new arguments: refused; the approver\'s decision about the old id runs nothing', async () => {
    const upstream = await scope.upstream('streamable-http');
    const upstreamUrl = upstream.config.url as string;
    const [a, b] = await twoReplicas(scope, {
      upstreams: { fx: upstream.config },
      tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 }, rules: [{ match: 'slow_compute', approval: { approvers: ['bob'], timeoutMs: 600_000 } }] },
      auth: { resource: 'http://gateway.example/mcp', apiKeys: [{ principal: 'alice', key: ALICE_KEY }, { principal: 'bob', key: BOB_KEY }] },
    }, 'idempotency-holds');
    const alice = await Session.open(a.url, ALICE_KEY);
    const seen = taskIdOf(await alice.createTask(a.url, { seconds: 0, label: 'held-version-1.2.3' }, idempotencyKey('release-key')));
    // The approver looks at the hold (its id and arguments).
    const listing = (await (await fetch(`${b.origin}/approvals`, { headers: bearer(BOB_KEY) })).json()) as Json;
    assert.ok(JSON.stringify(listing).includes(seen), JSON.stringify(listing));
    // The requester cancels, deletes, and sends the same key with other arguments.
    await alice.request(b.url, 'tasks/cancel', { taskId: seen });
    assert.deepEqual((await alice.request(a.url, 'tasks/delete', { taskId: seen })).result, {});
    const swapped = await alice.createTask(b.url, { seconds: 0, label: 'held-version-6.6.6-drop-all-tables' }, idempotencyKey('release-key'));
    assert.equal((swapped.error as Json | undefined)?.code, -32602, JSON.stringify(swapped));
    assert.match(String((swapped.error as Json).message), /task was deleted/);
    // The approver's approve of the id they saw: nothing there to run.
    const decided = await fetch(`${a.origin}/approvals/${encodeURIComponent(seen)}`, { method: 'POST', headers: { 'content-type': 'application/json', ...bearer(BOB_KEY) }, body: JSON.stringify({ decision: 'approve' }) });
    assert.notEqual(decided.status, 200, await decided.text());
    const counts = await fixtureExecutions(upstreamUrl);
    assert.equal(counts['held-version-6.6.6-drop-all-tables'] ?? 0, 0);
    assert.equal(counts['held-version-1.2.3'] ?? 0, 0);
  });
});
