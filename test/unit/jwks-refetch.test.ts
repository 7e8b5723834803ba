// The JWKS refetch bound of the gateway's Authenticator (src/http/credentials.ts) on node:test's mock clock: a token
// signed with a key the cached key set does not have makes the set fetched again (key rotation), at most once per
// JWKS_COOLDOWN_MS (1 s) after the last fetch, so a flood of tokens with unknown keys cannot make the gateway hammer
// the issuer; and a token is good up to its exp (no tolerance configured), not a millisecond longer. Only Date is
// mocked (jose reads Date.now for its cooldown); the JWKS is served over a real loopback socket.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { AuthError, Authenticator } from '../../src/http/credentials.js';
import { createLogger } from '../../src/log.js';

const silent = createLogger({ level: 'silent' }, { pretty: false });
const ISSUER = 'https://idp.example.com';
const RESOURCE = 'http://127.0.0.1/mcp';
const T0 = Date.UTC(2026, 0, 1);

interface SigningKey {
  kid: string;
  sign(claims?: { exp?: number }): Promise<string>;
  publicJwk: JWK;
}

async function signingKey(kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' };
  const sign = (claims: { exp?: number } = {}) =>
    new SignJWT({ scope: 'read' })
      .setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' })
      .setIssuer(ISSUER)
      .setAudience(RESOURCE)
      .setSubject('alice')
      .setIssuedAt(Math.floor(Date.now() / 1000))
      .setExpirationTime(claims.exp ?? Math.floor(Date.now() / 1000) + 3_600)
      .sign(privateKey);
  return { kid, sign, publicJwk };
}

/** Serves a JWKS the test changes (a key rotation), counting the fetches. */
async function jwksServer(): Promise<{ server: Server; url: string; keys: JWK[]; fetches: () => number }> {
  const keys: JWK[] = [];
  let fetches = 0;
  const server = createServer((_req, res) => {
    fetches++;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`, keys, fetches: () => fetches };
}

function authenticator(jwksUri: string): Authenticator {
  const config = parseConfig(
    stringify({
      upstreams: { fx: { transport: 'streamable-http', url: 'http://127.0.0.1:1/mcp' } },
      auth: { resource: RESOURCE, oauth: { issuer: ISSUER, jwksUri, clockToleranceSeconds: 0 } },
    }),
    'jwks-refetch.yaml',
    {},
  );
  return new Authenticator(config.auth!, silent);
}

async function refusal(attempt: Promise<unknown>): Promise<AuthError> {
  const error = await attempt.then(() => assert.fail('the token was accepted'), (e: unknown) => e);
  assert.ok(error instanceof AuthError, String(error));
  return error;
}

describe('JWKS refetch bound on the mock clock', () => {
  let jwks: Awaited<ReturnType<typeof jwksServer>>;

  beforeEach(async () => {
    jwks = await jwksServer();
    mock.timers.enable({ apis: ['Date'], now: T0 });
  });
  afterEach(async () => {
    mock.timers.reset();
    await new Promise((resolve) => jwks.server.close(resolve));
  });

  it('an unknown key makes the set fetched again only once the 1 s cooldown after the last fetch is over', async () => {
    const [first, rotated] = await Promise.all([signingKey('k1'), signingKey('k2')]);
    jwks.keys.push(first.publicJwk);
    const auth = authenticator(jwks.url);
    assert.equal((await auth.authenticate(`Bearer ${await first.sign()}`)).principal, `oauth:${ISSUER}#alice`);
    assert.equal(jwks.fetches(), 1);
    // The issuer rotates to k2: the gateway still holds the set fetched at T0.
    jwks.keys.push(rotated.publicJwk);
    mock.timers.setTime(T0 + 999);
    const early = await refusal(auth.authenticate(`Bearer ${await rotated.sign()}`));
    assert.equal(early.status, 401);
    assert.equal(jwks.fetches(), 1, 'inside the cooldown an unknown key is refused without a fetch');
    mock.timers.setTime(T0 + 1_000);
    assert.equal((await auth.authenticate(`Bearer ${await rotated.sign()}`)).principal, `oauth:${ISSUER}#alice`);
    assert.equal(jwks.fetches(), 2, 'at the end of the cooldown the set is fetched again, and k2 is found');
  });

  it('a flood of tokens with unknown keys costs one fetch per cooldown', async () => {
    const [known, stranger] = await Promise.all([signingKey('k1'), signingKey('unknown')]);
    jwks.keys.push(known.publicJwk);
    const auth = authenticator(jwks.url);
    await auth.authenticate(`Bearer ${await known.sign()}`);
    for (const at of [1_000, 1_500, 1_999, 2_000, 2_999]) {
      mock.timers.setTime(T0 + at);
      await refusal(auth.authenticate(`Bearer ${await stranger.sign()}`));
    }
    // Fetched at 0, then at 1 000 (the cooldown over) and 2 000 (over again); 1 500, 1 999 and 2 999 were inside one.
    assert.equal(jwks.fetches(), 3);
  });

  it('a token is accepted until the millisecond before its exp and refused from its exp on, with no further fetch', async () => {
    const key = await signingKey('k1');
    jwks.keys.push(key.publicJwk);
    const auth = authenticator(jwks.url);
    const exp = Math.floor(T0 / 1000) + 60;
    const token = await key.sign({ exp });
    await auth.authenticate(`Bearer ${token}`);
    mock.timers.setTime(exp * 1000 - 1);
    assert.equal((await auth.authenticate(`Bearer ${token}`)).principal, `oauth:${ISSUER}#alice`);
    mock.timers.setTime(exp * 1000);
    const expired = await refusal(auth.authenticate(`Bearer ${token}`));
    assert.equal(expired.status, 401);
    assert.equal(jwks.fetches(), 1);
  });
});
