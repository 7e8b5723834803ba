// Task expiry in the embedded store (src/store/memory/tasks.ts) on node:test's mock clock, through the Date.now the
// gateway gives it (no `now` option): an ended task lives until max(created + retention, ended + result grace), an
// upstream's own (native) task from its creation whether it runs or not, a running one never; an expired id is told
// from an unknown one for EXPIRED_MEMORY_MS, a deleted keyed id stays retired as long; stored bytes are released at
// the expiry. Each bound is checked one millisecond before and at it (the integration suite, on the real clock, can
// only sleep past it).
import assert from 'node:assert/strict';
import { beforeEach, describe, it, mock } from 'node:test';
import type { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { memoryStoreOnMockClock } from '../helpers/mock-clock.js';

let store: MemoryTaskStore;
import { DEFAULT_RESULT_GRACE_MS, EXPIRED_MEMORY_MS, type NewTask } from '../../src/store/tasks.js';

const RETENTION_MS = 60_000;

function newTask(taskId: string, overrides: Partial<NewTask> = {}): NewTask {
  return { taskId, principal: 'key:alice', era: '2025-11-25', tool: 'slow', upstream: 'fixture', retentionMs: RETENTION_MS, pollMs: 1000, ...overrides };
}

/** Whether the store still has the task, and whether it says the id expired. */
async function state(taskId: string): Promise<{ live: boolean; expired: boolean }> {
  return { live: (await store.tasks.get(taskId)) !== undefined, expired: await store.tasks.expired(taskId) };
}

describe('memory store: task expiry on the mock clock', () => {
  const storeNow = memoryStoreOnMockClock();
  beforeEach(() => {
    store = storeNow();
  });

  it('an ended task lives until its retention from creation when that is the later bound', async () => {
    await store.tasks.create(newTask('t1'));
    mock.timers.setTime(1_000);
    await store.tasks.transition('t1', { to: 'completed' });
    // created 0 + 60 s retention = 60 s; ended 1 s + 60 s grace = 61 s: the later one wins.
    const expiresAt = Math.max(RETENTION_MS, 1_000 + DEFAULT_RESULT_GRACE_MS);
    mock.timers.setTime(expiresAt - 1);
    assert.deepEqual(await state('t1'), { live: true, expired: false });
    mock.timers.setTime(expiresAt);
    assert.deepEqual(await state('t1'), { live: false, expired: true });
  });

  it('a long retention outlasts the result grace: the task stays until created + retention', async () => {
    await store.tasks.create(newTask('t1', { retentionMs: 600_000 }));
    mock.timers.setTime(1_000);
    await store.tasks.transition('t1', { to: 'failed' });
    mock.timers.setTime(599_999);
    assert.deepEqual(await state('t1'), { live: true, expired: false });
    mock.timers.setTime(600_000);
    assert.deepEqual(await state('t1'), { live: false, expired: true });
  });

  it('a task ended late gets the result grace from its end, past its retention', async () => {
    await store.tasks.create(newTask('t1'));
    mock.timers.setTime(500_000);
    assert.deepEqual(await state('t1'), { live: true, expired: false }, 'a running task outlives its retention');
    await store.tasks.transition('t1', { to: 'completed' });
    mock.timers.setTime(500_000 + DEFAULT_RESULT_GRACE_MS - 1);
    assert.deepEqual(await state('t1'), { live: true, expired: false });
    mock.timers.setTime(500_000 + DEFAULT_RESULT_GRACE_MS);
    assert.deepEqual(await state('t1'), { live: false, expired: true });
  });

  it('a running task never expires; an upstream\'s own task expires at its retention from creation, running or not', async () => {
    await store.tasks.create(newTask('ours'));
    await store.tasks.create(newTask('native', { native: true }));
    mock.timers.setTime(RETENTION_MS - 1);
    assert.deepEqual(await state('native'), { live: true, expired: false });
    mock.timers.setTime(RETENTION_MS);
    assert.deepEqual(await state('native'), { live: false, expired: true });
    mock.timers.setTime(EXPIRED_MEMORY_MS * 10);
    assert.deepEqual(await state('ours'), { live: true, expired: false });
  });

  it('an expired id is remembered for EXPIRED_MEMORY_MS after its expiry, then it is unknown (and free for a key again)', async () => {
    await store.tasks.createOnce(newTask('keyed'), 'digest');
    await store.tasks.transition('keyed', { to: 'completed' });
    const expiresAt = DEFAULT_RESULT_GRACE_MS; // = RETENTION_MS: ended at 0
    mock.timers.setTime(expiresAt);
    assert.equal(await store.tasks.retired('keyed'), 'expired');
    mock.timers.setTime(expiresAt + EXPIRED_MEMORY_MS - 1);
    assert.equal(await store.tasks.expired('keyed'), true);
    assert.deepEqual(await store.tasks.createOnce(newTask('keyed'), 'digest'), { outcome: 'retired', reason: 'expired' });
    mock.timers.setTime(expiresAt + EXPIRED_MEMORY_MS);
    assert.equal(await store.tasks.expired('keyed'), false);
    assert.equal(await store.tasks.retired('keyed'), undefined);
    assert.equal((await store.tasks.createOnce(newTask('keyed'), 'digest')).outcome, 'created');
  });

  it('a deleted keyed id stays retired as long as its task would have been remembered once expired', async () => {
    await store.tasks.createOnce(newTask('keyed'), 'digest');
    await store.tasks.transition('keyed', { to: 'cancelled' });
    mock.timers.setTime(10_000);
    assert.equal(await store.tasks.delete('keyed'), 'deleted');
    const until = RETENTION_MS + EXPIRED_MEMORY_MS; // its expiry (60 s) + the memory of expired ids
    mock.timers.setTime(until - 1);
    assert.equal(await store.tasks.retired('keyed'), 'deleted');
    assert.equal(await store.tasks.expired('keyed'), false, 'deleted is not expired');
    mock.timers.setTime(until);
    assert.equal(await store.tasks.retired('keyed'), undefined);
  });

  it('stored bytes: an ended task\'s charge is released at its expiry, a running task\'s creation charge at its retention', async () => {
    await store.tasks.create(newTask('ended'));
    await store.tasks.create(newTask('running', { principal: 'key:bob' }));
    await store.tasks.transition('ended', { to: 'completed', outcome: { result: { content: [] } } });
    mock.timers.setTime(RETENTION_MS - 1);
    assert.ok((await store.tasks.storedBytes('key:alice')).principal > 0);
    assert.ok((await store.tasks.storedBytes('key:bob')).principal > 0);
    mock.timers.setTime(RETENTION_MS);
    assert.equal((await store.tasks.storedBytes('key:alice')).principal, 0, 'released when the ended task expired');
    assert.equal((await store.tasks.storedBytes('key:bob')).principal, 0, 'a running task\'s charge lapses at its retention');
    assert.equal((await store.tasks.storedBytes('key:bob')).total, 0);
  });
});
