// The one codec contract (src/protocol/wire-codec.ts) as each revision implements it: the same question asked of
// both codecs, answered in each revision's own field names. The shapes themselves are codecs.test.ts's.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { codec as rev2025 } from '../../src/protocol/rev2025-11-25/codec.js';
import { codec as rev2026 } from '../../src/protocol/rev2026-07-28/codec.js';
import type { TaskRecord } from '../../src/store/task-store.js';

const T0 = Date.parse('2026-11-24T10:00:00.000Z');

const TASK: TaskRecord = {
  taskId: 'task-1',
  principal: 'session:s1',
  era: 'legacy',
  tool: 'slow',
  upstream: 'fx',
  status: 'working',
  createdMs: T0,
  createdUs: T0 * 1000,
  updatedMs: T0 + 500,
  retentionMs: 60_000,
  pollMs: 1000,
};

describe('WireCodec', () => {
  it('both read the task id a tasks/* request names, unchecked', () => {
    for (const codec of [rev2025, rev2026]) {
      assert.equal(codec.taskIdOf({ taskId: 'task-1' }), 'task-1');
      assert.equal(codec.taskIdOf({ taskId: 7 }), 7);
      assert.equal(codec.taskIdOf({}), undefined);
    }
  });

  it('tasks/get and tasks/cancel: the Task in 2025-11-25, a DetailedTask and an empty ack in 2026-07-28', () => {
    assert.equal(rev2025.taskResult(TASK).ttl, 60_000);
    assert.deepEqual(rev2025.cancelResult({ ...TASK, status: 'cancelled' }), rev2025.taskResult({ ...TASK, status: 'cancelled' }));
    assert.equal(rev2026.taskResult(TASK).resultType, 'complete');
    assert.equal(rev2026.taskResult(TASK).ttlMs, 60_000);
    assert.deepEqual(rev2026.cancelResult(TASK), { resultType: 'complete' });
  });

  it('a task-creating tools/call: nested with the immediate response in 2025-11-25, flat without in 2026-07-28', () => {
    const legacy = rev2025.createTaskResult(TASK, 'started');
    assert.equal((legacy.task as { taskId: string }).taskId, 'task-1');
    assert.ok(legacy._meta !== undefined);
    const modern = rev2026.createTaskResult(TASK, 'started');
    assert.equal(modern.resultType, 'task');
    assert.equal(modern.taskId, 'task-1');
    assert.equal(modern._meta, undefined);
  });

  it('a tool: 2025-11-25 shows the gateway mode (none to sessions without tasks); 2026-07-28 lists it as is', () => {
    const tool = { name: 't', inputSchema: { type: 'object' }, execution: { taskSupport: 'forbidden' } };
    assert.deepEqual(rev2025.toolView(tool, 'optional'), { ...tool, execution: { taskSupport: 'optional' } });
    assert.deepEqual(rev2025.toolView(tool, undefined), { name: 't', inputSchema: { type: 'object' } });
    const other = { ...tool, execution: { taskSupport: 'required', other: true } };
    assert.deepEqual(rev2025.toolView(other, undefined), { ...tool, execution: { other: true } });
    assert.equal(rev2025.toolView({ name: 'plain' }, undefined).execution, undefined);
    assert.equal(rev2026.toolView(tool, 'optional'), tool);
  });

  it('a result: passed through in 2025-11-25; with resultType (and hints on lists) in 2026-07-28', () => {
    const result = { tools: [] };
    assert.equal(rev2025.clientResult('tools/list', result), result);
    assert.deepEqual(rev2026.clientResult('tools/list', result), { resultType: 'complete', tools: [], ttlMs: 0, cacheScope: 'private' });
    assert.deepEqual(rev2026.clientResult('subscriptions/listen', {}), { resultType: 'complete' });
  });

  it("an upstream's own create-task result, in each revision's shape only", () => {
    assert.deepEqual(rev2025.createdTask({ task: { taskId: 'up-1', ttl: 5000 } }), { taskId: 'up-1', retentionMs: 5000 });
    assert.deepEqual(rev2025.createdTask({ task: { taskId: 'up-1' } }), { taskId: 'up-1', retentionMs: undefined });
    assert.equal(rev2025.createdTask({ resultType: 'task', taskId: 'up-2' }), undefined);
    assert.deepEqual(rev2026.createdTask({ resultType: 'task', taskId: 'up-2', ttlMs: 9000 }), { taskId: 'up-2', retentionMs: 9000 });
    assert.deepEqual(rev2026.createdTask({ resultType: 'task', taskId: 'up-2', ttlMs: 0 }), { taskId: 'up-2', retentionMs: undefined });
    assert.equal(rev2026.createdTask({ resultType: 'complete', taskId: 'up-2' }), undefined);
    assert.equal(rev2026.createdTask({ task: { taskId: 'up-1' } }), undefined);
  });
});
