// What an upstream's requests carry (src/identity/credential-sources.ts), per mode, for the gateway and for callers:
// client credentials from the real authorization-server fixture, token exchange against a small endpoint that
// answers per subject token, identities the gateway signs (verified through its JWKS), claim headers, static
// headers merged under auth's Authorization, the API-key caller refused by name, and the refresh after a 401.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createLocalJWKSet, decodeJwt, jwtVerify } from 'jose';
import type { IdentityConfig, UpstreamAuthConfig } from '../../src/config/identity.js';
import { UpstreamCredentialError } from '../../src/identity/credential-error.js';
import { UpstreamCredentials, type CredentialUpstream } from '../../src/identity/credential-sources.js';
import { createGatewayIdentity } from '../../src/identity/parts.js';
import { startAuthServer, type AuthServer } from '../fixtures/auth-server.js';

const UPSTREAM_URL = 'http://127.0.0.1:1/mcp';
const IDENTITY: IdentityConfig = {
  issuer: 'https://gw.example',
  keys: [{ kid: 'k1', alg: 'ES256', privateKey: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() }],
  sealingKeys: [],
};
const ALICE = { principal: 'oauth:https://idp#alice', claims: { email: 'alice@example.com', groups: ['dev'] }, subjectToken: () => 'alice-access-token' };
const CI = { principal: 'key:ci', claims: {} };

const auth = (over: Partial<UpstreamAuthConfig>): UpstreamAuthConfig => ({
  clientCredentials: undefined, tokenExchange: undefined, signedIdentity: undefined, authorizationCode: undefined, claimHeaders: {}, timeoutMs: 5_000, ...over,
});
const upstream = (a: UpstreamAuthConfig | undefined, headers: Record<string, string> = {}): CredentialUpstream => ({ name: 'docs', url: UPSTREAM_URL, headers, auth: a });

describe('identity: credential sources', () => {
  let as: AuthServer;
  let exchange: { url: string; server: http.Server; subjects: string[] };
  before(async () => {
    as = await startAuthServer({ clients: { gw: { secret: 'gw-secret' } } });
    const subjects: string[] = [];
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const form = new URLSearchParams(body);
        const subject = form.get('subject_token') ?? '';
        subjects.push(subject);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
          access_token: `for-${subject}-${subjects.length}`, token_type: 'Bearer', expires_in: 300,
        }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    exchange = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, subjects };
  });
  after(async () => {
    await as.close();
    exchange.server.closeAllConnections();
    await new Promise((resolve) => exchange.server.close(resolve));
  });

  const client = (tokenUrl: string) => ({
    clientId: 'gw', clientSecret: 'gw-secret', tokenUrl, resource: UPSTREAM_URL, scope: undefined, tokenEndpointAuthMethod: 'client_secret_basic' as const,
  });

  it('clientCredentials: one gateway token for the gateway and every caller, static headers kept but their Authorization replaced', async () => {
    const parts = createGatewayIdentity(IDENTITY);
    const creds = new UpstreamCredentials(
      upstream(auth({ clientCredentials: client(`${as.issuer}/token`), claimHeaders: { 'X-User': 'principal' } }), { authorization: 'Bearer static', 'X-Team': 'a' }),
      parts,
    );
    const gateway = await creds.forGateway().headers();
    const alice = await creds.forCaller(ALICE).headers();
    assert.equal(gateway.Authorization, alice.Authorization);
    assert.equal(decodeJwt((gateway.Authorization ?? '').slice(7)).sub, 'gw');
    assert.equal(gateway.authorization, undefined, 'the static Authorization is gone');
    assert.equal(gateway['X-Team'], 'a');
    assert.equal(gateway['X-User'], undefined, 'no caller, no claim headers');
    assert.equal(alice['X-User'], 'oauth:https://idp#alice');
  });

  it('tokenExchange: a token per principal from its own subject token, cached; the gateway uses client credentials of the same client', async () => {
    const parts = createGatewayIdentity(IDENTITY);
    const creds = new UpstreamCredentials(upstream(auth({ tokenExchange: { ...client(`${exchange.url}/token`), audience: undefined } })), parts);
    const bob = { principal: 'oauth:https://idp#bob', claims: {}, subjectToken: () => 'bob-access-token' };
    const [a1, a2, b] = await Promise.all([creds.forCaller(ALICE).headers(), creds.forCaller(ALICE).headers(), creds.forCaller(bob).headers()]);
    assert.match(a1.Authorization ?? '', /^Bearer for-alice-access-token-\d$/);
    assert.equal(a1.Authorization, a2.Authorization, 'one exchange for alice');
    assert.match(b.Authorization ?? '', /^Bearer for-bob-access-token-\d$/);
    assert.deepEqual([...exchange.subjects].sort(), ['alice-access-token', 'bob-access-token']);
    // The gateway's own requests: client credentials at the same endpoint (no subject token sent).
    await creds.forGateway().headers();
    assert.equal(exchange.subjects.at(-1), '');
  });

  it('tokenExchange: each of a principal\'s tokens is exchanged for itself, cached under a hash that is never the token', async () => {
    const keys: string[] = [];
    const parts = createGatewayIdentity(IDENTITY, { onEvent: (event) => keys.push(event.key) });
    const creds = new UpstreamCredentials(upstream(auth({ tokenExchange: { ...client(`${exchange.url}/token`), audience: undefined } })), parts);
    const narrow = { ...ALICE, subjectToken: () => 'alice-narrow-token' };
    const broad = { ...ALICE, subjectToken: () => 'alice-broad-token' };
    const first = await creds.forCaller(broad).headers();
    const second = await creds.forCaller(narrow).headers();
    const again = await creds.forCaller({ ...broad }).headers();
    assert.match(first.Authorization ?? '', /^Bearer for-alice-broad-token-/);
    assert.match(second.Authorization ?? '', /^Bearer for-alice-narrow-token-/, 'not the broad token exchanged just before');
    assert.equal(again.Authorization, first.Authorization, 'the same token again: from the cache');
    assert.ok(keys.length > 0 && keys.every((key) => !key.includes('alice-narrow-token') && !key.includes('alice-broad-token')), JSON.stringify(keys));
  });

  it('tokenExchange for a caller with nothing to exchange: a typed error naming the upstream', async () => {
    const creds = new UpstreamCredentials(upstream(auth({ tokenExchange: { ...client(`${exchange.url}/token`), audience: undefined } })), createGatewayIdentity(IDENTITY));
    const err = await creds.forCaller(CI).headers().catch((e: unknown) => e);
    assert.ok(err instanceof UpstreamCredentialError);
    assert.equal(err.reason, 'no_subject_token');
    assert.equal(err.retryable, false);
    assert.match(err.message, /upstream 'docs'.*key:ci has no access token to exchange/);
  });

  it('signedIdentity: the caller as sub with the configured claims, the gateway as itself; verified through the JWKS', async () => {
    const parts = createGatewayIdentity(IDENTITY);
    const creds = new UpstreamCredentials(upstream(auth({ signedIdentity: { ttlSeconds: 60, claims: ['email', 'missing'], audience: UPSTREAM_URL } })), parts);
    const jwks = createLocalJWKSet(parts.signer?.jwks() ?? { keys: [] });
    const alice = (await creds.forCaller(ALICE).headers()).Authorization?.slice(7) ?? '';
    const { payload } = await jwtVerify(alice, jwks, { issuer: 'https://gw.example', audience: UPSTREAM_URL });
    assert.equal(payload.sub, 'oauth:https://idp#alice');
    assert.equal(payload.email, 'alice@example.com');
    assert.equal('missing' in payload, false);
    assert.equal('groups' in payload, false, 'only the configured claims');
    assert.equal((await creds.forCaller(ALICE).headers()).Authorization?.slice(7), alice, 'cached while fresh');
    const own = (await creds.forGateway().headers()).Authorization?.slice(7) ?? '';
    assert.equal((await jwtVerify(own, jwks, { audience: UPSTREAM_URL })).payload.sub, 'gateway:https://gw.example');
  });

  it('claimHeaders alone: static headers plus the caller\'s claims, nothing refreshable', async () => {
    const creds = new UpstreamCredentials(upstream(auth({ claimHeaders: { 'X-Email': 'email', 'x-team': 'groups' } }), { Authorization: 'Bearer static', 'X-Team': 'static' }), createGatewayIdentity(undefined));
    const source = creds.forCaller(ALICE);
    assert.deepEqual(await source.headers(), { Authorization: 'Bearer static', 'X-Email': 'alice@example.com', 'x-team': 'dev' });
    assert.equal(source.refreshAfterUnauthorized({}), false);
  });

  it('one source per caller, whose headers stay the same object while the token does (the transport keeps them)', async () => {
    const creds = new UpstreamCredentials(
      upstream(auth({ clientCredentials: client(`${as.issuer}/token`), claimHeaders: { 'X-User': 'principal' } })),
      createGatewayIdentity(IDENTITY),
    );
    const first = creds.forCaller(ALICE);
    assert.equal(creds.forCaller(ALICE), first, 'the same caller object, the same source');
    const headers = await first.headers();
    assert.equal(await creds.forCaller(ALICE).headers(), headers);
    const other = await creds.forCaller({ ...ALICE, principal: 'oauth:https://idp#bob' }).headers();
    assert.equal(other['X-User'], 'oauth:https://idp#bob', 'another caller: its own claim headers');
    assert.equal(first.refreshAfterUnauthorized(headers), true);
    assert.notEqual((await creds.forCaller(ALICE).headers()).Authorization, headers.Authorization, 'a refused token is not served again');
  });

  it('after a 401 the refused token is dropped and the retry carries a new one', async () => {
    const parts = createGatewayIdentity(IDENTITY);
    const creds = new UpstreamCredentials(upstream(auth({ clientCredentials: client(`${as.issuer}/token`) })), parts);
    const source = creds.forGateway();
    const sent = await source.headers();
    assert.equal(source.refreshAfterUnauthorized(sent), true);
    const retried = await source.headers();
    assert.notEqual(retried.Authorization, sent.Authorization);
    assert.equal(creds.invalidate(undefined, sent.Authorization?.slice(7) ?? ''), false, 'already replaced');
    creds.forget();
    assert.equal(parts.tokens.size, 0, 'a reload that changes the upstream starts afresh');
  });
});
