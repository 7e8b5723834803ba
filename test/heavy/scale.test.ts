// Tasks at scale, with small counts: store calls of more ids than one batch, recovery of more orphans than one
// batch in one sweep (and by two replicas at once), readiness while lease renewals fail, the replica-wide cap
// on running tasks and the one anonymous principal that every client without auth is counted as. The large
// counts (100k held, 40k orphans) are measured by `npm run bench -- --scenarios scale`, not asserted here.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { redisKeys } from '../../src/store/redis-keys.js';
import { RedisTaskStore } from '../../src/store/redis-task-store.js';
import { IDS_PER_SCRIPT_CALL, isTerminal, newTaskId, type NewTask, type TaskRecord } from '../../src/store/task-store.js';
import { fixtureCommand } from '../fixtures/spawn.js';
import { eventually, fixtureExecutions, type Json, logEntries, testScope, textOf, whenLogged } from '../helpers/harness.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';
import { createdTaskId, SessionWire } from '../helpers/session-wire.js';
import { ownRedis } from '../helpers/redis-server.js';
import { twoReplicaProcesses } from '../helpers/replicas.js';
import { deleteRedisPrefixes, TEST_REDIS_URL } from '../helpers/shared-redis.js';

const RUN = `taskgate-scale-${process.pid}-${randomBytes(4).toString('hex')}`;
const LEASE_MS = 1000;
/** More orphans than one store call takes, ending in a partial batch. */
const ORPHANS = 2 * IDS_PER_SCRIPT_CALL + 500;
const DEAD_REPLICA = 'dead-replica';
const prefixes: string[] = [];

after(() => deleteRedisPrefixes(prefixes));

/** A store of its own prefix on the shared Redis, as the replicas of one test see it. */
async function testStore(name: string): Promise<{ store: RedisTaskStore; prefix: string }> {
  const prefix = `${RUN}-${name}`;
  prefixes.push(prefix);
  const store = new RedisTaskStore(new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 }), prefix);
  await store.ready();
  return { store, prefix };
}

/** Running tasks as a replica leaves them in the store: records in `working`, written directly. */
async function createTasks(store: RedisTaskStore, count: number, shape: (i: number) => Partial<NewTask> = () => ({})): Promise<string[]> {
  const ids: string[] = [];
  for (let start = 0; start < count; start += 250) {
    const chunk = Array.from({ length: Math.min(250, count - start) }, (_, j) => {
      const i = start + j;
      // Both eras: a lost 2025 task also looks for its session to tell.
      const era = i % 2 === 0 ? '2025-11-25' : '2026-07-28';
      const principal = era === '2025-11-25' ? `session:${newTaskId()}` : 'modern:anonymous';
      return { taskId: newTaskId(), principal, era, tool: 'slow', upstream: 'fx', retentionMs: 600_000, pollMs: 100, ...shape(i) } as NewTask;
    });
    await Promise.all(chunk.map((task) => store.tasks.create(task)));
    ids.push(...chunk.map((task) => task.taskId));
  }
  return ids;
}

/** Resolves with every task once all of them are terminal, told by the store's events (watching starts now). */
function untilAllEnded(store: RedisTaskStore, ids: readonly string[]): Promise<Map<string, TaskRecord>> {
  const ended = new Map<string, TaskRecord>();
  const stops: (() => void)[] = [];
  return new Promise((resolve) => {
    for (const id of ids) {
      stops.push(
        store.tasks.watch(id, (task) => {
          if (!isTerminal(task.status) || ended.has(id)) return;
          ended.set(id, task);
          if (ended.size === ids.length) {
            for (const stop of stops) stop();
            resolve(ended);
          }
        }),
      );
    }
  });
}

function replicaConfig(prefix: string, extra: Json = {}): Json {
  const { command, args, cwd } = fixtureCommand('stdio');
  return {
    store: { type: 'redis', url: TEST_REDIS_URL, prefix },
    upstreams: { fx: { command, args, cwd } },
    tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 }, rules: [{ match: 'slow_compute', retry: { onLoss: true, maxAttempts: 2 } }] },
    replicas: { leaseMs: LEASE_MS, drainTimeoutMs: 0 },
    ...extra,
  };
}

describe('recovery of a dead replica\'s tasks, batch after batch', () => {
  test(`one sweep settles all ${ORPHANS} orphans (more than one batch of ${IDS_PER_SCRIPT_CALL}), each failed as lost and unleased`, { timeout: 120_000 }, async (t) => {
    const scope = testScope(t);
    const { store, prefix } = await testStore('one-sweep');
    scope.defer(() => store.close());
    const ids = await createTasks(store, ORPHANS);
    const ended = untilAllEnded(store, ids);
    // The dead replica's leases have all run out before any replica sweeps: the first sweep finds every one.
    await store.leases.assign(ids, DEAD_REPLICA, 1);
    const gateway = await scope.spawnGateway({ config: { ...replicaConfig(prefix), log: { level: 'info' } } });

    const tasks = await ended;
    for (const task of tasks.values()) {
      assert.equal(task.status, 'failed');
      assert.match(String(task.message), new RegExp(`The gateway lost the call: replica ${DEAD_REPLICA} stopped while running it`));
    }
    let sweeps: Json[] = [];
    await whenLogged(gateway, () => (sweeps = logEntries(gateway).filter((e) => e.msg === 'orphaned tasks settled')).length > 0);
    assert.equal(sweeps.length, 1, JSON.stringify(sweeps));
    assert.equal(sweeps[0]?.orphans, ORPHANS);
    assert.equal(sweeps[0]?.batches, Math.ceil(ORPHANS / IDS_PER_SCRIPT_CALL));
    // Settled orphans leave the running index (the taker held their leases until then).
    const redis = store.redis;
    const owners = redisKeys(prefix).runningOwners();
    await eventually(async () => (await redis.hlen(owners)) === 0);
    const failedIds = logEntries(gateway).filter((e) => e.audit === 'task.lost').map((e) => e.task);
    assert.deepEqual(new Set(failedIds), new Set(ids));
    assert.equal(failedIds.length, ORPHANS);
  });

  test('two replicas sweeping at once settle each orphan exactly once; a retryable one runs again once', { timeout: 120_000 }, async (t) => {
    const scope = testScope(t);
    const { store, prefix } = await testStore('two-sweepers');
    scope.defer(() => store.close());
    const lost = await createTasks(store, ORPHANS);
    const labels = ['scale-retry-1', 'scale-retry-2', 'scale-retry-3', 'scale-retry-4'];
    const retried = await createTasks(store, labels.length, (i) => ({
      era: '2026-07-28',
      principal: 'modern:anonymous',
      tool: 'slow_compute',
      call: {
        params: { name: 'slow_compute', arguments: { seconds: 0.1, label: labels[i] as string } },
        identity: { sessionId: 'rev2026:clients', protocolVersion: '2025-11-25', capabilities: {} },
      },
    }));
    const [a, b] = await twoReplicaProcesses(scope, replicaConfig(prefix));
    const ended = untilAllEnded(store, [...lost, ...retried]);
    // Both replicas are up and sweeping when the leases run out: they race for the same orphans.
    await store.leases.assign([...lost, ...retried], DEAD_REPLICA, 1);

    const tasks = await ended;
    for (const id of lost) assert.equal(tasks.get(id)?.status, 'failed', id);
    for (const id of retried) assert.equal(tasks.get(id)?.status, 'completed', JSON.stringify(tasks.get(id)));
    // Each replica logs a task it failed just after the change it published: wait for the lines to arrive.
    const audits = (): Json[] => [...logEntries(a), ...logEntries(b)].filter((e) => e.audit === 'task.lost' || e.audit === 'task.retried');
    await eventually(() => audits().length >= ORPHANS + retried.length);
    const entries = audits();
    const failedIds = entries.filter((e) => e.audit === 'task.lost').map((e) => e.task);
    // Reported, not asserted: which replica got how many depends on when each one's sweep came round.
    console.log(`# orphans failed by replica A: ${logEntries(a).filter((e) => e.audit === 'task.lost').length}, by B: ${logEntries(b).filter((e) => e.audit === 'task.lost').length}`);
    assert.equal(failedIds.length, ORPHANS, 'each orphan failed once, by one replica');
    assert.equal(new Set(failedIds).size, ORPHANS);
    assert.deepEqual(new Set(entries.filter((e) => e.audit === 'task.retried').map((e) => e.task)), new Set(retried));
    assert.equal(entries.filter((e) => e.audit === 'task.retried').length, retried.length);
    const [countsA, countsB] = await Promise.all([fixtureExecutions(a.url), fixtureExecutions(b.url)]);
    for (const label of labels) assert.equal((countsA[label] ?? 0) + (countsB[label] ?? 0), 1, `${label} ran once after the loss`);
  });

  test('a task of an era no revision here serves is failed as lost, logged naming it and its era; the sweep goes on', { timeout: 60_000 }, async (t) => {
    const scope = testScope(t);
    const { store, prefix } = await testStore('unknown-era');
    scope.defer(() => store.close());
    const era = '2099-01-01';
    // One it could run again (retry.onLoss, its call kept), one it could only fail, and one of a revision it serves.
    const [retryable] = await createTasks(store, 1, () => ({
      era,
      tool: 'slow_compute',
      call: { params: { name: 'slow_compute', arguments: { seconds: 0.1, label: 'unknown-era' } }, identity: { sessionId: 'rev2026:clients', protocolVersion: era, capabilities: {} } },
    }));
    const [plain] = await createTasks(store, 1, () => ({ era }));
    const [known] = await createTasks(store, 1, () => ({ era: '2026-07-28', principal: 'modern:anonymous' }));
    const ids = [retryable, plain, known] as string[];
    const ended = untilAllEnded(store, ids);
    await store.leases.assign(ids, DEAD_REPLICA, 1);
    const gateway = await scope.spawnGateway({ config: replicaConfig(prefix) });

    const tasks = await ended;
    for (const id of ids) {
      assert.equal(tasks.get(id)?.status, 'failed', id);
      assert.match(String(tasks.get(id)?.message), new RegExp(`The gateway lost the call: replica ${DEAD_REPLICA} stopped`), id);
    }
    const naming = (id: string) => (e: Json): boolean => e.level === 50 && e.task === id && String((e.err as Json | undefined)?.message).includes(`task ${id} was created in protocol revision '${era}'`);
    await whenLogged(gateway, () => logEntries(gateway).filter(naming(retryable as string)).length === 2 && logEntries(gateway).some(naming(plain as string)));
    assert.equal((await fixtureExecutions(gateway.url))['unknown-era'], undefined, 'never run again');
    assert.ok(!logEntries(gateway).some((e) => e.level === 50 && e.task === known), 'a known era is no error');
  });
});

describe('readiness follows lease renewal', () => {
  test('/readyz is 503 with the reason while renewals fail (Redis refusing writes, then stopped), and ready once they succeed', { timeout: 120_000 }, async (t) => {
    const scope = testScope(t);
    const redis = await ownRedis(scope);
    const admin = new Redis({ port: redis.port, maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined);
    scope.defer(() => admin.disconnect());
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.gateway({
      store: { type: 'redis', url: redis.url, prefix: 'readiness' },
      upstreams: { fx: upstream.config },
      tasks: { defaults: { mode: 'optional', taskAfterMs: 0 } },
      replicas: { leaseMs: 600, drainTimeoutMs: 0 },
    });
    const readiness = async (): Promise<{ status: number; body: Json }> => {
      const answer = await fetch(`${gateway.origin}/readyz`);
      return { status: answer.status, body: (await answer.json()) as Json };
    };
    // A running task: a lease to renew.
    const created = await sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 60, label: 'readiness' } }, { capabilities: TASKS_CAPABILITIES });
    assert.equal(created.result?.resultType, 'task', JSON.stringify(created.messages));
    let state = await readiness();
    await eventually(async () => (state = await readiness()).status === 200 && (state.body.leases as Json).held === 1);

    // Full: Redis still answers PING, but refuses every write, lease renewals included.
    await admin.config('SET', 'maxmemory', '1');
    await eventually(async () => (state = await readiness()).status === 503);
    assert.equal((state.body.store as Json).ok, true, 'the store answers PING all along');
    assert.equal((state.body.leases as Json).ok, false);
    assert.match(String((state.body.leases as Json).error), /task lease renewals fail since \S+: OOM/);
    await admin.config('SET', 'maxmemory', '0');
    await eventually(async () => (state = await readiness()).status === 200);
    assert.equal((state.body.leases as Json).ok, true);

    await redis.stop();
    await eventually(async () => (state = await readiness()).status === 503);
    await redis.restart();
    await eventually(async () => (state = await readiness()).status === 200);
    assert.deepEqual([(state.body.store as Json).ok, (state.body.leases as Json).ok], [true, true]);
  });
});

describe('replicas.maxRunningTasks', () => {
  test('past the cap a new task is refused, retryably: HTTP 503 with a JSON-RPC error saying when, in either revision', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.gateway({
      upstreams: { fx: upstream.config },
      tasks: { defaults: { mode: 'optional', taskAfterMs: 0 } },
      replicas: { maxRunningTasks: 2, drainTimeoutMs: 0 },
    });
    const wire = new SessionWire();
    await wire.initialize(gateway.url);
    const call = (label: string): Promise<Json> => wire.request(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 60, label }, task: {} });
    const first = createdTaskId(await call('cap-1'));
    createdTaskId(await call('cap-2'));

    const refusal = await wire.start(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 60, label: 'cap-3' }, task: {} });
    await refusal.done;
    assert.equal(refusal.status, 503, 'retryable, as for 2026-07-28 clients: a load balancer may try another replica');
    const refused = refusal.messages.find((m) => 'error' in m)?.error as Json;
    assert.equal(refused.code, -32603);
    assert.match(String(refused.message), /This gateway replica already runs 2 tasks \(replicas\.maxRunningTasks: 2\); try again shortly/);
    assert.deepEqual(refused.data, { retryAfterMs: 1000 });
    const rev2026Refused = await sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0 } }, { capabilities: TASKS_CAPABILITIES });
    assert.equal(rev2026Refused.status, 503);
    assert.equal(rev2026Refused.headers['retry-after'], '1');
    assert.equal(rev2026Refused.error?.code, -32603);
    assert.match(String(rev2026Refused.error?.message), /replicas\.maxRunningTasks: 2/);
    const ready = await fetch(`${gateway.origin}/readyz`);
    assert.deepEqual(((await ready.json()) as Json).tasks, { running: 2, maxRunningTasks: 2 });

    // A task that ends makes room.
    await wire.request(gateway.url, 'tasks/cancel', { taskId: first });
    const admitted = await sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0 } }, { capabilities: TASKS_CAPABILITIES });
    assert.equal(admitted.result?.resultType, 'task', JSON.stringify(admitted.messages));
  });

  test('a 2026-07-28 call refused as it becomes a task (past taskAfterMs) is cancelled upstream', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.gateway({
      upstreams: { fx: upstream.config },
      tasks: { defaults: { mode: 'optional', taskAfterMs: 300 } },
      replicas: { maxRunningTasks: 1, drainTimeoutMs: 0 },
    });
    const call = (label: string): ReturnType<typeof sendRev2026> =>
      sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 60, label } }, { capabilities: TASKS_CAPABILITIES });
    assert.equal((await call('late-1')).result?.resultType, 'task');
    const refused = await call('late-2');
    assert.equal(refused.status, 503, JSON.stringify(refused.messages));
    assert.match(String(refused.error?.message), /replicas\.maxRunningTasks: 1/);
    // It ran upstream for taskAfterMs before it was refused: the upstream hears it is cancelled.
    const { client } = await scope.client(gateway.url);
    await eventually(async () => {
      const who = JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} }))) as { cancelled: { tool: string }[] };
      return who.cancelled.some((c) => c.tool === 'slow_compute');
    });
  });
});

describe('maxTasksPerPrincipal without auth: one anonymous principal', () => {
  test('every 2025 session and every 2026-07-28 client count together; listing stays per session', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.gateway({ upstreams: { fx: upstream.config }, tasks: { defaults: { mode: 'optional', taskAfterMs: 0, maxTasksPerPrincipal: 2 } } });
    const sessions = [new SessionWire(), new SessionWire(), new SessionWire()];
    for (const session of sessions) await session.initialize(gateway.url);
    const call = (session: SessionWire, label: string): Promise<Json> =>
      session.request(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 60, label }, task: {} });
    const [a, b, c] = sessions as [SessionWire, SessionWire, SessionWire];
    const fromA = createdTaskId(await call(a, 'anon-a'));
    createdTaskId(await call(b, 'anon-b'));
    const full = /Too many unfinished tasks: clients without authentication \(counted together\) already have 2 \(maxTasksPerPrincipal: 2\)/;
    assert.match(String(((await call(c, 'anon-c')).error as Json).message), full, 'a new session opens no new room');
    const rev2026Refused = await sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0 } }, { capabilities: TASKS_CAPABILITIES });
    assert.match(String(rev2026Refused.error?.message), full);
    // Each session still lists only its own tasks.
    const listed = ((await a.request(gateway.url, 'tasks/list')).result as Json).tasks as Json[];
    assert.deepEqual(listed.map((task) => task.taskId), [fromA]);
    assert.deepEqual(((await c.request(gateway.url, 'tasks/list')).result as Json).tasks, []);

    await a.request(gateway.url, 'tasks/cancel', { taskId: fromA });
    const admitted = await sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0 } }, { capabilities: TASKS_CAPABILITIES });
    assert.equal(admitted.result?.resultType, 'task', JSON.stringify(admitted.messages));
  });

  test('with auth each principal has its own count', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const keys = { alice: 'alice-key-0123456789abcdef', bob: 'bob-key-0123456789abcdef' };
    const gateway = await scope.gateway({
      upstreams: { fx: upstream.config },
      tasks: { defaults: { mode: 'optional', taskAfterMs: 0, maxTasksPerPrincipal: 1 } },
      auth: { resource: 'http://gateway.example/mcp', apiKeys: Object.entries(keys).map(([principal, key]) => ({ principal, key })) },
    });
    const task = (key: string): ReturnType<typeof sendRev2026> =>
      sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 60 } }, { capabilities: TASKS_CAPABILITIES, headers: { authorization: `Bearer ${key}` } });
    assert.equal((await task(keys.alice)).result?.resultType, 'task');
    assert.match(String((await task(keys.alice)).error?.message), /Too many unfinished tasks: this client already has 1 \(maxTasksPerPrincipal: 1\)/);
    assert.equal((await task(keys.bob)).result?.resultType, 'task', 'another principal is not affected');
  });
});
