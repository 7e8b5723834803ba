// A replica killed amid a burst of task creations leaves no task stuck (issue 39, finding 1): two gateway processes
// on one Redis, ~300 concurrent creations (plain and under idempotency keys) at replica A, kill -9 of A mid-burst.
// Read from Redis itself: at every moment after the kill, every unfinished task record is leased to some replica
// (a new task's id is leased before its record is written), and within the lease bound every record is terminal or
// leased to a live replica; the keys' resends to replica B each get a task that ends.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { fixtureCommand, type GatewayChild } from '../fixtures/spawn.js';
import { redisKeys } from '../../src/store/redis-keys.js';
import { bearer } from '../helpers/auth-requests.js';
import { eventually, testScope } from '../helpers/harness.js';
import { twoReplicaProcesses } from '../helpers/replicas.js';
import { sharedRedisStore, TEST_REDIS_URL } from '../helpers/shared-redis.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';

const LEASE_MS = 1000;
const PLAIN = 150;
const KEYED = 150;
/** Responses A sends before it is killed: the rest of the burst is in flight (admitted, stored, leased, or not yet). */
const KILL_AFTER_ANSWERS = 40;
const API_KEY = 'alice-key-stuck-creations-0123456789';
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/** Every task record under `prefix` with its status, and the replica each running id is leased to, read from Redis. */
async function recordsAndLeases(redis: Redis, prefix: string, beatAfterMs = 0): Promise<{ records: Map<string, string>; owners: Record<string, string>; alive: Set<string> }> {
  const keys = redisKeys(prefix);
  const records = new Map<string, string>();
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}:task:{*}`, 'COUNT', 1000);
    cursor = next;
    for (const key of found) {
      const taskId = /:task:\{([^}]*)\}$/.exec(key)?.[1];
      if (taskId === undefined) continue; // a timeline or an expired-marker
      const status = await redis.hget(key, 'status');
      if (status !== null) records.set(taskId, status);
    }
  } while (cursor !== '0');
  const owners = await redis.hgetall(keys.runningOwners());
  // Alive: its liveness runs past now, and past what any heartbeat before `beatAfterMs` (store time) could give.
  const liveness = await redis.zrangebyscore(keys.replicasAlive(), Math.max(await storeNow(redis), beatAfterMs + LEASE_MS) + 1, '+inf');
  return { records, owners, alive: new Set(liveness) };
}

/** Redis's clock (the one leases run on), epoch ms. */
async function storeNow(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

function create(url: string, label: string, seconds: number, key?: string): ReturnType<typeof sendRev2026> {
  const headers = { ...bearer(API_KEY), ...(key === undefined ? {} : { 'idempotency-key': key }) };
  return sendRev2026(url, 'tools/call', { name: 'slow_compute', arguments: { seconds, label } }, { capabilities: TASKS_CAPABILITIES, headers });
}

async function statusOn(url: string, taskId: string): Promise<string | undefined> {
  const answer = await sendRev2026(url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES, headers: bearer(API_KEY) });
  return answer.result?.status as string | undefined;
}

describe('a replica killed amid a burst of creations', () => {
  test(`kill -9 during ${PLAIN + KEYED} concurrent creations: no record is left unleased, every one ends or runs under a live lease, keyed resends get tasks that end`, { timeout: 180_000 }, async (t) => {
    const scope = testScope(t);
    const redis = new Redis(TEST_REDIS_URL);
    t.after(() => redis.quit());
    let a: GatewayChild | undefined;
    try {
      const { command, args, cwd } = fixtureCommand('stdio');
      const store = sharedRedisStore(scope, 'stuck-creations');
      const config = {
        store,
        upstreams: { fx: { command, args, cwd } },
        tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 } },
        replicas: { leaseMs: LEASE_MS, drainTimeoutMs: 0 },
        auth: { resource: 'http://gateway.example/mcp', apiKeys: [{ principal: 'alice', key: API_KEY }] },
      };
      const [first, b] = await twoReplicaProcesses(scope, config, 'stuck-creations');
      a = first;

      // The burst: long plain tasks (still running at the kill) and short keyed ones.
      let answered = 0;
      let killed: () => void = () => undefined;
      const killedNow = new Promise<void>((resolve) => (killed = resolve));
      const sent = Array.from({ length: PLAIN + KEYED }, (_, i) =>
        i % 2 === 0 && i / 2 < KEYED ? { key: `stuck-key-${i}`, label: `stuck-keyed-${i}`, seconds: 0.5 } : { key: undefined, label: `stuck-plain-${i}`, seconds: 30 },
      );
      const answers = sent.map((call) =>
        create(first.url, call.label, call.seconds, call.key).then(
          (answer) => {
            if (++answered === KILL_AFTER_ANSWERS) killed();
            return answer;
          },
          () => undefined,
        ),
      );
      await killedNow;
      process.kill(-first.pid, 'SIGKILL');
      const killedAt = Date.now();
      const killedAtStore = await storeNow(redis);
      await first.exited;
      await Promise.all(answers);

      const storePrefix = store.prefix;
      // At once, and from then on: every unfinished record is leased to some replica (the dead one's leases too:
      // the sweep takes those). Before issue 39's fix, records stored and never leased were missing here.
      const atKill = await recordsAndLeases(redis, storePrefix);
      assert.ok(atKill.records.size > 0, 'A stored tasks before it died');
      const leasedAtKill = [...atKill.records.keys()].filter((taskId) => atKill.owners[taskId] !== undefined).length;
      console.log(`# at the kill (${answered} answers sent): ${atKill.records.size} records, ${leasedAtKill} leased; ${Object.keys(atKill.owners).length} ids leased in all`);
      const unleased = [...atKill.records].filter(([taskId, status]) => !TERMINAL.has(status) && atKill.owners[taskId] === undefined);
      assert.deepEqual(unleased, [], `${unleased.length} of ${atKill.records.size} records unfinished and leased to nobody right after the kill`);

      // Within the lease bound (docs/limits.md): every record terminal, or running under a live replica's lease.
      let last = atKill;
      await eventually(async () => {
        last = await recordsAndLeases(redis, storePrefix, killedAtStore);
        return [...last.records].every(([taskId, status]) => TERMINAL.has(status) || last.alive.has(last.owners[taskId] ?? ''));
      }, 20 * LEASE_MS);
      const settledMs = Date.now() - killedAt;
      const statuses = [...last.records.values()].reduce<Record<string, number>>((acc, status) => ({ ...acc, [status]: (acc[status] ?? 0) + 1 }), {});
      console.log(`# ${last.records.size} records after the kill; all settled or live-leased ${settledMs} ms after it (leaseMs ${LEASE_MS}): ${JSON.stringify(statuses)}`);
      // And A's own end: the sweep fails them (their policy runs nothing again), each once.
      await eventually(async () => {
        const now = await recordsAndLeases(redis, storePrefix, killedAtStore);
        return [...atKill.records.keys()].every((taskId) => TERMINAL.has(now.records.get(taskId) ?? 'completed'));
      }, 20 * LEASE_MS);

      // Each key sent again, to B: a task that ends (the one A made, ended by the sweep or by its run; or, where A
      // never stored it, a new one B runs).
      const resent = await Promise.all(sent.filter((call) => call.key !== undefined).map((call) => create(b.url, call.label, call.seconds, call.key)));
      const ids = resent.map((answer, i) => {
        assert.equal(answer.result?.resultType, 'task', `resend ${i}: ${JSON.stringify(answer.messages)}`);
        return String(answer.result?.taskId);
      });
      await eventually(async () => {
        const now = await Promise.all(ids.map((taskId) => statusOn(b.url, taskId)));
        return now.every((status) => status !== undefined && TERMINAL.has(status));
      }, 30 * LEASE_MS);
      console.log(`# ${ids.length} keyed resends to B: every task ended`);
    } finally {
      await a?.kill(0).catch(() => undefined);
    }
  });
});
