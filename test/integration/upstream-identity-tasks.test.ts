// Upstream identity of tasks (issue 33, items 2 and 6): a task keeps its creator's identity at the upstream on
// whichever replica handles it. Alice's task asks for input and is answered, or is cancelled, through the other
// replica; after its replica is killed (-9), a re-run on the other (retry.onLoss, identity.sealingKeys) still runs as
// alice; and nothing in Redis holds a token or the client secret. 2026-07-28 tasks over the wire, a real
// authorization server and an OAuth-protected upstream (test/helpers/identity-gateway.ts).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import type { ProtectedServer } from '../fixtures/protected-server.js';
import { startAuthServer, TOKEN_EXCHANGE_GRANT, type AuthServer } from '../fixtures/auth-server.js';
import { startProtectedServer } from '../fixtures/protected-server.js';
import { freePort, type GatewayChild } from '../fixtures/spawn.js';
import { bearer } from '../helpers/auth-requests.js';
import { eventually, testScope, type Json } from '../helpers/harness.js';
import { GATEWAY_CLIENT, whoamiOf } from '../helpers/identity-gateway.js';
import { twoReplicas } from '../helpers/replicas.js';
import { createdTaskId, SessionWire } from '../helpers/session-wire.js';
import { sharedRedisStore, TEST_REDIS_URL } from '../helpers/shared-redis.js';
import { sendRev2026, TASKS_CAPABILITIES, TASKS_EXTENSION } from '../helpers/stateless-wire.js';
import { bounded, HANG_MS } from '../helpers/waits.js';

/** A 2025-11-25 session on the wire whose every request carries the caller's bearer token. */
class BearerWire extends SessionWire {
  constructor(capabilities: Json, private readonly token: string) {
    super(capabilities);
  }

  override headers(extra: Record<string, string> = {}): Record<string, string> {
    return super.headers({ ...bearer(this.token), ...extra });
  }
}

const ASKS = { elicitation: { form: {} }, extensions: { [TASKS_EXTENSION]: {} } };
const LEASE_MS = 1000;

/** What an upstream-identity gateway of these tests is configured with, whatever runs it. */
function gatewayConfig(issuer: string, upstream: ProtectedServer, resource: string, more: Json = {}): Json {
  return {
    auth: { resource, oauth: { issuer } },
    upstreams: { prot: { url: upstream.url, auth: { tokenExchange: { ...GATEWAY_CLIENT.config, tokenUrl: `${issuer}/token` } } } },
    tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 } },
    replicas: { leaseMs: LEASE_MS, drainTimeoutMs: 0 },
    ...more,
  };
}

/** Starts a tools/call as a 2026-07-28 task and answers its id. */
async function createTask(url: string, token: string, name: string, args: Json = {}): Promise<string> {
  const created = await sendRev2026(url, 'tools/call', { name, arguments: args }, { headers: bearer(token), capabilities: ASKS });
  assert.equal(created.result?.resultType, 'task', JSON.stringify(created.response));
  return created.result?.taskId as string;
}

/** tasks/get until the task is in one of `statuses` (bounded against hangs). */
async function untilTask(url: string, token: string, taskId: string, statuses: string[]): Promise<Json> {
  let task: Json = {};
  await eventually(async () => {
    task = (await sendRev2026(url, 'tasks/get', { taskId }, { headers: bearer(token), capabilities: TASKS_CAPABILITIES })).result ?? {};
    return statuses.includes(task.status as string);
  }, HANG_MS);
  return task;
}

describe('upstream identity of tasks across replicas', () => {
  test('alice\'s task runs as alice; its question is answered and another is cancelled through the other replica', async (t) => {
    const scope = testScope(t);
    const as = await startAuthServer({ clients: { [GATEWAY_CLIENT.id]: { secret: GATEWAY_CLIENT.secret } } });
    scope.defer(() => as.close());
    const upstream = await startProtectedServer({ issuers: [{ issuer: as.issuer, jwksUri: as.jwksUri }] });
    scope.defer(() => upstream.close());
    const resource = `http://127.0.0.1:${await freePort()}/mcp`; // the audience of callers' tokens, on either replica
    const [a, b] = await twoReplicas(scope, gatewayConfig(as.issuer, upstream, resource), 'upstream-identity-tasks');
    const alice = await as.mint({ sub: 'alice', aud: resource });
    await eventually(async () => ((await sendRev2026(a.url, 'tools/list', {}, { headers: bearer(alice) })).result?.tools as Json[] | undefined)?.some((tool) => tool.name === 'ask') === true, HANG_MS);

    const asking = await createTask(a.url, alice, 'ask');
    const waiting = await untilTask(b.url, alice, asking, ['input_required', 'completed', 'failed', 'cancelled']);
    assert.equal(waiting.status, 'input_required', JSON.stringify(waiting));
    const [key] = Object.keys(waiting.inputRequests as Json);
    const ack = await sendRev2026(b.url, 'tasks/update', { taskId: asking, inputResponses: { [key as string]: { action: 'accept', content: { answer: 'blue' } } } }, { headers: bearer(alice), capabilities: TASKS_CAPABILITIES });
    assert.equal(ack.error, undefined, JSON.stringify(ack.response));
    const answered = await untilTask(a.url, alice, asking, ['completed', 'failed', 'cancelled']);
    assert.equal(answered.status, 'completed', JSON.stringify(answered));
    assert.deepEqual((answered.result as Json).structuredContent, { sub: 'alice', action: 'accept', answer: 'blue' });

    const started = upstream.nextEvent((e) => e.tool === 'slow' && e.type === 'started');
    const cancelled = upstream.nextEvent((e) => e.tool === 'slow' && e.type === 'cancelled');
    const slow = await createTask(a.url, alice, 'slow');
    assert.equal((await bounded(started, 'slow started')).sub, 'alice');
    const cancel = await sendRev2026(b.url, 'tasks/cancel', { taskId: slow }, { headers: bearer(alice), capabilities: TASKS_CAPABILITIES });
    assert.equal(cancel.error, undefined, JSON.stringify(cancel.response));
    assert.equal((await bounded(cancelled, 'slow cancelled at the upstream')).sub, 'alice');
    assert.equal((await untilTask(b.url, alice, slow, ['completed', 'failed', 'cancelled'])).status, 'cancelled');

    // 2025-11-25: one session, alice's, used on both replicas: the task made on A, its question answered on B's
    // tasks/result stream, the next task cancelled on B.
    const wire = new BearerWire({ elicitation: { form: {} } }, alice);
    await wire.initialize(a.url);
    const rev2025Ask = createdTaskId(await wire.request(a.url, 'tools/call', { name: 'ask', arguments: {}, task: {} }));
    const stream = await wire.start(b.url, 'tasks/result', { taskId: rev2025Ask });
    const question = await stream.next((m) => m.method === 'elicitation/create', HANG_MS);
    await wire.respond(b.url, question.id, { action: 'accept', content: { answer: 'green' } });
    const rev2025Answer = await stream.next((m) => 'result' in m || 'error' in m, HANG_MS);
    assert.deepEqual((rev2025Answer.result as Json | undefined)?.structuredContent, { sub: 'alice', action: 'accept', answer: 'green' }, JSON.stringify(rev2025Answer));

    const rev2025Started = upstream.nextEvent((e) => e.tool === 'slow' && e.type === 'started');
    const rev2025Cancelled = upstream.nextEvent((e) => e.tool === 'slow' && e.type === 'cancelled');
    const rev2025Slow = createdTaskId(await wire.request(a.url, 'tools/call', { name: 'slow', arguments: {}, task: {} }));
    assert.equal((await bounded(rev2025Started, 'the 2025 slow task started')).sub, 'alice');
    const rev2025Cancel = await wire.request(b.url, 'tasks/cancel', { taskId: rev2025Slow });
    assert.equal((rev2025Cancel.result as Json | undefined)?.status, 'cancelled', JSON.stringify(rev2025Cancel));
    assert.equal((await bounded(rev2025Cancelled, 'the 2025 slow task cancelled at the upstream')).sub, 'alice');
  });
});

/** Every key under `prefix` and what it holds (strings, hashes, lists, sets, sorted sets, streams), as one text. */
async function redisDump(prefix: string): Promise<string> {
  const redis = new Redis(TEST_REDIS_URL);
  const parts: string[] = [];
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) {
        const type = await redis.type(key);
        const value =
          type === 'string' ? await redis.get(key)
          : type === 'hash' ? await redis.hgetall(key)
          : type === 'list' ? await redis.lrange(key, 0, -1)
          : type === 'set' ? await redis.smembers(key)
          : type === 'zset' ? await redis.zrange(key, '0', '-1')
          : type === 'stream' ? await redis.xrange(key, '-', '+')
          : type;
        parts.push(`${key} ${JSON.stringify(value)}`);
      }
    } while (cursor !== '0');
  } finally {
    await redis.quit();
  }
  return parts.join('\n');
}

describe('upstream identity of a task re-run after its replica was killed', () => {
  test('the other replica re-runs alice\'s task as alice; Redis holds no token and no client secret', async (t) => {
    const scope = testScope(t);
    const as = await startAuthServer({ clients: { [GATEWAY_CLIENT.id]: { secret: GATEWAY_CLIENT.secret } } });
    scope.defer(() => as.close());
    const upstream = await startProtectedServer({ issuers: [{ issuer: as.issuer, jwksUri: as.jwksUri }] });
    scope.defer(() => upstream.close());
    const resource = `http://127.0.0.1:${await freePort()}/mcp`;
    const store = sharedRedisStore(scope, 'upstream-identity-rerun');
    const config = gatewayConfig(as.issuer, upstream, resource, {
      store,
      log: { level: 'info' },
      identity: { sealingKeys: [{ kid: 'seal-1', key: randomBytes(32).toString('base64') }] },
      tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 }, rules: [{ match: 'slow', retry: { onLoss: true, maxAttempts: 2 } }] },
    });
    const a: GatewayChild = await scope.spawnGateway({ config });
    const b: GatewayChild = await scope.spawnGateway({ config });
    const alice = await as.mint({ sub: 'alice', aud: resource, extra: { email: 'alice@example.test' } });

    const firstRun = upstream.nextEvent((e) => e.tool === 'slow' && e.type === 'started');
    const taskId = await createTask(a.url, alice, 'slow');
    assert.equal((await bounded(firstRun, 'the first run at the upstream')).sub, 'alice');
    const secondRun = upstream.nextEvent((e) => e.tool === 'slow' && e.type === 'started');
    process.kill(-a.pid, 'SIGKILL');
    await a.exited;
    assert.equal((await bounded(secondRun, 'the re-run at the upstream')).sub, 'alice');
    upstream.releaseSlow();
    const done = await untilTask(b.url, alice, taskId, ['completed', 'failed', 'cancelled']);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(whoamiOf(done.result).sub, 'alice');
    assert.deepEqual(whoamiOf(done.result).act, { sub: GATEWAY_CLIENT.id });
    const exchanges = as.tokenRequests().filter((r) => r.grantType === TOKEN_EXCHANGE_GRANT && r.subjectSub === 'alice');
    assert.ok(exchanges.length >= 2, 'the other replica exchanged alice\'s token (restored from the sealed call) itself');

    const dump = await redisDump(store.prefix);
    assert.ok(dump.includes(taskId), 'the scan sees the task\'s keys');
    assert.ok(!dump.includes(alice), 'alice\'s access token is not in Redis');
    assert.ok(!dump.includes(GATEWAY_CLIENT.secret), 'the client secret is not in Redis');
    assert.doesNotMatch(dump, /eyJ[\w-]+\.[\w-]+\.[\w-]*/, 'no JWT (alice\'s or an exchanged token) is in Redis');
    assert.ok(upstream.counts().tokensSeen >= 1);
    const logged = `${b.stdout()}${b.stderr()}`;
    assert.ok(logged.includes(taskId), 'the surviving replica logged about the task (info level)');
    assert.ok(!logged.includes(alice) && !logged.includes(GATEWAY_CLIENT.secret), 'no token or secret in its log');
    assert.doesNotMatch(logged, /eyJ[\w-]+\.[\w-]+\.[\w-]*/, 'no JWT in its log');
  });
});

/**
 * Alice's `slow` task started on replica A (of two, on one Redis, re-run after loss allowed); `beforeKill` runs
 * just before A is killed; resolves with the task as B ends it, and the protected upstream.
 */
async function rerunAfterKill(t: TestContext, prefix: string, extra: Record<string, unknown>, beforeKill: (as: AuthServer) => Promise<void> = async () => undefined) {
  const scope = testScope(t);
  const as = await startAuthServer({ clients: { [GATEWAY_CLIENT.id]: { secret: GATEWAY_CLIENT.secret } } });
  scope.defer(() => as.close());
  const upstream = await startProtectedServer({ issuers: [{ issuer: as.issuer, jwksUri: as.jwksUri }] });
  scope.defer(() => upstream.close());
  const resource = `http://127.0.0.1:${await freePort()}/mcp`;
  const config = gatewayConfig(as.issuer, upstream, resource, {
    store: sharedRedisStore(scope, prefix),
    tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 }, rules: [{ match: 'slow', retry: { onLoss: true, maxAttempts: 2 } }] },
    ...extra,
  });
  const a = await scope.spawnGateway({ config });
  const b = await scope.spawnGateway({ config });
  const alice = await as.mint({ sub: 'alice', aud: resource });
  const firstRun = upstream.nextEvent((e) => e.tool === 'slow' && e.type === 'started');
  const taskId = await createTask(a.url, alice, 'slow');
  await bounded(firstRun, 'the first run at the upstream');
  await beforeKill(as);
  process.kill(-a.pid, 'SIGKILL');
  await a.exited;
  const failed = await untilTask(b.url, alice, taskId, ['completed', 'failed', 'cancelled']);
  return { failed, upstream };
}

describe('a re-run that cannot act for its caller', () => {
  test('without identity.sealingKeys the task of a killed replica fails saying why instead of running as the gateway', async (t) => {
    const { failed, upstream } = await rerunAfterKill(t, 'upstream-identity-unsealed', {});
    assert.equal(failed.status, 'failed', JSON.stringify(failed));
    assert.match(String(failed.statusMessage), /sealingKeys/);
    assert.ok(upstream.events().filter((e) => e.tool === 'slow' && e.type === 'started').every((e) => e.sub === 'alice'), 'never ran as anyone else');
  });

  test('a re-run whose caller\'s credential cannot be obtained again fails saying so', async (t) => {
    const sealing = { identity: { sealingKeys: [{ kid: 'seal-1', key: randomBytes(32).toString('base64') }] } };
    // The authorization server refuses the gateway before A dies (as if its client were revoked): B cannot act for alice.
    const { failed, upstream } = await rerunAfterKill(t, 'upstream-identity-refused', sealing, (as) => as.setMode('refuse'));
    assert.equal(failed.status, 'failed', JSON.stringify(failed));
    assert.match(String(failed.statusMessage), /upstream 'prot'.*credential/, JSON.stringify(failed));
    assert.equal(upstream.events().filter((e) => e.tool === 'slow' && e.type === 'started').length, 1, 'the re-run never reached the upstream');
  });
});

