// Durable human approval for chosen tools (issue 34): calls to `slow_compute` are held until an approver decides,
// through GET/POST /approvals on any replica. Two gateway processes share one Redis and one upstream fixture (an
// HTTP server that counts the calls it starts, per label), so "the upstream never saw it" and "it ran once" are
// read off the upstream itself; a webhook receiver on loopback verifies what the gateways tell it of each hold.
// Every wait is for an answer or a state, bounded by the test's own timeout.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { spawnFixture, spawnGateway, type FixtureChild, type GatewayChild } from '../fixtures/spawn.js';
import { startWebhookReceiver, type WebhookReceiver } from '../fixtures/webhook-receiver.js';
import { connectPlainClient, eventually, fixtureExecutions, logEntries, type Json } from '../helpers/harness.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';
import { redisTestPrefix, TEST_REDIS_URL } from '../helpers/shared-redis.js';
import { SessionWire } from '../helpers/session-wire.js';

const PREFIX = redisTestPrefix('approvals');
const LEASE_MS = 1000;
const KEYS: Record<string, string> = Object.fromEntries(['alice', 'bob', 'carol', 'mallory'].map((name) => [name, `${name}-key-0123456789abcdef`] as const));
const RESOURCE = 'http://127.0.0.1/mcp';
const RELATED_TASK = 'io.modelcontextprotocol/related-task';

const WAIT_RULE: Json = { plainCalls: 'wait' };

function bearer(who: string): Record<string, string> {
  return { authorization: `Bearer ${KEYS[who] ?? ''}` };
}

/** `rule`: the held tool's other task policy keys (plainCalls, taskAfterMs, …). */
function config(fixtureUrl: string, store: Json, approval: Json, extra: Json = {}, rule: Json = {}): Json {
  return {
    store,
    upstreams: { fx: { url: fixtureUrl } },
    auth: {
      resource: RESOURCE,
      apiKeys: Object.entries(KEYS).map(([principal, key]) => ({ principal, key, ...(principal === 'carol' ? { scopes: ['approve'] } : {}) })),
    },
    tasks: {
      defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 },
      rules: [{ match: 'slow_compute', ...rule, approval }],
    },
    replicas: { leaseMs: LEASE_MS, drainTimeoutMs: 0 },
    ...extra,
  };
}

/** A task-capable 2026-07-28 call to slow_compute as `who`: the held task. */
async function heldTask(url: string, who: string, label: string): Promise<Json> {
  const created = await sendRev2026(url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label } }, { capabilities: TASKS_CAPABILITIES, headers: bearer(who) });
  assert.equal(created.result?.resultType, 'task', JSON.stringify(created.messages));
  return created.result as Json;
}

async function taskOn(url: string, who: string, taskId: string): Promise<Json> {
  const r = await sendRev2026(url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES, headers: bearer(who) });
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

/** The task a background answer names (in its related-task marker, and in its text). */
function handleOf(result: Json | undefined): string {
  const taskId = ((result?._meta as Json | undefined)?.[RELATED_TASK] as Json | undefined)?.taskId;
  assert.equal(typeof taskId, 'string', `a background answer: ${JSON.stringify(result)}`);
  assert.ok(textOf(result).includes(taskId as string), textOf(result));
  return taskId as string;
}

function textOf(result: Json | undefined): string {
  return String(((result?.content ?? []) as Json[])[0]?.text);
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
  let hooks: WebhookReceiver;
  const approval = { approvers: ['bob', 'alice'], scopes: ['approve'], timeoutMs: 600_000 };

  before(async () => {
    fixture = await spawnFixture({ transport: 'streamable-http' });
    hooks = await startWebhookReceiver();
    const store = { type: 'redis', url: TEST_REDIS_URL, prefix: PREFIX };
    const webhooks = { webhooks: [{ url: hooks.url, secret: hooks.secret, events: ['approval.requested', 'approval.decided'] }] };
    // plainCalls: wait said here: a rule with approval otherwise answers plain callers with a handle (issue 39 #11).
    a = await spawnGateway({ config: config(urlOf(fixture), store, approval, webhooks, WAIT_RULE) });
    b = await spawnGateway({ config: config(urlOf(fixture), store, approval, webhooks, WAIT_RULE) });
  });

  after(async () => {
    await a?.kill();
    await b?.kill();
    await fixture?.kill();
    await hooks?.close();
  });

  /** The deliveries the receiver acknowledged for `taskId` (one per webhook-id). */
  function approvalEvents(taskId: string): ReturnType<WebhookReceiver['deliveries']> {
    return hooks.deliveries().filter((d) => d.data.taskId === taskId);
  }

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
    const cancel = await sendRev2026(b.url, 'tasks/cancel', { taskId }, { capabilities: TASKS_CAPABILITIES, headers: bearer('alice') });
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
    assert.match(((await plain.json()) as { error: string }).error, /must send Content-Type: application\/json/, 'refused as a cross-site write, before the body is parsed');
    const foreign = await decide(a.baseUrl, 'bob', taskId, { decision: 'approve' }, { origin: 'http://evil.example' });
    assert.equal(foreign.status, 403);
    assert.equal((await taskOn(a.url, 'alice', taskId)).status, 'working');
    assert.equal((await decide(a.baseUrl, 'bob', taskId, { decision: 'deny' })).status, 200);
  });

  test('a plain caller (plainCalls: wait) waits for the decision and gets the upstream\'s own result', async () => {
    const answer = sendRev2026(a.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label: 'plain' } }, { headers: bearer('alice') });
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

  test('a session of a revision without tasks that sends params.task anyway is held all the same: nothing runs before the decision', async () => {
    const wire = new KeyedWire('alice', {});
    await wire.initialize(a.url, '2025-06-18');
    // 2025-06-18 has no tasks: the hint is no task request, and the call is a plain one held for approval (plainCalls: wait).
    const answer = wire.request(a.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label: 'old-session-task-hint' }, task: { ttl: 60_000 } });
    let taskId: string | undefined;
    await eventually(async () => {
      taskId = ((await listApprovals(b.baseUrl, 'bob')).body.approvals as Json[]).find((x) => (x.arguments as Json).label === 'old-session-task-hint')?.taskId as string | undefined;
      return taskId !== undefined;
    }, 10_000);
    assert.equal(await executions(fixture, 'old-session-task-hint'), 0, 'held: the upstream has not seen the call');
    assert.equal((await decide(b.baseUrl, 'bob', String(taskId), { decision: 'approve' })).status, 200);
    const r = await answer;
    assert.deepEqual((r.result as Json).structuredContent, { seconds: 0, label: 'old-session-task-hint' }, JSON.stringify(r));
    assert.equal(await executions(fixture, 'old-session-task-hint'), 1);
  });

  test('approvers\' own hosts: approval_list and approval_decide are listed to approvers only, and decide like the API', async () => {
    const names = async (who: string): Promise<string[]> => {
      const r = await sendRev2026(b.url, 'tools/list', {}, { headers: bearer(who) });
      return ((r.result?.tools ?? []) as Json[]).map((t) => String(t.name));
    };
    assert.ok((await names('bob')).includes('approval_list'));
    assert.ok((await names('bob')).includes('approval_decide'));
    assert.ok(!(await names('mallory')).includes('approval_list'));
    const hidden = await sendRev2026(b.url, 'tools/call', { name: 'approval_list', arguments: {} }, { headers: bearer('mallory') });
    assert.ok(hidden.error !== undefined || hidden.result?.isError === true, JSON.stringify(hidden.messages));

    const created = await heldTask(a.url, 'alice', 'mcp-tool');
    const listed = await sendRev2026(b.url, 'tools/call', { name: 'approval_list', arguments: {} }, { headers: bearer('carol') });
    const pending = ((listed.result?.structuredContent as Json | undefined)?.approvals ?? []) as Json[];
    assert.deepEqual(pending.find((x) => x.taskId === created.taskId)?.arguments, { seconds: 0, label: 'mcp-tool' }, JSON.stringify(listed.messages));
    const digest = pending.find((x) => x.taskId === created.taskId)?.digest;
    const decided = await sendRev2026(b.url, 'tools/call', { name: 'approval_decide', arguments: { taskId: created.taskId, decision: 'approve', digest } }, { headers: bearer('carol') });
    assert.equal((decided.result?.structuredContent as Json | undefined)?.status, 'approved', JSON.stringify(decided.messages));
    assert.equal((await settled(a.url, 'alice', String(created.taskId))).status, 'completed');
    assert.equal(await executions(fixture, 'mcp-tool'), 1);
  });

  test('a decision is bound to the call the approver was shown: another digest gets 409 through the API and approval_decide, and nothing runs', async () => {
    const x = await heldTask(a.url, 'alice', 'bound-x');
    const y = await heldTask(a.url, 'alice', 'bound-y');
    const listed = (await listApprovals(b.baseUrl, 'bob')).body.approvals as Json[];
    const shownX = listed.find((v) => v.taskId === x.taskId);
    const shownY = listed.find((v) => v.taskId === y.taskId);
    assert.match(String(shownX?.digest), /^[0-9a-f]{64}$/, 'the listing shows each call\'s digest');
    assert.notEqual(shownX?.digest, shownY?.digest);
    const tools = await sendRev2026(b.url, 'tools/call', { name: 'approval_list', arguments: {} }, { headers: bearer('carol') });
    const toolView = (((tools.result?.structuredContent as Json | undefined)?.approvals ?? []) as Json[]).find((v) => v.taskId === x.taskId);
    assert.equal(toolView?.digest, shownX?.digest, 'approval_list shows the same digest');
    assert.ok(textOf(tools.result).includes(String(shownX?.digest)), textOf(tools.result));

    // Approving x with y's digest: the call is not the one this digest names.
    const stale = await decide(b.baseUrl, 'bob', String(x.taskId), { decision: 'approve', digest: shownY?.digest });
    assert.equal(stale.status, 409, JSON.stringify(stale.body));
    assert.equal(stale.body.reason, 'changed');
    assert.match(String(stale.body.error), /changed since it was shown/);
    const now = stale.body.approval as Json;
    assert.equal(now.status, 'pending', 'nothing was decided');
    assert.deepEqual(now.arguments, { seconds: 0, label: 'bound-x' }, 'the call as it stands, to look at again');
    assert.equal(now.digest, shownX?.digest);

    // approval_decide requires the digest, and refuses another one the same way.
    const schema = ((await sendRev2026(b.url, 'tools/list', {}, { headers: bearer('carol') })).result?.tools as Json[]).find((t) => t.name === 'approval_decide')?.inputSchema as Json;
    assert.deepEqual(schema.required, ['taskId', 'decision', 'digest']);
    const viaTool = await sendRev2026(b.url, 'tools/call', { name: 'approval_decide', arguments: { taskId: x.taskId, decision: 'approve', digest: shownY?.digest } }, { headers: bearer('carol') });
    assert.equal(viaTool.result?.isError, true, JSON.stringify(viaTool.messages));
    assert.match(textOf(viaTool.result), /changed since it was shown/);
    assert.deepEqual((viaTool.result?.structuredContent as Json | undefined)?.arguments, { seconds: 0, label: 'bound-x' });
    const without = await sendRev2026(b.url, 'tools/call', { name: 'approval_decide', arguments: { taskId: x.taskId, decision: 'approve' } }, { headers: bearer('carol') });
    assert.equal(without.result?.isError, true, JSON.stringify(without.messages));
    assert.match(textOf(without.result), /digest must be/);
    assert.equal((await taskOn(a.url, 'alice', String(x.taskId))).status, 'working');
    assert.equal(await executions(fixture, 'bound-x'), 0, 'no stale decision ran it');

    // The digest shown decides.
    assert.equal((await decide(b.baseUrl, 'bob', String(x.taskId), { decision: 'approve', digest: shownX?.digest })).status, 200);
    assert.equal((await settled(a.url, 'alice', String(x.taskId))).status, 'completed');
    assert.equal(await executions(fixture, 'bound-x'), 1);
    assert.equal((await decide(b.baseUrl, 'bob', String(y.taskId), { decision: 'deny', digest: shownY?.digest })).status, 200);
    assert.equal(await executions(fixture, 'bound-y'), 0);
  });

  test('issue 39 #3: a held keyed call cancelled, deleted and sent again with new arguments under the same key: the approval of what was shown never runs the new call', async () => {
    const wire = new KeyedWire('alice', { tasks: {} });
    await wire.initialize(a.url);
    const call = (version: string) => wire.request(a.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label: `swap-${version}` }, task: { ttl: 60_000 }, _meta: { 'taskgate/idempotency-key': 'swap-once' } });
    const first = String((((await call('1.0.0')).result as Json).task as Json).taskId);
    const shown = ((await listApprovals(b.baseUrl, 'bob')).body.approvals as Json[]).find((v) => v.taskId === first);
    assert.deepEqual(shown?.arguments, { seconds: 0, label: 'swap-1.0.0' });
    await wire.request(a.url, 'tasks/cancel', { taskId: first });
    assert.deepEqual((await wire.request(a.url, 'tasks/delete', { taskId: first })).result, {});
    // The key's task was deleted: the key is retired and makes no new task, under that id or any other.
    const resent = await call('6.6.6-drop-all-tables');
    assert.equal((resent.error as Json | undefined)?.code, -32602, JSON.stringify(resent));
    assert.match(String((resent.error as Json | undefined)?.message), /deleted/);

    // The approver approves what they were shown, under the id they were shown it: it is gone, nothing runs.
    const approved = await decide(b.baseUrl, 'bob', first, { decision: 'approve', digest: shown?.digest });
    assert.equal(approved.status, 404, JSON.stringify(approved.body));

    // The new arguments under a new key: a new id, and the digest shown for the old call decides nothing.
    const other = wire.request(a.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label: 'swap-6.6.6-drop-all-tables' }, task: { ttl: 60_000 }, _meta: { 'taskgate/idempotency-key': 'swap-twice' } });
    const second = String((((await other).result as Json).task as Json).taskId);
    assert.notEqual(second, first, 'a task id is never reused');
    const stale = await decide(b.baseUrl, 'bob', second, { decision: 'approve', digest: shown?.digest });
    assert.equal(stale.status, 409, JSON.stringify(stale.body));
    assert.equal(stale.body.reason, 'changed');
    assert.equal((await taskOn(a.url, 'alice', second)).status, 'working', 'the new call still waits for its own decision');
    assert.equal(await executions(fixture, 'swap-6.6.6-drop-all-tables'), 0);
    assert.equal(await executions(fixture, 'swap-1.0.0'), 0);
    const fresh = ((await listApprovals(b.baseUrl, 'bob')).body.approvals as Json[]).find((v) => v.taskId === second);
    assert.equal((await decide(b.baseUrl, 'bob', second, { decision: 'deny', digest: fresh?.digest })).status, 200);
  });

  test('issue 39 #9: a comment is bounded alike on the API (400) and approval_decide (-32602); nothing is decided', async () => {
    const created = await heldTask(a.url, 'alice', 'long-comment');
    const taskId = String(created.taskId);
    const digest = ((await listApprovals(b.baseUrl, 'bob')).body.approvals as Json[]).find((v) => v.taskId === taskId)?.digest;
    const long = 'x'.repeat(200_000);
    const api = await decide(b.baseUrl, 'bob', taskId, { decision: 'deny', comment: long, digest });
    assert.equal(api.status, 400, JSON.stringify(api.body).slice(0, 300));
    assert.match(String(api.body.error), /comment must be at most 1000 characters/);
    assert.equal((await decide(b.baseUrl, 'bob', taskId, { decision: 'deny', comment: 'x'.repeat(1_001), digest })).status, 400);
    const tool = await sendRev2026(b.url, 'tools/call', { name: 'approval_decide', arguments: { taskId, decision: 'deny', comment: long, digest } }, { headers: bearer('carol') });
    assert.equal(tool.error?.code, -32602, JSON.stringify(tool.messages).slice(0, 300));
    assert.match(String(tool.error?.message), /comment must be at most 1000 characters/);
    const schema = ((await sendRev2026(b.url, 'tools/list', {}, { headers: bearer('carol') })).result?.tools as Json[]).find((t) => t.name === 'approval_decide')?.inputSchema as Json;
    assert.equal(((schema.properties as Json).comment as Json).maxLength, 1_000);
    const still = await taskOn(a.url, 'alice', taskId);
    assert.equal(still.status, 'working');
    assert.match(String(still.statusMessage), /^Waiting for approval/, 'the caller\'s status is untouched');
    // At the bound it is taken, and the caller reads it in full.
    const atBound = 'y'.repeat(1_000);
    assert.equal((await decide(b.baseUrl, 'bob', taskId, { decision: 'deny', comment: atBound, digest })).status, 200);
    assert.ok(String((await settled(a.url, 'alice', taskId)).statusMessage).includes(atBound));
  });

  test('the replica holding a call dies: another takes the hold over, and the approval still runs it once', async () => {
    const store = { type: 'redis', url: TEST_REDIS_URL, prefix: PREFIX };
    const doomed = await spawnGateway({ config: config(urlOf(fixture), store, approval, {}, WAIT_RULE) });
    const created = await heldTask(doomed.url, 'alice', 'restart');
    process.kill(-doomed.pid, 'SIGKILL');
    await doomed.exited;
    assert.equal((await decide(b.baseUrl, 'bob', String(created.taskId), { decision: 'approve' })).status, 200);
    const done = await settled(b.url, 'alice', String(created.taskId));
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(await executions(fixture, 'restart'), 1);
  });

  test('webhooks: the receiver is told of the hold and of its decision, each once, signed, whichever replica saw it', async () => {
    const created = await heldTask(a.url, 'alice', 'webhook');
    const taskId = String(created.taskId);
    await eventually(() => approvalEvents(taskId).some((d) => d.type === 'approval.requested'), 10_000);
    const requested = approvalEvents(taskId).find((d) => d.type === 'approval.requested');
    assert.equal(requested?.data.tool, 'slow_compute');
    assert.equal(requested?.data.upstream, 'fx');
    assert.equal(requested?.data.principal, 'key:alice');
    assert.equal(requested?.data.status, 'working');
    assert.deepEqual(requested?.data.approvers, ['bob', 'alice', 'scope:approve']);
    assert.match(String(requested?.data.deadline), /^\d{4}-\d\d-\d\dT/);

    assert.equal((await decide(b.baseUrl, 'bob', taskId, { decision: 'approve', comment: 'ship it' })).status, 200);
    await eventually(() => approvalEvents(taskId).some((d) => d.type === 'approval.decided'), 10_000);
    const decided = approvalEvents(taskId).find((d) => d.type === 'approval.decided');
    assert.equal(decided?.data.decision, 'approved');
    assert.equal(decided?.data.decidedBy, 'key:bob');
    assert.equal(decided?.data.comment, 'ship it');
    assert.equal(typeof decided?.data.waitedMs, 'number');
    assert.equal((await settled(a.url, 'alice', taskId)).status, 'completed');
    assert.equal(await executions(fixture, 'webhook'), 1);

    // One delivery per event (the receiver counts acknowledgements per webhook-id), every try signed.
    assert.deepEqual(approvalEvents(taskId).map((d) => d.type).sort(), ['approval.decided', 'approval.requested']);
    for (const [id, count] of hooks.acknowledged()) assert.equal(count, 1, `webhook-id ${id} acknowledged ${count} times`);
    assert.deepEqual(hooks.tries().filter((t) => !t.verified), []);
  });

  test('an idempotent retry of a held call, on either replica and in either revision, answers with the one hold: one listing, one run', async () => {
    const args = { seconds: 0, label: 'keyed' };
    const keyed = { ...bearer('alice'), 'idempotency-key': '"held-once"' };
    const call = (url: string) => sendRev2026(url, 'tools/call', { name: 'slow_compute', arguments: args }, { capabilities: TASKS_CAPABILITIES, headers: keyed });
    const first = await call(a.url);
    assert.equal(first.result?.resultType, 'task', JSON.stringify(first.messages));
    const taskId = String(first.result?.taskId);
    const again = await call(b.url);
    assert.equal(again.result?.taskId, taskId, JSON.stringify(again.messages));
    assert.match(String(again.result?.statusMessage), /Waiting for approval/);
    // The same key through the gateway's _meta key, from a 2025-11-25 session: the same principal's same call.
    const wire = new KeyedWire('alice', { tasks: {} });
    await wire.initialize(b.url);
    const rev2025Side = await wire.request(b.url, 'tools/call', { name: 'slow_compute', arguments: args, task: { ttl: 60_000 }, _meta: { 'taskgate/idempotency-key': 'held-once' } });
    assert.equal(((rev2025Side.result as Json).task as Json).taskId, taskId, JSON.stringify(rev2025Side));

    const pending = ((await listApprovals(a.baseUrl, 'bob')).body.approvals as Json[]).filter((x) => (x.arguments as Json).label === 'keyed');
    assert.deepEqual(pending.map((x) => x.taskId), [taskId], 'one hold');
    assert.equal((await decide(a.baseUrl, 'bob', taskId, { decision: 'approve' })).status, 200);
    assert.equal((await settled(b.url, 'alice', taskId)).status, 'completed');
    // A retry after the run is still that task, ended: nothing is held or run again.
    const late = await call(a.url);
    assert.equal(late.result?.taskId, taskId);
    assert.equal(late.result?.status, 'completed');
    assert.equal(await executions(fixture, 'keyed'), 1);
    await eventually(() => approvalEvents(taskId).length >= 2, 10_000);
    assert.deepEqual(approvalEvents(taskId).map((d) => d.type).sort(), ['approval.decided', 'approval.requested'], 'one hold requested, one decided');
  });

  test('tasks/delete of a held call says to cancel it first; once cancelled it goes', async () => {
    const wire = new KeyedWire('alice', { tasks: {} });
    await wire.initialize(a.url);
    const created = await wire.request(a.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label: 'delete-held' }, task: { ttl: 60_000 } });
    const taskId = String(((created.result as Json).task as Json).taskId);
    const refused = await wire.request(a.url, 'tasks/delete', { taskId });
    assert.equal((refused.error as Json | undefined)?.code, -32602, JSON.stringify(refused));
    assert.match(String((refused.error as Json).message), /still waiting for approval; cancel it first/);
    assert.ok(((await listApprovals(b.baseUrl, 'bob')).body.approvals as Json[]).some((x) => x.taskId === taskId), 'still held');

    await wire.request(a.url, 'tasks/cancel', { taskId });
    assert.deepEqual((await wire.request(b.url, 'tasks/delete', { taskId })).result, {});
    assert.equal((await decide(b.baseUrl, 'bob', taskId, { decision: 'approve' })).status, 404);
    assert.equal(await executions(fixture, 'delete-held'), 0);
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

describe('plain callers under plainCalls: background, and a rule with allowSelf', () => {
  let fixture: FixtureChild;
  let gateway: GatewayChild;

  before(async () => {
    fixture = await spawnFixture({ transport: 'streamable-http' });
    // taskAfterMs far beyond the test's timeouts: a held call is a task at once, whatever it says.
    const rule = { plainCalls: 'background', taskAfterMs: 600_000 };
    gateway = await spawnGateway({ config: config(urlOf(fixture), { type: 'memory' }, { approvers: ['alice', 'bob'], allowSelf: true, timeoutMs: 600_000 }, {}, rule) });
  });

  after(async () => {
    await gateway?.kill();
    await fixture?.kill();
  });

  test('a plain call is answered at once with a handle saying it waits for approval; task_result gives the upstream\'s result once approved', async () => {
    const answer = await sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label: 'background' } }, { headers: bearer('alice') });
    const taskId = handleOf(answer.result);
    assert.match(textOf(answer.result), /is waiting for approval \(Waiting for approval by alice, bob until /);
    const status = await sendRev2026(gateway.url, 'tools/call', { name: 'taskgate_task_status', arguments: { taskId } }, { headers: bearer('alice') });
    assert.equal((status.result?.structuredContent as Json | undefined)?.status, 'working', JSON.stringify(status.messages));
    // Deleting it is refused the way tasks/delete is: the hold ends by cancelling it, not by deleting it.
    const deleted = await sendRev2026(gateway.url, 'tools/call', { name: 'taskgate_task_delete', arguments: { taskId } }, { headers: bearer('alice') });
    assert.equal(deleted.result?.isError, true, JSON.stringify(deleted.messages));
    assert.match(textOf(deleted.result), /still waiting for approval: cancel it first with taskgate_task_cancel/);
    assert.equal(await executions(fixture, 'background'), 0);

    assert.equal((await decide(gateway.baseUrl, 'bob', taskId, { decision: 'approve' })).status, 200);
    const result = await sendRev2026(gateway.url, 'tools/call', { name: 'taskgate_task_result', arguments: { taskId } }, { headers: bearer('alice') });
    assert.deepEqual(result.result?.structuredContent, { seconds: 0, label: 'background' }, JSON.stringify(result.messages));
    assert.equal(await executions(fixture, 'background'), 1);
  });

  test('2025-11-25: a session without tasks gets the same handle, and a denial is what task_result then says', async () => {
    const wire = new KeyedWire('alice', {});
    await wire.initialize(gateway.url);
    const answer = await wire.request(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label: 'background-2025' } });
    const taskId = handleOf(answer.result as Json);
    assert.match(textOf(answer.result as Json), /is waiting for approval/);
    assert.equal((await decide(gateway.baseUrl, 'bob', taskId, { decision: 'deny', comment: 'no' })).status, 200);
    const result = await wire.request(gateway.url, 'tools/call', { name: 'taskgate_task_result', arguments: { taskId } });
    assert.equal((result.result as Json).isError, true, JSON.stringify(result));
    assert.match(textOf(result.result as Json), /denied by key:bob: no/);
    assert.equal(await executions(fixture, 'background-2025'), 0);
  });

  test('allowSelf: true lets the caller approve their own call (and list it); others still may not', async () => {
    const created = await heldTask(gateway.url, 'alice', 'self');
    const taskId = String(created.taskId);
    assert.ok(((await listApprovals(gateway.baseUrl, 'alice')).body.approvals as Json[]).some((x) => x.taskId === taskId), 'the caller sees their own call');
    assert.equal((await decide(gateway.baseUrl, 'mallory', taskId, { decision: 'approve' })).status, 403);
    const own = await decide(gateway.baseUrl, 'alice', taskId, { decision: 'approve', comment: 'mine' });
    assert.equal(own.status, 200, JSON.stringify(own.body));
    assert.equal((own.body.approval as Json).decidedBy, 'key:alice');
    assert.equal((await settled(gateway.url, 'alice', taskId)).status, 'completed');
    assert.equal(await executions(fixture, 'self'), 1);
  });
});

describe('issue 39 #11: plain SDK callers and their own timeout; a cancelled hold and refusals say what happened', () => {
  let fixture: FixtureChild;
  /** A rule with approval and nothing else: plain callers get the default (background). */
  let byDefault: GatewayChild;
  /** The same rule with plainCalls: wait: plain callers wait, and their timeout leaves the hold to the approvers. */
  let waiting: GatewayChild;
  const clients: Client[] = [];
  const approval = { approvers: ['bob', 'alice'], timeoutMs: 600_000 };
  /** A short request timeout: what a host's 60 s is to an approval that takes minutes. */
  const CLIENT_TIMEOUT_MS = 1_000;

  before(async () => {
    fixture = await spawnFixture({ transport: 'streamable-http' });
    byDefault = await spawnGateway({ config: config(urlOf(fixture), { type: 'memory' }, approval) });
    // Info logs: the audit lines, and the line saying a plain caller's leaving was taken in.
    waiting = await spawnGateway({ config: config(urlOf(fixture), { type: 'memory' }, approval, { log: { level: 'info' } }, WAIT_RULE) });
  });

  after(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    await byDefault?.kill();
    await waiting?.kill();
    await fixture?.kill();
  });

  /** A real SDK client as a host without tasks, authenticated as `who`. */
  async function sdkClient(url: string, who: string): Promise<Client> {
    const client = await connectPlainClient(url, { headers: bearer(who) });
    clients.push(client);
    return client;
  }

  async function approveListed(baseUrl: string, label: string): Promise<string> {
    let view: Json | undefined;
    await eventually(async () => {
      view = ((await listApprovals(baseUrl, 'bob')).body.approvals as Json[]).find((v) => (v.arguments as Json).label === label);
      return view !== undefined;
    }, 10_000);
    const decided = await decide(baseUrl, 'bob', String(view?.taskId), { decision: 'approve', digest: view?.digest });
    assert.equal(decided.status, 200, JSON.stringify(decided.body));
    return String(view?.taskId);
  }

  test('by default a plain SDK call of a held tool is answered at once with a handle, inside any timeout; approved later, task_result gives the result, run once', async () => {
    const client = await sdkClient(byDefault.url, 'alice');
    const listed = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(listed.includes('taskgate_task_result'), 'the task tools are listed: held calls need them');
    const answer = await client.callTool({ name: 'slow_compute', arguments: { seconds: 0, label: 'sdk-default' } }, undefined, { timeout: CLIENT_TIMEOUT_MS });
    const taskId = handleOf(answer as Json);
    assert.match(textOf(answer as Json), /is waiting for approval/);
    assert.equal(await executions(fixture, 'sdk-default'), 0);
    assert.equal(await approveListed(byDefault.baseUrl, 'sdk-default'), taskId);
    const result = await client.callTool({ name: 'taskgate_task_result', arguments: { taskId } }, undefined, { timeout: 30_000 });
    assert.deepEqual(result.structuredContent, { seconds: 0, label: 'sdk-default' }, JSON.stringify(result));
    assert.equal(await executions(fixture, 'sdk-default'), 1);
  });

  test('plainCalls: wait: the SDK times out (and sends notifications/cancelled), the hold stays, the approval runs it once, and the caller fetches the result', async () => {
    const client = await sdkClient(waiting.url, 'alice');
    const call = client.callTool({ name: 'slow_compute', arguments: { seconds: 0, label: 'sdk-timeout' } }, undefined, { timeout: CLIENT_TIMEOUT_MS });
    const failure = await call.then(() => undefined, (error: unknown) => error);
    assert.ok(failure instanceof McpError && failure.code === ErrorCode.RequestTimeout, `the client's own timeout: ${String(failure)}`);
    // The gateway has taken the cancellation in: the task goes on for its approvers.
    await eventually(() => logEntries(waiting).some((line) => line.msg === 'plain caller stopped waiting for a held call: the task goes on for its approvers'), 10_000);
    const taskId = await approveListed(waiting.baseUrl, 'sdk-timeout');

    // The caller finds its task and its result with the task tools.
    const mine = await client.callTool({ name: 'taskgate_task_list', arguments: {} });
    assert.ok(((mine.structuredContent as Json).tasks as Json[]).some((t) => t.taskId === taskId), JSON.stringify(mine));
    const result = await client.callTool({ name: 'taskgate_task_result', arguments: { taskId } }, undefined, { timeout: 30_000 });
    assert.deepEqual(result.structuredContent, { seconds: 0, label: 'sdk-timeout' }, JSON.stringify(result));
    assert.equal(await executions(fixture, 'sdk-timeout'), 1);
  });

  test('a hold whose task was cancelled answers 409 saying so (not "pending"), and leaves the listing', async () => {
    const created = await heldTask(waiting.url, 'alice', 'cancelled-hold');
    const taskId = String(created.taskId);
    const digest = ((await listApprovals(waiting.baseUrl, 'bob')).body.approvals as Json[]).find((v) => v.taskId === taskId)?.digest;
    const cancel = await sendRev2026(waiting.url, 'tasks/cancel', { taskId }, { capabilities: TASKS_CAPABILITIES, headers: bearer('alice') });
    assert.ok(cancel.result !== undefined, JSON.stringify(cancel.messages));
    const late = await decide(waiting.baseUrl, 'bob', taskId, { decision: 'approve', digest });
    assert.equal(late.status, 409, JSON.stringify(late.body));
    assert.equal(late.body.reason, 'cancelled');
    assert.match(String(late.body.error), /cancelled while its call waited for approval/);
    assert.equal((late.body.approval as Json).status, 'cancelled', JSON.stringify(late.body));
    assert.equal((late.body.approval as Json).taskStatus, 'cancelled');
    assert.ok(!((await listApprovals(waiting.baseUrl, 'bob')).body.approvals as Json[]).some((v) => v.taskId === taskId));
    assert.equal(await executions(fixture, 'cancelled-hold'), 0);
  });

  test('refused decisions are audited with their own cause: not an approver, self-approval, cross-site; never auth.access', async () => {
    const created = await heldTask(waiting.url, 'alice', 'audited-refusals');
    const taskId = String(created.taskId);
    assert.equal((await decide(waiting.baseUrl, 'mallory', taskId, { decision: 'approve' })).status, 403);
    assert.equal((await decide(waiting.baseUrl, 'alice', taskId, { decision: 'approve' })).status, 403);
    // A local origin the gateway's Origin check lets by: the approvals API refuses it as a cross-site write.
    assert.equal((await decide(waiting.baseUrl, 'bob', taskId, { decision: 'approve' }, { origin: 'http://127.0.0.1:1' })).status, 403);
    const denials = (): Json[] => logEntries(waiting).filter((line) => line.audit === 'access.denied');
    await eventually(() => denials().length >= 3, 10_000);
    const about = denials().filter((line) => line.task === taskId);
    assert.deepEqual(about.map((line) => [line.principal, line.msg]), [
      ['key:mallory', 'approval refused: not an approver of this tool'],
      ['key:alice', 'approval refused: own call: the rule does not allow self-approval'],
    ]);
    const crossSite = denials().find((line) => line.kind === 'cross-site');
    assert.equal(crossSite?.msg, 'request refused: a write a page on another origin could have sent');
    assert.equal(crossSite?.endpoint, 'approvals');
    for (const line of denials()) assert.doesNotMatch(String(line.msg), /auth\.access/);
    assert.equal(await executions(fixture, 'audited-refusals'), 0);
  });
});
