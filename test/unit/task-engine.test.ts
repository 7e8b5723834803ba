// The task core as the gateway runs it (engine.ts): its parts built once and shared (a task opened through the
// runs is read through the queries), a reload's policy reaching every part, readiness counting the runs, a drain
// that ends when the last run does, and a close that fails what still runs.
import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { GatewayEvents } from '../../src/events.js';
import { ReplicaLink } from '../../src/gateway/replicas.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import type { TaskRecord } from '../../src/store/task-store.js';
import type { TaskEngine } from '../../src/tasks/engine.js';
import { storedCall } from '../../src/tasks/task-runs.js';
import { configFor, fixtureUpstream, identity, recordingCaller, silentLogger, startedEngine, type FixtureUpstream } from '../helpers/task-core.js';
import { nextEvent } from '../helpers/waits.js';

let fixture: FixtureUpstream;
before(async () => {
  fixture = await fixtureUpstream(new GatewayEvents());
});
after(() => fixture.close());

let store: MemoryTaskStore;
let link: ReplicaLink;
let events: GatewayEvents;
let engine: TaskEngine;

beforeEach(async () => {
  store = new MemoryTaskStore();
  link = new ReplicaLink(store, silentLogger);
  events = new GatewayEvents();
  engine = await startedEngine({ store, fixture, link, events, replica: { leaseMs: 30_000, maxRunningTasks: 4 } });
});
afterEach(async () => {
  await engine.close();
  link.close();
  await store.close();
});

async function runSlow(exposedName: string, ms: number): Promise<TaskRecord> {
  const params = { name: 'slow', arguments: { ms } };
  const who = identity('session-1');
  const task = await engine.runs.open({ principal: 'key:alice', era: '2025-11-25', exposedName: exposedName, upstream: fixture.upstream, call: storedCall(params, who) });
  engine.runs.runToolCall(task, fixture.upstream, recordingCaller(), { params, identity: who, actingFor: undefined });
  return task;
}

describe('task engine', () => {
  it('readiness counts the runs here against replicas.maxRunningTasks, and the parts share one store of runs', async () => {
    assert.deepEqual({ ...engine.health(), leases: undefined }, { leases: undefined, running: 0, maxRunningTasks: 4 });
    const started = nextEvent(events, 'task.started');
    const task = await runSlow('slow', 60_000);
    await started;
    assert.equal(engine.health().running, 1);
    assert.equal(engine.health().leases.ok, true);
    assert.equal(engine.peerLink.holds(task.taskId), true);
    assert.equal((await engine.queries.find(task.taskId, { reader: { principal: 'key:alice', mayUse: () => true } })).status, 'working');
    await engine.runs.cancel(task);
    assert.equal(engine.health().running, 0);
  });

  it('a reload\'s task policy applies to tasks opened after it', async () => {
    engine.reconfigure(configFor('http://127.0.0.1:1/mcp', { rules: [{ match: 'short_*', maxRunMs: 50 }] }).tasks);
    assert.equal(engine.policies.policyFor('short_slow').maxRunMs, 50);
    const task = await runSlow('short_slow', 60_000);
    const failed = await engine.queries.untilTerminal(task.taskId);
    assert.match(failed.message ?? '', /maximum run time of 50 ms/);
  });

  it('a drain ends once the last run has, and close fails what still runs', async () => {
    const quick = await runSlow('slow', 20);
    await engine.drain(60_000);
    assert.equal((await engine.queries.untilTerminal(quick.taskId)).status, 'completed');
    const started = nextEvent(events, 'task.started');
    const slow = await runSlow('slow', 60_000);
    await started;
    const ended = nextEvent(events, 'task.ended', (e) => e.taskId === slow.taskId);
    await engine.close();
    assert.deepEqual([(await ended).status, (await ended).reason], ['failed', 'drained']);
    assert.equal((await store.tasks.get(slow.taskId))?.message, 'The gateway shut down while the task was running');
  });
});
