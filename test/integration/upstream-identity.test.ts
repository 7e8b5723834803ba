// Upstream identity from outside (issue 33, item 6): a real gateway, fronted by OAuth, acting for its callers at an
// OAuth-protected MCP upstream (test/fixtures/protected-server.ts) with tokens from a real authorization server
// (test/fixtures/auth-server.ts): each caller is seen as themselves, tokens are shared and refreshed, failures are
// clear and bounded, and a config asking for token passthrough is refused at load. Tasks across replicas are in
// upstream-identity-tasks.test.ts.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { before, describe, test } from 'node:test';
import { createRemoteJWKSet, decodeJwt, jwtVerify } from 'jose';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import type { ProtectedServer, Whoami } from '../fixtures/protected-server.js';
import { bearer } from '../helpers/auth-requests.js';
import { eventually, suiteScope, testScope, type Json } from '../helpers/harness.js';
import { HANG_MS } from '../helpers/waits.js';
import { sendRev2026 } from '../helpers/stateless-wire.js';
import { SessionWire } from '../helpers/session-wire.js';
import { startAuthServer, TOKEN_EXCHANGE_GRANT, type AuthServer } from '../fixtures/auth-server.js';
import { freePort, spawnStatelessFixture } from '../fixtures/spawn.js';
import { recordingProxy } from '../helpers/recording-proxy.js';
import { identityGateway, GATEWAY_CLIENT, whoamiOf, type IdentityGateway } from '../helpers/identity-gateway.js';

const ROBOT_KEY = 'robot-key-0123456789abcdef-robot';

describe('upstream identity: tokenExchange', () => {
  const scope = suiteScope();
  let as: AuthServer;
  let upstream: ProtectedServer;
  let gw: IdentityGateway;

  before(async () => {
    ({ as, upstream, gw } = await identityGateway(scope, (server) => ({ tokenExchange: { ...GATEWAY_CLIENT.config, tokenUrl: `${server.issuer}/token` } }), undefined,
      { apiKeys: [{ principal: 'robot', key: ROBOT_KEY }] }));
  });

  test('alice and bob each see themselves at the upstream, acted for by the gateway, in both revisions', async () => {
    const alice = await gw.token('alice', { email: 'alice@example.test' });
    const bob = await gw.token('bob', { email: 'bob@example.test' });
    const forbiddenBefore = upstream.counts().forbidden;
    for (const [token, sub] of [[alice, 'alice'], [bob, 'bob']] as const) {
      const client = await scope.plainClient(gw.gateway.url, { headers: bearer(token) });
      const me = whoamiOf(await client.callTool({ name: 'whoami', arguments: {} }));
      assert.equal(me.sub, sub);
      assert.deepEqual(me.act, { sub: GATEWAY_CLIENT.id });
      assert.equal(me.email, `${sub}@example.test`);
      assert.equal(me.aud, upstream.url);

      const answer = await sendRev2026(gw.gateway.url, 'tools/call', { name: 'whoami', arguments: {} }, { headers: bearer(token) });
      assert.equal(answer.error, undefined, JSON.stringify(answer.response));
      const rev2026Me = whoamiOf(answer.result);
      assert.equal(rev2026Me.sub, sub);
      assert.deepEqual(rev2026Me.act, { sub: GATEWAY_CLIENT.id });
    }
    assert.equal(upstream.counts().forbidden, forbiddenBefore, 'no upstream session was used by another subject');
    assert.ok((upstream.sessionsBySub().alice ?? 0) >= 1 && (upstream.sessionsBySub().bob ?? 0) >= 1, JSON.stringify(upstream.sessionsBySub()));
  });

  test('50 concurrent calls by one caller cost one token request', async () => {
    const carol = await gw.token('carol');
    as.resetCounts();
    const calls = Array.from({ length: 50 }, () => sendRev2026(gw.gateway.url, 'tools/call', { name: 'whoami', arguments: {} }, { headers: bearer(carol) }));
    for (const answer of await Promise.all(calls)) assert.equal(whoamiOf(answer.result).sub, 'carol');
    assert.deepEqual(as.tokenCounts().byGrant, { [TOKEN_EXCHANGE_GRANT]: 1 });
  });

  test('a 401 from the upstream drops the token, one new exchange, and the call succeeds', async () => {
    const alice = await gw.token('alice');
    const client = await scope.plainClient(gw.gateway.url, { headers: bearer(alice) });
    assert.equal(whoamiOf(await client.callTool({ name: 'whoami', arguments: {} })).sub, 'alice'); // cached now
    as.resetCounts();
    const unauthorized = upstream.counts().unauthorized;
    upstream.rejectNext(1);
    assert.equal(whoamiOf(await client.callTool({ name: 'whoami', arguments: {} })).sub, 'alice');
    assert.equal(upstream.counts().unauthorized, unauthorized + 1);
    assert.deepEqual(as.tokenCounts().byGrant, { [TOKEN_EXCHANGE_GRANT]: 1 });
    assert.equal(as.lastTokenRequest?.subjectSub, 'alice');
  });

  test('an exchanged token that expires is replaced by a new one for a later call', async () => {
    const dave = await gw.token('dave');
    as.setExpiresIn(2);
    try {
      as.resetCounts();
      const call = async () => whoamiOf((await sendRev2026(gw.gateway.url, 'tools/call', { name: 'whoami', arguments: {} }, { headers: bearer(dave) })).result);
      assert.equal((await call()).sub, 'dave');
      assert.equal(as.tokenCounts().byGrant[TOKEN_EXCHANGE_GRANT], 1);
      // Past its lifetime (or the refresh margin before it), a call obtains a new token: no clock is asserted.
      await eventually(async () => (await call()).sub === 'dave' && (as.tokenCounts().byGrant[TOKEN_EXCHANGE_GRANT] ?? 0) >= 2, HANG_MS);
      const exchanges = as.tokenRequests().filter((r) => r.grantType === TOKEN_EXCHANGE_GRANT);
      assert.ok(exchanges.every((r) => r.subjectSub === 'dave'), JSON.stringify(exchanges));
    } finally {
      as.setExpiresIn(300);
    }
  });

  test('an API-key caller has no token to exchange: the call fails naming the upstream, and nothing is asked of the authorization server', async () => {
    as.resetCounts();
    const answer = await sendRev2026(gw.gateway.url, 'tools/call', { name: 'whoami', arguments: {} }, { headers: bearer(ROBOT_KEY) });
    const said = JSON.stringify(answer.error ?? answer.result);
    assert.ok(answer.error !== undefined || (answer.result as Json | undefined)?.isError === true, said);
    assert.match(said, /upstream 'prot'/i);
    assert.match(said, /key:robot/);
    assert.deepEqual(as.tokenCounts().byGrant, {});
  });

  test('a 403 insufficient_scope reaches the caller as the call\'s error naming the scope, in both revisions', async () => {
    const alice = await gw.token('alice');
    const client = await scope.plainClient(gw.gateway.url, { headers: bearer(alice) });
    const rev2025Side = await client.callTool({ name: 'admin-only', arguments: {} }).then((r) => JSON.stringify(r), (e: unknown) => String(e));
    assert.match(rev2025Side, /insufficient scope.*"admin"/);
    const answer = await sendRev2026(gw.gateway.url, 'tools/call', { name: 'admin-only', arguments: {} }, { headers: bearer(alice) });
    assert.match(JSON.stringify(answer.error ?? answer.result), /insufficient scope.*\\"admin\\"/);
  });
});

describe('upstream identity: the authorization server fails', () => {
  const scope = suiteScope();
  let as: AuthServer;
  let gw: IdentityGateway;
  let staticUrl: string;
  let warm: string;

  before(async () => {
    const other = await scope.upstream('streamable-http');
    staticUrl = other.config.url as string;
    ({ as, gw } = await identityGateway(scope,
      (server) => ({ tokenExchange: { ...GATEWAY_CLIENT.config, tokenUrl: `${server.issuer}/token` }, timeoutMs: 500 }),
      () => ({ upstreams: { plain: { url: staticUrl, headers: { 'x-static': 'yes' } } } })));
    // Both upstreams connected and the front's view of the authorization server (metadata, keys) cached first.
    warm = await gw.token('warm');
    const warmed = await sendRev2026(gw.gateway.url, 'tools/call', { name: 'prot__whoami', arguments: {} }, { headers: bearer(warm) });
    assert.equal(warmed.error, undefined, JSON.stringify(warmed.response));
    assert.equal(whoamiOf(warmed.result).sub, 'warm');
  });

  // With two upstreams the tools are named <upstream>__<tool>.
  const CAUSES = { down: 'unreachable', slow: 'timeout', unavailable: 'http_status' } as const;
  for (const mode of ['down', 'slow', 'unavailable'] as const) {
    test(`${mode}: a caller's call fails naming the upstream and the cause, in both revisions, while the static-headers upstream and cached callers are served`, async () => {
      const erin = await gw.token(`erin-${mode}`);
      await as.setMode(mode);
      try {
        const answer = await sendRev2026(gw.gateway.url, 'tools/call', { name: 'prot__whoami', arguments: {} }, { headers: bearer(erin) });
        // The credential's own error: the upstream, the step and the cause named, temporary (503 + Retry-After).
        assert.equal(answer.status, 503, JSON.stringify(answer.response));
        assert.ok(Number(answer.headers['retry-after']) >= 1, JSON.stringify(answer.headers));
        assert.match(answer.error?.message ?? '', /^upstream 'prot': cannot get a credential \(exchange\)/, JSON.stringify(answer.response));
        assert.deepEqual([answer.error?.data?.upstream, answer.error?.data?.step, answer.error?.data?.cause], ['prot', 'exchange', CAUSES[mode]]);
        // A caller's credential failing says nothing of the upstream: it stays ready for everyone else.
        const ready = (await (await fetch(`${gw.gateway.origin}/readyz`)).json()) as Json;
        assert.equal(ready.ready, true, JSON.stringify(ready));
        assert.equal(ready.credentials, undefined, JSON.stringify(ready));
        assert.equal((ready.upstreams as Json[]).find((u) => u.name === 'prot')?.state, 'ready', JSON.stringify(ready));
        const rev2025Side = await scope.plainClient(gw.gateway.url, { headers: bearer(erin) });
        await assert.rejects(rev2025Side.callTool({ name: 'prot__whoami', arguments: {} }), /upstream 'prot': cannot get a credential \(exchange\)/);
        // A 2025-11-25 session's call answered as plain JSON is refused in HTTP too, as a full replica's is.
        const wire = new SessionWire({}, bearer(erin));
        await wire.initialize(gw.gateway.url);
        const refused = await wire.start(gw.gateway.url, 'tools/call', { name: 'prot__whoami', arguments: {} });
        await refused.done;
        assert.equal(refused.status, 503, JSON.stringify(refused.messages));
        assert.ok(Number(refused.headers.get('retry-after')) >= 1, JSON.stringify([...refused.headers]));
        assert.match(JSON.stringify(refused.messages), /upstream 'prot': cannot get a credential \(exchange\)/);
        const echoed = await sendRev2026(gw.gateway.url, 'tools/call', { name: 'plain__echo', arguments: { still: 'serving' } }, { headers: bearer(erin) });
        assert.deepEqual(echoed.result?.structuredContent, { still: 'serving' }, JSON.stringify(echoed.response));
      } finally {
        await as.setMode('up');
      }
    });
  }
});

const ecKey = (): string => generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

describe('upstream identity: signedIdentity and claimHeaders', () => {
  const scope = suiteScope();
  let as: AuthServer;
  let upstream: ProtectedServer;
  let gw: IdentityGateway;

  before(async () => {
    ({ as, upstream, gw } = await identityGateway(scope,
      () => ({ signedIdentity: { claims: ['email', 'groups'], ttlSeconds: 120 }, claimHeaders: { 'x-user': 'principal', 'x-email': 'email' } }),
      (_as, protectedServer, origin) => {
        // The upstream trusts the gateway as an issuer, through its published keys (before the handshake needs it).
        protectedServer.trust(origin, `${origin}/.well-known/jwks.json`);
        return { identity: { keys: [{ kid: 'gw-ec-1', privateKey: ecKey() }] } };
      }));
  });

  test('the upstream verifies the identity the gateway signed through its JWKS and sees the caller, the claims and the headers', async () => {
    const alice = await gw.token('alice', { email: 'alice@example.test', groups: ['eng'], secret_claim: 'not copied' });
    const principal = `oauth:${as.issuer}#alice`;
    const origin = new URL(gw.gateway.url).origin;
    const checks = (me: Whoami): void => {
      assert.equal(me.sub, principal);
      assert.equal(me.iss, origin);
      assert.equal(me.aud, upstream.url);
      assert.equal(me.email, 'alice@example.test');
      assert.deepEqual(me.groups, ['eng']);
      assert.equal(me.act, undefined);
      assert.equal(me.headers['x-user'], principal);
      assert.equal(me.headers['x-email'], 'alice@example.test');
    };
    const client = await scope.plainClient(gw.gateway.url, { headers: bearer(alice) });
    checks(whoamiOf(await client.callTool({ name: 'whoami', arguments: {} })));
    checks(whoamiOf((await sendRev2026(gw.gateway.url, 'tools/call', { name: 'whoami', arguments: {} }, { headers: bearer(alice) })).result));
    assert.equal((upstream.lastClaims as Json | undefined)?.secret_claim, undefined, 'only the configured claims are copied');
    assert.deepEqual(as.tokenCounts().byGrant, {}, 'signing needs no authorization server');
  });
});

describe('upstream identity at a 2026-07-28 (stateless) upstream', () => {
  test('each request carries the caller\'s own signed identity and claim headers; the gateway\'s own carry its identity', async (t) => {
    const scope = testScope(t);
    const fixture = await spawnStatelessFixture({ rev2026Only: true });
    scope.defer(() => fixture.kill());
    const proxy = await recordingProxy(scope, fixture.url);
    const as = await startAuthServer();
    scope.defer(() => as.close());
    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    const gateway = await scope.gateway({
      listen: { host: '127.0.0.1', port, path: '/mcp' },
      auth: { resource: `${origin}/mcp`, oauth: { issuer: as.issuer } },
      identity: { keys: [{ kid: 'gw-ec-1', privateKey: ecKey() }] },
      upstreams: { st: { url: proxy.url, auth: { signedIdentity: { claims: ['email'] }, claimHeaders: { 'x-user': 'principal' } } } },
    });
    const jwks = createRemoteJWKSet(new URL(`${origin}/.well-known/jwks.json`));
    const principals = new Map<string, string>();
    for (const sub of ['alice', 'bob']) {
      const token = await as.mint({ sub, aud: `${origin}/mcp`, extra: { email: `${sub}@example.test` } });
      principals.set(`oauth:${as.issuer}#${sub}`, `${sub}@example.test`);
      let answer: Awaited<ReturnType<typeof sendRev2026>> | undefined;
      await eventually(async () => {
        answer = await sendRev2026(gateway.url, 'tools/call', { name: 'rev2026_echo', arguments: { text: sub } }, { headers: bearer(token) });
        return answer.error?.message.includes('Unknown tool') !== true;
      }, HANG_MS);
      assert.equal(answer?.error, undefined, JSON.stringify(answer?.response));
    }
    const calls = proxy.requests.filter((r) => r.mcpMethod === 'tools/call');
    assert.equal(calls.length, 2, JSON.stringify(proxy.requests.map((r) => r.mcpMethod)));
    for (const call of calls) {
      const bearerToken = /^Bearer (\S+)$/.exec(call.headers.authorization ?? '')?.[1] ?? '';
      const { payload } = await jwtVerify(bearerToken, jwks, { issuer: origin, audience: proxy.url });
      assert.equal(call.headers['x-user'], payload.sub);
      assert.equal(payload.email, principals.get(payload.sub ?? ''));
    }
    assert.deepEqual(new Set(calls.map((c) => c.headers['x-user'])), new Set(principals.keys()));
    const ownRequests = proxy.requests.filter((r) => r.mcpMethod === 'server/discover' || r.mcpMethod === 'tools/list');
    assert.ok(ownRequests.length > 0, JSON.stringify(proxy.requests.map((r) => r.mcpMethod)));
    for (const own of ownRequests) {
      const token = /^Bearer (\S+)$/.exec(own.headers.authorization ?? '')?.[1] ?? '';
      assert.equal(decodeJwt(token).sub, `gateway:${origin}`, 'what the gateway asks for itself goes under its own identity');
      assert.equal(own.headers['x-user'], undefined);
    }
  });
});

describe('upstream identity: clientCredentials', () => {
  test('without tokenUrl the token endpoint is discovered from the upstream\'s 401 (RFC 9728 → RFC 8414); claimHeaders name the caller', async (t) => {
    const scope = testScope(t);
    const { as, upstream, gw } = await identityGateway(scope,
      () => ({ clientCredentials: GATEWAY_CLIENT.config, claimHeaders: { 'x-user': 'principal', 'x-email': 'email' } }));
    const bob = await gw.token('bob', { email: 'bob@example.test' });
    const answer = await sendRev2026(gw.gateway.url, 'tools/call', { name: 'whoami', arguments: {} }, { headers: bearer(bob) });
    const me = whoamiOf(answer.result);
    assert.equal(me.sub, GATEWAY_CLIENT.id, 'the gateway\'s own token');
    assert.equal(me.aud, upstream.url);
    assert.equal(me.headers['x-user'], `oauth:${as.issuer}#bob`);
    assert.equal(me.headers['x-email'], 'bob@example.test');
    const grants = as.tokenRequests().filter((r) => r.grantType === 'client_credentials');
    assert.ok(grants.length >= 1 && grants.every((r) => r.resource.includes(upstream.url) && r.clientId === GATEWAY_CLIENT.id), JSON.stringify(grants));
    assert.ok(upstream.counts().unauthorized >= 1, 'the token endpoint was found through the upstream\'s 401');

    // The gateway's own token refused once (as if revoked): one new client-credentials grant, and the call succeeds.
    as.resetCounts();
    upstream.rejectNext(1);
    const again = await sendRev2026(gw.gateway.url, 'tools/call', { name: 'whoami', arguments: {} }, { headers: bearer(bob) });
    assert.equal(whoamiOf(again.result).sub, GATEWAY_CLIENT.id);
    assert.deepEqual(as.tokenCounts().byGrant, { client_credentials: 1 });
  });

  test('/readyz lists an upstream whose gateway credential cannot be obtained', async (t) => {
    const scope = testScope(t);
    const { gw } = await identityGateway(scope,
      (server) => ({ clientCredentials: { ...GATEWAY_CLIENT.config, clientSecret: 'not-the-secret', tokenUrl: `${server.issuer}/token` }, timeoutMs: 2000 }),
      undefined, { waitForTools: false });
    let body: Json = {};
    await eventually(async () => {
      body = (await (await fetch(`${gw.gateway.origin}/readyz`)).json()) as Json;
      return Array.isArray(body.credentials) && body.credentials.length > 0;
    }, HANG_MS);
    const [entry] = body.credentials as Json[];
    assert.equal(entry?.upstream, 'prot');
    assert.equal(entry?.grant, 'client_credentials');
    assert.doesNotMatch(JSON.stringify(body), /not-the-secret/);
  });
});

describe('upstream identity: token passthrough refused at load', () => {
  for (const auth of ['passthrough', { forwardToken: true }] as const) {
    test(`auth: ${JSON.stringify(auth)} is a located error saying why`, () => {
      const yaml = stringify({
        listen: { host: '127.0.0.1', port: 0 },
        auth: { resource: 'http://127.0.0.1:1/mcp', oauth: { issuer: 'http://127.0.0.1:2' } },
        upstreams: { prot: { url: 'http://127.0.0.1:3/mcp', auth } },
      });
      assert.throws(() => parseConfig(yaml, 'passthrough.yaml', {}), (error: Error) => {
        assert.match(error.message, /passthrough\.yaml:\d+/);
        assert.match(error.message, /upstreams\.prot\.auth/);
        assert.match(error.message, /MUST NOT pass/);
        return true;
      });
    });
  }
});
