// Upstream identity over the 2024-11-05 HTTP+SSE transport (issue 33): an SSE upstream with `auth`, the
// protected-server fixture speaking SSE (its stream and every POST need a token; a session is bound to the `sub`
// that opened its stream), tokens from the auth-server fixture. Each caller is seen as themselves through token
// exchange, a 401 on a POST drops the token and the call is retried once with a new one, a task runs as its
// caller, and client credentials find the token endpoint from the SSE upstream's own 401.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { startAuthServer, TOKEN_EXCHANGE_GRANT, type AuthServer } from '../fixtures/auth-server.js';
import { startProtectedServer, type ProtectedServer } from '../fixtures/protected-server.js';
import { freePort } from '../fixtures/spawn.js';
import { bearer } from '../helpers/auth-requests.js';
import { startTask } from '../helpers/dashboard-browser.js';
import { eventually, suiteScope, testScope, type Json, type TestGateway, type TestScope } from '../helpers/harness.js';
import { GATEWAY_CLIENT, whoamiOf } from '../helpers/identity-gateway.js';
import { sendRev2026 } from '../helpers/stateless-wire.js';
import { HANG_MS } from '../helpers/waits.js';

interface SseSetup {
  as: AuthServer;
  upstream: ProtectedServer;
  gateway: TestGateway;
  /** A caller's access token for the gateway. */
  token(sub: string, claims?: Json): Promise<string>;
}

/** The authorization server, the protected upstream over SSE, and a gateway fronted by OAuth whose upstream `prot` has `auth`. */
async function sseSetup(scope: TestScope, auth: (as: AuthServer) => Json): Promise<SseSetup> {
  const as = await startAuthServer({ clients: { [GATEWAY_CLIENT.id]: { secret: GATEWAY_CLIENT.secret } } });
  scope.defer(() => as.close());
  const upstream = await startProtectedServer({ issuers: [{ issuer: as.issuer, jwksUri: as.jwksUri }], transport: 'sse' });
  scope.defer(() => upstream.close());
  const port = await freePort();
  const resource = `http://127.0.0.1:${port}/mcp`;
  const gateway = await scope.gateway({
    listen: { host: '127.0.0.1', port, path: '/mcp' },
    tasks: { defaults: { mode: 'optional', pollIntervalMs: 100 } },
    upstreams: { prot: { transport: 'sse', url: upstream.url, auth: auth(as) } },
    auth: { resource, oauth: { issuer: as.issuer } },
  });
  const token = (sub: string, claims: Json = {}) => as.mint({ sub, aud: resource, extra: claims });
  // The gateway connects to its upstreams in the background: wait until the upstream's tools are listed.
  const lister = await scope.plainClient(gateway.url, { headers: bearer(await token('lister')) });
  await eventually(async () => (await lister.listTools()).tools.some((tool) => tool.name === 'whoami'), HANG_MS);
  return { as, upstream, gateway, token };
}

describe('upstream identity over an SSE upstream: tokenExchange', () => {
  const scope = suiteScope();
  let setup: SseSetup;

  before(async () => {
    setup = await sseSetup(scope, (as) => ({ tokenExchange: { ...GATEWAY_CLIENT.config, tokenUrl: `${as.issuer}/token` } }));
  });

  test('alice and bob each see themselves at the upstream, on SSE sessions bound to them, in both revisions', async () => {
    const { upstream, gateway, token } = setup;
    const forbiddenBefore = upstream.counts().forbidden;
    for (const sub of ['alice', 'bob']) {
      const callerToken = await token(sub, { email: `${sub}@example.test` });
      const client = await scope.plainClient(gateway.url, { headers: bearer(callerToken) });
      const me = whoamiOf(await client.callTool({ name: 'whoami', arguments: {} }));
      assert.equal(me.sub, sub);
      assert.deepEqual(me.act, { sub: GATEWAY_CLIENT.id }, 'a token exchanged by the gateway for the caller');
      assert.equal(me.email, `${sub}@example.test`);
      assert.equal(me.aud, upstream.url, 'the token\'s resource is the SSE upstream');
      // 2026-07-28 clients share upstream sessions: one per principal here, since the upstream tells callers apart.
      const answer = await sendRev2026(gateway.url, 'tools/call', { name: 'whoami', arguments: {} }, { headers: bearer(callerToken) });
      assert.equal(answer.error, undefined, JSON.stringify(answer.response));
      assert.equal(whoamiOf(answer.result).sub, sub);
    }
    assert.equal(upstream.counts().forbidden, forbiddenBefore, 'no SSE session was used by another subject');
    const bySub = upstream.sessionsBySub();
    assert.ok((bySub.alice ?? 0) >= 1 && (bySub.bob ?? 0) >= 1, JSON.stringify(bySub));
  });

  test('a 401 on a POST drops the token, one new exchange, and the call succeeds', async () => {
    const { as, upstream, gateway, token } = setup;
    const client = await scope.plainClient(gateway.url, { headers: bearer(await token('carol')) });
    assert.equal(whoamiOf(await client.callTool({ name: 'whoami', arguments: {} })).sub, 'carol'); // its token cached now
    as.resetCounts();
    const unauthorized = upstream.counts().unauthorized;
    upstream.rejectNext(1);
    assert.equal(whoamiOf(await client.callTool({ name: 'whoami', arguments: {} })).sub, 'carol');
    assert.equal(upstream.counts().unauthorized, unauthorized + 1, 'the upstream refused once');
    assert.deepEqual(as.tokenCounts().byGrant, { [TOKEN_EXCHANGE_GRANT]: 1 }, 'one new exchange for the retry');
    assert.equal(as.lastTokenRequest?.subjectSub, 'carol');
  });

  test('a task runs as its caller over the SSE upstream', async () => {
    const { gateway, token } = setup;
    const client = await scope.plainClient(gateway.url, { headers: bearer(await token('dave')) });
    const taskId = await startTask(client, 'whoami', {});
    const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    assert.equal(whoamiOf(result).sub, 'dave');
  });
});

describe('upstream identity over an SSE upstream: clientCredentials', () => {
  test('without tokenUrl the token endpoint is found from the SSE upstream\'s 401; claim headers name the caller; a 401 is retried', async (t) => {
    const scope = testScope(t);
    const { as, upstream, gateway, token } = await sseSetup(scope, () => ({ clientCredentials: GATEWAY_CLIENT.config, claimHeaders: { 'x-user': 'principal' } }));
    const client = await scope.plainClient(gateway.url, { headers: bearer(await token('erin')) });
    const me = whoamiOf(await client.callTool({ name: 'whoami', arguments: {} }));
    assert.equal(me.sub, GATEWAY_CLIENT.id, 'the gateway\'s own token');
    assert.equal(me.aud, upstream.url, 'resource: the SSE upstream\'s URL');
    assert.equal(me.headers['x-user'], `oauth:${as.issuer}#erin`);
    const grants = as.tokenRequests().filter((r) => r.grantType === 'client_credentials');
    assert.ok(grants.length >= 1 && grants.every((r) => r.resource.includes(upstream.url)), JSON.stringify(grants));

    as.resetCounts();
    const unauthorized = upstream.counts().unauthorized;
    upstream.rejectNext(1);
    const again = whoamiOf(await client.callTool({ name: 'whoami', arguments: {} }));
    assert.equal(again.headers['x-user'], `oauth:${as.issuer}#erin`);
    assert.equal(upstream.counts().unauthorized, unauthorized + 1);
    assert.deepEqual(as.tokenCounts().byGrant, { client_credentials: 1 }, 'one new gateway token for the retry');
  });
});
