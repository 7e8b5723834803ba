// Principals' own upstream sessions (issue 33, item 1): where an upstream's `auth` tells callers apart, the
// 2026-07-28 clients get one upstream session per principal, which no client session ends; it is ended with DELETE
// once it has had no call for the upstream's idleTimeoutMs, and the principal's next call opens a new one. A call
// running keeps its session however long it runs, and a 2025-11-25 client session's own upstream session ends with
// its client session, not for being idle. Seen at the OAuth-protected upstream fixture, which records each session
// a DELETE ends and reports the session a call came on (whoami echoes `Mcp-Session-Id`).
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ProtectedServer, Whoami } from '../fixtures/protected-server.js';
import { bearer } from '../helpers/auth-requests.js';
import { suiteScope } from '../helpers/harness.js';
import { identityGateway, GATEWAY_CLIENT, whoamiOf, type IdentityGateway } from '../helpers/identity-gateway.js';
import { sendRev2026 } from '../helpers/stateless-wire.js';
import { bounded } from '../helpers/waits.js';

/** Small, so that a session goes idle within the test; the sweep looks every 50 ms. */
const IDLE_TIMEOUT_MS = 200;

describe('upstream identity: principals\' own upstream sessions end when idle', () => {
  const scope = suiteScope();
  let upstream: ProtectedServer;
  let gw: IdentityGateway;

  before(async () => {
    ({ upstream, gw } = await identityGateway(scope, (server) => ({ tokenExchange: { ...GATEWAY_CLIENT.config, tokenUrl: `${server.issuer}/token` } }), undefined,
      { upstreamSettings: { idleTimeoutMs: IDLE_TIMEOUT_MS }, echoHeaders: ['mcp-session-id'] }));
  });

  /** A 2026-07-28 client's call of `tool` as `sub`: what the upstream saw, and the upstream session it came on. */
  async function callAs(sub: string, tool = 'whoami', args = {}): Promise<{ me: Whoami; session: string }> {
    const answer = await sendRev2026(gw.gateway.url, 'tools/call', { name: tool, arguments: args }, { headers: bearer(await gw.token(sub)) });
    assert.equal(answer.error, undefined, JSON.stringify(answer.response));
    const me = whoamiOf(answer.result);
    assert.equal(me.sub, sub);
    const session = me.headers['mcp-session-id'];
    assert.ok(session !== undefined && session !== '', JSON.stringify(me.headers));
    return { me, session };
  }

  const endOf = (sub: string) => bounded(upstream.nextSessionEnd((e) => e.sub === sub), `the end of ${sub}'s upstream session`);

  test('each principal\'s upstream session is ended with DELETE once idle, and the principal\'s next call opens a new one', async () => {
    const aliceEnded = endOf('alice');
    const bobEnded = endOf('bob');
    const alice = await callAs('alice');
    const bob = await callAs('bob');
    assert.notEqual(alice.session, bob.session, 'one upstream session per principal');

    assert.equal((await aliceEnded).sessionId, alice.session);
    assert.equal((await bobEnded).sessionId, bob.session);

    const forbidden = upstream.counts().forbidden;
    const aliceAgain = await callAs('alice');
    assert.notEqual(aliceAgain.session, alice.session, 'a new upstream session for the principal\'s next call');
    assert.equal(upstream.counts().forbidden, forbidden, 'no call went to another subject\'s session');
    assert.equal((await endOf('alice')).sessionId, aliceAgain.session, 'the new one ends when idle too');
  });

  test('a session with a call running is not ended while it runs, however long; it is once the call is over', async () => {
    const carolStarted = bounded(upstream.nextEvent((e) => e.type === 'started' && e.tool === 'slow' && e.sub === 'carol'), 'carol\'s slow call');
    const slow = callAs('carol', 'slow'); // runs until releaseSlow()
    await carolStarted;

    // Dave's session goes idle after carol's call started: once it is ended, carol's has run longer than
    // idleTimeoutMs with its call, and must still be open.
    const daveEnded = endOf('dave');
    const dave = await callAs('dave');
    assert.equal((await daveEnded).sessionId, dave.session);
    assert.deepEqual(upstream.endedSessions().filter((e) => e.sub === 'carol'), [], 'carol\'s session was not ended mid-call');

    const carolEnded = endOf('carol');
    upstream.releaseSlow();
    const carol = await slow;
    assert.equal((await carolEnded).sessionId, carol.session);
  });

  test('a 2025-11-25 client session\'s own upstream session is not ended for being idle: it ends with its client session', async () => {
    const erin = await gw.token('erin');
    const client = await scope.plainClient(gw.gateway.url, { headers: bearer(erin) });
    const first = whoamiOf(await client.callTool({ name: 'whoami', arguments: {} }));
    const session = first.headers['mcp-session-id'];
    assert.ok(session !== undefined);

    // Frank's principal session goes idle after erin's call: once it is ended, erin's has been idle longer.
    const frankEnded = endOf('frank');
    await callAs('frank');
    await frankEnded;
    assert.deepEqual(upstream.endedSessions().filter((e) => e.sub === 'erin'), []);
    const again = whoamiOf(await client.callTool({ name: 'whoami', arguments: {} }));
    assert.equal(again.headers['mcp-session-id'], session, 'the same upstream session');

    const erinEnded = endOf('erin');
    await (client.transport as StreamableHTTPClientTransport).terminateSession();
    assert.equal((await erinEnded).sessionId, session);
  });
});
