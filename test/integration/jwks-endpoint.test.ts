// GET /.well-known/jwks.json through a real gateway (issue 33): the public keys of identity.keys, served without
// credentials even where auth guards the MCP endpoint, readable from any origin, briefly cacheable; a JWT the
// gateway's signer minted verifies against it with jose's createRemoteJWKSet, as an upstream would; a reload that
// rotates the keys publishes the new set at once; without signing keys there is no such document.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, it } from 'node:test';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { IdentitySigner } from '../../src/identity/signer.js';
import { testScope, type Json } from '../helpers/harness.js';
import { fixtureCommand } from '../fixtures/spawn.js';

const ISSUER = 'https://gw.example';
const AUDIENCE = 'https://upstream.example/mcp';
const JWKS_PATH = '/.well-known/jwks.json';

const pem = (type: 'ec' | 'rsa'): string =>
  (type === 'ec' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('rsa', { modulusLength: 2048 })).privateKey
    .export({ type: 'pkcs8', format: 'pem' })
    .toString();

function stdioUpstream(): Json {
  const { command, args, cwd } = fixtureCommand('stdio');
  return { transport: 'stdio', command, args, cwd };
}

/** A gateway config with auth on (API keys) and these signing keys, as startTestGateway fills it in. */
function configWith(keys: { kid: string; privateKey: string }[] | undefined): Json {
  return {
    upstreams: { fx: stdioUpstream() },
    auth: { resource: 'http://gateway.example/mcp', apiKeys: [{ principal: 'alice', key: 'alice-key-0123456789abcdef' }] },
    ...(keys === undefined ? {} : { identity: { issuer: ISSUER, keys } }),
  };
}

/** The same config parsed, as a reload is given it. */
function parsed(config: Json): ReturnType<typeof parseConfig> {
  const full = { listen: { host: '127.0.0.1', port: 0, path: '/mcp' }, store: { type: 'memory' }, log: { level: process.env.TEST_LOG_LEVEL ?? 'silent' }, replicas: { drainTimeoutMs: 0 }, ...config };
  return parseConfig(stringify(full), 'test.yaml', {});
}

/** What the gateway's own signer mints with this identity config (the first key signs). */
function signerOf(config: ReturnType<typeof parseConfig>): IdentitySigner {
  assert.ok(config.identity !== undefined);
  return new IdentitySigner(config.identity);
}

describe('JWKS endpoint', () => {
  it('serves the public keys without credentials, to any origin, cacheable; a minted identity verifies against it', async (t) => {
    const scope = testScope(t);
    const config = configWith([{ kid: 'ec-1', privateKey: pem('ec') }, { kid: 'rsa-1', privateKey: pem('rsa') }]);
    const gateway = await scope.gateway(config);
    const url = new URL(JWKS_PATH, gateway.origin);

    const mcp = await fetch(gateway.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(mcp.status, 401, 'auth is on: the MCP endpoint wants credentials');
    await mcp.body?.cancel();

    const response = await fetch(url, { headers: { origin: 'http://127.0.0.1:9999' } });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(response.headers.get('cache-control'), 'public, max-age=300');
    assert.equal(response.headers.get('access-control-allow-origin'), '*');
    const body = (await response.json()) as { keys: Json[] };
    assert.deepEqual(body.keys.map((k) => [k.kid, k.alg, k.use, k.kty]), [['ec-1', 'ES256', 'sig', 'EC'], ['rsa-1', 'RS256', 'sig', 'RSA']]);
    for (const key of body.keys) for (const member of ['d', 'p', 'q', 'dp', 'dq', 'qi']) assert.equal(key[member], undefined, `no private member ${member}`);

    const token = await signerOf(parsed(config)).mint({ subject: 'key:alice', audience: AUDIENCE, claims: { email: 'alice@example.com' }, ttlSeconds: 60 });
    const { payload, protectedHeader } = await jwtVerify(token, createRemoteJWKSet(url), { issuer: ISSUER, audience: AUDIENCE });
    assert.equal(protectedHeader.kid, 'ec-1');
    assert.equal(payload.sub, 'key:alice');
    assert.equal(payload.email, 'alice@example.com');
  });

  it('after a reload that rotates the keys, serves the new set: the new key verifies, the removed one no longer does', async (t) => {
    const scope = testScope(t);
    const before = configWith([{ kid: 'old', privateKey: pem('ec') }]);
    const gateway = await scope.gateway(before);
    const url = new URL(JWKS_PATH, gateway.origin);
    const old = await signerOf(parsed(before)).mint({ subject: 'key:alice', audience: AUDIENCE, ttlSeconds: 60 });
    await jwtVerify(old, createRemoteJWKSet(url), { issuer: ISSUER, audience: AUDIENCE });

    const rotated = parsed(configWith([{ kid: 'new', privateKey: pem('rsa') }]));
    const result = await gateway.reload(rotated);
    assert.ok(result.changes.some((change) => change.includes('identity')), `the reload reports the identity change: ${JSON.stringify(result.changes)}`);
    const body = (await (await fetch(url)).json()) as { keys: Json[] };
    assert.deepEqual(body.keys.map((k) => k.kid), ['new']);
    const fresh = await signerOf(rotated).mint({ subject: 'key:alice', audience: AUDIENCE, ttlSeconds: 60 });
    // A fresh key set each time: what a verifier holds after its cache (max-age) runs out.
    await jwtVerify(fresh, createRemoteJWKSet(url), { issuer: ISSUER, audience: AUDIENCE });
    await assert.rejects(jwtVerify(old, createRemoteJWKSet(url), { issuer: ISSUER, audience: AUDIENCE }), /no applicable key|JWKSNoMatchingKey|matching/i);
  });

  it('404 without signing keys, as for any unknown path', async (t) => {
    const scope = testScope(t);
    const gateway = await scope.gateway(configWith(undefined));
    const jwks = await fetch(new URL(JWKS_PATH, gateway.origin));
    const unknown = await fetch(new URL('/.well-known/nothing-here', gateway.origin));
    assert.equal(jwks.status, 404);
    assert.equal(unknown.status, 404);
    const unknownBody = (await unknown.json()) as Json;
    assert.deepEqual(await jwks.json(), { ...unknownBody, message: `Route GET:${JWKS_PATH} not found` });
  });
});
