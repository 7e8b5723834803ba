// Two gateway replicas on a Redis Cluster and on a Sentinel-managed primary that this file starts itself, and a
// failover of that primary (kill -9) with tasks in flight: no acknowledged task lost, every task ends, sessions go
// on. The store suite (task-store.test.ts) covers the store's behaviour on both; this is the gateway on top.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { fixtureCommand } from '../fixtures/spawn.js';
import { eventually, testScope, type Json, type TestGateway, type TestScope } from '../helpers/harness.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';
import { SessionWire } from '../helpers/session-wire.js';
import { twoReplicas } from '../helpers/replicas.js';
import { startCluster, startSentinelSet, type RedisCluster, type SentinelSet } from '../helpers/redis-topologies.js';

const LEASE_MS = 1000;
const TERMINAL = ['completed', 'failed', 'cancelled'];
let cluster: Promise<RedisCluster> | undefined;
let sentinelSet: Promise<SentinelSet> | undefined;

after(async () => {
  await Promise.all([cluster?.then((c) => c.stop()), sentinelSet?.then((s) => s.stop())]);
});

async function storeOf(topology: 'cluster' | 'sentinel'): Promise<Json> {
  const prefix = `taskgate-topology-${process.pid}`;
  if (topology === 'cluster') return { type: 'redis', prefix, cluster: { nodes: (await (cluster ??= startCluster())).nodes } };
  const set = await (sentinelSet ??= startSentinelSet());
  return { type: 'redis', prefix, sentinel: { name: set.name, nodes: set.sentinels } };
}

/** Two in-process gateways on `store`, every task-capable call a task at once. */
function replicasOn(scope: TestScope, store: Json): Promise<[TestGateway, TestGateway]> {
  const { command, args, cwd } = fixtureCommand('stdio');
  return twoReplicas(scope, {
    store,
    upstreams: { fx: { command, args, cwd } },
    tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 } },
    replicas: { leaseMs: LEASE_MS, drainTimeoutMs: 0 },
  });
}

async function taskOn(url: string, taskId: string): Promise<Json> {
  const r = await sendRev2026(url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES });
  assert.ok(r.result !== undefined, JSON.stringify(r.messages));
  return r.result;
}

/** What the last failed create said (for the failover test's failure message). */
let lastRefusal = '';

/** Starts a slow_compute task; its id, or undefined when the gateway could not create it (the store is down). */
async function tryTask(url: string, seconds: number, label: string): Promise<string | undefined> {
  const created = await sendRev2026(url, 'tools/call', { name: 'slow_compute', arguments: { seconds, label } }, { capabilities: TASKS_CAPABILITIES });
  lastRefusal = created.result?.resultType === 'task' ? '' : JSON.stringify(created.messages);
  return created.result?.resultType === 'task' ? (created.result.taskId as string) : undefined;
}

async function slowTask(url: string, seconds: number, label: string): Promise<string> {
  const taskId = await tryTask(url, seconds, label);
  assert.ok(taskId !== undefined, `task ${label} created`);
  return taskId;
}

describe('gateway replicas on Redis Cluster and Sentinel', () => {
  for (const topology of ['cluster', 'sentinel'] as const) {
    test(`${topology}: a task created on A is read and finished through B; B cancels A's running call`, async (t) => {
      const scope = testScope(t);
      const [a, b] = await replicasOn(scope, await storeOf(topology));
      const quick = await slowTask(a.url, 0.2, `${topology}-quick`);
      let done: Json = {};
      await eventually(async () => TERMINAL.includes(String((done = await taskOn(b.url, quick)).status)));
      assert.equal(done.status, 'completed');
      assert.match(JSON.stringify(done.result), /slow_compute \(.*quick\) finished/);

      const long = await slowTask(a.url, 60, `${topology}-long`);
      assert.equal((await taskOn(b.url, long)).status, 'working');
      const cancelled = await sendRev2026(b.url, 'tasks/cancel', { taskId: long }, { capabilities: TASKS_CAPABILITIES });
      assert.ok(cancelled.result !== undefined, JSON.stringify(cancelled.messages));
      await eventually(async () => (await taskOn(a.url, long)).status === 'cancelled');
    });
  }

  test('sentinel failover: kill -9 of the primary mid-run loses no acknowledged task, every task ends, sessions go on', async (t) => {
    const scope = testScope(t);
    const [a, b] = await replicasOn(scope, await storeOf('sentinel'));
    const set = await (sentinelSet as Promise<SentinelSet>);
    const session = new SessionWire();
    await session.initialize(a.url);

    const acknowledged: string[] = [];
    for (let i = 0; i < 6; i++) acknowledged.push(await slowTask(i % 2 === 0 ? a.url : b.url, 1.5, `failover-before-${i}`));

    set.kill(set.primaryPort);
    const killedAt = performance.now();
    // Creating goes on through the failover: what fails is not acknowledged; what succeeds must survive. The
    // store is back when a create succeeds on the promoted replica.
    let attempt = 0;
    await eventually(async () => {
      attempt++;
      const taskId = await tryTask(attempt % 2 === 0 ? a.url : b.url, 0.5, `failover-during-${attempt}`);
      if (taskId === undefined) return false;
      acknowledged.push(taskId);
      return (await set.currentPrimaryPort()) === set.replicaPort;
      // 60 s: a sentinel that saw its timer late (a loaded machine) sits 30 s in TILT mode before it acts.
    }, 60_000).catch(async (error: unknown) => {
      const [named, logs] = await Promise.all([set.currentPrimaryPort().catch(String), set.logs()]);
      throw new Error(`no recovery: ${attempt} attempts, sentinels name ${named} (replica ${set.replicaPort}), last refusal ${lastRefusal}\n${logs}`, { cause: error });
    });
    const recoveryMs = Math.round(performance.now() - killedAt);
    t.diagnostic(`store recovered ${recoveryMs} ms after the primary was killed (${attempt} create attempts)`);

    const ended = new Map<string, string>();
    await eventually(async () => {
      for (const taskId of acknowledged.filter((id) => !ended.has(id))) {
        const status = String((await taskOn(b.url, taskId)).status);
        if (TERMINAL.includes(status)) ended.set(taskId, status);
      }
      return ended.size === acknowledged.length;
    });
    for (const taskId of acknowledged) assert.ok(TERMINAL.includes(String((await taskOn(a.url, taskId)).status)), `${taskId} readable on A`);
    const counts = [...ended.values()].reduce<Record<string, number>>((all, status) => ({ ...all, [status]: (all[status] ?? 0) + 1 }), {});
    t.diagnostic(`${acknowledged.length} acknowledged tasks, all ended: ${JSON.stringify(counts)}`);

    // The 2025-11-25 session made before the failover answers on both replicas after it.
    for (const url of [a.url, b.url]) {
      const listed = await session.request(url, 'tools/list');
      assert.ok(Array.isArray((listed.result as Json | undefined)?.tools), JSON.stringify(listed));
    }
    const call = await session.request(b.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0.1, label: 'after-failover' } });
    assert.match(JSON.stringify(call.result), /after-failover/);
  });
});
