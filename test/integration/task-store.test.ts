// One behavioural suite for every task store: the in-memory one and Redis in each topology: the real server on
// 127.0.0.1:6379 (a key prefix unique to this run), and a 3-master Redis Cluster and a Sentinel set that this file
// starts itself, once, on first use (a script crossing slots fails here with CROSSSLOT, as it would in production).
// One file because one suite runs over every store, and the Cluster and Sentinel set it starts once serve all of its
// cases: split, each file would start its own.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import type { StoreConfig } from '../../src/config/types.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { connectRedis } from '../../src/store/redis-connection.js';
import { redisKeys, slotKeyList } from '../../src/store/redis-keys.js';
import { RedisTaskStore } from '../../src/store/redis-task-store.js';
import { IDS_PER_SCRIPT_CALL, InvalidCursorError, newTaskId, outcomeBytes, storedTaskBytes, TASK_OVERHEAD_BYTES, TIMELINE_LENGTH, type NewTask, type TaskRecord, type TaskStore, type TransitionResult } from '../../src/store/task-store.js';
import { HOLDS_PER_READ, pendingHoldOf, type PendingHold } from '../../src/store/approvals.js';
import type { SlotGrant } from '../../src/store/slots.js';
import { UPSTREAM_SESSIONS_PER_TAKE } from '../../src/store/upstream-sessions.js';
import { eventually } from '../helpers/harness.js';
import { startCluster, startSentinelSet, type RedisCluster, type SentinelSet } from '../helpers/redis-topologies.js';
import { deleteRedisPrefixes, TEST_REDIS_URL, uniqueRedisPrefix } from '../helpers/shared-redis.js';

const RESULT_GRACE_MS = 200;
const prefixes: string[] = [];

let cluster: Promise<RedisCluster> | undefined;
let sentinelSet: Promise<SentinelSet> | undefined;

type RedisTopology = 'single' | 'cluster' | 'sentinel';

/** The store config of a topology, starting its servers on first use. */
async function storeConfig(topology: RedisTopology, prefix: string): Promise<Extract<StoreConfig, { type: 'redis' }>> {
  const base = { type: 'redis' as const, url: TEST_REDIS_URL, prefix };
  if (topology === 'cluster') return { ...base, cluster: { nodes: (await (cluster ??= startCluster())).nodes } };
  if (topology === 'sentinel') {
    const set = await (sentinelSet ??= startSentinelSet());
    return { ...base, sentinel: { name: set.name, nodes: set.sentinels } };
  }
  return base;
}

function newPrefix(): string {
  const prefix = uniqueRedisPrefix('store');
  prefixes.push(prefix);
  return prefix;
}

async function newRedisStore(prefix: string, topology: RedisTopology = 'single'): Promise<RedisTaskStore> {
  return new RedisTaskStore(connectRedis(await storeConfig(topology, prefix)), prefix, { resultGraceMs: RESULT_GRACE_MS, waitForReplica: topology === 'sentinel' });
}

const redisFactory = (topology: RedisTopology) => async (): Promise<TaskStore> => {
  const store = await newRedisStore(newPrefix(), topology);
  await store.ready();
  return store;
};

/** Every store a test made: one that failed before its own close() is closed at the end, or its connections would keep the run from exiting. */
const opened = new Set<TaskStore>();
const tracked = (factory: () => Promise<TaskStore>) => async (): Promise<TaskStore> => {
  const store = await factory();
  opened.add(store);
  return store;
};

const factories: Record<string, () => Promise<TaskStore>> = {
  memory: tracked(async () => new MemoryTaskStore({ resultGraceMs: RESULT_GRACE_MS })),
  redis: tracked(redisFactory('single')),
  'redis cluster': tracked(redisFactory('cluster')),
  'redis sentinel': tracked(redisFactory('sentinel')),
};

after(async () => {
  await Promise.all([...opened].map((store) => store.close().catch(() => undefined)));
  // The cluster and the sentinel set go whole; the shared server keeps only what other runs put there.
  await Promise.all([cluster?.then((c) => c.stop()), sentinelSet?.then((s) => s.stop())]);
  await deleteRedisPrefixes(prefixes);
});

/**
 * Watches a task made just before for its changes. A Redis store publishes the creation too, and that event may
 * reach the subscriber after the watch began (a busy machine): delivered first and equal to the record `create`
 * returned, it is not one of the changes watched for.
 */
function watchChanges(store: TaskStore, created: TaskRecord, onChange: (task: TaskRecord) => void): () => void {
  let first = true;
  return store.tasks.watch(created.taskId, (task) => {
    const creation = first && isDeepStrictEqual(task, created);
    first = false;
    if (!creation) onChange(task);
  });
}

function newTask(overrides: Partial<NewTask> = {}): NewTask {
  return { taskId: newTaskId(), principal: 'session:alpha', era: '2025-11-25', tool: 'slow', upstream: 'fx', retentionMs: 60_000, pollMs: 1000, ...overrides };
}

/** More ids than one store call carries, ending in a partial batch. */
const BATCH_TEST_IDS = 2 * IDS_PER_SCRIPT_CALL + 500;
const SLOT = 'tool:fx/slow';
const GRANTED: SlotGrant = { granted: true };
const waiting = (ahead: number): SlotGrant => ({ granted: false, ahead });
/** The ids of a page of the pending index. */
const heldIds = (holds: readonly PendingHold[]): string[] => holds.map((hold) => hold.taskId);

for (const [kind, create] of Object.entries(factories)) {
  describe(`${kind} task store`, () => {
    test('create then get: a new task is working, with what it was given', async () => {
      const store = await create();
      const before = Date.now();
      const input = newTask({ message: 'queued' });
      const created = await store.tasks.create(input);
      const read = await store.tasks.get(input.taskId);
      assert.deepEqual(read, created);
      assert.equal(read?.status, 'working');
      assert.equal(read?.message, 'queued');
      assert.equal(read?.tool, 'slow');
      assert.ok(read !== undefined && read.createdMs >= before - 1000 && read.createdMs === read.updatedMs);
      assert.equal(await store.tasks.get(newTaskId()), undefined);
      await assert.rejects(store.tasks.create(input), /already exists/);
      await store.close();
    });

    test('createOnce: racing creates under one key make one task; the same principal and digest find it, anything else conflicts', async () => {
      const store = await create();
      const input = newTask({ principal: 'key:alice' });
      const answers = await Promise.all(Array.from({ length: 8 }, () => store.tasks.createOnce(input, 'digest-1')));
      assert.equal(answers.filter((a) => a.outcome === 'created').length, 1, JSON.stringify(answers));
      for (const answer of answers) assert.ok((answer.outcome === 'created' || answer.outcome === 'existing') && answer.task.taskId === input.taskId && answer.task.status === 'working');
      assert.equal((await store.tasks.get(input.taskId))?.idempotency, 'digest-1');
      assert.deepEqual(await store.tasks.createOnce(input, 'digest-2'), { outcome: 'conflict' }, 'the key was used for another call');
      assert.deepEqual(await store.tasks.createOnce({ ...input, principal: 'key:bob' }, 'digest-1'), { outcome: 'conflict' }, 'another principal never gets it');
      assert.deepEqual(await store.tasks.createOnce(newTask({ taskId: (await store.tasks.create(newTask())).taskId }), 'digest-1'), { outcome: 'conflict' }, 'nor a task made without a key');
      await store.tasks.transition(input.taskId, { to: 'completed', outcome: { result: {} } });
      const ended = await store.tasks.createOnce(input, 'digest-1');
      assert.ok(ended.outcome === 'existing' && ended.task.status === 'completed', 'an ended task is still the key\'s');
      await store.close();
    });

    test('approvals: a hold is decided once however many decide at once, and leaves the pending ones', async () => {
      const store = await create();
      const hold = (deadlineMs: number): NonNullable<NewTask['approval']> => ({ approvers: ['key:ops'], scopes: [], deadlineMs, digest: 'd', state: 'pending' });
      const later = newTask({ approval: hold(Date.now() + 120_000) });
      const sooner = newTask({ approval: hold(Date.now() + 60_000) });
      await store.tasks.create(later);
      await store.tasks.create(sooner);
      assert.deepEqual(heldIds(await store.approvals.pending({ limit: 10 })), [sooner.taskId, later.taskId], 'soonest deadline first');
      const decisions = await Promise.all(['ops-1', 'ops-2', 'ops-3', 'ops-4'].map((by, i) =>
        store.approvals.decide(later.taskId, { state: i % 2 === 0 ? 'approved' : 'denied', by, message: `decided by ${by}` })));
      const won = decisions.filter((d) => d.ok);
      assert.equal(won.length, 1, JSON.stringify(decisions));
      assert.ok(decisions.every((d) => d.ok || d.reason === 'decided'), JSON.stringify(decisions));
      const read = await store.tasks.get(later.taskId);
      assert.equal(read?.status, 'working', 'deciding leaves the status to the run');
      assert.ok(read?.approval?.state === 'approved' || read?.approval?.state === 'denied');
      assert.equal(read?.message, `decided by ${read?.approval?.decidedBy}`);
      assert.deepEqual(heldIds(await store.approvals.pending({ limit: 10 })), [sooner.taskId]);
      const unheld = await store.tasks.create(newTask());
      assert.deepEqual(await store.approvals.decide(unheld.taskId, { state: 'approved', message: 'x' }).then((d) => !d.ok && d.reason), 'not_held');
      assert.deepEqual(await store.approvals.decide(newTaskId(), { state: 'approved', message: 'x' }), { ok: false, reason: 'not_found' });
      await store.tasks.transition(sooner.taskId, { to: 'cancelled' });
      assert.equal(await store.approvals.decide(sooner.taskId, { state: 'approved', message: 'x' }).then((d) => !d.ok && d.reason), 'terminal');
      assert.deepEqual(await store.approvals.pending({ limit: 10 }), [], 'an ended hold met by a decision leaves the index');
      await store.close();
    });

    test('approvals: a decision naming another call\'s digest decides nothing, and the hold stays pending', async () => {
      const store = await create();
      const held = newTask({ approval: { approvers: ['key:ops'], scopes: [], deadlineMs: Date.now() + 60_000, digest: 'shown', state: 'pending' } });
      await store.tasks.create(held);
      const stale = await store.approvals.decide(held.taskId, { state: 'approved', by: 'key:ops', digest: 'another', message: 'x' });
      assert.equal(!stale.ok && stale.reason, 'changed', JSON.stringify(stale));
      assert.equal((await store.tasks.get(held.taskId))?.approval?.state, 'pending');
      assert.deepEqual(heldIds(await store.approvals.pending({ limit: 10 })), [held.taskId], 'still listed');
      const decided = await store.approvals.decide(held.taskId, { state: 'approved', by: 'key:ops', digest: 'shown', message: 'approved' });
      assert.ok(decided.ok && decided.task.approval?.state === 'approved', JSON.stringify(decided));
      await store.close();
    });

    test('approvals: only expiry decides past the deadline, and not before it; approvals.index lists a hold once', async () => {
      const store = await create();
      const hold = (deadlineMs: number): NonNullable<NewTask['approval']> => ({ approvers: ['key:ops'], scopes: [], deadlineMs, digest: 'd', state: 'pending' });
      const due = newTask({ approval: hold(Date.now() - 1_000) });
      const ahead = newTask({ approval: hold(Date.now() + 60_000) });
      await store.tasks.create(due);
      await store.tasks.create(ahead);
      assert.equal(await store.approvals.decide(ahead.taskId, { state: 'expired', message: 'expired' }).then((d) => !d.ok && d.reason), 'not_due');
      assert.equal(await store.approvals.decide(due.taskId, { state: 'approved', by: 'key:ops', message: 'late' }).then((d) => !d.ok && d.reason), 'expired');
      const expired = await store.approvals.decide(due.taskId, { state: 'expired', message: 'The approval expired' });
      assert.ok(expired.ok && expired.task.approval?.state === 'expired' && expired.task.message === 'The approval expired', JSON.stringify(expired));
      await store.approvals.index(pendingHoldOf(ahead) as PendingHold);
      await store.approvals.index(pendingHoldOf(ahead) as PendingHold);
      assert.deepEqual(heldIds(await store.approvals.pending({ limit: 10 })), [ahead.taskId], 'listed once, the expired one gone');
      await store.close();
    });

    test('approvals index: small entries (who asked, tool, approvers, deadline; never the call), paged after a position through equal deadlines', async () => {
      const store = await create();
      const deadlineMs = Date.now() + 60_000;
      const hold = (at: number): NonNullable<NewTask['approval']> => ({ approvers: ['key:ops'], scopes: ['approve'], deadlineMs: at, digest: 'd', state: 'pending' });
      const call = { params: { name: 'slow', arguments: { blob: 'x'.repeat(10_000) } }, identity: { sessionId: 's', protocolVersion: '2025-11-25', capabilities: {} } };
      // Seven holds: five sharing one deadline (the cursor must walk through ties), one before, one after.
      const inputs = [deadlineMs - 1, deadlineMs, deadlineMs, deadlineMs, deadlineMs, deadlineMs, deadlineMs + 1].map((at) => newTask({ principal: 'key:alice', tool: 'deploy', call, approval: hold(at) }));
      for (const input of inputs) await store.tasks.create(input);
      const first = await store.approvals.pending({ limit: 1 });
      assert.deepEqual(first, [{ taskId: inputs[0]?.taskId, principal: 'key:alice', tool: 'deploy', approvers: ['key:ops'], scopes: ['approve'], deadlineMs: deadlineMs - 1 }], 'an entry has what filtering needs, and nothing of the call');
      const walked: string[] = [];
      for (let after: PendingHold | undefined, pages = 0; pages < 20; pages++) {
        const page = await store.approvals.pending({ ...(after === undefined ? {} : { after }), limit: 2 });
        walked.push(...heldIds(page));
        after = page.at(-1);
        if (page.length < 2) break;
      }
      const byDeadlineThenId = [...inputs].sort((a, b) => (a.approval?.deadlineMs ?? 0) - (b.approval?.deadlineMs ?? 0) || Buffer.compare(Buffer.from(a.taskId), Buffer.from(b.taskId)));
      assert.deepEqual(walked, byDeadlineThenId.map((input) => input.taskId), 'every hold once, in order');
      assert.equal((await store.approvals.pending({ limit: HOLDS_PER_READ + 100 })).length, inputs.length);
      await store.approvals.unindex(inputs[1]?.taskId ?? '');
      await store.approvals.unindex(inputs[1]?.taskId ?? '');
      assert.equal((await store.approvals.pending({ limit: 10 })).length, inputs.length - 1, 'unindexed, once');
      await store.close();
    });

    test('approvals index: approvals.due gives the ids past their deadline only; approvals.reserve caps a principal\'s pending holds', async () => {
      const store = await create();
      const hold = (at: number): NonNullable<NewTask['approval']> => ({ approvers: ['key:ops'], scopes: [], deadlineMs: at, digest: 'd', state: 'pending' });
      const now = Date.now();
      const due = await store.tasks.create(newTask({ principal: 'key:bob', approval: hold(now - 10) }));
      const notDue = await store.tasks.create(newTask({ principal: 'key:bob', approval: hold(now + 60_000) }));
      assert.deepEqual(await store.approvals.due(now, 10), [due.taskId]);
      assert.ok(!(await store.approvals.due(now, 10)).includes(notDue.taskId));

      const [one, two, three] = [newTaskId(), newTaskId(), newTaskId()];
      const later = now + 60_000;
      assert.deepEqual(await store.approvals.reserve('key:carol', one, later, 2), { reserved: true });
      assert.deepEqual(await store.approvals.reserve('key:carol', two, later, 2), { reserved: true });
      assert.deepEqual(await store.approvals.reserve('key:carol', three, later, 2), { reserved: false, pending: 2 }, 'over the cap');
      assert.deepEqual(await store.approvals.reserve('key:carol', two, later, 2), { reserved: true }, 'a place held already');
      assert.deepEqual(await store.approvals.reserve('key:dave', three, later, 2), { reserved: true }, 'per principal');
      assert.deepEqual(await store.approvals.reserve('key:carol', three, later, 0), { reserved: true }, '0: no cap');
      // An indexed hold's place goes with its index entry (decided, ended): a new one fits again.
      const capped = newTask({ principal: 'key:erin', approval: hold(later) });
      assert.deepEqual(await store.approvals.reserve('key:erin', capped.taskId, later, 1), { reserved: true });
      await store.tasks.create(capped);
      assert.deepEqual(await store.approvals.reserve('key:erin', newTaskId(), later, 1), { reserved: false, pending: 1 });
      await store.approvals.unindex(capped.taskId);
      assert.deepEqual(await store.approvals.reserve('key:erin', newTaskId(), later, 1), { reserved: true });
      // A place whose task was never stored frees itself at its deadline.
      assert.deepEqual(await store.approvals.reserve('key:frank', newTaskId(), Date.now() + 50, 1), { reserved: true });
      await eventually(async () => (await store.approvals.reserve('key:frank', newTaskId(), later, 1)).reserved, 5_000);
      await store.close();
    });

    test('createOnce: a key whose task was deleted or expired is retired: its id never serves a new task, for any call', async () => {
      const store = await create();
      const input = newTask({ principal: 'key:carol', retentionMs: 100 });
      assert.equal((await store.tasks.createOnce(input, 'd')).outcome, 'created');
      assert.equal(await store.tasks.retired(input.taskId), undefined, 'a task that exists is not retired');
      await store.tasks.transition(input.taskId, { to: 'completed', outcome: { result: {} } });
      assert.equal(await store.tasks.delete(input.taskId), 'deleted');
      assert.equal(await store.tasks.get(input.taskId), undefined);
      assert.equal(await store.tasks.expired(input.taskId), false, 'deleted is unknown, not expired');
      assert.equal(await store.tasks.retired(input.taskId), 'deleted');
      assert.deepEqual(await store.tasks.createOnce(input, 'd'), { outcome: 'retired', reason: 'deleted' }, 'the same call');
      assert.deepEqual(await store.tasks.createOnce(input, 'other digest'), { outcome: 'retired', reason: 'deleted' }, 'another call');
      assert.equal(await store.tasks.get(input.taskId), undefined, 'nothing was written');
      // Expired: the same, for as long as the expired id is remembered.
      const expiring = newTask({ principal: 'key:carol', retentionMs: 100 });
      assert.equal((await store.tasks.createOnce(expiring, 'd')).outcome, 'created');
      await store.tasks.transition(expiring.taskId, { to: 'completed', outcome: { result: {} } });
      await eventually(async () => (await store.tasks.get(expiring.taskId)) === undefined, 5000);
      assert.equal(await store.tasks.retired(expiring.taskId), 'expired');
      assert.deepEqual(await store.tasks.createOnce(expiring, 'other digest'), { outcome: 'retired', reason: 'expired' });
      // A task made without a key leaves no tombstone (its id is random: never asked for again).
      const plain = await store.tasks.create(newTask());
      await store.tasks.transition(plain.taskId, { to: 'completed', outcome: { result: {} } });
      assert.equal(await store.tasks.delete(plain.taskId), 'deleted');
      assert.equal(await store.tasks.retired(plain.taskId), undefined);
      assert.deepEqual((await store.tasks.list('key:carol', { limit: 10 })).tasks, []);
      await store.close();
    });

    test('legal transitions, and the outcome comes back exactly as stored', async () => {
      const store = await create();
      const { taskId } = await store.tasks.create(newTask());
      assert.equal((await store.tasks.transition(taskId, { to: 'input_required', message: 'waiting for the user' })).ok, true);
      assert.equal((await store.tasks.transition(taskId, { to: 'working', message: null })).ok, true);
      assert.equal((await store.tasks.get(taskId))?.message, undefined);
      const outcome = { result: { content: [{ type: 'text', text: 'done' }], structuredContent: { n: 1 }, _meta: { x: { y: [1, 2] } }, extra: true } };
      const done = await store.tasks.transition(taskId, { to: 'completed', outcome });
      assert.ok(done.ok);
      assert.deepEqual((await store.tasks.get(taskId, { outcome: true }))?.outcome, outcome);
      assert.equal((await store.tasks.get(taskId))?.outcome, undefined, 'a plain read leaves the outcome out');
      assert.equal(done.ok && done.task.outcome, undefined, 'so does the transition result');
      const failedOutcome = { error: { code: -32042, message: 'boom', data: { why: 'fixture' } } };
      const other = await store.tasks.create(newTask());
      await store.tasks.transition(other.taskId, { to: 'failed', outcome: failedOutcome, message: 'boom' });
      assert.deepEqual((await store.tasks.get(other.taskId, { outcome: true }))?.outcome, failedOutcome);
      await store.close();
    });

    test('terminal is forever: a cancelled task stays cancelled whatever comes later', async () => {
      const store = await create();
      const { taskId } = await store.tasks.create(newTask());
      assert.ok((await store.tasks.transition(taskId, { to: 'cancelled', message: 'cancelled by the client' })).ok);
      for (const to of ['completed', 'working', 'failed', 'cancelled'] as const) {
        const late = await store.tasks.transition(taskId, { to, outcome: { result: { content: [] } } });
        assert.equal(late.ok, false);
        assert.equal(!late.ok && late.reason, 'terminal');
      }
      const task = await store.tasks.get(taskId, { outcome: true });
      assert.equal(task?.status, 'cancelled');
      assert.equal(task?.outcome, undefined);
      assert.deepEqual(await store.tasks.transition(newTaskId(), { to: 'completed' }), { ok: false, reason: 'not_found' });
      await store.close();
    });

    test('a transition tells `applied` once, with what it returns, and the stored end is readable from then on', async () => {
      const store = await create();
      const { taskId } = await store.tasks.create(newTask());
      const told: TransitionResult[] = [];
      let readWhenTold: Promise<TaskRecord | undefined> | undefined;
      const ended = await store.tasks.transition(taskId, { to: 'completed', outcome: { result: { content: [] } } }, (result) => {
        told.push(result);
        readWhenTold ??= store.tasks.get(taskId);
      });
      assert.deepEqual(told, [ended]);
      assert.equal((await readWhenTold)?.status, 'completed', 'the change was stored before it was told');
      const late = await store.tasks.transition(taskId, { to: 'failed' }, (result) => told.push(result));
      assert.deepEqual(told.slice(1), [late], 'a refused change is told too');
      const missing = newTaskId();
      assert.deepEqual(await store.tasks.transition(missing, { to: 'completed' }, (result) => told.push(result)), { ok: false, reason: 'not_found' });
      assert.equal(told.length, 3);
      await store.close();
    });

    test('a stored call comes only when asked for and goes at the end; attempt and the queued mark are kept, and the mark goes at the end', async () => {
      const store = await create();
      const call = { params: { name: 'slow', arguments: { ms: 1 } }, identity: { sessionId: 's1', protocolVersion: '2025-11-25', capabilities: {} } };
      const task = await store.tasks.create(newTask({ call }));
      assert.equal(task.call, undefined, 'the created record does not carry it back');
      assert.equal((await store.tasks.get(task.taskId))?.call, undefined);
      assert.equal((await store.tasks.get(task.taskId, { outcome: true }))?.call, undefined, 'reading the outcome does not read the call');
      assert.deepEqual((await store.tasks.get(task.taskId, { call: true }))?.call, call);
      await store.tasks.transition(task.taskId, { to: 'working', queued: true, message: 'Queued' });
      assert.equal((await store.tasks.get(task.taskId))?.queued, true);
      await store.tasks.transition(task.taskId, { to: 'working', message: 'still' });
      assert.equal((await store.tasks.get(task.taskId))?.queued, true, 'kept unless changed');
      await store.tasks.transition(task.taskId, { to: 'working', queued: false, attempt: 2 });
      const started = await store.tasks.get(task.taskId);
      assert.equal(started?.queued, undefined);
      assert.equal(started?.attempt, 2);
      await store.tasks.transition(task.taskId, { to: 'working', queued: true });
      await store.tasks.transition(task.taskId, { to: 'failed', message: 'lost' });
      assert.equal((await store.tasks.get(task.taskId))?.queued, undefined);
      const ended = await store.tasks.get(task.taskId, { outcome: true, call: true });
      assert.equal(ended?.status, 'failed');
      assert.equal(ended?.call, undefined, 'an ended task is never run again: its arguments are not kept');
      await store.close();
    });

    test("a task's era is the id of the revision that created it, kept as written: one no revision serves too (using it is the error)", async () => {
      const store = await create();
      for (const era of ['2025-11-25', '2026-07-28', '2099-01-01']) {
        const { taskId } = await store.tasks.create(newTask({ era }));
        assert.equal((await store.tasks.get(taskId))?.era, era);
        assert.equal((await store.tasks.transition(taskId, { to: 'completed' })).ok, true);
        assert.equal((await store.tasks.get(taskId, { outcome: true }))?.era, era);
      }
      await store.close();
    });

    test('outstanding input requests: set, replaced, cleared, dropped at the terminal status, carried by events', async () => {
      const store = await create();
      const task = await store.tasks.create(newTask({ era: '2026-07-28' }));
      const seen: (object | undefined)[] = [];
      const stop = watchChanges(store, task, (t) => seen.push(t.openRequests));
      const first = { a1: { method: 'elicitation/create', params: { message: 'Name?' } } };
      const both = { ...first, a2: { method: 'roots/list' } };
      assert.deepEqual((await store.tasks.transition(task.taskId, { to: 'input_required', openRequests: first })).ok, true);
      assert.deepEqual((await store.tasks.get(task.taskId))?.openRequests, first);
      await store.tasks.transition(task.taskId, { to: 'input_required', openRequests: both, message: 'two' });
      assert.deepEqual((await store.tasks.get(task.taskId))?.openRequests, both);
      await store.tasks.transition(task.taskId, { to: 'input_required', message: 'kept' });
      assert.deepEqual((await store.tasks.get(task.taskId))?.openRequests, both);
      await store.tasks.transition(task.taskId, { to: 'working', openRequests: null });
      assert.equal((await store.tasks.get(task.taskId))?.openRequests, undefined);
      await store.tasks.transition(task.taskId, { to: 'input_required', openRequests: first });
      await store.tasks.transition(task.taskId, { to: 'completed', outcome: { result: { content: [] } } });
      assert.equal((await store.tasks.get(task.taskId, { outcome: true }))?.openRequests, undefined);
      await eventually(async () => seen.length === 6);
      stop();
      assert.deepEqual(seen, [first, both, both, undefined, first, undefined]);
      await store.close();
    });

    test('leases: a dead replica\'s tasks are taken exactly once, with their owner; heartbeats keep a replica\'s tasks, and a late one revives nothing taken', async () => {
      const store = await create();
      const [a, b, c] = [newTaskId(), newTaskId(), newTaskId()];
      // Each step below only needs its lease to have run out (a sleep longer than it), or a write made before the
      // next read: a busy machine's stalls make neither wrong.
      await store.leases.assign([a, b], 'replica-1', 1);
      await store.leases.assign([c], 'replica-2', 60_000);
      await store.leases.heartbeat('replica-1', 60_000);
      await sleep(20);
      assert.deepEqual(await store.leases.takeOrphans(10, 'replica-3', 60_000), [], 'the heartbeat kept both of replica-1\'s tasks past their lease');
      await store.leases.heartbeat('replica-1', 1);
      await sleep(20);
      // replica-1 stopped beating; replica-2 is far from its deadline. Two callers race: each task goes to one.
      const [first, second] = await Promise.all([store.leases.takeOrphans(10, 'replica-3', 60_000), store.leases.takeOrphans(10, 'replica-4', 60_000)]);
      const taken = [...first, ...second].sort((x, y) => x.taskId.localeCompare(y.taskId));
      assert.deepEqual(taken, [{ taskId: a, owner: 'replica-1' }, { taskId: b, owner: 'replica-1' }].sort((x, y) => x.taskId.localeCompare(y.taskId)));
      // replica-1 comes back (its heartbeats were late): what was taken stays taken.
      await store.leases.heartbeat('replica-1', 50);
      await sleep(100);
      assert.deepEqual(await store.leases.takeOrphans(10, 'replica-5', 60_000), [], 'a dead replica holding nothing has nothing to give');
      await store.leases.release(c);
      // A taken orphan is its taker's: it goes with the taker's tasks (its owner now the taker) once the taker
      // stops beating, as when the taker dies before it settled it. An ended task is in nobody's index.
      await store.leases.heartbeat('replica-3', 50);
      await store.leases.heartbeat('replica-4', 50);
      await store.leases.assign([c], 'replica-3', 50);
      await store.leases.release(c);
      await sleep(100);
      const again = (await store.leases.takeOrphans(10, 'replica-5', 60_000)).sort((x, y) => x.taskId.localeCompare(y.taskId));
      const takers = new Map([...first.map((o) => [o.taskId, 'replica-3'] as const), ...second.map((o) => [o.taskId, 'replica-4'] as const)]);
      assert.deepEqual(again, taken.map((o) => ({ taskId: o.taskId, owner: takers.get(o.taskId) })));
      // Leasing to a replica moves a task out of its previous replica's tasks (an orphan handed back to its owner).
      await store.leases.assign([a], 'replica-6', 60_000);
      await store.leases.heartbeat('replica-5', 50);
      await sleep(100);
      assert.deepEqual(await store.leases.takeOrphans(10, 'replica-7', 60_000), [{ taskId: b, owner: 'replica-5' }]);
      await store.close();
    });

    test('leases: a replica that gives up its liveness (shutdown) has its tasks taken by the next sweep, its lease far from over', async () => {
      const store = await create();
      const [a, b] = [newTaskId(), newTaskId()];
      await store.leases.assign([a], 'replica-1', 60_000);
      await store.leases.assign([b], 'replica-2', 60_000);
      assert.deepEqual(await store.leases.takeOrphans(10, 'replica-3', 60_000), [], 'both replicas are alive');
      await store.leases.expire('replica-1');
      await store.leases.expire('replica-unknown');
      assert.deepEqual(await store.leases.takeOrphans(10, 'replica-3', 60_000), [{ taskId: a, owner: 'replica-1' }], 'no wait for its lease to run out');
      assert.deepEqual(await store.leases.takeOrphans(10, 'replica-4', 60_000), [], 'replica-2 lives on; a replica never heard of holds nothing');
      await store.close();
    });

    test('upstream sessions: a dead replica\'s are taken exactly once and forgotten; a live one\'s and forgotten ones stay out', async () => {
      const store = await create();
      await store.upstreamSessions.record('replica-1', { upstream: 'up', sessionId: 's1', protocolVersion: '2025-11-25' }, 60_000);
      await store.upstreamSessions.record('replica-1', { upstream: 'up', sessionId: 's2' }, 60_000);
      await store.upstreamSessions.record('replica-1', { upstream: 'other', sessionId: 's3' }, 60_000);
      await store.upstreamSessions.forget('replica-1', { upstream: 'other', sessionId: 's3' });
      await store.upstreamSessions.record('replica-2', { upstream: 'up', sessionId: 's4' }, 60_000);
      assert.deepEqual(await store.upstreamSessions.takeDead(10), [], 'recording is a sign of life');
      // replica-1 stops beating (a heartbeat of 1 ms is its last); replica-2 lives on. Two sweepers race.
      await store.leases.heartbeat('replica-1', 1);
      await sleep(20);
      const [first, second] = await Promise.all([store.upstreamSessions.takeDead(10), store.upstreamSessions.takeDead(10)]);
      const taken = [...first, ...second].sort((x, y) => x.sessionId.localeCompare(y.sessionId));
      assert.deepEqual(taken, [
        { replica: 'replica-1', upstream: 'up', sessionId: 's1', protocolVersion: '2025-11-25' },
        { replica: 'replica-1', upstream: 'up', sessionId: 's2' },
      ]);
      assert.deepEqual(await store.upstreamSessions.takeDead(10), [], 'taken sessions are forgotten');
      // A dead replica the task sweep dropped from the liveness index (it held no task) is still dead.
      await store.upstreamSessions.record('replica-5', { upstream: 'up', sessionId: 's5' }, 60_000);
      await store.leases.heartbeat('replica-5', 1);
      await sleep(20);
      assert.deepEqual(await store.leases.takeOrphans(10, 'replica-2', 60_000), []);
      assert.deepEqual(await store.upstreamSessions.takeDead(10), [{ replica: 'replica-5', upstream: 'up', sessionId: 's5' }]);
      // Many sessions go batch by batch, each at most UPSTREAM_SESSIONS_PER_TAKE, none twice.
      const many = 2 * UPSTREAM_SESSIONS_PER_TAKE + 30;
      for (let i = 0; i < many; i++) await store.upstreamSessions.record('replica-6', { upstream: 'up', sessionId: `m${i}` }, 60_000);
      await store.leases.heartbeat('replica-6', 1);
      await sleep(20);
      const seen = new Set<string>();
      for (;;) {
        const batch = await store.upstreamSessions.takeDead(1_000);
        if (batch.length === 0) break;
        assert.ok(batch.length <= UPSTREAM_SESSIONS_PER_TAKE, `a batch of ${batch.length}`);
        for (const { sessionId } of batch) {
          assert.ok(!seen.has(sessionId), `${sessionId} taken twice`);
          seen.add(sessionId);
        }
      }
      assert.equal(seen.size, many);
      assert.deepEqual((await store.upstreamSessions.takeDead(10)).map((s) => s.sessionId), [], 'replica-2 is alive: s4 stays');
      await store.close();
    });

    test('reserve: a new task\'s id is leased before its record exists, never taken from a replica that holds it; a reservation goes back only from its holder; one left by a dead replica is swept', async () => {
      const store = await create();
      const fresh = newTaskId();
      assert.equal(await store.leases.reserve(fresh, 'replica-1', 60_000), true);
      assert.equal(await store.leases.reserve(fresh, 'replica-2', 60_000), false, 'another replica holds it');
      assert.equal(await store.leases.reserve(fresh, 'replica-1', 60_000), false, 'held already, by the same replica too (two racing calls under one key)');
      await store.leases.release(fresh, 'replica-2');
      assert.equal(await store.leases.reserve(fresh, 'replica-2', 60_000), false, 'given back by a replica that does not hold it: nothing changed');
      await store.leases.release(fresh, 'replica-1');
      assert.equal(await store.leases.reserve(fresh, 'replica-2', 60_000), true, 'given back by its holder: free');
      // A running task's lease is never taken by a reservation (a keyed call finding its key's task running elsewhere).
      const running = await store.tasks.create(newTask());
      await store.leases.assign([running.taskId], 'replica-3', 60_000);
      assert.equal(await store.leases.reserve(running.taskId, 'replica-4', 60_000), false);
      // A replica that dies after reserving leaves ids the sweep takes with their owner: one it never stored (no
      // record: the taker drops it) and one it stored (the taker settles it). Nothing is left unleased.
      const neverStored = newTaskId();
      const stored = newTask();
      assert.equal(await store.leases.reserve(neverStored, 'replica-5', 1), true);
      assert.equal(await store.leases.reserve(stored.taskId, 'replica-5', 1), true);
      await store.tasks.create(stored);
      const taken: { taskId: string; owner: string }[] = [];
      await eventually(async () => {
        taken.push(...(await store.leases.takeOrphans(10, 'replica-6', 60_000)));
        return taken.length >= 2;
      }, 5000);
      const byId = (x: { taskId: string }, y: { taskId: string }): number => x.taskId.localeCompare(y.taskId);
      assert.deepEqual(taken.sort(byId), [{ taskId: neverStored, owner: 'replica-5' }, { taskId: stored.taskId, owner: 'replica-5' }].sort(byId));
      assert.equal(await store.tasks.get(neverStored), undefined);
      assert.equal((await store.tasks.get(stored.taskId))?.status, 'working');
      // Until the taker lets it go, the id is the taker's; then a new reservation gets it.
      assert.equal(await store.leases.reserve(neverStored, 'replica-7', 60_000), false);
      await store.leases.release(neverStored);
      assert.equal(await store.leases.reserve(neverStored, 'replica-7', 60_000), true);
      await store.close();
    });

    test(`leases in batches: ${BATCH_TEST_IDS} ids (more than ${IDS_PER_SCRIPT_CALL} per store call) are leased, kept by one heartbeat and taken batch by batch`, async () => {
      const store = await create();
      const ids = Array.from({ length: BATCH_TEST_IDS }, () => newTaskId());
      await store.leases.assign(ids, 'replica-1', 150);
      await store.leases.heartbeat('replica-1', 60_000);
      await sleep(200);
      assert.deepEqual(await store.leases.takeOrphans(IDS_PER_SCRIPT_CALL, 'replica-2', 60_000), [], 'one heartbeat kept every task, the last batch\'s too');
      // A short last heartbeat, then none: a dead replica's tasks, taken at most a batch per call.
      await store.leases.heartbeat('replica-1', 50);
      await sleep(100);
      const taken: { taskId: string; owner: string }[] = [];
      for (;;) {
        const batch = await store.leases.takeOrphans(BATCH_TEST_IDS, 'replica-2', 60_000);
        assert.ok(batch.length <= IDS_PER_SCRIPT_CALL, `one call took ${batch.length}`);
        if (batch.length === 0) break;
        taken.push(...batch);
      }
      assert.equal(taken.length, BATCH_TEST_IDS);
      assert.deepEqual(new Set(taken.map((o) => o.taskId)), new Set(ids));
      assert.ok(taken.every((o) => o.owner === 'replica-1'));
      await store.close();
    });

    test(`slot renewal in batches: ${BATCH_TEST_IDS} tickets of one semaphore are all renewed`, async () => {
      const store = await create();
      const key = `principal:batch-${randomBytes(4).toString('hex')}`;
      const tickets = Array.from({ length: BATCH_TEST_IDS }, () => newTaskId());
      for (const ticket of tickets) await store.slots.acquire(key, ticket, 'replica-1', BATCH_TEST_IDS, 60_000, { queue: false });
      assert.equal((await store.slots.holders(key)).length, BATCH_TEST_IDS);
      // Renewed to a short lease: every ticket gets the renewal's deadline (the last batch's too), so all run out.
      await store.slots.renew(tickets.map((ticket) => ({ key, ticket })), 100);
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.deepEqual(await store.slots.holders(key), [], 'every ticket was renewed');
      await store.close();
    });

    test('one signing secret per store, stable across calls', async () => {
      const store = await create();
      const a = await store.signingSecret();
      assert.ok(a.length >= 32);
      assert.deepEqual(await store.signingSecret(), a);
      await store.close();
    });

    test('concurrent terminal transitions: exactly one wins', async () => {
      const store = await create();
      const { taskId } = await store.tasks.create(newTask());
      const attempts = await Promise.all(
        Array.from({ length: 20 }, (_, i) => store.tasks.transition(taskId, i % 2 === 0 ? { to: 'completed', outcome: { result: { i } } } : { to: 'cancelled' })),
      );
      const winners = attempts.filter((a) => a.ok);
      assert.equal(winners.length, 1);
      const final = await store.tasks.get(taskId);
      assert.equal(final?.status, winners[0]?.ok ? winners[0].task.status : undefined);
      await store.close();
    });

    test('watchers see every change, in order, until they stop watching', async () => {
      const store = await create();
      const created = await store.tasks.create(newTask());
      const { taskId } = created;
      const seen: string[] = [];
      const stop = watchChanges(store, created, (task) => seen.push(`${task.status}:${task.message ?? ''}`));
      await store.tasks.transition(taskId, { to: 'working', message: '50%' });
      await store.tasks.transition(taskId, { to: 'input_required' });
      await store.tasks.transition(taskId, { to: 'completed', outcome: { result: {} } });
      await eventually(async () => seen.length === 3);
      assert.deepEqual(seen, ['working:50%', 'input_required:50%', 'completed:50%']);
      stop();
      const other = await store.tasks.create(newTask());
      await store.tasks.transition(other.taskId, { to: 'completed' });
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(seen.length, 3);
      await store.close();
    });

    test('listing: newest first, 250 tasks over pages, no gaps or repeats, only the principal\'s own', async () => {
      const store = await create();
      const ids: string[] = [];
      for (let i = 0; i < 250; i++) ids.push((await store.tasks.create(newTask({ principal: 'session:lister' }))).taskId);
      await store.tasks.create(newTask({ principal: 'session:someone-else' }));
      const listed: TaskRecord[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await store.tasks.list('session:lister', cursor === undefined ? { limit: 100 } : { cursor, limit: 100 });
        assert.ok(page.tasks.length <= 100);
        listed.push(...page.tasks);
        cursor = page.nextCursor;
        pages++;
      } while (cursor !== undefined && pages < 10);
      assert.equal(pages, 3);
      assert.deepEqual(listed.map((t) => t.taskId), [...ids].reverse());
      assert.ok(listed.every((t) => t.principal === 'session:lister'));
      assert.deepEqual((await store.tasks.list('session:nobody', { limit: 10 })).tasks, []);
      await store.close();
    });

    test('cursors are tamper-proof and bound to their principal', async () => {
      const store = await create();
      for (let i = 0; i < 3; i++) await store.tasks.create(newTask({ principal: 'session:a' }));
      const first = await store.tasks.list('session:a', { limit: 1 });
      assert.ok(first.nextCursor);
      await assert.rejects(store.tasks.list('session:b', { cursor: first.nextCursor, limit: 1 }), InvalidCursorError);
      const [payload, signature] = first.nextCursor.split('.');
      const forged = `${Buffer.from('999999999999999:x').toString('base64url')}.${signature}`;
      await assert.rejects(store.tasks.list('session:a', { cursor: forged, limit: 1 }), InvalidCursorError);
      await assert.rejects(store.tasks.list('session:a', { cursor: `${payload}.AAAA`, limit: 1 }), InvalidCursorError);
      await assert.rejects(store.tasks.list('session:a', { cursor: 'garbage', limit: 1 }), InvalidCursorError);
      const second = await store.tasks.list('session:a', { cursor: first.nextCursor, limit: 5 });
      assert.equal(second.tasks.length, 2);
      assert.equal(second.nextCursor, undefined);
      await store.close();
    });

    test('expiry: terminal tasks go after their TTL (and the grace period); running tasks never expire', async () => {
      const store = await create();
      const finished = await store.tasks.create(newTask({ retentionMs: 100, principal: 'session:ttl' }));
      const running = await store.tasks.create(newTask({ retentionMs: 100, principal: 'session:ttl' }));
      await store.tasks.transition(finished.taskId, { to: 'completed', outcome: { result: {} } });
      assert.equal((await store.tasks.get(finished.taskId))?.status, 'completed'); // still readable right after
      assert.equal(await store.tasks.expired(finished.taskId), false);
      await eventually(async () => (await store.tasks.get(finished.taskId)) === undefined, 5000);
      assert.equal(await store.tasks.expired(finished.taskId), true, 'an expired id is told from an unknown one');
      assert.equal(await store.tasks.expired(newTaskId()), false);
      assert.equal(await store.tasks.expired(running.taskId), false);
      assert.equal((await store.tasks.get(running.taskId))?.status, 'working');
      const listed = await store.tasks.list('session:ttl', { limit: 10 });
      assert.deepEqual(listed.tasks.map((t) => t.taskId), [running.taskId]);
      await store.close();
    });

    test('stored bytes: a task is charged its overhead from creation and its outcome as it ends, to its principal and the total; a delete releases it, a running task is not deleted', async () => {
      const store = await create();
      const O = TASK_OVERHEAD_BYTES;
      assert.deepEqual(await store.tasks.storedBytes('session:ledger-a'), { principal: 0, total: 0 });
      const outcome = { result: { content: [{ type: 'text', text: 'x'.repeat(5000) }] } };
      const size = outcomeBytes(outcome);
      const a1 = await store.tasks.create(newTask({ principal: 'session:ledger-a' }));
      const a2 = await store.tasks.create(newTask({ principal: 'session:ledger-a' }));
      const b1 = await store.tasks.create(newTask({ principal: 'session:ledger-b' }));
      const noOutcome = await store.tasks.create(newTask({ principal: 'session:ledger-a' }));
      assert.equal((await store.tasks.storedBytes('session:ledger-a')).principal, 3 * O, 'each task is charged its overhead as it is created');
      await store.tasks.transition(a1.taskId, { to: 'input_required', message: 'asking' });
      assert.equal((await store.tasks.storedBytes('session:ledger-a')).principal, 3 * O, 'a status change charges nothing more');
      const ended = await store.tasks.transition(a1.taskId, { to: 'completed', outcome });
      await store.tasks.transition(a2.taskId, { to: 'failed', outcome: { error: { code: -32042, message: 'y'.repeat(100) } } });
      await store.tasks.transition(b1.taskId, { to: 'completed', outcome });
      await store.tasks.transition(noOutcome.taskId, { to: 'cancelled' });
      const errorSize = outcomeBytes({ error: { code: -32042, message: 'y'.repeat(100) } });
      const a = await store.tasks.storedBytes('session:ledger-a');
      assert.equal(a.principal, 3 * O + size + errorSize, 'a result, a stored error and a cancellation, each with its overhead (the end replaces the creation\'s charge)');
      assert.equal(a.total, 4 * O + 2 * size + errorSize);
      assert.ok(ended.ok && a.principalFreesAtMs !== undefined && a.principalFreesAtMs >= ended.task.createdMs + 60_000, 'frees up when the oldest expires');
      assert.equal((await store.tasks.storedBytes('session:ledger-b')).principal, O + size);
      // Terminal is forever: a late second end charges nothing more.
      await store.tasks.transition(a1.taskId, { to: 'completed', outcome });
      assert.equal((await store.tasks.storedBytes('session:ledger-a')).principal, 3 * O + size + errorSize);
      const running = await store.tasks.create(newTask({ principal: 'session:ledger-a' }));
      assert.equal(await store.tasks.delete(running.taskId), 'not_terminal');
      assert.equal((await store.tasks.get(running.taskId))?.status, 'working');
      assert.equal(await store.tasks.delete(a1.taskId), 'deleted');
      assert.equal(await store.tasks.get(a1.taskId), undefined);
      assert.equal(await store.tasks.expired(a1.taskId), false, 'a deleted task is unknown, not expired');
      assert.equal(await store.tasks.delete(a1.taskId), 'not_found');
      assert.equal(await store.tasks.delete(newTaskId()), 'not_found');
      assert.deepEqual((await store.tasks.list('session:ledger-a', { limit: 10 })).tasks.map((t) => t.taskId).sort(), [a2.taskId, noOutcome.taskId, running.taskId].sort());
      const after = await store.tasks.storedBytes('session:ledger-a');
      assert.equal(after.principal, 3 * O + errorSize, 'a2, noOutcome and the running one');
      assert.equal(after.total, 4 * O + size + errorSize);
      // Charged to another ledger than the task's principal (clients counted together), and released from it.
      const counted = await store.tasks.create(newTask({ principal: 'session:ledger-c' }));
      await store.tasks.transition(counted.taskId, { to: 'completed', outcome, chargeTo: 'ledger-together' });
      assert.equal((await store.tasks.storedBytes('session:ledger-c')).principal, O, 'created for its principal\'s ledger');
      assert.equal((await store.tasks.storedBytes('ledger-together')).principal, O + size);
      assert.equal(await store.tasks.delete(counted.taskId, 'ledger-together'), 'deleted');
      assert.equal((await store.tasks.storedBytes('ledger-together')).principal, 0);
      // Created for another ledger: the record remembers it, so an end and a delete that do not say go there too.
      const together = await store.tasks.create(newTask({ principal: 'session:ledger-d', chargeTo: 'ledger-together' }));
      assert.equal(together.chargedTo, 'ledger-together');
      assert.equal((await store.tasks.get(together.taskId))?.chargedTo, 'ledger-together');
      assert.equal((await store.tasks.storedBytes('ledger-together')).principal, O);
      await store.tasks.transition(together.taskId, { to: 'failed', outcome: { error: { code: -32042, message: 'y'.repeat(100) } } });
      assert.equal((await store.tasks.storedBytes('ledger-together')).principal, O + errorSize);
      assert.equal((await store.tasks.storedBytes('session:ledger-d')).principal, 0);
      assert.equal(await store.tasks.delete(together.taskId), 'deleted');
      const released = await store.tasks.storedBytes('ledger-together');
      assert.equal(released.principal, 0);
      assert.equal(released.total, 4 * O + size + errorSize, 'b1, a2, noOutcome and running are left');
      await store.close();
    });

    test('stored bytes: a kept call is charged while its task runs, and gives way to the outcome at the end', async () => {
      const store = await create();
      const call = { params: { name: 'slow', arguments: { text: 'z'.repeat(10_000) } }, identity: { sessionId: 's', protocolVersion: '2025-11-25', capabilities: {} } };
      const task = await store.tasks.create(newTask({ principal: 'session:ledger-call', call }));
      assert.equal((await store.tasks.storedBytes('session:ledger-call')).principal, storedTaskBytes({ callJson: JSON.stringify(call) }));
      assert.ok(storedTaskBytes({ callJson: JSON.stringify(call) }) > TASK_OVERHEAD_BYTES + 10_000, 'the call counts beside the overhead');
      const outcome = { result: { content: [] } };
      await store.tasks.transition(task.taskId, { to: 'completed', outcome });
      assert.equal((await store.tasks.storedBytes('session:ledger-call')).principal, storedTaskBytes({ outcomeJson: JSON.stringify(outcome) }));
      await store.close();
    });

    test('stored bytes: released when the task expires; a creation\'s charge lapses at its TTL if the task still runs', async () => {
      const store = await create();
      const outcome = { result: { content: [{ type: 'text', text: 'z'.repeat(2000) }] } };
      const charged = TASK_OVERHEAD_BYTES + outcomeBytes(outcome);
      const short = await store.tasks.create(newTask({ principal: 'session:ledger-ttl', retentionMs: 50 }));
      const long = await store.tasks.create(newTask({ principal: 'session:ledger-ttl', retentionMs: 60_000 }));
      const stillRunning = await store.tasks.create(newTask({ principal: 'session:ledger-ttl-running', retentionMs: 50 }));
      await store.tasks.transition(short.taskId, { to: 'completed', outcome });
      await store.tasks.transition(long.taskId, { to: 'completed', outcome });
      assert.equal((await store.tasks.storedBytes('session:ledger-ttl')).principal, 2 * charged);
      await eventually(async () => (await store.tasks.get(short.taskId)) === undefined, 5000);
      const left = await store.tasks.storedBytes('session:ledger-ttl');
      assert.equal(left.principal, charged, 'the expired one is released, the other kept');
      // A task that runs on is never dropped (and ends charged anew); its creation's charge does not outlive its TTL.
      await eventually(async () => (await store.tasks.storedBytes('session:ledger-ttl-running')).principal === 0, 5000);
      assert.equal((await store.tasks.get(stillRunning.taskId))?.status, 'working');
      assert.equal((await store.tasks.storedBytes('session:ledger-ttl')).total, charged);
      await store.tasks.transition(stillRunning.taskId, { to: 'cancelled' });
      assert.equal((await store.tasks.storedBytes('session:ledger-ttl-running')).principal, TASK_OVERHEAD_BYTES);
      await store.close();
    });

    test('webhook queue: bounded in bytes as in deliveries; an acknowledged or dead-lettered body frees its bytes', async () => {
      const store = await create();
      const queue = store.deliveries;
      const endpoint = `bytes-${randomBytes(4).toString('hex')}`;
      const options = { maxQueued: 100, maxQueuedBytes: 2500, keepMs: 60_000 };
      const body = (n: number): string => JSON.stringify({ type: 'task.completed', data: { n, result: 'r'.repeat(1000) } });
      assert.equal(await queue.enqueue(endpoint, { id: 'one', body: body(1) }, options), 'queued');
      assert.equal(await queue.enqueue(endpoint, { id: 'two', body: body(2) }, options), 'queued');
      assert.equal(await queue.queuedBytes(endpoint), 2 * Buffer.byteLength(body(1)));
      assert.equal(await queue.enqueue(endpoint, { id: 'three', body: body(3) }, options), 'full_bytes', 'the newest is refused');
      assert.equal(await queue.enqueue(endpoint, { id: 'small', body: '{"type":"task.created"}' }, options), 'queued', 'a body that fits still goes in');
      assert.equal(await queue.enqueue(endpoint, { id: 'one', body: body(1) }, options), 'duplicate');
      assert.equal(await queue.depth(endpoint), 3);
      const claimed = await queue.claim(endpoint, 'replica-a', { concurrency: 10, leaseMs: 60_000, keepMs: 60_000 });
      assert.equal(claimed.deliveries.length, 3);
      await queue.acknowledge(endpoint, 'one');
      assert.equal(await queue.queuedBytes(endpoint), Buffer.byteLength(body(2)) + Buffer.byteLength('{"type":"task.created"}'));
      const two = claimed.deliveries.find((d) => d.id === 'two');
      assert.ok(two !== undefined && (await queue.deadLetter(endpoint, { id: 'two', owner: 'replica-a', attempt: two.attempt }, 'given up', 60_000)), 'dead-lettered');
      await queue.acknowledge(endpoint, 'small');
      assert.equal(await queue.queuedBytes(endpoint), 0);
      // Multi-byte text counts its UTF-8 bytes, as the bound is documented.
      const wide = JSON.stringify({ text: '\u00e9'.repeat(2000) });
      assert.ok(wide.length < 2500 && Buffer.byteLength(wide) > 2500, 'fewer characters than the bound, more bytes');
      assert.equal(await queue.enqueue(endpoint, { id: 'wide', body: wide }, options), 'full_bytes');
      await store.close();
    });

    test('expiry: an upstream\'s own (native) task expires with its TTL from creation while still working; its end is recorded once', async () => {
      const store = await create();
      const native = await store.tasks.create(newTask({ retentionMs: 100, principal: 'session:native', native: true, message: "Runs on upstream 'up'" }));
      const ended = await store.tasks.create(newTask({ retentionMs: 60_000, principal: 'session:native', native: true }));
      assert.equal(native.status, 'working');
      assert.equal(native.native, true);
      const first = await store.tasks.transition(ended.taskId, { to: 'completed' });
      assert.equal(first.ok, true);
      assert.equal((await store.tasks.transition(ended.taskId, { to: 'completed' })).ok, false, 'terminal is forever');
      await eventually(async () => (await store.tasks.get(native.taskId)) === undefined, 5000);
      assert.equal((await store.tasks.get(ended.taskId))?.status, 'completed');
      await store.close();
    });

    test('slots: never more than `limit` holders, even when every ticket asks at once', async () => {
      const store = await create();
      const tickets = Array.from({ length: 10 }, (_, i) => `t${i}`);
      const grants = await Promise.all(tickets.map((ticket) => store.slots.acquire(SLOT, ticket, 'replica-1', 3, 5000)));
      const holders = tickets.filter((_, i) => grants[i]?.granted);
      assert.equal(holders.length, 3);
      assert.deepEqual((await store.slots.holders(SLOT)).sort(), holders.sort());
      const aheads = grants.flatMap((grant) => (grant.granted ? [] : [grant.ahead]));
      assert.deepEqual(aheads.sort((a, b) => a - b), [3, 4, 5, 6, 7, 8, 9], 'each waiter has its own place in line');
      assert.deepEqual(await store.slots.holders('tool:fx/other'), []);
      await store.close();
    });

    test('slots: strict FIFO — a later ticket is refused while an earlier one waits, whoever asks first', async () => {
      const store = await create();
      const acquire = (ticket: string): Promise<SlotGrant> => store.slots.acquire(SLOT, ticket, 'replica-1', 1, 5000);
      assert.deepEqual(await acquire('t1'), GRANTED);
      assert.deepEqual(await acquire('t2'), waiting(1));
      assert.deepEqual(await acquire('t3'), waiting(2));
      await store.slots.release(SLOT, 't1');
      assert.deepEqual(await acquire('t3'), waiting(1), 't2 is first in line');
      assert.deepEqual(await acquire('t2'), GRANTED);
      assert.deepEqual(await acquire('t3'), waiting(1));
      await store.slots.release(SLOT, 't2');
      assert.deepEqual(await acquire('t3'), GRANTED);
      assert.deepEqual(await store.slots.holders(SLOT), ['t3']);
      await store.close();
    });

    test('slots: `ahead` counts holders and the line before the ticket, which keeps its place; the first `free` in line may go', async () => {
      const store = await create();
      const acquire = (ticket: string): Promise<SlotGrant> => store.slots.acquire(SLOT, ticket, 'replica-1', 2, 5000);
      assert.deepEqual(await acquire('a'), GRANTED);
      assert.deepEqual(await acquire('b'), GRANTED);
      assert.deepEqual(await acquire('c'), waiting(2));
      assert.deepEqual(await acquire('d'), waiting(3));
      assert.deepEqual(await acquire('e'), waiting(4));
      assert.deepEqual(await acquire('d'), waiting(3), 'asking again keeps the place');
      await store.slots.release(SLOT, 'a');
      assert.deepEqual(await acquire('d'), waiting(2), 'one free slot, and c is before d');
      await store.slots.release(SLOT, 'b');
      assert.deepEqual(await acquire('d'), GRANTED, 'two free slots: the first two in line may go, in any order');
      assert.deepEqual(await acquire('e'), waiting(2), 'd holds one, c is still before e');
      assert.deepEqual(await acquire('c'), GRANTED);
      assert.deepEqual(await acquire('e'), waiting(2));
      await store.close();
    });

    test('slots: `queue: false` is granted or refused at once, never joins the line and never jumps it', async () => {
      const store = await create();
      const once = (ticket: string): Promise<SlotGrant> => store.slots.acquire(SLOT, ticket, 'replica-1', 1, 5000, { queue: false });
      assert.deepEqual(await store.slots.acquire(SLOT, 't1', 'replica-1', 1, 5000), GRANTED);
      assert.deepEqual(await once('x'), waiting(1));
      assert.deepEqual(await store.slots.acquire(SLOT, 't2', 'replica-1', 1, 5000), waiting(1), 'x did not join the line');
      await store.slots.release(SLOT, 't1');
      assert.deepEqual(await once('x'), waiting(1), 't2 is in line before it');
      assert.deepEqual(await store.slots.acquire(SLOT, 't2', 'replica-1', 1, 5000), GRANTED);
      await store.slots.release(SLOT, 't2');
      assert.deepEqual(await once('x'), GRANTED);
      assert.deepEqual(await once('y'), waiting(1));
      assert.deepEqual(await once('x'), GRANTED, 'idempotent');
      assert.deepEqual(await store.slots.holders(SLOT), ['x']);
      await store.close();
    });

    test('slots: re-acquiring a held ticket is granted again, holds one slot, and refreshes its lease', async () => {
      const store = await create();
      assert.deepEqual(await store.slots.acquire(SLOT, 't1', 'replica-1', 1, 400), GRANTED);
      await sleep(250);
      assert.deepEqual(await store.slots.acquire(SLOT, 't1', 'replica-1', 1, 400), GRANTED);
      await sleep(250); // past the first lease, within the refreshed one
      assert.deepEqual(await store.slots.holders(SLOT), ['t1']);
      assert.deepEqual(await store.slots.acquire(SLOT, 't2', 'replica-1', 1, 5000), waiting(1));
      await store.close();
    });

    test('rate windows: hits add up in one window per name and principal, several at once for a batch', async () => {
      const store = await create();
      const first = await store.rates.count('requests', 'key:alice', 60_000);
      assert.equal(first.hits, 1);
      assert.ok(first.resetInMs > 0 && first.resetInMs <= 60_000, String(first.resetInMs));
      assert.equal((await store.rates.count('requests', 'key:alice', 60_000, 19)).hits, 20);
      assert.equal((await store.rates.count('requests', 'oauth:https://idp.example#alice', 60_000, 3)).hits, 3, 'another principal, another window');
      assert.equal((await store.rates.count('task-creations', 'key:alice', 60_000)).hits, 1, 'another name, another window');
      const opened = await store.rates.count('requests', 'key:bob', 60_000, 5);
      assert.equal(opened.hits, 5);
      assert.ok(opened.resetInMs > 0 && opened.resetInMs <= 60_000, 'a window opened by a batch has its length too');
      await store.close();
    });

    test('subscribers counts who listens on a topic now (a replica named by a client may not exist)', async () => {
      const store = await create();
      assert.equal(await store.bus.subscribers('replica.nobody'), 0);
      const stop = await store.bus.subscribe('replica.somebody', () => undefined);
      assert.equal(await store.bus.subscribers('replica.somebody'), 1);
      assert.equal(await store.bus.publish('replica.somebody', { hello: 1 }), 1);
      stop();
      await eventually(async () => (await store.bus.subscribers('replica.somebody')) === 0);
      assert.equal(await store.bus.publish('replica.nobody', { hello: 1 }), 0);
      await store.close();
    });

    test('slots: releasing (or leaving the line) publishes { key } on `slots`; releasing nothing is a silent no-op', async () => {
      const store = await create();
      const seen: object[] = [];
      const stop = await store.bus.subscribe('slots', (message) => seen.push(message));
      await store.slots.release(SLOT, 'nobody');
      assert.deepEqual(await store.slots.acquire(SLOT, 't1', 'replica-1', 1, 5000), GRANTED);
      assert.deepEqual(await store.slots.acquire(SLOT, 't2', 'replica-1', 1, 5000), waiting(1));
      assert.deepEqual(await store.slots.acquire(SLOT, 't3', 'replica-1', 1, 5000), waiting(2));
      await store.slots.release(SLOT, 'nobody');
      await store.slots.release(SLOT, 't2');
      assert.deepEqual(await store.slots.acquire(SLOT, 't3', 'replica-1', 1, 5000), waiting(1), 't2 left the line');
      await store.slots.release(SLOT, 't1');
      await store.slots.release(SLOT, 't1');
      await eventually(async () => seen.length >= 2);
      await sleep(50);
      assert.deepEqual(seen, [{ key: SLOT }, { key: SLOT }]);
      assert.deepEqual(await store.slots.acquire(SLOT, 't3', 'replica-1', 1, 5000), GRANTED);
      stop();
      await store.close();
    });

    test('slots: a holder that stops renewing loses its slot, and the acquire that drops it tells waiters; a renewed one keeps it', async () => {
      const store = await create();
      assert.deepEqual(await store.slots.acquire(SLOT, 'renewed', 'replica-1', 2, 300), GRANTED);
      assert.deepEqual(await store.slots.acquire(SLOT, 'dead', 'replica-2', 2, 300), GRANTED);
      assert.deepEqual(await store.slots.acquire(SLOT, 'waiter', 'replica-1', 2, 5000), waiting(2));
      for (let i = 0; i < 3; i++) {
        await sleep(150);
        await store.slots.renew([{ key: SLOT, ticket: 'renewed' }], 300);
      }
      assert.deepEqual(await store.slots.holders(SLOT), ['renewed'], 'the dead holder is not counted even before it is dropped');
      const seen: object[] = [];
      const stop = await store.bus.subscribe('slots', (message) => seen.push(message));
      assert.deepEqual(await store.slots.acquire(SLOT, 'waiter', 'replica-1', 2, 5000), GRANTED);
      await eventually(async () => seen.length === 1, 2000);
      assert.deepEqual(seen, [{ key: SLOT }]);
      stop();
      // Without renewals, the renewed holder's lease runs out too.
      await eventually(async () => (await store.slots.holders(SLOT)).length === 1, 2000);
      assert.deepEqual(await store.slots.holders(SLOT), ['waiter']);
      await store.close();
    });

    test('slots: a waiter that stops renewing stops blocking the line; a renewed one keeps its place', async () => {
      const store = await create();
      const acquire = (ticket: string, leaseMs: number): Promise<SlotGrant> => store.slots.acquire(SLOT, ticket, 'replica-1', 1, leaseMs);
      assert.deepEqual(await acquire('holder', 5000), GRANTED);
      assert.deepEqual(await acquire('dead', 300), waiting(1));
      assert.deepEqual(await acquire('renewed', 300), waiting(2));
      assert.deepEqual(await acquire('last', 5000), waiting(3));
      await store.slots.release(SLOT, 'holder');
      assert.deepEqual(await acquire('last', 5000), waiting(2), 'both are still in line before it');
      for (let i = 0; i < 3; i++) {
        await sleep(150);
        await store.slots.renew([{ key: SLOT, ticket: 'renewed' }], 300);
      }
      assert.deepEqual(await acquire('last', 5000), waiting(1), 'the dead waiter left the line');
      assert.deepEqual(await acquire('renewed', 300), GRANTED);
      assert.deepEqual(await acquire('last', 5000), waiting(1));
      await store.close();
    });

    test('slots: renewing does not revive an expired holder or waiter', async () => {
      const store = await create();
      assert.deepEqual(await store.slots.acquire(SLOT, 'holder', 'replica-1', 1, 200), GRANTED);
      assert.deepEqual(await store.slots.acquire(SLOT, 'waiter', 'replica-1', 1, 200), waiting(1));
      await sleep(300);
      await store.slots.renew(
        [
          { key: SLOT, ticket: 'holder' },
          { key: SLOT, ticket: 'waiter' },
          { key: 'tool:fx/never', ticket: 'ghost' },
        ],
        5000,
      );
      assert.deepEqual(await store.slots.holders(SLOT), []);
      assert.deepEqual(await store.slots.acquire(SLOT, 'next', 'replica-1', 1, 5000), GRANTED);
      assert.deepEqual(await store.slots.acquire(SLOT, 'after', 'replica-1', 1, 5000), waiting(1), 'the waiter is gone from the line');
      assert.deepEqual(await store.slots.holders('tool:fx/never'), []);
      await store.close();
    });

    test('listAll: every principal\'s tasks newest first, over pages, filtered by status and tool', async () => {
      const store = await create();
      const made: TaskRecord[] = [];
      for (let i = 0; i < 30; i++) {
        made.push(await store.tasks.create(newTask({ principal: `session:p${i % 3}`, tool: i % 2 === 0 ? 'slow' : 'fast' })));
      }
      for (const task of made.slice(0, 10)) await store.tasks.transition(task.taskId, { to: 'completed', outcome: { result: {} } });
      await store.tasks.transition((made[20] as TaskRecord).taskId, { to: 'input_required', message: 'asking' });
      const newestFirst = [...made].reverse().map((t) => t.taskId);

      const listed: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await store.tasks.listAll(cursor === undefined ? { limit: 7 } : { cursor, limit: 7 });
        assert.ok(page.tasks.length <= 7);
        listed.push(...page.tasks.map((t) => t.taskId));
        cursor = page.nextCursor;
        pages++;
      } while (cursor !== undefined && pages < 20);
      assert.deepEqual(listed, newestFirst, 'all of them, newest first, no gaps or repeats');
      assert.equal((await store.tasks.listAll({ limit: 100 })).tasks[0]?.outcome, undefined, 'without outcomes');

      const completed = await store.tasks.listAll({ limit: 100, statuses: ['completed'] });
      assert.deepEqual(completed.tasks.map((t) => t.taskId), made.slice(0, 10).reverse().map((t) => t.taskId));
      const open = await store.tasks.listAll({ limit: 100, statuses: ['working', 'input_required'] });
      assert.equal(open.tasks.length, 20);
      assert.ok(open.tasks.every((t) => t.status === 'working' || t.status === 'input_required'));
      const slowAsking = await store.tasks.listAll({ limit: 100, statuses: ['input_required'], tool: 'slow' });
      assert.deepEqual(slowAsking.tasks.map((t) => t.taskId), [(made[20] as TaskRecord).taskId]);
      const fast = await store.tasks.listAll({ limit: 100, tool: 'fast' });
      assert.equal(fast.tasks.length, 15);
      assert.ok(fast.tasks.every((t) => t.tool === 'fast'));
      assert.deepEqual((await store.tasks.listAll({ limit: 10, tool: 'nope' })).tasks, []);

      // A filtered listing pages too: the same tasks, whatever the page size.
      const paged: string[] = [];
      cursor = undefined;
      do {
        const page = await store.tasks.listAll({ limit: 4, tool: 'fast', ...(cursor === undefined ? {} : { cursor }) });
        paged.push(...page.tasks.map((t) => t.taskId));
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      assert.deepEqual(paged, fast.tasks.map((t) => t.taskId));
      await store.close();
    });

    test('listAll cursors are its own: a principal\'s cursor, a forged or a garbled one is refused', async () => {
      const store = await create();
      for (let i = 0; i < 3; i++) await store.tasks.create(newTask({ principal: 'session:a' }));
      const mine = await store.tasks.list('session:a', { limit: 1 });
      assert.ok(mine.nextCursor);
      await assert.rejects(store.tasks.listAll({ cursor: mine.nextCursor, limit: 1 }), InvalidCursorError);
      const first = await store.tasks.listAll({ limit: 1 });
      assert.ok(first.nextCursor);
      await assert.rejects(store.tasks.list('session:a', { cursor: first.nextCursor, limit: 1 }), InvalidCursorError);
      await assert.rejects(store.tasks.listAll({ cursor: 'garbage', limit: 1 }), InvalidCursorError);
      assert.equal((await store.tasks.listAll({ cursor: first.nextCursor, limit: 5 })).tasks.length, 2);
      await store.close();
    });

    test('listAll: expired tasks leave the index; running ones stay', async () => {
      const store = await create();
      const finished = await store.tasks.create(newTask({ retentionMs: 100, principal: 'session:one' }));
      const running = await store.tasks.create(newTask({ retentionMs: 100, principal: 'session:two' }));
      await store.tasks.transition(finished.taskId, { to: 'failed', message: 'no' });
      assert.equal((await store.tasks.listAll({ limit: 10 })).tasks.length, 2, 'listed while readable');
      await eventually(async () => (await store.tasks.get(finished.taskId)) === undefined, 5000);
      assert.deepEqual((await store.tasks.listAll({ limit: 10 })).tasks.map((t) => t.taskId), [running.taskId]);
      assert.deepEqual(await store.tasks.timeline(finished.taskId), [], 'its timeline went with it');
      await store.close();
    });

    test(`timeline: creation and every status change, oldest first, messages as they were; the last ${TIMELINE_LENGTH} only`, async () => {
      const store = await create();
      const before = Date.now() - 1000;
      const { taskId } = await store.tasks.create(newTask({ message: 'Queued' }));
      await store.tasks.transition(taskId, { to: 'working', message: 'step 1/3' });
      await store.tasks.transition(taskId, { to: 'input_required', message: 'Which file?' });
      await store.tasks.transition(taskId, { to: 'input_required', message: 'Still waiting' });
      await store.tasks.transition(taskId, { to: 'working', message: null });
      await store.tasks.transition(taskId, { to: 'completed', message: 'Done', outcome: { result: {} } });
      await store.tasks.transition(taskId, { to: 'failed', message: 'too late' }); // refused: terminal is forever
      const timeline = await store.tasks.timeline(taskId);
      assert.deepEqual(
        timeline.map(({ status, message }) => ({ status, message })),
        [
          { status: 'working', message: 'Queued' },
          { status: 'input_required', message: 'Which file?' },
          { status: 'working', message: undefined },
          { status: 'completed', message: 'Done' },
        ],
      );
      assert.ok(timeline.every((entry, i) => entry.atMs >= before && entry.atMs >= (timeline[i - 1]?.atMs ?? 0)));
      assert.ok(timeline.every((entry) => !('message' in entry) || entry.message !== undefined), 'no message key without a message');
      assert.deepEqual(await store.tasks.timeline(newTaskId()), []);

      const long = await store.tasks.create(newTask());
      for (let i = 0; i < TIMELINE_LENGTH; i++) await store.tasks.transition(long.taskId, { to: i % 2 === 0 ? 'input_required' : 'working', message: `change ${i}` });
      const kept = await store.tasks.timeline(long.taskId);
      assert.equal(kept.length, TIMELINE_LENGTH);
      assert.equal(kept.at(-1)?.message, `change ${TIMELINE_LENGTH - 1}`);
      assert.equal(kept[0]?.message, 'change 0', 'the oldest (creation) went first');
      await store.close();
    });
  });
}

for (const topology of ['single', 'cluster', 'sentinel'] as const) {
  describe(`redis task store specifics (${topology})`, () => {
    test('tasks outlive the store instance (a gateway restart) and keep working', async () => {
      const prefix = newPrefix();
      const first = await newRedisStore(prefix, topology);
      const { taskId } = await first.tasks.create(newTask({ principal: 'session:restart' }));
      await first.close();
      const second = await newRedisStore(prefix, topology);
      await second.ready();
      assert.equal((await second.tasks.get(taskId))?.status, 'working');
      assert.ok((await second.tasks.transition(taskId, { to: 'completed', outcome: { result: { ok: 1 } } })).ok);
      const listed = await second.tasks.list('session:restart', { limit: 5 });
      assert.deepEqual(listed.tasks.map((t) => t.taskId), [taskId]);
      await second.close();
    });

    test('a change made through one instance reaches watchers of another (replicas)', async () => {
      const prefix = newPrefix();
      const a = await newRedisStore(prefix, topology);
      const b = await newRedisStore(prefix, topology);
      await b.ready();
      const { taskId } = await a.tasks.create(newTask());
      const seen: string[] = [];
      b.tasks.watch(taskId, (task) => seen.push(task.status));
      await a.tasks.transition(taskId, { to: 'completed', outcome: { result: {} } });
      await eventually(async () => seen.includes('completed'));
      await a.close();
      await b.close();
    });

    test("eras an earlier release wrote ('legacy', 'modern') are read as their revisions' ids; any other as it is", async () => {
      const prefix = newPrefix();
      const store = await newRedisStore(prefix, topology);
      const keys = redisKeys(prefix);
      const written: [string, string][] = [['legacy', '2025-11-25'], ['modern', '2026-07-28'], ['2099-01-01', '2099-01-01']];
      for (const [stored, read] of written) {
        const { taskId } = await store.tasks.create(newTask());
        await store.redis.hset(keys.task(taskId), 'era', stored);
        assert.equal((await store.tasks.get(taskId))?.era, read, stored);
        assert.equal((await store.tasks.list('session:alpha', { limit: 100 })).tasks.find((task) => task.taskId === taskId)?.era, read, `${stored}, listed`);
        const changed = await store.tasks.transition(taskId, { to: 'completed' });
        assert.equal(changed.ok && changed.task.era, read, `${stored}, as a script returns it`);
      }
      await store.close();
    });

    test('a hold whose index entry was lost (its replica died between the two writes) is listed again once approvals.index is called', async () => {
      const prefix = newPrefix();
      const store = await newRedisStore(prefix, topology);
      const deadlineMs = Date.now() + 60_000;
      const held = await store.tasks.create(newTask({ approval: { approvers: ['key:ops'], scopes: [], deadlineMs, digest: 'd', state: 'pending' } }));
      await store.redis.zrem(redisKeys(prefix).pendingApprovals(), held.taskId);
      assert.deepEqual(await store.approvals.pending({ limit: 10 }), [], 'missed while unindexed');
      await store.approvals.index(pendingHoldOf(held) as PendingHold);
      assert.deepEqual(heldIds(await store.approvals.pending({ limit: 10 })), [held.taskId]);
      await store.close();
    });

    test('a hold an earlier release indexed (an id, no entry) is read from its record\'s summary and given an entry; a gone one is dropped', async () => {
      const prefix = newPrefix();
      const store = await newRedisStore(prefix, topology);
      const keys = redisKeys(prefix);
      const deadlineMs = Date.now() + 60_000;
      const held = await store.tasks.create(newTask({ principal: 'key:alice', approval: { approvers: ['key:ops'], scopes: [], deadlineMs, digest: 'd', state: 'pending' } }));
      await store.redis.hdel(keys.pendingApprovalEntries(), held.taskId);
      await store.redis.zadd(keys.pendingApprovals(), String(deadlineMs - 1), 'gone-task');
      assert.deepEqual(await store.approvals.pending({ limit: 10 }), [pendingHoldOf(held)]);
      assert.ok((await store.redis.hget(keys.pendingApprovalEntries(), held.taskId)) !== null, 'the entry written back');
      assert.equal(await store.redis.zscore(keys.pendingApprovals(), 'gone-task'), null, 'a gone hold dropped');
      await store.close();
    });

    test('per-task keys carry the task id as a Redis Cluster hash tag; running tasks have no expiry', async () => {
      const prefix = newPrefix();
      const store = await newRedisStore(prefix, topology);
      const { taskId } = await store.tasks.create(newTask());
      const key = redisKeys(prefix).task(taskId);
      assert.ok(key.includes(`{${taskId}}`));
      assert.equal(await store.redis.pttl(key), -1);
      await store.tasks.transition(taskId, { to: 'completed' });
      const pttl = await store.redis.pttl(key);
      assert.ok(pttl > 0 && pttl <= 60_000);
      await store.close();
    });

    test('a rolling upgrade: tasks an earlier release leased with deadlines of their own are taken once those ran out, and unleased like any other', async () => {
      const prefix = newPrefix();
      const store = await newRedisStore(prefix, topology);
      const keys = redisKeys(prefix);
      const [ranOut, ahead, ended] = [newTaskId(), newTaskId(), newTaskId()];
      const [seconds] = await store.redis.time();
      const nowMs = Number(seconds) * 1000;
      // As the earlier release's lease.lua wrote them: a deadline per task, and its owner.
      await store.redis.zadd(keys.runningByLeaseDeadline(), nowMs - 5_000, ranOut, nowMs + 60_000, ahead, nowMs - 5_000, ended);
      await store.redis.hset(keys.runningOwners(), ranOut, 'old-replica', ahead, 'old-replica', ended, 'old-replica');
      assert.ok(keys.runningByLeaseDeadline().includes('{running}') && keys.replicasAlive().includes('{running}'), 'one Cluster slot');
      await store.leases.release(ended);
      assert.deepEqual(await store.leases.takeOrphans(10, 'new-replica', 60_000), [{ taskId: ranOut, owner: 'old-replica' }]);
      assert.equal(await store.redis.hget(keys.runningOwners(), ranOut), 'new-replica');
      assert.equal(await store.redis.sismember(keys.runningOf('new-replica'), ranOut), 1);
      assert.deepEqual(await store.redis.zrange(keys.runningByLeaseDeadline(), '0', '-1'), [ahead]);
      await store.leases.release(ahead);
      await store.leases.release(ranOut);
      assert.equal(await store.redis.zcard(keys.runningByLeaseDeadline()), 0);
      assert.equal(await store.redis.hlen(keys.runningOwners()), 0);
      assert.equal(await store.redis.scard(keys.runningOf('new-replica')), 0);
      await store.close();
    });

    test('timeline and the all-tasks index: timeline keys share the task\'s hash tag and expire with it; the index is one key, swept as tasks are created', async () => {
      const prefix = newPrefix();
      const store = await newRedisStore(prefix, topology);
      const keys = redisKeys(prefix);
      const gone = await store.tasks.create(newTask({ retentionMs: 50 }));
      assert.ok(keys.taskTimeline(gone.taskId).includes(`{${gone.taskId}}`));
      assert.equal(await store.redis.pttl(keys.taskTimeline(gone.taskId)), -1, 'a running task\'s timeline never expires');
      await store.tasks.transition(gone.taskId, { to: 'completed' });
      const pttl = await store.redis.pttl(keys.taskTimeline(gone.taskId));
      assert.ok(pttl > 0 && pttl <= RESULT_GRACE_MS, `expires with the record (${pttl} ms)`);
      await eventually(async () => (await store.redis.exists(keys.task(gone.taskId), keys.taskTimeline(gone.taskId))) === 0, 5000);
      assert.equal(await store.redis.zcard(keys.allTasks()), 1, 'still indexed: nobody listed, nothing swept yet');
      // Tasks created later sweep the index a few entries at a time, round and round: the expired entry goes.
      const live: string[] = [];
      await eventually(async () => {
        live.push((await store.tasks.create(newTask())).taskId);
        const entries = await store.redis.zrangebylex(keys.allTasks(), '-', '+');
        return !entries.some((entry) => entry.endsWith(`:${gone.taskId}`));
      }, 5000);
      assert.equal(await store.redis.zcard(keys.allTasks()), live.length, 'the live ones stay');
      await store.close();
    });

    test('stored-bytes ledgers: a principal\'s under its hash tag, the total under its own; both go with their last charge', async () => {
      const prefix = newPrefix();
      const store = await newRedisStore(prefix, topology);
      const keys = redisKeys(prefix);
      const mine = keys.storedBytes('session:ledger-keys');
      assert.ok(mine.expiries.includes('{session:ledger-keys}') && mine.sizes.includes('{session:ledger-keys}') && mine.total.includes('{session:ledger-keys}'));
      const task = await store.tasks.create(newTask({ principal: 'session:ledger-keys', retentionMs: 50 }));
      await store.tasks.transition(task.taskId, { to: 'completed', outcome: { result: { content: [] } } });
      for (const key of [mine.expiries, mine.sizes, mine.total, keys.allStoredBytes().total]) {
        const pttl = await store.redis.pttl(key);
        assert.ok(pttl > 0 && pttl <= RESULT_GRACE_MS, `${key} expires with its last charge (${pttl} ms)`);
      }
      await eventually(async () => (await store.redis.exists(mine.expiries, mine.sizes, mine.total)) === 0, 5000);
      assert.deepEqual(await store.tasks.storedBytes('session:ledger-keys'), { principal: 0, total: 0 });
      await store.close();
    });

    test('two instances on one prefix (replicas) share a semaphore, and a release on one wakes waiters on the other', async () => {
      const prefix = newPrefix();
      const a = await newRedisStore(prefix, topology);
      const b = await newRedisStore(prefix, topology);
      assert.deepEqual(await a.slots.acquire(SLOT, 't1', 'replica-a', 1, 5000), GRANTED);
      assert.deepEqual(await b.slots.acquire(SLOT, 't2', 'replica-b', 1, 5000), waiting(1));
      assert.deepEqual(await b.slots.holders(SLOT), ['t1']);
      const seen: object[] = [];
      const stop = await b.bus.subscribe('slots', (message) => seen.push(message));
      await a.slots.release(SLOT, 't1');
      await eventually(async () => seen.length === 1, 2000);
      assert.deepEqual(seen, [{ key: SLOT }]);
      assert.deepEqual(await b.slots.acquire(SLOT, 't2', 'replica-b', 1, 5000), GRANTED);
      assert.deepEqual(await a.slots.holders(SLOT), ['t2']);
      stop();
      await a.close();
      await b.close();
    });

    test('slot keys share one hash tag, keep each ticket\'s owner, go when idle, and never expire before a renewed lease', async () => {
      const prefix = newPrefix();
      const store = await newRedisStore(prefix, topology);
      const keys = redisKeys(prefix).slot(SLOT);
      const all = slotKeyList(keys);
      assert.ok(all.every((key) => key.includes(`{slot:${SLOT}}`)));
      assert.deepEqual(await store.slots.acquire(SLOT, 't1', 'replica-a', 1, 100), GRANTED);
      assert.deepEqual(await store.slots.acquire(SLOT, 't2', 'replica-b', 1, 100), waiting(1));
      assert.deepEqual(await store.redis.hgetall(keys.owners), { t1: 'replica-a', t2: 'replica-b' });
      for (const key of all) {
        const pttl = await store.redis.pttl(key);
        assert.ok(pttl > 0 && pttl <= 1000, `${key} expires with the semaphore (${pttl} ms)`);
      }
      await store.slots.renew([{ key: SLOT, ticket: 't1' }], 60_000);
      assert.deepEqual(await store.slots.acquire(SLOT, 't2', 'replica-b', 1, 100), waiting(1), 'asks again with a short lease');
      assert.ok((await store.redis.pttl(keys.holders)) > 60_000, 'the keys outlive the renewed lease: expiries only grow');
      // An idle semaphore's keys go by themselves.
      const idle = redisKeys(prefix).slot('tool:fx/idle');
      assert.deepEqual(await store.slots.acquire('tool:fx/idle', 't1', 'replica-a', 1, 50), GRANTED);
      assert.deepEqual(await store.slots.acquire('tool:fx/idle', 't2', 'replica-a', 1, 50), waiting(1));
      assert.equal(await store.redis.exists(...slotKeyList(idle)), 5);
      await eventually(async () => (await store.redis.exists(...slotKeyList(idle))) === 0, 3000);
      await store.close();
    });
  });
}
