// Answers a call did not ask for are violations (issue 31, item 6): an upstream that answers a plain call with a
// task, answers with an id the gateway never sent, answers twice, answers nobody, or claims to cancel the
// gateway's own request. Over every transport (stdio, Streamable HTTP, legacy SSE, and 2026-07-28) the affected
// call fails at once with -32603 naming the upstream and the violation, each violation is counted in
// taskgate_upstream_violations_total and warned about, and the gateway keeps serving. The upstream is
// test/fixtures/abusive-server.ts, which writes what no SDK server would; the gateway is a real process, the
// clients the SDK's and hand-written 2026-07-28 requests. A real SDK v1 server asked `server/discover` (HTTP 400,
// id null) is no violation at all.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { request } from 'undici';
import { abusiveFixtureCommand, spawnAbusiveFixture, spawnFixture, type GatewayChild } from '../fixtures/spawn.js';
import { eventually, type Json, logEntries, suiteScope, type TestScope, textOf, whenLogged } from '../helpers/harness.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';
import { parsePrometheus, sampleValue } from '../helpers/prometheus-text.js';

type Variant = 'stdio' | 'streamable-http' | 'sse' | 'modern';

const VIOLATION = (what: RegExp): { code: number; message: RegExp } => ({
  code: -32603,
  message: new RegExp(`Upstream 'bad' broke the protocol: ${what.source}`),
});
const UNASKED_TASK = VIOLATION(/it answered tools\/call with a task \("evil-task-\d+"\) the gateway did not ask for/);
const WRONG_ID = VIOLATION(/it answered (this call's stream with id 10000000\d\d, never with the call's own|with id 10000000\d\d, which the gateway never sent \(taken for this call's answer\))/);
const CANCELLED = VIOLATION(/it sent notifications\/cancelled for the gateway's tools\/call request/);

async function upstreamConfig(scope: TestScope, variant: Variant): Promise<Json> {
  if (variant === 'stdio') return { transport: 'stdio', ...abusiveFixtureCommand() };
  const fixture = await spawnAbusiveFixture({ transport: variant === 'sse' ? 'sse' : 'streamable-http', rev2026Side: variant === 'modern' });
  scope.defer(() => fixture.kill());
  if (variant === 'modern') return { transport: 'streamable-http', url: fixture.url, protocol: 'modern' };
  return { transport: variant, url: fixture.url };
}

async function violations(gateway: GatewayChild): Promise<number> {
  const response = await request(`${gateway.baseUrl}/metrics`);
  return sampleValue(parsePrometheus(await response.body.text()), 'taskgate_upstream_violations_total', { upstream: 'bad' });
}

/** Waits for the count to pass `before` (the event, not a clock: the scrape is only repeated until it shows). */
async function counted(gateway: GatewayChild, before: number): Promise<void> {
  await eventually(async () => (await violations(gateway)) > before, 15_000);
}

function warned(gateway: GatewayChild, kind: string): Json[] {
  return logEntries(gateway).filter((entry) => entry.violation === kind && entry.upstream === 'bad' && Number(entry.level) === 40);
}

for (const variant of ['stdio', 'streamable-http', 'sse', 'modern'] as const) {
  describe(`answers a ${variant} upstream was not asked for`, () => {
    const scope = suiteScope();
    let gateway: GatewayChild;

    before(async () => {
      gateway = await scope.spawnGateway({
        config: {
          upstreams: { bad: { ...(await upstreamConfig(scope, variant)), prefix: 'bad_' } },
          tasks: { defaults: { mode: 'optional', taskAfterMs: 0 } },
          log: { level: 'info' },
        },
      });
      const { client } = await scope.client(gateway.url);
      // The gateway listens before its upstreams are connected: wait for the fixture's tools.
      await eventually(async () => (await client.listTools()).tools.some((t) => t.name === 'bad_task_result'), 20_000);
    });

    test('a CreateTaskResult to a plain call fails it with -32603 naming the upstream; counted and warned about', async () => {
      const { client } = await scope.client(gateway.url);
      const before = await violations(gateway);
      await assert.rejects(client.callTool({ name: 'bad_task_result', arguments: {} }), UNASKED_TASK);
      await counted(gateway, before);
      await eventually(() => warned(gateway, 'a task the gateway did not ask for').length > 0);
      assert.equal(textOf(await client.callTool({ name: 'bad_echo', arguments: { text: 'still serving' } })), 'still serving');
    });

    test('a 2026-07-28 plain call gets the error, never resultType "complete" around the upstream\'s task id', async () => {
      const answer = await sendRev2026(gateway.url, 'tools/call', { name: 'bad_task_result', arguments: {} });
      assert.equal(answer.result, undefined, JSON.stringify(answer.response));
      assert.equal(answer.error?.code, UNASKED_TASK.code);
      assert.match(String(answer.error?.message), UNASKED_TASK.message);
    });

    if (variant !== 'modern') {
      // (A 2026-07-28 upstream asked by a client that declares the Tasks extension may answer with its own task.)
      test('a gateway task whose upstream call was plain fails with the violation, never "completed"', async () => {
        const created = await sendRev2026(gateway.url, 'tools/call', { name: 'bad_task_result', arguments: {} }, { capabilities: TASKS_CAPABILITIES });
        assert.equal(created.result?.resultType, 'task', JSON.stringify(created.response));
        const taskId = String(created.result?.taskId);
        assert.doesNotMatch(taskId, /evil-task/);
        let task: Json = {};
        await eventually(async () => {
          task = (await sendRev2026(gateway.url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES })).result ?? {};
          return task.status !== 'working';
        }, 15_000);
        assert.equal(task.status, 'failed', JSON.stringify(task));
        assert.match(String((task.error as Json | undefined)?.message), UNASKED_TASK.message);
      });
    }

    test('an answer with an id the gateway never sent fails the call at once; counted', async () => {
      const { client } = await scope.client(gateway.url);
      const before = await violations(gateway);
      await assert.rejects(client.callTool({ name: 'bad_wrong_id', arguments: {} }), WRONG_ID);
      await counted(gateway, before);
      await eventually(() => warned(gateway, 'a response with a wrong id').length > 0);
    });

    if (variant === 'stdio' || variant === 'sse') {
      test('on a shared channel, an id spelled as text ("7" for 7) is its call\'s answer even with another call waiting', async () => {
        const { client } = await scope.client(gateway.url);
        const waiting = client.callTool({ name: 'bad_never_answers', arguments: {} }).catch(() => undefined);
        await assert.rejects(
          client.callTool({ name: 'bad_wrong_id', arguments: { spelled: true } }),
          VIOLATION(/it answered with id "\d+", which the gateway never sent \(taken for this call's answer\)/),
        );
        assert.equal(textOf(await client.callTool({ name: 'bad_echo', arguments: { text: 'others served' } })), 'others served');
        await client.close();
        await waiting;
      });
    }

    test("notifications/cancelled for the gateway's own request fails the call at once; counted", async () => {
      const { client } = await scope.client(gateway.url);
      const before = await violations(gateway);
      await assert.rejects(client.callTool({ name: 'bad_cancel_own', arguments: {} }), CANCELLED);
      await counted(gateway, before);
      await eventually(() => warned(gateway, "notifications/cancelled for the gateway's own request").length > 0);
    });

    test('a duplicate answer: the call gets the first, the second is counted and warned about', async () => {
      const { client } = await scope.client(gateway.url);
      const before = await violations(gateway);
      assert.equal(textOf(await client.callTool({ name: 'bad_answer_twice', arguments: { text: 'once' } })), 'once');
      await counted(gateway, before);
      await eventually(() => warned(gateway, 'a duplicate response').length > 0);
    });

    test('an unsolicited response is counted and warned about; nothing else happens', async () => {
      const { client } = await scope.client(gateway.url);
      const before = await violations(gateway);
      assert.equal(textOf(await client.callTool({ name: 'bad_unsolicited', arguments: { text: 'answered' } })), 'answered');
      await counted(gateway, before);
      await eventually(() => warned(gateway, 'an unsolicited response').length > 0);
      assert.equal(textOf(await client.callTool({ name: 'bad_echo', arguments: { text: 'after' } })), 'after');
    });

    test('the gateway is still up and serving a new client', async () => {
      assert.equal(gateway.child.exitCode, null, gateway.stderr());
      assert.equal((await fetch(`${gateway.baseUrl}/healthz`)).status, 200);
      const { client } = await scope.client(gateway.url);
      assert.equal(textOf(await client.callTool({ name: 'bad_echo', arguments: { text: 'new client' } })), 'new client');
    });
  });
}

describe('a standard SDK v1 server asked server/discover', () => {
  const scope = suiteScope();

  test('its HTTP 400 with id null only means it does not speak 2026-07-28: no violation counted or warned about', async () => {
    const fixture = await spawnFixture({ transport: 'streamable-http' });
    scope.defer(() => fixture.kill());
    const gateway = await scope.spawnGateway({ config: { upstreams: { v1: { transport: 'streamable-http', url: fixture.url } }, log: { level: 'info' } } });
    // Connected after the probe (the log line comes once the catalog is in): the probe's answer was taken by then.
    await whenLogged(gateway, () => logEntries(gateway).some((e) => e.msg === 'upstream connected' && e.upstream === 'v1'));
    const { client } = await scope.client(gateway.url);
    assert.ok((await client.listTools()).tools.length > 0);
    const samples = parsePrometheus(await (await request(`${gateway.baseUrl}/metrics`)).body.text());
    assert.equal(sampleValue(samples, 'taskgate_upstream_violations_total', { upstream: 'v1' }), 0);
    const loud = logEntries(gateway).filter((e) => e.upstream === 'v1' && Number(e.level) >= 40);
    assert.deepEqual(loud, []);
  });
});
