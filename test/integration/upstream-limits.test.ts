// Upstream output is bounded (issue 20): over every transport, a message larger than the upstream's
// maxMessageBytes fails its own call with an error naming the upstream and the limit, while the gateway process
// keeps serving that upstream's other calls and new clients, and holds no more than about the limit. The upstream
// is test/fixtures/abusive-server.ts, which writes what no SDK server would; the gateway is a real process.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test, before } from 'node:test';
import { abusiveFixtureCommand, spawnAbusiveFixture, type GatewayChild } from '../fixtures/spawn.js';
import { eventually, type Json, logEntries, suiteScope, type TestScope, textOf, whenLogged } from '../helpers/harness.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';

const MiB = 1024 * 1024;
const LIMIT = MiB;
const ROOMY_LIMIT = 4 * MiB;
/** What a call whose answer was too large fails with: -32603, naming the upstream and its limit. */
const TOO_LARGE = { code: -32603, message: /Upstream 'tight' sent a message larger than maxMessageBytes \(1048576 bytes\)/ };

type Transport = 'stdio' | 'streamable-http' | 'sse';

/**
 * The fixture twice as upstreams: `tight` (maxMessageBytes 1 MiB) and `roomy` (4 MiB), tools prefixed `tight_`
 * and `roomy_`. HTTP transports share one fixture process; stdio starts a child for each.
 */
async function upstreams(scope: TestScope, transport: Transport, extra: Json = {}): Promise<Json> {
  let base: Json;
  if (transport === 'stdio') {
    base = { transport, ...abusiveFixtureCommand(), restart: { initialDelayMs: 100, maxDelayMs: 1000 } };
  } else {
    const fixture = await spawnAbusiveFixture({ transport, rev2026Side: extra.protocol === 'modern' });
    scope.defer(() => fixture.kill());
    base = { transport, url: fixture.url };
  }
  return {
    tight: { ...base, ...extra, prefix: 'tight_', maxMessageBytes: LIMIT },
    roomy: { ...base, ...extra, prefix: 'roomy_', maxMessageBytes: ROOMY_LIMIT },
  };
}

async function gatewayFor(scope: TestScope, transport: Transport, extra: Json = {}): Promise<GatewayChild> {
  return scope.spawnGateway({
    config: {
      upstreams: await upstreams(scope, transport, extra),
      // 2026-07-28 clients that declare the tasks extension get a task at once.
      tasks: { defaults: { taskAfterMs: 0 } },
      log: { level: 'info' },
    },
  });
}

function logged(gateway: GatewayChild, message: string | RegExp): Json[] {
  return logEntries(gateway).filter((entry) => (typeof message === 'string' ? entry.msg === message : message.test(String(entry.msg))));
}

/** The gateway process is still running and answering, and its peak resident memory stayed bounded. */
async function assertHealthy(gateway: GatewayChild): Promise<void> {
  assert.equal(gateway.child.exitCode, null, `the gateway exited: ${gateway.stderr()}`);
  assert.equal((await fetch(`${gateway.baseUrl}/healthz`)).status, 200);
  // Without the bounds, an endless line alone takes the process past 2 GB; with them it holds about the limit.
  const peakKiB = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${gateway.pid}/status`, 'utf8'))?.[1]);
  assert.ok(peakKiB < 400 * 1024, `peak RSS ${Math.round(peakKiB / 1024)} MiB`);
}

/** The limit tests every transport passes alike. */
function commonTests(transport: Transport, gateway: () => GatewayChild, scope: TestScope): void {
  test('a message over maxMessageBytes fails its call naming the upstream and the limit; a concurrent call and a new client are served', async () => {
    const { client } = await scope.client(gateway().url);
    const big = client.callTool({ name: 'tight_big_result', arguments: { bytes: 2 * MiB } });
    const echo = client.callTool({ name: 'tight_echo', arguments: { text: 'still here' } });
    await assert.rejects(big, TOO_LARGE);
    assert.equal(textOf(await echo), 'still here');
    const { client: another } = await scope.client(gateway().url);
    assert.equal(textOf(await another.callTool({ name: 'tight_echo', arguments: { text: 'new client' } })), 'new client');
  });

  test('a result under a raised limit passes intact', async () => {
    const { client } = await scope.client(gateway().url);
    const text = textOf(await client.callTool({ name: 'roomy_big_result', arguments: { bytes: 3 * MiB } }));
    assert.equal(text.length, 3 * MiB);
    assert.match(text, /^x+$/);
  });

  test('a message that never ends fails its call; the upstream serves again', async () => {
    const { client } = await scope.client(gateway().url);
    await assert.rejects(client.callTool({ name: 'tight_endless_line', arguments: {} }), TOO_LARGE);
    if (transport !== 'streamable-http') {
      // A channel all calls share is skipped to the message's end; one that does not end is reset (the child
      // killed and restarted, the SSE stream closed and reopened), after which the upstream serves again.
      const reset = transport === 'stdio' ? 'upstream stdout line does not end; killing the process' : 'upstream SSE event does not end; closing the stream';
      await whenLogged(gateway(), () => logged(gateway(), reset).length > 0);
      if (transport === 'stdio') await whenLogged(gateway(), () => logged(gateway(), 'upstream connected').filter((e) => e.upstream === 'tight').length >= 2);
    }
    assert.equal(textOf(await client.callTool({ name: 'tight_echo', arguments: { text: 'after' } })), 'after');
  });
}

for (const transport of ['stdio', 'streamable-http', 'sse'] as const) {
  describe(`maxMessageBytes on a ${transport} upstream`, () => {
    const scope = suiteScope();
    let gateway: GatewayChild;
    before(async () => {
      gateway = await gatewayFor(scope, transport);
    });

    commonTests(transport, () => gateway, scope);

    if (transport === 'stdio') {
      test('a stderr line of 20 MB is logged cut short, with its full length', async () => {
        const { client } = await scope.client(gateway.url);
        const result = await client.callTool({ name: 'tight_stderr_flood', arguments: { bytes: 20_000_000, lines: 1 } });
        assert.equal(textOf(result), 'wrote 1 stderr lines of 20000000 bytes');
        await whenLogged(gateway, () => logged(gateway, 'upstream stderr').some((e) => e.bytes === 20_000_000));
        const line = logged(gateway, 'upstream stderr').find((e) => e.bytes === 20_000_000) as Json;
        assert.equal(line.truncated, true);
        assert.equal(line.upstream, 'tight');
        assert.match(String(line.stderr), /^e{2048}$/);
        assert.ok(logged(gateway, /^upstream stderr line longer than maxMessageBytes/).some((e) => e.upstream === 'tight'));
      });

      test("an over-long request of the upstream's own is refused back to it, and its call goes on", async () => {
        const { client } = await scope.client(gateway.url);
        const result = await client.callTool({ name: 'tight_huge_request', arguments: { bytes: 2 * MiB } });
        assert.equal(textOf(result), 'answered: The request is larger than the gateway accepts from this server (maxMessageBytes: 1048576 bytes)');
      });

      test('a task whose result is over the limit fails with the same message', async () => {
        const created = await sendRev2026(gateway.url, 'tools/call', { name: 'tight_big_result', arguments: { bytes: 2 * MiB } }, { capabilities: TASKS_CAPABILITIES });
        assert.equal(created.result?.resultType, 'task', JSON.stringify(created.response));
        const taskId = String(created.result?.taskId);
        let task: Json = {};
        await eventually(async () => {
          task = (await sendRev2026(gateway.url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES })).result ?? {};
          return task.status === 'failed';
        }, 15_000);
        assert.match(String(task.statusMessage), TOO_LARGE.message);
        assert.match(String((task.error as Json | undefined)?.message), TOO_LARGE.message);
      });
    }

    if (transport === 'streamable-http') {
      test('a JSON body over the limit that is not even JSON fails its call the same way', async () => {
        const { client } = await scope.client(gateway.url);
        await assert.rejects(client.callTool({ name: 'tight_huge_line', arguments: { bytes: 2 * MiB } }), TOO_LARGE);
        await assert.rejects(client.callTool({ name: 'tight_huge_line', arguments: { bytes: 2 * MiB, sse: true } }), TOO_LARGE);
      });
    }

    test('the gateway process is still up, answering, and held bounded memory', async () => {
      await assertHealthy(gateway);
    });
  });
}

describe('maxMessageBytes on a 2026-07-28 upstream (the stateless client)', () => {
  const scope = suiteScope();
  let gateway: GatewayChild;
  before(async () => {
    gateway = await gatewayFor(scope, 'streamable-http', { protocol: 'modern' });
  });

  commonTests('streamable-http', () => gateway, scope);

  test('a JSON body over the limit fails its call, for a 2025 client and a 2026-07-28 one alike', async () => {
    const { client } = await scope.client(gateway.url);
    await assert.rejects(client.callTool({ name: 'tight_huge_line', arguments: { bytes: 2 * MiB } }), TOO_LARGE);
    const answer = await sendRev2026(gateway.url, 'tools/call', { name: 'tight_big_result', arguments: { bytes: 2 * MiB } });
    assert.equal(answer.error?.code, TOO_LARGE.code);
    assert.match(String(answer.error?.message), TOO_LARGE.message);
  });

  test('the gateway process is still up, answering, and held bounded memory', async () => {
    await assertHealthy(gateway);
  });
});
