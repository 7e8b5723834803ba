// Leases and orphan recovery (src/tasks/leases.ts) over the embedded store, two replicas in one process, on
// node:test's mock clock (Date and setInterval: the heartbeat and the sweep are intervals, the store's clock is
// Date.now). A replica heartbeats every leaseMs / 3 (its slot tickets renewed every third beat) and keeps its tasks
// however long they run; once it stops, its tasks are failed as lost by the first sweep at or after leaseMs past its
// last heartbeat (not 1 ms before), and after a store outage nobody is declared lost for two lease periods. The
// integration suites can only wait out leaseMs on the real clock.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import type { TaskPolicy } from '../../src/config/types.js';
import { GatewayEvents } from '../../src/events.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { TaskLeases, type LeasedRuns, type LeasePeerMessages, type LeasePeers } from '../../src/tasks/leases.js';
import { silentLogger } from '../helpers/task-core.js';

const LEASE_MS = 600; // heartbeats every 200 ms, sweeps every 100 ms
const T0 = 1_000_000; // an epoch far from 0: "the store came back at 0" must not look recent

type Handler = (body: unknown) => Promise<unknown>;

/** The replicas' messages, in process: a replica marked down answers nothing (as a dead process would not). */
class PeerHub {
  private readonly handlers = new Map<string, Map<string, Handler>>();
  readonly down = new Set<string>();

  peers(id: string): LeasePeers {
    const handlers = new Map<string, Handler>();
    this.handlers.set(id, handlers);
    return {
      id,
      on: (type, handler) => void handlers.set(type, (body) => handler(body as never, { accept() {}, emit() {} })),
      ask: async (target, type, body) => {
        const handler = target === undefined || this.down.has(target) ? undefined : this.handlers.get(target)?.get(type);
        return (await handler?.(body)) as LeasePeerMessages[typeof type]['answer'] | undefined;
      },
    };
  }
}

/** The runs of one replica: the task ids it holds, run by nothing (the test only needs them held). */
function heldRuns(held: Set<string>, slotRenewals: number[] = []): LeasedRuns {
  return {
    heldCount: () => held.size,
    holds: (taskId) => held.has(taskId),
    renewSlots: async () => void slotRenewals.push(Date.now() - T0),
    policyFor: () => ({ retry: { onLoss: false, maxAttempts: 1 } }) as unknown as TaskPolicy,
    runAgain: async () => {},
  };
}

/** Lets the store calls the timers started run to their end (setImmediate is not mocked). */
async function settle(): Promise<void> {
  for (let round = 0; round < 5; round++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Moves the clock to T0 + `at`, one sweep interval at a time, letting each heartbeat and sweep finish. */
async function advanceTo(at: number): Promise<void> {
  while (Date.now() < T0 + at) {
    mock.timers.tick(Math.min(100 - ((Date.now() - T0) % 100), T0 + at - Date.now()));
    await settle();
  }
}

describe('task leases on the mock clock', () => {
  let store: MemoryTaskStore;
  let hub: PeerHub;
  let events: GatewayEvents;
  let replicas: TaskLeases[];
  let lost: { taskId: string; previousOwner: string; atMs: number }[];

  function replica(id: string, held: Set<string>, on = store, slotRenewals: number[] = []): TaskLeases {
    const leases = new TaskLeases({ store: on, logger: silentLogger, leaseMs: LEASE_MS, peers: hub.peers(id), runs: heldRuns(held, slotRenewals), losses: { upstream: () => undefined, lost: () => {} }, events });
    replicas.push(leases);
    return leases;
  }

  beforeEach(() => {
    mock.timers.enable({ apis: ['Date', 'setInterval'], now: T0 });
    store = new MemoryTaskStore();
    hub = new PeerHub();
    events = new GatewayEvents();
    replicas = [];
    lost = [];
    events.on('task.recovered', ({ taskId, previousOwner, action }) => action === 'lost' && lost.push({ taskId, previousOwner, atMs: Date.now() - T0 }));
  });
  afterEach(async () => {
    for (const leases of replicas) leases.stop();
    await store.close();
    mock.timers.reset();
    mock.restoreAll();
  });

  async function runningTaskOf(owner: TaskLeases, taskId: string): Promise<void> {
    await store.tasks.create({ taskId, principal: 'key:alice', era: '2025-11-25', tool: 'slow', upstream: 'fixture', retentionMs: 3_600_000, pollMs: 1000 });
    await owner.lease([taskId]);
  }

  it('a replica that heartbeats keeps its tasks for many lease periods', async () => {
    const a = replica('a', new Set(['t1']));
    const b = replica('b', new Set());
    await runningTaskOf(a, 't1');
    a.start();
    b.start();
    await advanceTo(10 * LEASE_MS);
    assert.equal((await store.tasks.get('t1'))?.status, 'working');
    assert.deepEqual(lost, []);
  });

  it('heartbeats every leaseMs / 3, renewing the slot tickets on every third (once per lease period)', async () => {
    const slotRenewals: number[] = [];
    const a = replica('a', new Set(['t1']), store, slotRenewals);
    await runningTaskOf(a, 't1');
    const beats: number[] = [];
    const heartbeat = store.leases.heartbeat.bind(store.leases);
    mock.method(store.leases, 'heartbeat', (id: string, leaseMs: number) => {
      beats.push(Date.now() - T0);
      return heartbeat(id, leaseMs);
    });
    a.start();
    await advanceTo(1_900);
    assert.deepEqual(beats, [0, 200, 400, 600, 800, 1_000, 1_200, 1_400, 1_600, 1_800]);
    assert.deepEqual(slotRenewals, [0, 600, 1_200, 1_800]);
  });

  it('a stopped replica\'s task is failed as lost by the first sweep at leaseMs past its last heartbeat, not before', async () => {
    const a = replica('a', new Set(['t1']));
    const b = replica('b', new Set());
    await runningTaskOf(a, 't1');
    a.start();
    b.start();
    await advanceTo(1_000); // a's heartbeat at 1 000 is its last: it is alive until 1 600
    a.stop();
    hub.down.add('a');
    await advanceTo(1_599);
    assert.equal((await store.tasks.get('t1'))?.status, 'working', 'the sweep at 1 500 finds a still alive');
    assert.deepEqual(lost, []);
    await advanceTo(1_600);
    assert.deepEqual(lost, [{ taskId: 't1', previousOwner: 'a', atMs: 1_600 }]);
    const task = await store.tasks.get('t1');
    assert.equal(task?.status, 'failed');
    assert.match(task?.message ?? '', /replica a stopped while running it \(no heartbeat for 600 ms\)/);
  });

  it('a replica that stopped but still answers for its task keeps it (its heartbeats were only late)', async () => {
    const a = replica('a', new Set(['t1']));
    const b = replica('b', new Set());
    await runningTaskOf(a, 't1');
    a.start();
    b.start();
    await advanceTo(1_000);
    a.stop(); // no more heartbeats, but a still answers "task.held"
    await advanceTo(1_600);
    assert.deepEqual(lost, []);
    assert.equal((await store.tasks.get('t1'))?.status, 'working');
  });

  it('after a store outage nobody is declared lost for two lease periods from when the store answered again', async () => {
    let storeDown = false;
    const refuse = async (): Promise<never> => {
      throw new Error('store down');
    };
    // b's view of the store, which fails while `storeDown`; a writes to the store directly (its outage is not b's).
    const flaky = new Proxy(store, {
      get: (target, key) => {
        if (key === 'ping') return () => (storeDown ? refuse() : target.ping());
        if (key === 'leases') return new Proxy(target.leases, { get: (leases, name) => (storeDown ? refuse : Reflect.get(leases, name).bind(leases)) });
        return Reflect.get(target, key);
      },
    });
    const a = replica('a', new Set(['t1']));
    const b = replica('b', new Set(), flaky);
    await runningTaskOf(a, 't1');
    a.start();
    b.start();
    await advanceTo(1_000);
    a.stop(); // dead from 1 600 on
    hub.down.add('a');
    storeDown = true;
    await advanceTo(1_950);
    storeDown = false; // b's next sweep (2 000) pings it: the store counts as back at 2 000
    await advanceTo(2_000 + 2 * LEASE_MS - 1);
    assert.deepEqual(lost, [], 'two lease periods for every replica to heartbeat again');
    await advanceTo(2_000 + 2 * LEASE_MS);
    assert.deepEqual(lost, [{ taskId: 't1', previousOwner: 'a', atMs: 2_000 + 2 * LEASE_MS }]);
  });
});
