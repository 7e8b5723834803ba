// An approval listing's scan is bounded per request (HOLDS_SCANNED_PER_LISTING index entries), and its cursor still
// reaches every hold: more holds than one scan looks at, none of them the caller's, ahead of the one that is. Run on
// the task core's own parts over the in-memory store (the HTTP and tool paths are tried from outside in
// test/integration/approvals-listing.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NO_EVENTS } from '../../src/events.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { newTaskId, type NewTask } from '../../src/store/task-store.js';
import { Approvals, HOLDS_SCANNED_PER_LISTING } from '../../src/tasks/approvals.js';
import { apiKeyCaller } from '../../src/principals.js';
import { TaskPolicies } from '../../src/tasks/task-policies.js';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { silentLogger } from '../helpers/task-core.js';

describe('approval listings: a bounded scan per request, a cursor that reaches every hold', () => {
  it(`with ${HOLDS_SCANNED_PER_LISTING + 100} holds nobody but dave decides ahead of bob's, bob's first page is empty with a cursor, and the cursor finds it`, async () => {
    const store = new MemoryTaskStore();
    const config = {
      listen: { port: 8080 },
      upstreams: { fixture: { url: 'http://127.0.0.1:9/mcp' } },
      auth: { resource: 'http://127.0.0.1/mcp', apiKeys: ['alice', 'bob', 'dave', 'mallory'].map((principal) => ({ principal, key: `${principal}-key-0123456789abcdef` })) },
      tasks: {
        rules: [
          { match: 'echo', approval: { approvers: ['dave'], timeoutMs: 600_000 } },
          { match: 'deploy', approval: { approvers: ['bob'], timeoutMs: 600_000 } },
        ],
      },
    };
    const { tasks } = parseConfig(stringify(config), 'test.yaml', {});
    const approvals = new Approvals({
      store,
      policies: new TaskPolicies(tasks),
      queries: { waitFor: async () => undefined },
      endWrites: { record: async () => undefined },
      events: NO_EVENTS,
      logger: silentLogger,
    });
    const now = Date.now();
    const task = (tool: string, deadlineMs: number, approvers: string[]): NewTask => ({
      taskId: newTaskId(),
      principal: 'key:alice',
      era: '2025-11-25',
      tool,
      upstream: 'fixture',
      retentionMs: 600_000,
      pollMs: 1000,
      call: { params: { name: tool, arguments: {} }, identity: { sessionId: 's', protocolVersion: '2025-11-25', capabilities: {} } },
      approval: { approvers, scopes: [], deadlineMs, digest: 'd', state: 'pending' },
    });
    for (let i = 0; i < HOLDS_SCANNED_PER_LISTING + 100; i++) await store.tasks.create(task('echo', now + 1_000 + i, ['key:dave']));
    const bobs = await store.tasks.create(task('deploy', now + 500_000, ['key:bob']));

    const bob = apiKeyCaller('bob', []);
    const first = await approvals.pendingFor(bob);
    assert.deepEqual(first.tasks, [], 'nothing of bob\'s among the first holds looked at');
    assert.equal(typeof first.nextCursor, 'string', 'but a cursor to go on from');
    const second = await approvals.pendingFor(bob, { cursor: first.nextCursor as string });
    assert.deepEqual(second.tasks.map((t) => t.taskId), [bobs.taskId]);
    assert.equal(second.nextCursor, undefined);

    // A caller who decides nothing gets no holds, from either page.
    const mallory = apiKeyCaller('mallory', []);
    const nothing = await approvals.pendingFor(mallory);
    assert.deepEqual(nothing.tasks, []);
    assert.deepEqual((await approvals.pendingFor(mallory, { cursor: nothing.nextCursor as string })).tasks, []);
    await assert.rejects(approvals.pendingFor(bob, { cursor: nothing.nextCursor as string }), /Invalid cursor/, 'mallory\'s cursor is not bob\'s');
    await store.close();
  });
});
