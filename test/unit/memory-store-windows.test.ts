// The embedded store's other time rules on node:test's mock clock, through the Date.now the gateway gives it (no
// `now` option): a rate window counts hits until it ends and starts afresh at its end; a client session lives
// expireAfterMs past its last save (each save slides it), and is gone at that millisecond; a slot ticket's lease
// holds its slot until its deadline, a renewal extends only a live lease, and a run-out ticket frees the slot for the
// next caller. Each bound is checked one millisecond before and at it.
import assert from 'node:assert/strict';
import { beforeEach, describe, it, mock } from 'node:test';
import type { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { memoryStoreOnMockClock } from '../helpers/mock-clock.js';

let store: MemoryTaskStore;

describe('memory store windows and leases on the mock clock', () => {
  const storeNow = memoryStoreOnMockClock();
  beforeEach(() => {
    store = storeNow();
  });

  it('a rate window counts until it ends, then a new one starts at the next hit', async () => {
    assert.deepEqual(await store.rates.count('calls', 'key:alice', 1_000), { hits: 1, resetInMs: 1_000 });
    mock.timers.setTime(999);
    assert.deepEqual(await store.rates.count('calls', 'key:alice', 1_000), { hits: 2, resetInMs: 1 });
    mock.timers.setTime(1_000);
    assert.deepEqual(await store.rates.count('calls', 'key:alice', 1_000), { hits: 1, resetInMs: 1_000 }, 'the window ended at 1 000 ms');
    assert.deepEqual(await store.rates.count('calls', 'key:bob', 1_000), { hits: 1, resetInMs: 1_000 }, 'windows are per principal');
  });

  it('a session lives expireAfterMs past its last save; each save slides it', async () => {
    assert.equal(await store.sessions.save('s1', { protocol: '2025-11-25' }, 10_000, { create: true }), true);
    mock.timers.setTime(9_999);
    assert.equal(await store.sessions.save('s1', { seen: 'yes' }, 10_000), true, 'saved 1 ms before it would expire');
    mock.timers.setTime(19_998);
    assert.deepEqual(await store.sessions.get('s1'), { protocol: '2025-11-25', seen: 'yes' });
    mock.timers.setTime(19_999);
    assert.equal(await store.sessions.get('s1'), undefined, 'gone expireAfterMs after the last save');
    assert.equal(await store.sessions.save('s1', { seen: 'again' }, 10_000), false, 'an expired session is not revived without create');
  });

  it('a slot ticket holds its slot until its lease\'s deadline; a renewal extends only a live lease', async () => {
    assert.deepEqual(await store.slots.acquire('up', 'held', 'r1', 2, 1_000), { granted: true });
    assert.deepEqual(await store.slots.acquire('up', 'renewed', 'r1', 2, 1_000), { granted: true });
    mock.timers.setTime(999);
    assert.deepEqual(await store.slots.holders('up'), ['held', 'renewed']);
    await store.slots.renew([{ key: 'up', ticket: 'renewed' }], 1_000); // now until 1 999
    mock.timers.setTime(1_000);
    assert.deepEqual(await store.slots.holders('up'), ['renewed'], 'the unrenewed ticket ran out at 1 000 ms');
    await store.slots.renew([{ key: 'up', ticket: 'held' }], 60_000);
    assert.deepEqual(await store.slots.holders('up'), ['renewed'], 'a run-out lease is not revived by a late renewal');
    mock.timers.setTime(1_998);
    assert.deepEqual(await store.slots.holders('up'), ['renewed']);
    mock.timers.setTime(1_999);
    assert.deepEqual(await store.slots.holders('up'), []);
    assert.deepEqual(await store.slots.acquire('up', 'next', 'r2', 1, 1_000), { granted: true }, 'a run-out ticket frees its slot');
  });
});
