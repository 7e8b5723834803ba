// What the answer check (src/upstream/peer/answers.ts) takes for a task the call did not ask for, and the bound of the
// ids it remembers (RECENT_IDS): past it the oldest is forgotten, so a second answer to it reads as a late one.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { asksForTask, RECENT_IDS, RecentIds } from '../../src/upstream/peer/answers.js';
import { createdTaskId } from '../../src/protocol/revisions.js';

describe('answer check', () => {
  it('a CreateTaskResult of either revision names its task; a tool result (with content) never does', () => {
    assert.equal(createdTaskId({ task: { taskId: 'a', status: 'working' } }), 'a');
    assert.equal(createdTaskId({ resultType: 'task', taskId: 'b', status: 'working' }), 'b');
    assert.equal(createdTaskId({ content: [], task: { taskId: 'c' } }), undefined);
    assert.equal(createdTaskId({ content: [{ type: 'text', text: 'x' }] }), undefined);
    assert.equal(createdTaskId({ resultType: 'complete', content: [] }), undefined);
  });

  it('a request asks for a task with params.task (2025-11-25) or the Tasks extension in its envelope (2026-07-28)', () => {
    assert.equal(asksForTask({ name: 't', task: {} }), true);
    assert.equal(asksForTask({ name: 't', _meta: { 'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } } } }), true);
    assert.equal(asksForTask({ name: 't', _meta: { 'io.modelcontextprotocol/clientCapabilities': {} } }), false);
    assert.equal(asksForTask(undefined), false);
  });

  it(`remembers the last ${RECENT_IDS} ids, no more`, () => {
    const ids = new RecentIds();
    for (let id = 1; id <= RECENT_IDS + 10; id++) ids.add(id);
    assert.equal(ids.size, RECENT_IDS);
    assert.equal(ids.has(10), false);
    assert.equal(ids.has(11), true);
    assert.equal(ids.has(RECENT_IDS + 10), true);
  });
});
