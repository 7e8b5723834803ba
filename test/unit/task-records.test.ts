// Writes to records no run holds (task-records.ts), over the in-memory store: an ended task deleted before its
// TTL (a running one refused, a gone one unknown), and the records of tasks a 2026-07-28 upstream runs itself,
// created once per id and ended once.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { GatewayError } from '../../src/errors.js';
import { GatewayEvents } from '../../src/events.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import type { TaskRecord } from '../../src/store/task-store.js';
import { NATIVE_TASKS_PRINCIPAL } from '../../src/principals.js';
import { NOT_FOUND } from '../../src/tasks/task-queries.js';
import { TaskRecords } from '../../src/tasks/task-records.js';
import type { Upstream } from '../../src/upstream/life/upstream.js';
import { unconnectedUpstream } from '../helpers/task-core.js';
import { nextEvent } from '../helpers/waits.js';

let store: MemoryTaskStore;
let events: GatewayEvents;
let records: TaskRecords;
let upstream: Upstream;

beforeEach(() => {
  store = new MemoryTaskStore();
  events = new GatewayEvents();
  records = new TaskRecords({ store, authenticated: true, events });
  upstream = unconnectedUpstream(events);
});
afterEach(async () => {
  await upstream.close();
  await store.close();
});

async function refusal(write: Promise<unknown>): Promise<{ code: string; message: string }> {
  const error = await write.then(() => assert.fail('the write was not refused'), (e: unknown) => e);
  assert.ok(error instanceof GatewayError, String(error));
  return { code: error.code, message: error.message };
}

function create(taskId: string): Promise<TaskRecord> {
  return store.tasks.create({ taskId, principal: 'key:alice', era: '2025-11-25', tool: 'slow', upstream: 'fixture', retentionMs: 60_000, pollMs: 1000 });
}

describe('task records: delete', () => {
  it('an ended task goes before its TTL and is announced; a running one is refused; a gone one is unknown', async () => {
    const running = await create('running');
    assert.deepEqual(await refusal(records.delete(running)), { code: 'invalid_params', message: 'Cannot delete task: it is still running; cancel it first' });
    await store.tasks.transition('running', { to: 'input_required', openRequests: {} });
    assert.match((await refusal(records.delete({ ...running, status: 'input_required' }))).message, /still waiting for input/);
    await store.tasks.transition('running', { to: 'completed', outcome: { result: { content: [] } } });
    const deleted = nextEvent(events, 'task.deleted');
    await records.delete(running);
    assert.equal((await deleted).taskId, 'running');
    assert.equal(await store.tasks.get('running'), undefined);
    assert.deepEqual(await refusal(records.delete(running)), { code: 'invalid_params', message: NOT_FOUND });
  });

  it('a call held for approval is refused saying it waits for approval: cancelling is what ends the hold', async () => {
    const approval = { approvers: ['key:bob'], scopes: [], deadlineMs: Date.now() + 60_000, digest: 'd', state: 'pending' as const };
    const held = await store.tasks.create({ taskId: 'held', principal: 'key:alice', era: '2025-11-25', tool: 'slow', upstream: 'fixture', retentionMs: 60_000, pollMs: 1000, approval });
    assert.deepEqual(await refusal(records.delete(held)), { code: 'invalid_params', message: 'Cannot delete task: it is still waiting for approval; cancel it first' });
    assert.ok((await store.tasks.get('held')) !== undefined, 'the hold is still there');
  });
});

describe('task records: tasks upstreams run themselves', () => {
  it('a native task is recorded once, working on its upstream, owned by its creator or by no client', async () => {
    const created = nextEvent(events, 'task.created');
    await records.recordNative('2026-07-28', 'up-1', 'remote_tool', upstream, 60_000, 'key:alice');
    assert.deepEqual(await created, { taskId: 'up-1', principal: 'key:alice', tool: 'remote_tool', upstream: 'fixture', era: '2026-07-28', queued: false, native: true });
    const stored = await store.tasks.get('up-1');
    assert.deepEqual([stored?.status, stored?.native, stored?.message], ['working', true, "Runs on upstream 'fixture'"]);
    const again = await refusal(records.recordNative('2026-07-28', 'up-1', 'remote_tool', upstream, 60_000, 'key:alice'));
    assert.equal(again.code, 'internal');
    assert.match(again.message, /returned task id 'up-1', which another task already uses/);
    await records.recordNative('2026-07-28', 'up-2', 'remote_tool', upstream, 60_000, undefined);
    assert.equal((await store.tasks.get('up-2'))?.principal, NATIVE_TASKS_PRINCIPAL);
  });

  it('a native task\'s end is recorded and announced once: terminal is forever', async () => {
    await records.recordNative('2026-07-28', 'up-3', 'remote_tool', upstream, 60_000, 'key:alice');
    let ended = 0;
    events.on('task.ended', (e) => {
      ended++;
      assert.deepEqual([e.taskId, e.status, e.era], ['up-3', 'completed', '2026-07-28']);
    });
    await records.recordNativeEnd('up-3', 'completed');
    await records.recordNativeEnd('up-3', 'failed');
    assert.equal(ended, 1);
    assert.equal((await store.tasks.get('up-3'))?.status, 'completed');
  });
});
