// Gateways as child processes: several replicas on one Redis (a prefix of their own), and what happens to
// tasks when a replica or an upstream dies. Loopback only, bounded.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { fixtureCommand, spawnFixture, spawnGateway, type GatewayChild } from '../fixtures/spawn.js';
import { eventually, modern, TASKS_EXTENSION, type Json } from './harness.js';

const REDIS_URL = process.env.TASKGATE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `taskgate-replicas-${process.pid}-${randomBytes(4).toString('hex')}`;
const LEASE_MS = 1000;
const EXT: Json = { extensions: { [TASKS_EXTENSION]: {} } };

after(async () => {
  const redis = new Redis(REDIS_URL);
  const keys = await redis.keys(`${PREFIX}:*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
});

function replica(extra: Json = {}): Promise<GatewayChild> {
  const { command, args, cwd } = fixtureCommand('stdio');
  return spawnGateway({
    config: {
      store: { type: 'redis', url: REDIS_URL, prefix: PREFIX },
      upstreams: { fx: { command, args, cwd } },
      tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 } },
      replicas: { leaseMs: LEASE_MS, drainTimeoutMs: 0 },
      ...extra,
    },
  });
}

async function taskOn(url: string, taskId: string): Promise<Json> {
  const r = await modern(url, 'tasks/get', { taskId }, { capabilities: EXT });
  assert.ok(r.result !== undefined, JSON.stringify(r.messages));
  return r.result;
}

/** Starts a slow_compute task (the gateways make every task-capable call a task at once) and returns its id. */
async function slowTask(url: string, name: string, seconds: number, label: string): Promise<string> {
  const created = await modern(url, 'tools/call', { name, arguments: { seconds, label } }, { capabilities: EXT });
  assert.equal(created.result?.resultType, 'task', JSON.stringify(created.messages));
  return created.result?.taskId as string;
}

/** The task once it is no longer `working`, read through `url`. */
async function settled(url: string, taskId: string, timeoutMs: number): Promise<Json> {
  let task: Json = {};
  await eventually(async () => {
    task = await taskOn(url, taskId);
    return task.status !== 'working';
  }, timeoutMs);
  return task;
}

describe('replicas sharing one Redis', () => {
  test('kill -9 of the replica running a task: another replica fails it within the lease bound, saying the call was lost', async () => {
    const a = await replica();
    const b = await replica();
    try {
      const taskId = await slowTask(a.url, 'slow_compute', 60, 'orphan');
      assert.equal((await taskOn(b.url, taskId)).status, 'working');

      process.kill(-a.pid, 'SIGKILL');
      const killedAt = Date.now();
      await a.exited;
      const failed = await settled(b.url, taskId, 10 * LEASE_MS);
      const recoveredMs = Date.now() - killedAt;
      assert.equal(failed.status, 'failed');
      assert.match(String(failed.statusMessage), /The gateway lost the call: replica \S+ stopped while running it/);
      assert.match(String((failed.error as Json | undefined)?.message), /lost the call/);
      // Reported, not asserted: the bound is leaseMs plus one sweep (README).
      console.log(`# recovery after kill -9: ${recoveredMs} ms (leaseMs ${LEASE_MS})`);
    } finally {
      await a.kill(0).catch(() => undefined);
      await b.kill();
    }
  });

  test('a replica that is alive keeps its long task: leases are renewed past several lease periods', async () => {
    const a = await replica();
    const b = await replica();
    try {
      const taskId = await slowTask(a.url, 'slow_compute', 3.5, 'renewed');
      const done = await settled(b.url, taskId, 10_000);
      assert.equal(done.status, 'completed', JSON.stringify(done));
    } finally {
      await a.kill();
      await b.kill();
    }
  });

  test('SIGTERM drains: a task that finishes within drainTimeoutMs completes, one that does not is failed saying so', async () => {
    const a = await replica({ replicas: { leaseMs: LEASE_MS, drainTimeoutMs: 3000 } });
    const b = await replica();
    try {
      const short = await slowTask(a.url, 'slow_compute', 1, 'drained');
      const long = await slowTask(a.url, 'slow_compute', 60, 'cut');
      process.kill(a.pid, 'SIGTERM'); // the gateway only, as a container runtime does (not its stdio children)
      assert.equal(await a.exited, 0, 'the replica exits cleanly after draining');
      assert.equal((await taskOn(b.url, short)).status, 'completed');
      const cut = await taskOn(b.url, long);
      assert.equal(cut.status, 'failed');
      assert.equal(cut.statusMessage, 'The gateway shut down while the task was running');
    } finally {
      await a.kill(0).catch(() => undefined);
      await b.kill();
    }
  });
});

describe('upstream faults', () => {
  test('a stdio upstream that crashes fails its running tasks naming it, is restarted, and other upstreams are unaffected', async () => {
    const { command, args, cwd } = fixtureCommand('stdio');
    const gateway = await spawnGateway({
      config: {
        upstreams: {
          fx: { command, args, cwd, prefix: 'fx__', restart: { initialDelayMs: 100, maxDelayMs: 1000 } },
          other: { command, args, cwd, prefix: 'other__' },
        },
        tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 } },
      },
    });
    try {
      const taskId = await slowTask(gateway.url, 'fx__slow_compute', 60, 'crashed');
      // Called without the tasks extension, so synchronously: the call dies with the process.
      await modern(gateway.url, 'tools/call', { name: 'fx__crash', arguments: {} });
      const failed = await settled(gateway.url, taskId, 10_000);
      assert.equal(failed.status, 'failed');
      assert.match(String(failed.statusMessage), /Upstream 'fx'/);
      const echo = await modern(gateway.url, 'tools/call', { name: 'other__echo', arguments: { still: 'here' } });
      assert.deepEqual(echo.result?.structuredContent, { still: 'here' }, JSON.stringify(echo.messages));
      await eventually(async () => {
        const again = await modern(gateway.url, 'tools/call', { name: 'fx__echo', arguments: { back: true } });
        return (again.result?.structuredContent as Json | undefined)?.back === true;
      }, 10_000);
    } finally {
      await gateway.kill();
    }
  });

  test('an HTTP upstream that drops the connection mid-call fails that task naming it; other upstreams keep serving', async () => {
    const http = await spawnFixture({ transport: 'streamable-http' });
    const { command, args, cwd } = fixtureCommand('stdio');
    const gateway = await spawnGateway({
      config: {
        upstreams: { fx: { transport: 'streamable-http', url: http.url, prefix: 'fx__' }, other: { command, args, cwd, prefix: 'other__' } },
        tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 } },
      },
    });
    try {
      const taskId = await slowTask(gateway.url, 'fx__slow_compute', 60, 'dropped');
      process.kill(-http.pid, 'SIGKILL'); // the upstream process vanishes with the call's stream open
      const failed = await settled(gateway.url, taskId, 10_000);
      assert.equal(failed.status, 'failed');
      assert.match(String(failed.statusMessage), /Upstream 'fx'/);
      const echo = await modern(gateway.url, 'tools/call', { name: 'other__echo', arguments: { still: 'here' } });
      assert.deepEqual(echo.result?.structuredContent, { still: 'here' }, JSON.stringify(echo.messages));
    } finally {
      await gateway.kill();
      await http.kill(0).catch(() => undefined);
    }
  });
});
