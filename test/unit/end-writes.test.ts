// Ends of runs written to the store (end-writes.ts): written once and announced; kept while the store refuses
// the write (this replica still holds the task, its waiters are told to ask the store) and written once it is
// back, announced as kept; and tried once more at shutdown.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { GatewayEvents } from '../../src/events.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import type { TaskChange, TaskRecord, TransitionResult } from '../../src/store/task-store.js';
import { EndWrites } from '../../src/tasks/end-writes.js';
import { LocalEnds } from '../../src/tasks/local-ends.js';
import { silentLogger } from '../helpers/task-core.js';
import { nextEvent } from '../helpers/waits.js';

/** The in-memory store with an outage switch: while `away`, status writes fail as a lost Redis connection does. */
class StoreWithOutage extends MemoryTaskStore {
  away = false;

  constructor() {
    super();
    const transition = this.tasks.transition.bind(this.tasks);
    this.tasks.transition = (taskId: string, change: TaskChange, applied?: (result: TransitionResult) => void): Promise<TransitionResult> => {
      if (this.away) return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
      return transition(taskId, change, applied);
    };
  }
}

const RESULT = { result: { content: [{ type: 'text', text: 'the answer' }] } };
const COMPLETED: TaskChange = { to: 'completed', outcome: RESULT };

let store: StoreWithOutage;
let events: GatewayEvents;
let localEnds: LocalEnds;
let writes: EndWrites;

beforeEach(() => {
  store = new StoreWithOutage();
  events = new GatewayEvents();
  localEnds = new LocalEnds();
  writes = new EndWrites({ store, logger: silentLogger, events, localEnds });
});

afterEach(async () => {
  await writes.close();
  await store.close();
});

let serial = 0;
function create(): Promise<TaskRecord> {
  return store.tasks.create({ taskId: `end-${++serial}`, principal: 'key:alice', era: '2025-11-25', tool: 'slow', upstream: 'fixture', retentionMs: 60_000, pollMs: 1000 });
}

describe('end writes', () => {
  it("this replica's waiters are told once the store has the end, before the bookkeeping that follows it", async () => {
    const task = await create();
    const order: string[] = [];
    // As the Redis store does: the change is stored and told (`applied`), then its stored-bytes charge takes a round
    // trip more (here: a turn of the event loop) before the write returns.
    const transition = store.tasks.transition.bind(store.tasks);
    store.tasks.transition = async (taskId, change, applied) => {
      const result = await transition(taskId, change, applied);
      await new Promise((resolve) => setImmediate(resolve));
      order.push('bookkeeping done');
      return result;
    };
    const told = new Promise<TaskRecord | undefined>((resolve) => localEnds.listen(task.taskId, resolve));
    void told.then(() => order.push('waiters told'));
    await writes.record({ task, change: COMPLETED, reason: undefined });
    assert.deepEqual((await told)?.outcome, RESULT);
    assert.deepEqual(order, ['waiters told', 'bookkeeping done']);
  });

  it('an end is written once, told to this replica\'s waiters with its outcome, and announced', async () => {
    const task = await create();
    const told: (TaskRecord | undefined)[] = [];
    localEnds.listen(task.taskId, (ended) => told.push(ended));
    const announced = nextEvent(events, 'task.ended');
    await writes.record({ task, change: COMPLETED, reason: undefined });
    assert.equal(told.length, 1);
    assert.deepEqual(told[0]?.outcome, RESULT);
    const ended = await announced;
    assert.deepEqual([ended.taskId, ended.status, ended.kept], [task.taskId, 'completed', undefined]);
    assert.equal(writes.holds(task.taskId), false);
    assert.deepEqual((await store.tasks.get(task.taskId, { outcome: true }))?.outcome, RESULT);
  });

  it('an end the store refuses is kept, held by this replica, and written once the store is back', async () => {
    const task = await create();
    const told: (TaskRecord | undefined)[] = [];
    localEnds.listen(task.taskId, (ended) => told.push(ended));
    store.away = true;
    const ended = nextEvent(events, 'task.ended');
    await writes.record({ task, change: { to: 'failed', message: 'maxRunMs exceeded' }, reason: 'maxRunMs' });
    assert.deepEqual(told, [undefined], 'waiters here are told to ask the store');
    assert.equal(writes.holds(task.taskId), true, 'the lease stays this replica\'s while the outcome waits here');
    assert.equal(writes.count, 1);
    assert.equal((await store.tasks.get(task.taskId))?.status, 'working');
    store.away = false;
    const written = await ended;
    assert.deepEqual([written.taskId, written.status, written.reason, written.kept], [task.taskId, 'failed', 'maxRunMs', true]);
    assert.equal(writes.holds(task.taskId), false);
    assert.equal(writes.count, 0);
    assert.equal((await store.tasks.get(task.taskId))?.status, 'failed');
  });

  it('an end of a task already terminal is not announced again', async () => {
    const task = await create();
    await store.tasks.transition(task.taskId, { to: 'cancelled' });
    let announced = 0;
    events.on('task.ended', () => announced++);
    await writes.record({ task, change: COMPLETED, reason: undefined });
    assert.equal(announced, 0);
    assert.equal((await store.tasks.get(task.taskId))?.status, 'cancelled', 'terminal is forever');
  });

  it('shutdown tries what is kept once more', async () => {
    const task = await create();
    store.away = true;
    await writes.record({ task, change: COMPLETED, reason: undefined });
    assert.equal(writes.count, 1);
    store.away = false;
    await writes.close();
    assert.equal(writes.count, 0);
    assert.equal((await store.tasks.get(task.taskId))?.status, 'completed');
  });
});
