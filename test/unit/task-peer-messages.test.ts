// What the task core answers other replicas and asks of them (task-peer-messages.ts): two replicas in this process,
// each a task core with its own replica link over one in-memory store, running the 2025-era fixture server's tools
// through a real Upstream. Answers and word that the client is reachable go to the replica that runs the call and
// are acted on there; one about a task no replica holds is taken up by none; the leases hear which tasks are held.
import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { GatewayEvents } from '../../src/events.js';
import { ReplicaLink } from '../../src/gateway/replicas.js';
import type { JsonObject, Outcome } from '../../src/jsonrpc.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import type { TaskRecord } from '../../src/store/task-store.js';
import { TaskEngine } from '../../src/tasks/engine.js';
import { NOTHING_TO_DO, type TaskCaller } from '../../src/tasks/local-run.js';
import { storedCall } from '../../src/tasks/task-runs.js';
import { fixtureUpstream, identity, recordingCaller, silentLogger, storedWhen, type FixtureUpstream } from '../helpers/task-core.js';

let fixture: FixtureUpstream;
before(async () => {
  fixture = await fixtureUpstream(new GatewayEvents());
});
after(() => fixture.close());

interface Replica {
  link: ReplicaLink;
  engine: TaskEngine;
}

let store: MemoryTaskStore;
let a: Replica;
let b: Replica;

async function replica(): Promise<Replica> {
  const link = new ReplicaLink(store, silentLogger);
  const engine = new TaskEngine({
    store,
    config: fixture.config.tasks,
    logger: silentLogger,
    replica: { leaseMs: 30_000, maxRunningTasks: 0 },
    peers: link,
    recovery: { upstream: () => fixture.upstream, lost: NOTHING_TO_DO, resume: async (task) => ({ caller: recordingCaller(), identity: identity(task.call.identity.sessionId) }) },
    callers: { authenticated: true },
    events: new GatewayEvents(),
  });
  await link.start();
  return { link, engine };
}

beforeEach(async () => {
  store = new MemoryTaskStore();
  a = await replica();
  b = await replica();
});
afterEach(async () => {
  for (const { engine, link } of [a, b]) {
    await engine.close();
    link.close();
  }
  await store.close();
});

/** Replica A runs the fixture's `ask_twice` (two questions at once) for `caller`; resolves once both wait in the task. */
async function askTwiceOnA(caller: TaskCaller): Promise<TaskRecord> {
  const params = { name: 'ask_twice', arguments: {} };
  const who = identity('session-a');
  const task = await a.engine.runs.open({ principal: 'key:alice', era: '2025-11-25', exposedName: 'ask_twice', upstream: fixture.upstream, call: storedCall(params, who) });
  a.engine.runs.runToolCall(task, fixture.upstream, caller, { params, identity: who, actingFor: undefined });
  await storedWhen(store, task.taskId, (status, open) => status === 'input_required' && open === 2);
  return (await store.tasks.get(task.taskId)) as TaskRecord;
}

/** Answers to the task's open questions: each names the one field its schema asks for. */
function answersTo(task: TaskRecord): JsonObject {
  const answers: JsonObject = {};
  for (const [key, request] of Object.entries(task.openRequests ?? {})) {
    const field = Object.keys((request as { params: { requestedSchema: { properties: JsonObject } } }).params.requestedSchema.properties)[0]!;
    answers[key] = { action: 'accept', content: { [field]: `${field} answer` } };
  }
  return answers;
}

describe('task peer messages', () => {
  it('answers given on another replica go to the one running the call, which acts on them', async () => {
    const task = await askTwiceOnA(recordingCaller());
    assert.equal(b.engine.runs.runsHere(task.taskId), false);
    await b.engine.peerLink.answer(task, answersTo(task));
    const ended = await b.engine.queries.untilResult(task.taskId);
    assert.equal(ended.status, 'completed');
    assert.match(JSON.stringify(ended.outcome), /first answer.*second answer/);
  });

  it('a message about a task this replica runs is taken up; one about a task no replica holds is taken up by none', async () => {
    const held = await askTwiceOnA(recordingCaller());
    assert.deepEqual(await b.link.ask(undefined, 'task.update', { taskId: held.taskId, answers: {} }), { ok: true });
    assert.deepEqual(await b.link.ask(undefined, 'task.reachable', { taskId: held.taskId }), { ok: true });
    const orphan = await store.tasks.create({ taskId: 'nobody-runs-this', principal: 'key:alice', era: '2025-11-25', tool: 'slow', upstream: 'fixture', retentionMs: 60_000, pollMs: 1000 });
    assert.equal(await b.link.ask(undefined, 'task.update', { taskId: orphan.taskId, answers: {} }), undefined);
    assert.equal(await b.link.ask(undefined, 'task.reachable', { taskId: orphan.taskId }), undefined);
    await b.engine.runs.cancel(held);
  });

  it('a client reachable again through another replica gets the questions that found no way to it', async () => {
    const reachable = { now: false };
    const caller: TaskCaller = {
      deliver: (request) => {
        if (!reachable.now) return Promise.resolve(undefined);
        const field = Object.keys((request.params as { requestedSchema: { properties: JsonObject } }).requestedSchema.properties)[0]!;
        return Promise.resolve<Outcome>({ result: { action: 'accept', content: { [field]: `${field} delivered` } } });
      },
      notify: NOTHING_TO_DO,
      ended: NOTHING_TO_DO,
    };
    const task = await askTwiceOnA(caller);
    reachable.now = true;
    await b.engine.peerLink.reachable(task);
    const ended = await b.engine.queries.untilResult(task.taskId);
    assert.equal(ended.status, 'completed');
    assert.match(JSON.stringify(ended.outcome), /first delivered.*second delivered/);
  });

  it('a cancel on another replica stops the call where it runs', async () => {
    const caller = recordingCaller();
    const task = await askTwiceOnA(caller);
    const cancelled = await b.engine.runs.cancel(task);
    assert.equal(cancelled.ok, true);
    await storedWhen(store, task.taskId, (status) => status === 'cancelled');
    assert.equal(a.engine.runs.runsHere(task.taskId), false, 'the run here ended on the store\'s word');
    assert.equal(caller.endedCount, 1);
  });

  it('each replica says which tasks it holds, for the leases of the others', async () => {
    const task = await askTwiceOnA(recordingCaller());
    assert.equal(a.engine.peerLink.holds(task.taskId), true);
    assert.equal(b.engine.peerLink.holds(task.taskId), false);
    assert.deepEqual(await b.link.ask(a.link.id, 'task.held', { taskIds: [task.taskId, 'nobody-runs-this'] }), { held: [task.taskId] });
    await a.engine.runs.cancel(task);
  });
});
