// Approval deadlines (src/tasks/approvals.ts over the embedded store) on node:test's mock clock (Date, setTimeout
// and setInterval): a held run's own timer expires its hold at the deadline exactly; the sweep (every
// APPROVAL_SWEEP_MS) expires a hold nobody waits on at its first tick at or after the deadline; the store refuses an
// approval from the deadline on and an expiry before it. Each bound is checked one millisecond before and at it.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { GatewayEvents } from '../../src/events.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import type { NewTask, TaskRecord } from '../../src/store/task-store.js';
import { APPROVAL_SWEEP_MS, Approvals } from '../../src/tasks/approvals.js';
import { TaskPolicies } from '../../src/tasks/task-policies.js';
import { silentLogger } from '../helpers/task-core.js';

const T0 = 1_000_000;

/** Lets the store calls the timers started run to their end (setImmediate is not mocked). */
async function settle(): Promise<void> {
  for (let round = 0; round < 5; round++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Moves the clock to T0 + `at`, firing what falls due on the way and letting it finish. */
async function advanceTo(at: number): Promise<void> {
  mock.timers.tick(T0 + at - Date.now());
  await settle();
}

describe('approval deadlines on the mock clock', () => {
  let store: MemoryTaskStore;
  let approvals: Approvals;
  let ended: { taskId: string; reason: string; atMs: number }[];
  let decided: { taskId: string; decision: string; waitedMs: number }[];

  beforeEach(() => {
    mock.timers.enable({ apis: ['Date', 'setTimeout', 'setInterval'], now: T0 });
    store = new MemoryTaskStore();
    const { tasks } = parseConfig(
      stringify({
        upstreams: { fixture: { url: 'http://127.0.0.1:9/mcp' } },
        auth: { resource: 'http://127.0.0.1/mcp', apiKeys: [{ principal: 'dave', key: 'dave-key-0123456789abcdef' }] },
        tasks: { rules: [{ match: 'deploy', approval: { approvers: ['dave'], timeoutMs: 600_000 } }] },
      }),
      'approval-deadlines.yaml',
      {},
    );
    const events = new GatewayEvents();
    ended = [];
    decided = [];
    events.on('approval.decided', ({ taskId, decision, waitedMs }) => decided.push({ taskId, decision, waitedMs }));
    approvals = new Approvals({
      store,
      policies: new TaskPolicies(tasks),
      // Wakes on the store's own notices of a change (a hold decided), as TaskQueries.waitFor does.
      queries: {
        waitFor: (taskId, done) =>
          new Promise<TaskRecord | undefined>((resolve) => {
            const stop = store.tasks.watch(taskId, (task) => {
              if (!done(task)) return;
              stop();
              resolve(task);
            });
          }),
      },
      endWrites: { record: async ({ task, reason }) => void ended.push({ taskId: task.taskId, reason: reason ?? '', atMs: Date.now() - T0 }) },
      events,
      logger: silentLogger,
    });
  });
  afterEach(async () => {
    approvals.stop();
    await store.close();
    mock.timers.reset();
  });

  function held(taskId: string, deadlineAt: number): Promise<TaskRecord> {
    const task: NewTask = {
      taskId,
      principal: 'key:alice',
      era: '2025-11-25',
      tool: 'deploy',
      upstream: 'fixture',
      retentionMs: 3_600_000,
      pollMs: 1000,
      call: { params: { name: 'deploy', arguments: {} }, identity: { sessionId: 's', protocolVersion: '2025-11-25', capabilities: {} } },
      approval: { approvers: ['key:dave'], scopes: [], deadlineMs: T0 + deadlineAt, digest: 'd', state: 'pending' },
    };
    return store.tasks.create(task);
  }

  const stateOf = async (taskId: string) => (await store.tasks.get(taskId))?.approval?.state;

  it('a held run\'s own timer expires its hold at the deadline exactly, and the run is told not to call', async () => {
    const task = await held('t1', 2_500);
    let approved: boolean | undefined;
    void approvals.untilApproved({ task, ended: false, signal: new AbortController().signal }, undefined).then((ok) => (approved = ok));
    await advanceTo(2_499);
    assert.equal(await stateOf('t1'), 'pending');
    assert.equal(approved, undefined);
    await advanceTo(2_500);
    assert.equal(await stateOf('t1'), 'expired');
    assert.equal(approved, false);
    // Failed by whichever sees the expiry first, the timer or the waiting run (the end write is idempotent): at 2.5 s.
    assert.deepEqual([...new Set(ended.map((e) => JSON.stringify(e)))], [JSON.stringify({ taskId: 't1', reason: 'approval expired', atMs: 2_500 })]);
    assert.deepEqual(decided, [{ taskId: 't1', decision: 'expired', waitedMs: 2_500 }]);
  });

  it('the sweep expires a hold nobody waits on at its first tick at or after the deadline', async () => {
    await held('on-tick', 3 * APPROVAL_SWEEP_MS);
    await held('between', 3 * APPROVAL_SWEEP_MS + 1);
    approvals.start();
    await advanceTo(3 * APPROVAL_SWEEP_MS - 1);
    assert.deepEqual([await stateOf('on-tick'), await stateOf('between')], ['pending', 'pending']);
    await advanceTo(3 * APPROVAL_SWEEP_MS);
    assert.deepEqual([await stateOf('on-tick'), await stateOf('between')], ['expired', 'pending'], 'a deadline on the tick is due at it');
    await advanceTo(4 * APPROVAL_SWEEP_MS - 1);
    assert.equal(await stateOf('between'), 'pending');
    await advanceTo(4 * APPROVAL_SWEEP_MS);
    assert.equal(await stateOf('between'), 'expired', 'at most one sweep interval late');
    assert.deepEqual(ended, [
      { taskId: 'on-tick', reason: 'approval expired', atMs: 3 * APPROVAL_SWEEP_MS },
      { taskId: 'between', reason: 'approval expired', atMs: 4 * APPROVAL_SWEEP_MS },
    ]);
  });

  it('the store takes an approval until 1 ms before the deadline, and an expiry only from the deadline on', async () => {
    await held('early', 1_000);
    await held('late', 1_000);
    await advanceTo(999);
    assert.equal((await store.approvals.decide('late', { state: 'expired', message: 'expired' })).ok, false);
    assert.equal((await store.approvals.decide('early', { state: 'approved', by: 'key:dave', message: 'ok' })).ok, true);
    await advanceTo(1_000);
    const refused = await store.approvals.decide('late', { state: 'approved', by: 'key:dave', message: 'too late' });
    assert.equal(!refused.ok && refused.reason, 'expired');
    assert.equal((await store.approvals.decide('late', { state: 'expired', message: 'expired' })).ok, true);
  });
});
