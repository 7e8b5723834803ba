// The identities the gateway signs (src/identity/signer.ts), verified as an upstream would: through the published
// JWKS (public keys only), with issuer, audience and expiry checked; EC and RSA keys; rotation.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, it } from 'node:test';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { IdentitySigner } from '../../src/identity/signer.js';

const pem = (type: 'ec' | 'rsa') =>
  (type === 'ec' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('rsa', { modulusLength: 2048 })).privateKey
    .export({ type: 'pkcs8', format: 'pem' })
    .toString();
const EC = { kid: 'k1', alg: 'ES256' as const, privateKey: pem('ec') };
const RSA = { kid: 'k0', alg: 'RS256' as const, privateKey: pem('rsa') };
const ISSUER = 'https://gw.example';

describe('identity: signer', () => {
  it('mints a JWT an upstream verifies with the published JWKS: iss, sub, aud, iat, exp, jti, kid, typ', async () => {
    let now = 1_800_000_000_000;
    const signer = new IdentitySigner({ issuer: ISSUER, keys: [EC, RSA], sealingKeys: [] }, () => now);
    const token = await signer.mint({ subject: 'oauth:https://idp#alice', audience: 'https://up.example/mcp', claims: { email: 'a@x', groups: ['a', 'b'], iss: 'evil', exp: 1 }, ttlSeconds: 120 });
    assert.deepEqual(decodeProtectedHeader(token), { alg: 'ES256', kid: 'k1', typ: 'JWT' });
    const { payload } = await jwtVerify(token, createLocalJWKSet(signer.jwks()), {
      issuer: ISSUER, audience: 'https://up.example/mcp', currentDate: new Date(now),
    });
    assert.equal(payload.sub, 'oauth:https://idp#alice');
    assert.equal(payload.email, 'a@x');
    assert.deepEqual(payload.groups, ['a', 'b']);
    assert.equal(payload.iss, ISSUER, 'a copied claim never overrides a registered one');
    assert.equal((payload.exp ?? 0) - (payload.iat ?? 0), 120);
    assert.match(String(payload.jti), /^[0-9a-f-]{36}$/);
    now += 121_000;
    await assert.rejects(jwtVerify(token, createLocalJWKSet(signer.jwks()), { currentDate: new Date(now) }), /exp/);
  });

  it('publishes every key, public halves only, with use, alg and kid', () => {
    const { keys } = new IdentitySigner({ issuer: ISSUER, keys: [EC, RSA], sealingKeys: [] }).jwks();
    assert.deepEqual(keys.map((k) => [k.kid, k.alg, k.use, k.kty]), [['k1', 'ES256', 'sig', 'EC'], ['k0', 'RS256', 'sig', 'RSA']]);
    for (const k of keys) for (const priv of ['d', 'p', 'q', 'dp', 'dq', 'qi']) assert.equal(k[priv as keyof typeof k], undefined);
  });

  it('rotation: a token of the old first key still verifies once the new key signs', async () => {
    const before = new IdentitySigner({ issuer: ISSUER, keys: [RSA], sealingKeys: [] });
    const old = await before.mint({ subject: 's', audience: 'a', ttlSeconds: 60 });
    const after = new IdentitySigner({ issuer: ISSUER, keys: [EC, RSA], sealingKeys: [] });
    await jwtVerify(old, createLocalJWKSet(after.jwks()), { issuer: ISSUER, audience: 'a' });
    assert.equal(decodeProtectedHeader(await after.mint({ subject: 's', audience: 'a', ttlSeconds: 60 })).kid, 'k1');
    assert.equal(after.gatewaySubject, 'gateway:https://gw.example');
  });
});
