// Durable human approval for chosen tools (issue 34): calls to `slow_compute` are held until an approver decides,
// through GET/POST /approvals on any replica. Two gateway processes share one Redis and one upstream fixture (an
// HTTP server that counts the calls it starts, per label), so "the upstream never saw it" and "it ran once" are
// read off the upstream itself. Every wait is for an answer or a state, bounded by the test's own timeout.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { spawnFixture, spawnGateway, type FixtureChild, type GatewayChild } from '../fixtures/spawn.js';
import { eventually, fixtureExecutions, type Json } from '../helpers/harness.js';
import { modern, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';
import { redisTestPrefix, TEST_REDIS_URL } from '../helpers/shared-redis.js';
import { SessionWire } from '../helpers/session-wire.js';

const PREFIX = redisTestPrefix('approvals');
const LEASE_MS = 1000;
const KEYS: Record<string, string> = Object.fromEntries(['alice', 'bob', 'carol', 'mallory'].map((name) => [name, `${name}-key-0123456789abcdef`] as const));
const RESOURCE = 'http://127.0.0.1/mcp';

function bearer(who: string): Record<string, string> {
  return { authorization: `Bearer ${KEYS[who] ?? ''}` };
}

function config(fixtureUrl: string, store: Json, approval: Json, extra: Json = {}): Json {
  return {
    store,
    upstreams: { fx: { url: fixtureUrl } },
    auth: {
      resource: RESOURCE,
      apiKeys: Object.entries(KEYS).map(([principal, key]) => ({ principal, key, ...(principal === 'carol' ? { scopes: ['approve'] } : {}) })),
    },
    tasks: {
      defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 },
      rules: [{ match: 'slow_compute', approval }],
    },
    replicas: { leaseMs: LEASE_MS, drainTimeoutMs: 0 },
    ...extra,
  };
}

/** A task-capable 2026-07-28 call to slow_compute as `who`: the held task. */
async function heldTask(url: string, who: string, label: string): Promise<Json> {
  const created = await modern(url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label } }, { capabilities: TASKS_CAPABILITIES, headers: bearer(who) });
  assert.equal(created.result?.resultType, 'task', JSON.stringify(created.messages));
  return created.result as Json;
}

async function taskOn(url: string, who: string, taskId: string): Promise<Json> {
  const r = await modern(url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES, headers: bearer(who) });
  assert.ok(r.result !== undefined, JSON.stringify(r.messages));
  return r.result;
}

async function settled(url: string, who: string, taskId: string): Promise<Json> {
  let task: Json = {};
  await eventually(async () => {
    task = await taskOn(url, who, taskId);
    return task.status !== 'working';
  }, 15_000);
  return task;
}

async function listApprovals(baseUrl: string, who: string): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${baseUrl}/approvals`, { headers: bearer(who) });
  return { status: response.status, body: (await response.json()) as Json };
}

async function decide(baseUrl: string, who: string, taskId: string, body: Json, headers: Record<string, string> = {}): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${baseUrl}/approvals/${encodeURIComponent(taskId)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...bearer(who), ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Json };
}

/** How many times the upstream fixture started slow_compute with `label` (across every replica's connection). */
async function executions(fixture: FixtureChild, label: string): Promise<number> {
  return (await fixtureExecutions(urlOf(fixture)))[label] ?? 0;
}

function urlOf(fixture: FixtureChild): string {
  assert.ok(fixture.url !== undefined, 'an HTTP fixture has a URL');
  return fixture.url;
}

/** A 2025-11-25 session that authenticates as `who`. */
class KeyedWire extends SessionWire {
  constructor(
    private readonly who: string,
    capabilities: Json,
  ) {
    super(capabilities);
  }

  override headers(extra: Record<string, string> = {}): Record<string, string> {
    return super.headers({ ...bearer(this.who), ...extra });
  }
}

describe('approvals across two replicas on one Redis', () => {
  let fixture: FixtureChild;
  let a: GatewayChild;
  let b: GatewayChild;
  const approval = { approvers: ['bob', 'alice'], scopes: ['approve'], timeoutMs: 600_000 };

  before(async () => {
    fixture = await spawnFixture({ transport: 'streamable-http' });
    const store = { type: 'redis', url: TEST_REDIS_URL, prefix: PREFIX };
    a = await spawnGateway({ config: config(urlOf(fixture), store, approval) });
    b = await spawnGateway({ config: config(urlOf(fixture), store, approval) });
  });

  after(async () => {
    await a?.kill();
    await b?.kill();
    await fixture?.kill();
  });

  test('held on one replica, approved on the other: working and saying whom it waits for, then run once with the approved arguments', async () => {
    const created = await heldTask(a.url, 'alice', 'approve-across');
    assert.equal(created.status, 'working');
    assert.match(String(created.statusMessage), /Waiting for approval by bob, alice, scope approve until \d{4}-/);
    assert.equal(await executions(fixture, 'approve-across'), 0);

    const listed = await listApprovals(b.baseUrl, 'bob');
    assert.equal(listed.status, 200);
    const entry = (listed.body.approvals as Json[]).find((x) => x.taskId === created.taskId);
    assert.ok(entry !== undefined, JSON.stringify(listed.body));
    assert.equal(entry.tool, 'slow_compute');
    assert.equal(entry.upstream, 'fx');
    assert.equal(entry.principal, 'key:alice');
    assert.deepEqual(entry.arguments, { seconds: 0, label: 'approve-across' });
    assert.equal(typeof entry.deadlineMs, 'number');
    assert.equal(typeof entry.ageMs, 'number');

    const decided = await decide(b.baseUrl, 'bob', String(created.taskId), { decision: 'approve', comment: 'fine' });
    assert.equal(decided.status, 200, JSON.stringify(decided.body));
    const record = decided.body.approval as Json;
    assert.equal(record.status, 'approved');
    assert.equal(record.decidedBy, 'key:bob');
    assert.equal(record.comment, 'fine');

    const done = await settled(a.url, 'alice', String(created.taskId));
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.deepEqual((done.result as Json).structuredContent, { seconds: 0, label: 'approve-across' });
    assert.equal(await executions(fixture, 'approve-across'), 1);

    // Decided once: the other replica's late decision is refused.
    const again = await decide(a.baseUrl, 'carol', String(created.taskId), { decision: 'deny' });
    assert.equal(again.status, 409, JSON.stringify(again.body));
  });

  test('denied: the task fails naming the denial and the comment, and the upstream never sees the call', async () => {
    const created = await heldTask(a.url, 'alice', 'deny');
    const denied = await decide(b.baseUrl, 'carol', String(created.taskId), { decision: 'deny', comment: 'not on a Friday' });
    assert.equal(denied.status, 200, JSON.stringify(denied.body));
    assert.equal((denied.body.approval as Json).status, 'denied');
    const failed = await settled(a.url, 'alice', String(created.taskId));
    assert.equal(failed.status, 'failed');
    assert.match(String(failed.statusMessage), /denied by key:carol: not on a Friday/);
    assert.match(String((failed.error as Json).message), /denied/);
    assert.equal(await executions(fixture, 'deny'), 0);
  });

  test('403 for a non-approver and for the caller approving their own call, 404 for an unknown id, 409 once ended', async () => {
    const created = await heldTask(a.url, 'alice', 'refusals');
    const taskId = String(created.taskId);
    assert.equal((await decide(b.baseUrl, 'mallory', taskId, { decision: 'approve' })).status, 403);
    const own = await decide(b.baseUrl, 'alice', taskId, { decision: 'approve' });
    assert.equal(own.status, 403);
    assert.match(String(own.body.error), /allowSelf/);
    assert.equal((await decide(b.baseUrl, 'bob', 'no-such-task', { decision: 'approve' })).status, 404);
    assert.equal((await decide(b.baseUrl, 'bob', taskId, { decision: 'maybe' })).status, 400);
    // Nobody sees what they may not decide: mallory's list is empty, alice's lacks her own call.
    assert.deepEqual((await listApprovals(b.baseUrl, 'mallory')).body.approvals, []);
    assert.ok(!((await listApprovals(b.baseUrl, 'alice')).body.approvals as Json[]).some((x) => x.taskId === taskId));

    // Cancelling the held task ends the hold: nothing is left to decide, and the upstream never saw it.
    const cancel = await modern(b.url, 'tasks/cancel', { taskId }, { capabilities: TASKS_CAPABILITIES, headers: bearer('alice') });
    assert.ok(cancel.result !== undefined, JSON.stringify(cancel.messages));
    assert.equal((await taskOn(a.url, 'alice', taskId)).status, 'cancelled');
    assert.equal((await decide(a.baseUrl, 'bob', taskId, { decision: 'approve' })).status, 409);
    assert.equal(await executions(fixture, 'refusals'), 0);
  });

  test('decisions a page on another origin could send are refused', async () => {
    const created = await heldTask(a.url, 'alice', 'cross-site');
    const taskId = String(created.taskId);
    const plain = await fetch(`${a.baseUrl}/approvals/${taskId}`, { method: 'POST', headers: { 'content-type': 'text/plain', ...bearer('bob') }, body: '{"decision":"approve"}' });
    assert.equal(plain.status, 415);
    const foreign = await decide(a.baseUrl, 'bob', taskId, { decision: 'approve' }, { origin: 'http://evil.example' });
    assert.equal(foreign.status, 403);
    assert.equal((await taskOn(a.url, 'alice', taskId)).status, 'working');
    assert.equal((await decide(a.baseUrl, 'bob', taskId, { decision: 'deny' })).status, 200);
  });

  test('a plain caller (plainCalls: wait) waits for the decision and gets the upstream\'s own result', async () => {
    const answer = modern(a.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label: 'plain' } }, { headers: bearer('alice') });
    let taskId: string | undefined;
    await eventually(async () => {
      taskId = ((await listApprovals(b.baseUrl, 'bob')).body.approvals as Json[]).find((x) => (x.arguments as Json).label === 'plain')?.taskId as string | undefined;
      return taskId !== undefined;
    }, 10_000);
    assert.equal((await decide(b.baseUrl, 'bob', String(taskId), { decision: 'approve' })).status, 200);
    const r = await answer;
    assert.deepEqual(r.result?.structuredContent, { seconds: 0, label: 'plain' }, JSON.stringify(r.messages));
    assert.equal(await executions(fixture, 'plain'), 1);
  });

  test('2025-11-25: a task-augmented call is held as a task, approved elsewhere, and tasks/result returns the result', async () => {
    const wire = new KeyedWire('alice', { tasks: {} });
    await wire.initialize(a.url);
    const created = await wire.request(a.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label: 'legacy' }, task: { ttl: 60_000 } });
    const task = (created.result as Json).task as Json;
    assert.equal(task.status, 'working', JSON.stringify(created));
    assert.match(String(task.statusMessage), /Waiting for approval/);
    assert.equal((await decide(b.baseUrl, 'bob', String(task.taskId), { decision: 'approve' })).status, 200);
    const result = await wire.request(a.url, 'tasks/result', { taskId: task.taskId });
    assert.deepEqual((result.result as Json).structuredContent, { seconds: 0, label: 'legacy' }, JSON.stringify(result));
    assert.equal(await executions(fixture, 'legacy'), 1);
  });

  test('approvers\' own hosts: approval_list and approval_decide are listed to approvers only, and decide like the API', async () => {
    const names = async (who: string): Promise<string[]> => {
      const r = await modern(b.url, 'tools/list', {}, { headers: bearer(who) });
      return ((r.result?.tools ?? []) as Json[]).map((t) => String(t.name));
    };
    assert.ok((await names('bob')).includes('approval_list'));
    assert.ok((await names('bob')).includes('approval_decide'));
    assert.ok(!(await names('mallory')).includes('approval_list'));
    const hidden = await modern(b.url, 'tools/call', { name: 'approval_list', arguments: {} }, { headers: bearer('mallory') });
    assert.ok(hidden.error !== undefined || hidden.result?.isError === true, JSON.stringify(hidden.messages));

    const created = await heldTask(a.url, 'alice', 'mcp-tool');
    const listed = await modern(b.url, 'tools/call', { name: 'approval_list', arguments: {} }, { headers: bearer('carol') });
    const pending = ((listed.result?.structuredContent as Json | undefined)?.approvals ?? []) as Json[];
    assert.deepEqual(pending.find((x) => x.taskId === created.taskId)?.arguments, { seconds: 0, label: 'mcp-tool' }, JSON.stringify(listed.messages));
    const decided = await modern(b.url, 'tools/call', { name: 'approval_decide', arguments: { taskId: created.taskId, decision: 'approve' } }, { headers: bearer('carol') });
    assert.equal((decided.result?.structuredContent as Json | undefined)?.status, 'approved', JSON.stringify(decided.messages));
    assert.equal((await settled(a.url, 'alice', String(created.taskId))).status, 'completed');
    assert.equal(await executions(fixture, 'mcp-tool'), 1);
  });

  test('the replica holding a call dies: another takes the hold over, and the approval still runs it once', async () => {
    const store = { type: 'redis', url: TEST_REDIS_URL, prefix: PREFIX };
    const doomed = await spawnGateway({ config: config(urlOf(fixture), store, approval) });
    const created = await heldTask(doomed.url, 'alice', 'restart');
    process.kill(-doomed.pid, 'SIGKILL');
    await doomed.exited;
    assert.equal((await decide(b.baseUrl, 'bob', String(created.taskId), { decision: 'approve' })).status, 200);
    const done = await settled(b.url, 'alice', String(created.taskId));
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(await executions(fixture, 'restart'), 1);
  });
});

describe('an approval nobody gives expires', () => {
  let fixture: FixtureChild;
  let gateway: GatewayChild;

  before(async () => {
    fixture = await spawnFixture({ transport: 'streamable-http' });
    gateway = await spawnGateway({ config: config(urlOf(fixture), { type: 'memory' }, { approvers: ['bob'], timeoutMs: 500 }) });
  });

  after(async () => {
    await gateway?.kill();
    await fixture?.kill();
  });

  test('past its deadline the task fails saying the approval expired, and the upstream never sees the call', async () => {
    const created = await heldTask(gateway.url, 'alice', 'expire');
    const failed = await settled(gateway.url, 'alice', String(created.taskId));
    assert.equal(failed.status, 'failed');
    assert.match(String(failed.statusMessage), /approval expired/);
    assert.equal((await decide(gateway.baseUrl, 'bob', String(created.taskId), { decision: 'approve' })).status, 409);
    assert.equal(await executions(fixture, 'expire'), 0);
  });
});
