// Ends written here (local-ends.ts): a waiter on this replica is told of a terminal write only once it is over,
// with the task and its outcome when that write ended the task, and told to ask the store otherwise.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { TaskRecord } from '../../src/store/task-store.js';
import { LocalEnds } from '../../src/tasks/local-ends.js';

const ended: TaskRecord = {
  taskId: 't1',
  principal: 'alice',
  tool: 'slow',
  upstream: 'fixture',
  era: '2025-11-25',
  status: 'completed',
  createdMs: 0,
  createdUs: 0,
  updatedMs: 1,
  retentionMs: 60_000,
  pollMs: 1000,
  outcome: { result: { content: [] } },
};

describe('local ends', () => {
  it('tells the listeners of a task once its write is over, with what the write ended', () => {
    const ends = new LocalEnds();
    const heard: (TaskRecord | undefined)[] = [];
    const stop = ends.listen('t1', (task) => heard.push(task));
    ends.listen('t2', () => assert.fail('another task'));
    assert.equal(ends.isWriting('t1'), false);
    ends.begin('t1');
    assert.equal(ends.isWriting('t1'), true);
    assert.deepEqual(heard, [], 'nobody hears of a write in flight');
    ends.settle('t1', ended);
    assert.equal(ends.isWriting('t1'), false);
    assert.deepEqual(heard, [ended]);
    ends.begin('t1');
    ends.settle('t1', undefined);
    assert.deepEqual(heard, [ended, undefined], 'a write that did not end the task: the store says');
    stop();
    ends.begin('t1');
    ends.settle('t1', ended);
    assert.equal(heard.length, 2, 'a listener that stopped hears nothing more');
  });

  it('a settle without a write in flight tells nobody', () => {
    const ends = new LocalEnds();
    ends.listen('t1', () => assert.fail('no write was in flight'));
    ends.settle('t1', ended);
  });

  it('a listener may stop listening while it is told', () => {
    const ends = new LocalEnds();
    const heard: string[] = [];
    const stopFirst = ends.listen('t1', () => {
      heard.push('first');
      stopFirst();
    });
    ends.listen('t1', () => heard.push('second'));
    ends.begin('t1');
    ends.settle('t1', ended);
    assert.deepEqual(heard, ['first', 'second']);
  });
});
