// A replica that shuts down hands over what another replica can carry on (issue 42): two task engines on one store,
// as two replicas are. What never reached its upstream (waiting for a slot) and what its policy runs again
// (retry.onLoss) passes to the replica that stays within one sweep, asked for by the one leaving; the rest fails
// saying the gateway shut down; a task that ends during the hand-over ends once.
import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { GatewayEvents, type GatewayEventMap } from '../../src/events.js';
import { ReplicaLink } from '../../src/gateway/replicas.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { isTerminal, type TaskRecord, type TaskStatus } from '../../src/store/task-store.js';
import type { TaskEngine } from '../../src/tasks/engine.js';
import { SHUT_DOWN_MESSAGE } from '../../src/tasks/shutdown-runs.js';
import { storedCall } from '../../src/tasks/task-runs.js';
import { fixtureUpstream, identity, recordingCaller, silentLogger, startedEngine, storedWhen, type FixtureUpstream } from '../helpers/task-core.js';
import { bounded, nextEvent } from '../helpers/waits.js';

const RULES = { rules: [{ match: 'limited_*', concurrency: 1 }, { match: 'retried_*', retry: { onLoss: true } }] };

let fixture: FixtureUpstream;
before(async () => {
  fixture = await fixtureUpstream(new GatewayEvents(), RULES);
});
after(() => fixture.close());

interface Replica {
  engine: TaskEngine;
  link: ReplicaLink;
  events: GatewayEvents;
  ended: GatewayEventMap['task.ended'][];
  closed: boolean;
}

let store: MemoryTaskStore;
let replicas: Replica[];

async function replica(): Promise<Replica> {
  const link = new ReplicaLink(store, silentLogger);
  const events = new GatewayEvents();
  // Long leases: a take-over within this test is the hand-over's doing, not a lease that ran out.
  const engine = await startedEngine({ store, fixture, link, events, replica: { leaseMs: 60_000, maxRunningTasks: 0 } });
  const started: Replica = { engine, link, events, ended: [], closed: false };
  events.on('task.ended', (e) => started.ended.push(e));
  replicas.push(started);
  return started;
}

/** Shuts `leaving` down as the gateway does: drain (here: none left to wait for), close, then its replica link. */
async function shutDown(leaving: Replica): Promise<void> {
  leaving.engine.beginDrain();
  await leaving.engine.close();
  leaving.closed = true;
  leaving.link.close();
}

beforeEach(() => {
  store = new MemoryTaskStore();
  replicas = [];
});
afterEach(async () => {
  for (const { engine, link, closed } of replicas) {
    if (closed) continue;
    await engine.close();
    link.close();
  }
  await store.close();
});

async function runSlow(on: Replica, exposedName: string, ms: number): Promise<TaskRecord> {
  const params = { name: 'slow', arguments: { ms } };
  const who = identity('session-1');
  const task = await on.engine.runs.open({ principal: 'key:alice', era: '2025-11-25', exposedName, upstream: fixture.upstream, call: storedCall(params, who) });
  on.engine.runs.runToolCall(task, fixture.upstream, recordingCaller(), { params, identity: who, actingFor: undefined });
  return task;
}

describe('hand-over at shutdown', () => {
  it('passes what never started and what retries on loss to the replica that stays, at once, and fails the rest', async () => {
    const a = await replica();
    const b = await replica();
    const started = (taskId: string): Promise<unknown> => nextEvent(a.events, 'task.started', (e) => e.taskId === taskId);
    const first = await runSlow(a, 'limited_slow', 60_000);
    await started(first.taskId);
    const inLine = nextEvent(a.events, 'task.status', (e) => e.queued === true);
    const waiting = await runSlow(a, 'limited_slow', 50);
    assert.equal((await bounded(inLine, 'the second task in line')).taskId, waiting.taskId);
    const retried = await runSlow(a, 'retried_slow', 50);
    await started(retried.taskId);
    const plain = await runSlow(a, 'slow', 60_000);
    await started(plain.taskId);

    const handed: GatewayEventMap['task.handed_over'][] = [];
    a.events.on('task.handed_over', (e) => handed.push(e));
    const requeued = nextEvent(b.events, 'task.recovered', (e) => e.taskId === waiting.taskId);
    const rerun = nextEvent(b.events, 'task.recovered', (e) => e.taskId === retried.taskId);
    await shutDown(a);

    assert.deepEqual(handed.map((e) => [e.taskId, e.why]).sort(), [[waiting.taskId, 'not started'], [retried.taskId, 'retry on loss']].sort());
    for (const cut of [first, plain]) {
      const task = await store.tasks.get(cut.taskId);
      assert.deepEqual([task?.status, task?.message], ['failed', SHUT_DOWN_MESSAGE]);
    }
    assert.deepEqual(a.ended.map((e) => [e.taskId, e.reason]).sort(), [[first.taskId, 'drained'], [plain.taskId, 'drained']].sort());
    // Asked to sweep by the replica that left, b takes both over now (its own leases are 60 s long).
    assert.deepEqual([(await bounded(requeued, 'the requeue')).action, (await bounded(rerun, 'the re-run')).action], ['requeued', 'retried']);
    for (const taskId of [waiting.taskId, retried.taskId]) {
      await storedWhen(store, taskId, (status) => isTerminal(status as TaskStatus));
      assert.equal((await store.tasks.get(taskId))?.status, 'completed');
    }
    assert.equal((await store.tasks.get(retried.taskId))?.attempt, 2);
    assert.equal(b.engine.peerLink.holds(waiting.taskId) || b.engine.peerLink.holds(retried.taskId), false, 'ended on b');
  });

  it('a task whose call ends during the hand-over ends once, whichever way the race goes', async () => {
    // The call answers around the moment the replica closes: before it decides (it completes there), or after (it
    // is handed over and run again on the other replica). Either way one end, recorded once.
    // The shutdown begins at a spread of moments around the call's answer (20 ms in): nothing asserted depends on when.
    for (let lateBy = 0; lateBy <= 30; lateBy += 3) {
      const a = await replica();
      const b = await replica();
      const ended = Promise.race([a, b].map(({ events }) => nextEvent(events, 'task.ended')));
      const task = await runSlow(a, 'retried_slow', 20);
      await nextEvent(a.events, 'task.started', (e) => e.taskId === task.taskId);
      await new Promise((resolve) => setTimeout(resolve, lateBy));
      await shutDown(a);
      await bounded(ended, 'the end');
      await new Promise((resolve) => setImmediate(resolve)); // a second end, were there one, would be told by now
      const ends = [...a.ended, ...b.ended].filter((e) => e.taskId === task.taskId);
      assert.deepEqual(ends.map((e) => e.status), ['completed'], `${lateBy} ms late: ${JSON.stringify(ends)}`);
      assert.equal((await store.tasks.get(task.taskId))?.status, 'completed');
      await shutDown(b); // the next round's replicas alone
    }
  });

  it('a task cancelled as it is handed over stays cancelled and is not run again', async () => {
    const a = await replica();
    const b = await replica();
    const task = await runSlow(a, 'retried_slow', 60_000);
    await nextEvent(a.events, 'task.started', (e) => e.taskId === task.taskId);
    // The client cancels through b the moment a lets go of it, racing b's take-over.
    a.events.on('task.handed_over', () => void b.engine.runs.cancel(task));
    const startedOnB: string[] = [];
    b.events.on('task.started', (e) => startedOnB.push(e.taskId));
    const cancelled = nextEvent(b.events, 'task.ended', (e) => e.taskId === task.taskId);
    // b's sweep, asked for by a, settles the task: it was cancelled meanwhile, or is cancelled after b took it.
    const settled = nextEvent(b.events, 'task.recovered', (e) => e.taskId === task.taskId).then(() => undefined);
    await shutDown(a);
    assert.equal((await bounded(cancelled, 'the cancel')).status, 'cancelled');
    await Promise.race([settled, new Promise((resolve) => setTimeout(resolve, 500))]);
    assert.equal((await store.tasks.get(task.taskId))?.status, 'cancelled');
    const ends = [...a.ended, ...b.ended].filter((e) => e.taskId === task.taskId);
    assert.deepEqual(ends.map((e) => e.status), ['cancelled']);
    assert.ok(!b.engine.peerLink.holds(task.taskId), 'b runs nothing of it');
  });
});
