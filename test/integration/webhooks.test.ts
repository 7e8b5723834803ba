// Webhooks from outside (issue 34): real gateways (in-process, and processes for kill -9) on the test Redis or the
// memory store, a real stdio upstream, and a loopback receiver that verifies every signature with the
// `standardwebhooks` package. Each event is acknowledged exactly once per webhook-id across two replicas, retries
// included and after a replica dies holding deliveries; results go only where asked; filters, redirects, an endpoint
// that never answers, dead letters and a full queue behave as docs/approvals-and-webhooks.md says.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fixtureCommand } from '../fixtures/spawn.js';
import { startWebhookReceiver, type ReceiverMode, type WebhookReceiver } from '../fixtures/webhook-receiver.js';
import { eventually, testScope, type Json, type TestScope } from '../helpers/harness.js';
import { parsePrometheus, sampleValue } from '../helpers/prometheus-text.js';
import { twoReplicaProcesses, twoReplicas } from '../helpers/replicas.js';
import { TOOL_ERROR_WITHHELD } from '../../src/webhooks/webhook-body.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';

/** How long a wait for deliveries may take before the test fails: a bound for a busy 2-core machine, never a timing claim. */
const WAIT_MS = 30_000;

const TASK_EVENTS = ['task.created', 'task.completed', 'task.failed', 'task.cancelled'];
/** Retries come quickly in these tests; the backoff itself has a unit test. */
const FAST_RETRIES = { initialBackoffMs: 50, maxBackoffMs: 200 };
const API_KEYS = { alice: 'alice-webhooks-key-0123456789', bob: 'bob-webhooks-key-0123456789' };

function gatewayConfig(webhooks: Json[], extra: Json = {}): Json {
  const { command, args, cwd } = fixtureCommand('stdio');
  return {
    upstreams: { fx: { command, args, cwd } },
    tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 } },
    replicas: { leaseMs: 1000, drainTimeoutMs: 0 },
    webhooks,
    ...extra,
    webhookDelivery: { ...FAST_RETRIES, ...((extra.webhookDelivery as Json | undefined) ?? {}) },
  };
}

async function receiver(scope: TestScope, mode: ReceiverMode = 'ok', redirectTo?: string): Promise<WebhookReceiver> {
  const started = await startWebhookReceiver({ mode, ...(redirectTo === undefined ? {} : { redirectTo }) });
  scope.defer(() => started.close());
  return started;
}

function endpoint(to: WebhookReceiver, extra: Json = {}): Json {
  return { url: to.url, secret: to.secret, events: TASK_EVENTS, ...extra };
}

/** The endpoint's queue depth (waiting and in flight, every replica's) as the replica at `url` last saw it. */
async function queueDepth(url: string, endpointId: string): Promise<number> {
  const text = await (await fetch(`${new URL(url).origin}/metrics`)).text();
  return sampleValue(parsePrometheus(text), 'taskgate_webhook_queue_depth', { endpoint: endpointId });
}

/** Starts a task of `name` through `url` (every task-capable call is a task at once) and returns its id. */
async function startTask(url: string, name: string, args: Json, headers: Record<string, string> = {}): Promise<string> {
  const created = await sendRev2026(url, 'tools/call', { name, arguments: args }, { capabilities: TASKS_CAPABILITIES, headers });
  assert.equal(created.result?.resultType, 'task', JSON.stringify(created.messages));
  return created.result?.taskId as string;
}

/** The events a receiver acknowledged, as `type taskId` lines, sorted. */
function acknowledgedEvents(to: WebhookReceiver): string[] {
  return to.deliveries().map((d) => `${d.type} ${String(d.data.taskId)}`).sort();
}

function assertOncePerId(to: WebhookReceiver): void {
  for (const [id, count] of to.acknowledged()) assert.equal(count, 1, `webhook-id ${id} acknowledged ${count} times`);
  assert.deepEqual(to.tries().filter((t) => !t.verified), [], 'every try verifies with the endpoint secret');
}

describe('webhooks', () => {
  test('two replicas, a receiver that fails every first try: each event acknowledged once, retried under the same webhook-id, signed', async (t) => {
    const scope = testScope(t);
    const hooks = await receiver(scope, 'fail-first');
    const [a, b] = await twoReplicas(scope, gatewayConfig([endpoint(hooks)]), 'webhooks');
    const completed = await startTask(a.url, 'echo', { text: 'done' });
    const failed = await startTask(b.url, 'jsonrpc_error', {});
    const cancelled = await startTask(a.url, 'slow_compute', { seconds: 60, label: 'webhook-cancel' });
    const cancel = await sendRev2026(b.url, 'tasks/cancel', { taskId: cancelled }, { capabilities: TASKS_CAPABILITIES });
    assert.ok(cancel.result !== undefined, JSON.stringify(cancel.messages));
    const expected = [
      `task.created ${completed}`,
      `task.completed ${completed}`,
      `task.created ${failed}`,
      `task.failed ${failed}`,
      `task.created ${cancelled}`,
      `task.cancelled ${cancelled}`,
    ].sort();
    await eventually(() => hooks.acknowledged().size >= expected.length, WAIT_MS);
    assert.deepEqual(acknowledgedEvents(hooks), expected);
    assertOncePerId(hooks);
    for (const id of hooks.acknowledged().keys()) {
      const tries = hooks.tries().filter((tried) => tried.webhookId === id);
      assert.equal(tries[0]?.status, 500, 'the first try failed');
      assert.ok(tries.length >= 2, 'and the retry carried the same webhook-id');
    }
    const done = hooks.deliveries().find((d) => d.type === 'task.completed');
    assert.equal(done?.data.status, 'completed');
    assert.equal(done?.data.tool, 'echo');
    assert.equal(done?.data.upstream, 'fx');
    assert.match(String(done?.data.createdAt), /^\d{4}-\d\d-\d\dT/);
    assert.equal(done?.data.result, undefined, 'no result without includeResult');
    assert.match(String(hooks.deliveries().find((d) => d.type === 'task.failed')?.data.statusMessage), /./);
  });

  test('kill -9 of a replica holding deliveries: the other takes them over after the lease, each acknowledged once', async (t) => {
    const scope = testScope(t);
    const hooks = await receiver(scope, 'ok');
    // Tries that arrive while the receiver stalls are never answered: the replica that sent them dies holding them.
    hooks.stall();
    const config = gatewayConfig([endpoint(hooks, { id: 'kill', events: ['task.created', 'task.completed'] })], { webhookDelivery: { timeoutMs: 4000 } });
    // Both replicas run from the start: the second takes the first's leased deliveries over once their lease ran out.
    const [a] = await twoReplicaProcesses(scope, config, 'webhooks-kill');
    const tasks = [await startTask(a.url, 'echo', { text: 'one' }), await startTask(a.url, 'echo', { text: 'two' }), await startTask(a.url, 'echo', { text: 'three' })];
    // Every lease the endpoint allows (webhookDelivery.concurrency: 4) is held, by a try that will never be answered,
    // and all six events are queued (an event is queued just after its task's write: a replica killed in between
    // would take that one with it, which is not what this test is about).
    await eventually(async () => hooks.open() >= 4 && (await queueDepth(a.url, 'kill')) === 6, WAIT_MS);
    process.kill(-a.pid, 'SIGKILL');
    await a.exited;
    hooks.resume();
    await eventually(() => hooks.acknowledged().size >= 6, 2 * WAIT_MS);
    assert.deepEqual(acknowledgedEvents(hooks), tasks.flatMap((id) => [`task.created ${id}`, `task.completed ${id}`]).sort());
    assertOncePerId(hooks);
    assert.ok(hooks.tries().some((tried) => tried.cut === true), 'tries in flight when the replica died were cut');
  });

  test('includeResult, tools and principals filters: each endpoint gets what it asked for', async (t) => {
    const scope = testScope(t);
    const [withResult, withoutResult, echoOnly, aliceOnly] = await Promise.all([receiver(scope), receiver(scope), receiver(scope), receiver(scope)]);
    const auth = { resource: 'http://127.0.0.1/mcp', apiKeys: [{ principal: 'alice', key: API_KEYS.alice }, { principal: 'bob', key: API_KEYS.bob }] };
    const gateway = await scope.gateway(
      gatewayConfig(
        [
          endpoint(echoOnly, { tools: ['ec*'], events: ['task.created', 'task.completed'] }),
          endpoint(aliceOnly, { principals: ['alice'], events: ['task.completed'] }),
          endpoint(withResult, { includeResult: true, events: ['task.completed'] }),
          endpoint(withoutResult, { events: ['task.completed'] }),
        ],
        // One try at a time per endpoint: deliveries go in the order their events happened.
        { auth, webhookDelivery: { concurrency: 1 } },
      ),
    );
    const as = (who: keyof typeof API_KEYS) => ({ authorization: `Bearer ${API_KEYS[who]}` });
    const completedCount = (): number => withResult.deliveries().length;
    await startTask(gateway.url, 'echo', { text: 'from bob' }, as('bob'));
    await eventually(() => completedCount() === 1, WAIT_MS);
    await startTask(gateway.url, 'slow_compute', { seconds: 0.1, label: 'webhook-filter' }, as('alice'));
    await eventually(() => completedCount() === 2, WAIT_MS);
    const marker = await startTask(gateway.url, 'echo', { text: 'marker' }, as('alice'));
    await eventually(() => completedCount() === 3, WAIT_MS);
    // The marker is the last event each filtered endpoint wants: once it is there, whatever came before it was too.
    await eventually(() => echoOnly.deliveries().some((d) => d.type === 'task.completed' && d.data.taskId === marker), WAIT_MS);
    await eventually(() => aliceOnly.deliveries().some((d) => d.data.taskId === marker), WAIT_MS);

    assert.deepEqual([...new Set(echoOnly.deliveries().map((d) => d.data.tool))], ['echo']);
    assert.equal(echoOnly.deliveries().length, 4, 'created and completed of both echo tasks');
    assert.deepEqual(aliceOnly.deliveries().map((d) => d.data.principal), ['key:alice', 'key:alice']);
    const result = withResult.deliveries().find((d) => d.data.taskId === marker)?.data.result as { content?: { text?: string }[] } | undefined;
    assert.match(String(result?.content?.[0]?.text), /marker/);
    await eventually(() => withoutResult.deliveries().length === 3, WAIT_MS);
    assert.ok(withoutResult.deliveries().every((d) => !('result' in d.data)));
    for (const hooks of [withResult, withoutResult, echoOnly, aliceOnly]) assertOncePerId(hooks);
  });

  test('without includeResult a failed task\'s delivery leaves the tool\'s error text out (a generic statusMessage); with it, the text is there; the gateway\'s own reasons stay', async (t) => {
    const scope = testScope(t);
    const [withResult, withoutResult] = await Promise.all([receiver(scope), receiver(scope)]);
    const config = gatewayConfig([endpoint(withResult, { includeResult: true, events: ['task.failed'] }), endpoint(withoutResult, { events: ['task.failed'] })]);
    (config.tasks as Json).rules = [{ match: 'slow_compute', maxRunMs: 200 }];
    const gateway = await scope.gateway(config);
    const secret = 'patient 4711 diagnosis: confidential';
    const toolError = await startTask(gateway.url, 'fail_tool', { message: secret });
    const rpcError = await startTask(gateway.url, 'jsonrpc_error', {});
    const overran = await startTask(gateway.url, 'slow_compute', { seconds: 30, label: 'webhook-maxrun' });
    await eventually(() => withoutResult.deliveries().length === 3 && withResult.deliveries().length === 3, WAIT_MS);
    const of = (hooks: WebhookReceiver, taskId: string) => hooks.deliveries().find((d) => d.data.taskId === taskId)?.data ?? {};
    for (const taskId of [toolError, rpcError]) {
      assert.equal(of(withoutResult, taskId).statusMessage, TOOL_ERROR_WITHHELD);
      assert.equal(of(withoutResult, taskId).status, 'failed');
    }
    assert.ok(!JSON.stringify(withoutResult.deliveries()).includes(secret) && !JSON.stringify(withoutResult.deliveries()).includes('jsonrpc_error fixture failure'), 'no error text without includeResult');
    assert.match(String(of(withResult, toolError).statusMessage), /patient 4711/);
    assert.match(JSON.stringify(of(withResult, toolError).result), /patient 4711/);
    assert.match(String(of(withResult, rpcError).statusMessage), /jsonrpc_error fixture failure/);
    // The gateway's own reason is its own text, not the tool's: it stays, with the reason.
    assert.match(String(of(withoutResult, overran).statusMessage), /maxRunMs/);
    assert.equal(of(withoutResult, overran).reason, 'maxRunMs');
  });

  test('results held for an endpoint that never answers stop at webhookDelivery.maxQueuedBytesPerEndpoint: the newest is dropped (event, metric), the count bound far off', async (t) => {
    const scope = testScope(t);
    const stuck = await receiver(scope, 'never');
    const gateway = await scope.gateway(
      gatewayConfig([endpoint(stuck, { id: 'bytes', includeResult: true, events: ['task.completed'] })], {
        webhookDelivery: { timeoutMs: 60_000, concurrency: 1, maxBodyBytes: 32_768, maxQueuedBytesPerEndpoint: 32_768 },
      }),
    );
    const dropped: Json[] = [];
    gateway.events.on('webhook.dropped', (e) => dropped.push({ ...e }));
    // Each body is ~8.5 KB (the echoed text twice: content and structured content): three fit the 32 KiB bound, the
    // rest are refused however few they are.
    const tasks: string[] = [];
    for (let i = 0; i < 6; i++) tasks.push(await startTask(gateway.url, 'echo', { text: `${i}`.repeat(4000) }));
    await eventually(() => dropped.length === 3, WAIT_MS);
    assert.deepEqual(dropped.map((e) => [e.endpoint, e.type, e.reason]), Array.from({ length: 3 }, () => ['bytes', 'task.completed', 'queue_full']));
    const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
    assert.match(metrics, /taskgate_webhook_dropped_total\{endpoint="bytes",reason="queue_full"\} 3/);
    assert.equal(stuck.open(), 1, 'the one try in flight is the oldest; the queue holds it and two more');
    assert.deepEqual(dropped.map((e) => e.webhookId).filter((id) => !/^msg_/.test(String(id))), []);
  });

  test('a redirect is not followed: the try fails and is retried at the configured URL, the other URL is never called', async (t) => {
    const scope = testScope(t);
    const elsewhere = await receiver(scope, 'ok');
    const redirecting = await receiver(scope, 'redirect', elsewhere.url);
    const gateway = await scope.gateway(gatewayConfig([endpoint(redirecting, { events: ['task.created'] })]));
    await startTask(gateway.url, 'echo', { text: 'redirected' });
    await eventually(() => redirecting.tries().length >= 2, WAIT_MS);
    const [first, second] = redirecting.tries();
    assert.equal(first?.status, 302);
    assert.equal(second?.webhookId, first?.webhookId);
    assert.deepEqual(elsewhere.tries(), []);
  });

  test('an endpoint that never answers delays no other endpoint', async (t) => {
    const scope = testScope(t);
    const stuck = await receiver(scope, 'never');
    const fine = await receiver(scope, 'ok');
    const gateway = await scope.gateway(gatewayConfig([endpoint(stuck), endpoint(fine)], { webhookDelivery: { timeoutMs: 60_000, concurrency: 1 } }));
    for (const text of ['a', 'b', 'c']) await startTask(gateway.url, 'echo', { text });
    await eventually(() => fine.acknowledged().size === 6, WAIT_MS);
    assert.equal(stuck.open(), 1, 'the stuck endpoint holds its one try, the rest of its queue waits');
    assert.equal(stuck.acknowledged().size, 0);
    assertOncePerId(fine);
  });

  test('an endpoint that never answers: each timed-out try\'s socket is closed, and its sockets never outnumber webhookDelivery.concurrency', async (t) => {
    const scope = testScope(t);
    const stuck = await receiver(scope, 'never');
    const gateway = await scope.gateway(gatewayConfig([endpoint(stuck, { id: 'sockets' })], { webhookDelivery: { timeoutMs: 300, concurrency: 4, initialBackoffMs: 20, maxBackoffMs: 50 } }));
    // Twelve deliveries (created and completed of six tasks), tried again and again: many rounds of four timeouts.
    for (let i = 0; i < 6; i++) await startTask(gateway.url, 'echo', { text: `socket ${i}` });
    await eventually(() => stuck.tries().length >= 40, 2 * WAIT_MS);
    const sockets = stuck.sockets();
    assert.ok(sockets.peakAtTry <= 4, `at most 4 sockets open when a try arrived, saw ${sockets.peakAtTry}`);
    assert.ok(sockets.total >= 10, `timed-out tries' sockets were closed and new ones opened (${sockets.total} in all)`);
    assert.equal(stuck.acknowledged().size, 0);
  });

  test('past maxAgeMs a delivery is dead-lettered (event, metric and audit line); past maxQueuedPerEndpoint the newest is dropped', async (t) => {
    const scope = testScope(t);
    const failing = await receiver(scope, 'fail');
    const stuck = await receiver(scope, 'never');
    const gateway = await scope.gateway(
      gatewayConfig([endpoint(failing, { id: 'failing', events: ['task.created'] }), endpoint(stuck, { id: 'stuck', events: ['task.created'] })], {
        webhookDelivery: { maxAgeMs: 1000, initialBackoffMs: 100, maxBackoffMs: 200, maxQueuedPerEndpoint: 1, timeoutMs: 60_000 },
      }),
    );
    const dead: Json[] = [];
    const dropped: Json[] = [];
    gateway.events.on('webhook.dead_lettered', (e) => dead.push({ ...e }));
    gateway.events.on('webhook.dropped', (e) => dropped.push({ ...e }));
    const first = await startTask(gateway.url, 'echo', { text: 'first' });
    // The stuck endpoint's queue holds the first delivery (in flight, never answered): the next one is refused.
    await eventually(() => stuck.open() === 1, WAIT_MS);
    await startTask(gateway.url, 'echo', { text: 'second' });
    await eventually(() => dropped.some((e) => e.endpoint === 'stuck'), WAIT_MS);
    const refused = dropped.filter((e) => e.endpoint === 'stuck');
    assert.deepEqual(refused.map((e) => [e.type, e.reason]), [['task.created', 'queue_full']]);
    assert.match(String(refused[0]?.webhookId), /^msg_/);

    await eventually(() => dead.some((e) => e.endpoint === 'failing'), WAIT_MS);
    const letter = dead.find((e) => e.endpoint === 'failing');
    assert.equal(letter?.type, 'task.created');
    assert.match(String(letter?.reason), /maxAgeMs \(1000 ms\) after \d+ tries; the last: HTTP 500/);
    const tried = failing.tries().filter((tr) => tr.webhookId === letter?.webhookId);
    assert.ok(tried.length >= 2 && tried.every((tr) => tr.body?.data.taskId === first), 'the first task\'s delivery, tried until it was too old');
    const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
    assert.match(metrics, /taskgate_webhook_dead_letters_total\{endpoint="failing"\} 1/);
    assert.match(metrics, /taskgate_webhook_dropped_total\{endpoint="stuck",reason="queue_full"\} 1/);
    assert.match(metrics, /taskgate_webhook_deliveries_total\{endpoint="failing",outcome="failed"\} \d+/);
  });
});
