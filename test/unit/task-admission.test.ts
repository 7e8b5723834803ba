// Opening a task (task-admission.ts) over the in-memory store: stored before the opener hears of it, its call kept
// only where another replica may have to start it; refused for now when this replica's room is taken by running
// and opening tasks, and refused when the principal already has its maxTasksPerPrincipal; a refused open holds
// no room.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { GatewayError } from '../../src/errors.js';
import { GatewayEvents } from '../../src/events.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { TaskAdmission } from '../../src/tasks/task-admission.js';
import { TaskPolicies } from '../../src/tasks/task-policies.js';
import { storedCall } from '../../src/tasks/task-runs.js';
import { TaskSlots } from '../../src/tasks/slots.js';
import type { Upstream } from '../../src/upstream/life/upstream.js';
import { configFor, identity, silentLogger, unconnectedUpstream } from '../helpers/task-core.js';
import { nextEvent } from '../helpers/waits.js';

const TASKS = { rules: [{ match: 'retried', retry: { onLoss: true } }, { match: 'limited', maxTasksPerPrincipal: 1 }] };
const CALL = storedCall({ name: 'slow', arguments: { ms: 1 } }, identity('session-1'));

let store: MemoryTaskStore;
let events: GatewayEvents;
let upstream: Upstream;
/** What the runs here would say: how many tasks run now. */
let running: number;
let leased: string[];

beforeEach(() => {
  store = new MemoryTaskStore();
  events = new GatewayEvents();
  upstream = unconnectedUpstream(events);
  running = 0;
  leased = [];
});
afterEach(async () => {
  await upstream.close();
  await store.close();
});

function admission(maxRunningTasks = 0): TaskAdmission {
  return new TaskAdmission({
    store,
    policies: new TaskPolicies(configFor('http://127.0.0.1:1/mcp', TASKS).tasks),
    logger: silentLogger,
    replica: { maxRunningTasks },
    callers: { authenticated: true },
    events,
    slots: new TaskSlots({ store, logger: silentLogger, leaseMs: 30_000, replicaId: () => 'replica-1', authenticated: true, events }),
    leases: {
      reserve: async (taskId) => {
        // Leased BEFORE it is stored: a replica that dies in between leaves an id the sweep drops, not a record
        // nobody leased (issue 39).
        assert.equal(await store.tasks.get(taskId), undefined, 'reserved before it is stored');
        leased.push(taskId);
        return store.leases.reserve(taskId, 'replica-1', 30_000);
      },
      release: (taskId) => store.leases.release(taskId, 'replica-1'),
      leaseMs: 30_000,
    },
    running: () => running,
  });
}

async function refusal(open: Promise<unknown>): Promise<GatewayError> {
  const error = await open.then(() => assert.fail('the task was opened'), (e: unknown) => e);
  assert.ok(error instanceof GatewayError, String(error));
  return error;
}

describe('task admission', () => {
  it('a task is stored and leased before the opener hears of it; its call is kept only where it may run elsewhere', async () => {
    const opening = admission();
    const created = nextEvent(events, 'task.created');
    const plain = await opening.open({ principal: 'key:alice', era: '2025-11-25', exposedName: 'plain', upstream: upstream, call: CALL });
    assert.deepEqual(leased, [plain.taskId]);
    assert.deepEqual(await created, { taskId: plain.taskId, principal: 'key:alice', tool: 'plain', upstream: 'fixture', era: '2025-11-25', queued: false });
    assert.equal((await store.tasks.get(plain.taskId, { call: true }))?.call, undefined, 'no other replica will start it');
    const retried = await opening.open({ principal: 'key:alice', era: '2025-11-25', exposedName: 'retried', upstream: upstream, call: CALL });
    assert.deepEqual((await store.tasks.get(retried.taskId, { call: true }))?.call, CALL, 'kept: retry.onLoss may run it again elsewhere');
  });

  it('room taken by running and opening tasks refuses a new one for now, until a run ends', async () => {
    const opening = admission(2);
    running = 1;
    const first = await opening.open({ principal: 'key:alice', era: '2025-11-25', exposedName: 'plain', upstream: upstream, call: undefined });
    const full = await refusal(opening.open({ principal: 'key:bob', era: '2025-11-25', exposedName: 'plain', upstream: upstream, call: undefined }));
    assert.equal(full.code, 'replica_full');
    assert.match(full.message, /already runs 2 tasks \(replicas\.maxRunningTasks: 2\)/);
    opening.started(first.taskId); // its run holds the place now: still full while both run
    running = 2;
    assert.equal((await refusal(opening.open({ principal: 'key:bob', era: '2025-11-25', exposedName: 'plain', upstream: upstream, call: undefined }))).code, 'replica_full');
    running = 1;
    await opening.open({ principal: 'key:bob', era: '2025-11-25', exposedName: 'plain', upstream: upstream, call: undefined });
  });

  it('a principal at its maxTasksPerPrincipal is refused, and the refused open holds no room', async () => {
    const opening = admission(2);
    await opening.open({ principal: 'key:alice', era: '2025-11-25', exposedName: 'limited', upstream: upstream, call: undefined });
    const refused = await refusal(opening.open({ principal: 'key:alice', era: '2025-11-25', exposedName: 'limited', upstream: upstream, call: undefined }));
    assert.equal(refused.code, 'too_many_tasks');
    // One task opening, none running: the refused one gave its place back, so one more fits.
    await opening.open({ principal: 'key:bob', era: '2025-11-25', exposedName: 'limited', upstream: upstream, call: undefined });
  });
});
