// The runs of one replica (task-runs.ts), built from their parts over the in-memory store, calling the 2025-era
// fixture server through a real Upstream: a task runs to completion, a deadline fails it, a cancel (here, or
// written by another replica) stops its call, a full replica refuses new tasks, and a removed upstream's runs fail.
import assert from 'node:assert/strict';
import { after, before, beforeEach, afterEach, describe, it } from 'node:test';
import { GatewayError } from '../../src/errors.js';
import { GatewayEvents } from '../../src/events.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import type { TaskRecord } from '../../src/store/task-store.js';
import { EndWrites } from '../../src/tasks/end-writes.js';
import { LocalEnds } from '../../src/tasks/local-ends.js';
import { RunRelay } from '../../src/tasks/run-relay.js';
import { TaskSlots } from '../../src/tasks/slots.js';
import { TaskPolicies } from '../../src/tasks/task-policies.js';
import { TaskQueries } from '../../src/tasks/task-queries.js';
import { storedCall, TaskRuns } from '../../src/tasks/task-runs.js';
import { fixtureUpstream, identity, recordingCaller, silentLogger, type FixtureUpstream } from '../helpers/task-core.js';
import { nextEvent } from '../helpers/waits.js';

const REPLICA = 'replica-1';
const LEASE_MS = 30_000;
/** Tools exposed as `deadline_*` may run 100 ms at most. */
const TASKS = { rules: [{ match: 'deadline_*', maxRunMs: 100 }] };

let fixture: FixtureUpstream;
const upstreamEvents = new GatewayEvents();
before(async () => {
  fixture = await fixtureUpstream(upstreamEvents, TASKS);
});
after(() => fixture.close());

let store: MemoryTaskStore;
let events: GatewayEvents;
beforeEach(() => {
  store = new MemoryTaskStore();
  events = new GatewayEvents();
});
afterEach(() => store.close());

function taskRuns(maxRunningTasks = 0): { runs: TaskRuns; queries: TaskQueries } {
  const localEnds = new LocalEnds();
  const slots = new TaskSlots({ store, logger: silentLogger, leaseMs: LEASE_MS, replicaId: () => REPLICA, authenticated: true, events });
  const queries = new TaskQueries({ store, localEnds, events });
  const runs = new TaskRuns({
    store,
    policies: new TaskPolicies(fixture.config.tasks),
    logger: silentLogger,
    replica: { maxRunningTasks },
    callers: { authenticated: true },
    events,
    slots,
    endWrites: new EndWrites({ store, logger: silentLogger, events, localEnds }),
    relay: new RunRelay({ store, logger: silentLogger, events }),
    leases: { reserve: (taskId) => store.leases.reserve(taskId, REPLICA, LEASE_MS), release: (taskId) => store.leases.release(taskId, REPLICA), leaseMs: LEASE_MS },
    queries,
    recovery: {
      upstream: () => fixture.upstream,
      lost: () => undefined,
      resume: async (task) => ({ caller: recordingCaller(), identity: identity(task.call.identity.sessionId) }),
    },
  });
  return { runs, queries };
}

/** Opens a task of `exposedName` and runs the fixture's `slow` tool for it, sleeping `ms`. */
async function runSlow(runs: TaskRuns, exposedName: string, ms: number): Promise<{ task: TaskRecord; caller: ReturnType<typeof recordingCaller>; signal: AbortSignal }> {
  const params = { name: 'slow', arguments: { ms } };
  const who = identity('session-1');
  const task = await runs.open({ principal: 'key:alice', era: '2025-11-25', exposedName: exposedName, upstream: fixture.upstream, call: storedCall(params, who) });
  const caller = recordingCaller();
  const handle = runs.runToolCall(task, fixture.upstream, caller, { params, identity: who, actingFor: undefined });
  return { task, caller, signal: handle.signal };
}

describe('task runs', () => {
  it('a task is stored and leased before it runs, then runs to completion with the upstream\'s result', async () => {
    const { runs, queries } = taskRuns();
    const created = nextEvent(events, 'task.created');
    const { task, caller } = await runSlow(runs, 'slow', 0);
    assert.equal((await created).taskId, task.taskId);
    assert.equal((await store.tasks.get(task.taskId))?.status, 'working', 'durable before anyone hears of it');
    assert.equal(runs.runsHere(task.taskId), true);
    const ended = await queries.untilResult(task.taskId);
    assert.equal(ended.status, 'completed');
    assert.ok(ended.outcome !== undefined && 'result' in ended.outcome);
    assert.match(JSON.stringify(ended.outcome.result), /sleptMs/);
    assert.equal(runs.runsHere(task.taskId), false);
    assert.equal(caller.endedCount, 1, 'the caller stops counting the run');
  });

  it('a run past its policy\'s maxRunMs fails saying so, and its upstream call is cancelled', async () => {
    const { runs, queries } = taskRuns();
    const { task, signal } = await runSlow(runs, 'deadline_slow', 60_000);
    const ended = await nextEvent(events, 'task.ended', (e) => e.taskId === task.taskId);
    assert.equal(ended.status, 'failed');
    assert.equal(ended.reason, 'maxRunMs');
    const failed = await queries.untilTerminal(task.taskId);
    assert.match(failed.message ?? '', /exceeded its maximum run time of 100 ms \(maxRunMs\)/);
    assert.equal(signal.aborted, true);
  });

  it('cancel ends the task in the store first, then stops its call; a second cancel finds it terminal', async () => {
    const { runs } = taskRuns();
    const started = nextEvent(events, 'task.started');
    const { task, caller, signal } = await runSlow(runs, 'slow', 60_000);
    await started;
    const cancelled = await runs.cancel(task);
    assert.equal(cancelled.ok, true);
    assert.equal(cancelled.task?.status, 'cancelled');
    assert.equal(signal.aborted, true);
    assert.equal(runs.runsHere(task.taskId), false);
    assert.equal(caller.endedCount, 1);
    const again = await runs.cancel(task);
    assert.deepEqual([again.ok, again.task?.status], [false, 'cancelled']);
  });

  it('a cancel written elsewhere (another replica) stops the call running here', async () => {
    const { runs } = taskRuns();
    const started = nextEvent(events, 'task.started');
    const { task, signal } = await runSlow(runs, 'slow', 60_000);
    await started;
    const stopped = new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    await store.tasks.transition(task.taskId, { to: 'cancelled', message: 'cancelled on another replica' });
    await stopped;
    assert.equal(runs.runsHere(task.taskId), false);
  });

  it('a replica running replicas.maxRunningTasks refuses a new task for now', async () => {
    const { runs } = taskRuns(1);
    const limited = nextEvent(events, 'rate.limited');
    const { task } = await runSlow(runs, 'slow', 60_000);
    const refused = await runs.open({ principal: 'key:alice', era: '2025-11-25', exposedName: 'slow', upstream: fixture.upstream, call: undefined }).then(
      () => assert.fail('a second task was opened'),
      (error: unknown) => error,
    );
    assert.ok(refused instanceof GatewayError);
    assert.equal(refused.code, 'replica_full');
    assert.deepEqual(refused.data, { retryAfterMs: 1000 });
    assert.equal((await limited).limit, 'maxRunningTasks');
    await runs.cancel(task);
  });

  it('the runs of an upstream a reload removed fail once their grace is over', async () => {
    const { runs, queries } = taskRuns();
    const started = nextEvent(events, 'task.started');
    const { task } = await runSlow(runs, 'slow', 60_000);
    await started;
    assert.equal(await runs.drainUpstream(fixture.upstream, 0, 'upstream fixture was removed'), 1);
    const failed = await queries.untilTerminal(task.taskId);
    assert.deepEqual([failed.status, failed.message], ['failed', 'upstream fixture was removed']);
  });

  it('close fails what still runs, saying the gateway shut down', async () => {
    const { runs, queries } = taskRuns();
    const started = nextEvent(events, 'task.started');
    const { task } = await runSlow(runs, 'slow', 60_000);
    await started;
    await runs.close();
    const failed = await queries.untilTerminal(task.taskId);
    assert.deepEqual([failed.status, failed.message], ['failed', 'The gateway shut down while the task was running']);
  });
});
