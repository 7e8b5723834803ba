// What clients see at the gateway's start and at each new session (issue 39, finding 12), from outside. A client
// that connects the moment the gateway process listens, while an upstream is still in its slow initialize, gets
// every upstream's tools on its first tools/list (and their capabilities at initialize), with no list_changed
// needed: hosts that list once at connect would otherwise keep an empty toolbox after every restart. A new session
// of a warm gateway is listed from the catalog the gateway holds: it opens (and waits for) no upstream session of
// its own, which a fixture whose initialize takes a second counts; its first call opens one.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { nodeArgs, REPO_ROOT } from '../fixtures/spawn.js';
import { startSessionServer } from '../fixtures/session-server.js';
import { testScope, textOf, type Json } from '../helpers/harness.js';
import { sendRev2026 } from '../helpers/stateless-wire.js';

const NAMES_FIXTURE = join(REPO_ROOT, 'test/fixtures/names-server.ts');
const NAMES_TOOLS = ['add', 'echo', 'received', 'secret'];

function namesUpstream(extraArgs: string[] = []): Json {
  return { transport: 'stdio', command: process.execPath, args: [...nodeArgs(NAMES_FIXTURE), '--lookup', 'strict', ...extraArgs], cwd: REPO_ROOT, isolation: 'shared' };
}

describe('lists at start and per session', () => {
  test('a client connecting as the gateway starts lists every upstream\'s tools on its first tools/list', async (t) => {
    const scope = testScope(t);
    const gateway = await scope.spawnGateway({
      listeningOnly: true,
      config: {
        upstreams: {
          // Reads nothing for 5 s after it starts: its first attempt ends long after the gateway listens.
          slow: { ...namesUpstream(['--initialize-delay-ms', '5000']), prefix: 'slow__' },
          quick: { ...namesUpstream(), prefix: 'quick__' },
        },
      },
    });
    const readiness = (await (await fetch(`${gateway.baseUrl}/readyz`)).json()) as { initializing?: string[] };
    assert.ok(readiness.initializing?.includes('slow'), `the slow upstream is still connecting as the clients come: ${JSON.stringify(readiness)}`);

    // Both revisions at once, the moment the gateway listens.
    const [session, rev2026Tools, discovered] = await Promise.all([
      (async () => {
        const connected = await scope.client(gateway.url);
        return { ...connected, tools: (await connected.client.listTools()).tools.map((tool) => tool.name) };
      })(),
      sendRev2026(gateway.url, 'tools/list'),
      sendRev2026(gateway.url, 'server/discover'),
    ]);
    const expected = ['quick', 'slow'].flatMap((prefix) => NAMES_TOOLS.map((name) => `${prefix}__${name}`)).sort();
    assert.deepEqual(session.tools.filter((name) => !name.includes('task_')).sort(), expected, '2025-11-25: the first tools/list');
    const rev2026Names = ((rev2026Tools.result?.tools ?? []) as { name: string }[]).map((tool) => tool.name);
    assert.deepEqual(rev2026Names.filter((name) => !name.includes('task_')).sort(), expected, `2026-07-28: the first tools/list ${JSON.stringify(rev2026Tools.response)}`);
    const capabilities = session.client.getServerCapabilities();
    assert.ok(capabilities?.prompts !== undefined && capabilities.resources !== undefined, `initialize declared what the upstreams offer: ${JSON.stringify(capabilities)}`);
    assert.ok(JSON.stringify(discovered.result).includes('"resources"'), `server/discover declared it too: ${JSON.stringify(discovered.result)}`);
    assert.deepEqual(session.log.notifications.filter((n) => n.method.endsWith('/list_changed')), [], 'no list_changed was needed');
    assert.match(textOf(await session.client.callTool({ name: 'slow__echo', arguments: { x: 1 } })), /echo/);
  });

  test('a new session of a warm gateway is listed without an upstream handshake; its first call opens its session', async (t) => {
    const scope = testScope(t);
    // A real server's slow handshake: each initialize (a new upstream session) is answered a second later.
    const upstream = await startSessionServer({ transport: 'streamable-http', initializeDelayMs: 1000 });
    scope.defer(() => upstream.close());
    const gateway = await scope.gateway({ upstreams: { up: { transport: 'streamable-http', url: upstream.url, protocol: 'legacy' } } });
    const warm = upstream.initializeRequests();
    assert.equal(warm, 1, 'the gateway\'s own session');

    for (let i = 0; i < 3; i++) {
      const { client } = await scope.client(gateway.url);
      const tools = (await client.listTools()).tools.map((tool) => tool.name);
      assert.ok(tools.includes('echo'), JSON.stringify(tools));
      assert.ok((await client.listPrompts()).prompts.length > 0);
      assert.ok((await client.listResources()).resources.length > 0);
      await client.listResourceTemplates();
    }
    const listed = await sendRev2026(gateway.url, 'tools/list');
    assert.ok(JSON.stringify(listed.result).includes('"echo"'));
    assert.equal(upstream.initializeRequests(), warm, 'no list asked the upstream for a session');

    const { client } = await scope.client(gateway.url);
    assert.match(textOf(await client.callTool({ name: 'echo', arguments: { n: 1 } })), /"n":1/);
    assert.equal(upstream.initializeRequests(), warm + 1, 'the first call opened the session\'s own');
  });
});
