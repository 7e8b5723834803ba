// Identity edges that are pure logic: qualified principals and how rules name them, what a bearer token must be
// before its issuer is asked (RFC 9068), what a refusal may put into WWW-Authenticate, and rate windows that count
// a batch per message (on the real in-memory store).
import assert from 'node:assert/strict';
import { validateHeaderValue } from 'node:http';
import { describe, it } from 'node:test';
import { errors } from 'jose';
import { mayUse, principalMatches } from '../../src/config/access.js';
import type { AccessRule, AuthConfig } from '../../src/config/types.js';
import { AuthError, Authenticator } from '../../src/http/credentials.js';
import { faultOf, inspectAccessToken, TOKEN_FAULTS, TokenRefused, type TokenFault } from '../../src/http/access-token.js';
import { createLogger } from '../../src/log.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { apiKeyCaller, nameOf, oauthCaller, sessionOfPrincipal } from '../../src/principals.js';
import { RateLimited, RateLimiter } from '../../src/tasks/rate-limits.js';

const ISSUER = 'https://idp.example.com/realms/mcp';
const RESOURCE = 'https://gw.example.com/mcp';
const NOW = 1_800_000_000;
const EXPECTED = { issuer: ISSUER, audience: RESOURCE, algorithms: ['RS256', 'ES256'], clockToleranceS: 5 };
const silent = createLogger({ level: 'silent' }, { pretty: false });

const b64 = (value: unknown): string => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
/** A compact JWS of these parts; the signature is never looked at before the issuer's keys are. */
const jwt = (header: unknown, claims: unknown, signature = b64('not-a-signature')): string => `${b64(header)}.${b64(claims)}.${signature}`;
const HEADER = { alg: 'RS256', typ: 'at+jwt', kid: 'k1' };
const CLAIMS = { iss: ISSUER, sub: 'carol', aud: RESOURCE, iat: NOW - 10, exp: NOW + 300, jti: 'j1' };

function faultOfToken(token: string): TokenFault | undefined {
  try {
    inspectAccessToken(token, EXPECTED, NOW);
    return undefined;
  } catch (error) {
    assert.ok(error instanceof TokenRefused, String(error));
    return error.fault;
  }
}

describe('principals are full identities', () => {
  it('an API key and an OAuth subject of the same name are different principals, and neither is a session', () => {
    const key = apiKeyCaller('alice', []);
    const token = oauthCaller(ISSUER, 'alice', ['mcp']);
    assert.notEqual(key.principal, token.principal);
    assert.equal(key.principal, 'key:alice');
    assert.equal(token.principal, `oauth:${ISSUER}#alice`);
    assert.notEqual(oauthCaller('https://other.example', 'alice', []).principal, token.principal, 'another issuer, another principal');
    for (const name of ['session:abc', 'modern:anonymous', 'gateway:native-tasks', 'anonymous']) {
      assert.equal(sessionOfPrincipal(apiKeyCaller(name, []).principal), undefined, name);
      assert.equal(sessionOfPrincipal(oauthCaller(ISSUER, name, []).principal), undefined, name);
    }
  });

  it('a principal string gives back the credential and name rules match, whatever the subject holds', () => {
    for (const sub of ['alice', 'a#b', 'key:x', 'oauth:y', 'ü 🙂', '']) {
      assert.deepEqual(nameOf(oauthCaller(ISSUER, sub, []).principal), { credential: 'oauth', name: sub });
      assert.deepEqual(nameOf(apiKeyCaller(sub, []).principal), { credential: 'key', name: sub });
    }
    for (const other of ['session:s1', 'modern:anonymous', 'gateway:native-tasks', 'anonymous', 'alice']) assert.equal(nameOf(other), undefined, other);
  });

  it('rules name a principal bare (either credential) or qualified (one), with globs on both forms', () => {
    const key = { credential: 'key', name: 'alice' } as const;
    const token = { credential: 'oauth', name: 'alice' } as const;
    assert.ok(principalMatches('alice', key) && principalMatches('alice', token));
    assert.ok(principalMatches('key:alice', key) && !principalMatches('key:alice', token));
    assert.ok(principalMatches('oauth:alice', token) && !principalMatches('oauth:alice', key));
    assert.ok(principalMatches('key:al*', key) && !principalMatches('key:al*', token));
    assert.ok(principalMatches('oauth:*', token) && !principalMatches('oauth:*', key));
    assert.ok(principalMatches('*', key) && principalMatches('*', token));
    assert.ok(!principalMatches('bob', key) && !principalMatches('oauth:bob', token));
  });

  it('access rules follow: a grant to key:alice is not a grant to the OAuth subject alice', () => {
    const rules: AccessRule[] = [
      { principals: ['key:alice'], scopes: [], tools: ['*'], prompts: [], resources: [] },
      { principals: ['oauth:carol', 'dave'], scopes: [], tools: ['greet'], prompts: [], resources: [] },
    ];
    const tools = (caller: ReturnType<typeof apiKeyCaller>): string[] => ['greet', 'crash'].filter((tool) => mayUse(rules, caller, 'tools', tool));
    assert.deepEqual(tools(apiKeyCaller('alice', [])), ['greet', 'crash']);
    assert.deepEqual(tools(oauthCaller(ISSUER, 'alice', [])), []);
    assert.deepEqual(tools(oauthCaller(ISSUER, 'carol', [])), ['greet']);
    assert.deepEqual(tools(apiKeyCaller('carol', [])), []);
    assert.deepEqual(tools(apiKeyCaller('dave', [])), ['greet']);
    assert.deepEqual(tools(oauthCaller(ISSUER, 'dave', [])), ['greet']);
  });
});

describe('access tokens are checked from the token alone before the issuer is asked (RFC 9068)', () => {
  it('a well-formed access token for this resource passes, with its header and claims', () => {
    const { header, claims } = inspectAccessToken(jwt(HEADER, CLAIMS), EXPECTED, NOW);
    assert.equal(header.kid, 'k1');
    assert.equal(claims.sub, 'carol');
    assert.equal(faultOfToken(jwt(HEADER, { ...CLAIMS, aud: ['https://other.example', RESOURCE] })), undefined, 'aud as a list naming this resource');
  });

  it('each kind of fault is named, whatever the token holds', () => {
    const cases: [string, string, TokenFault][] = [
      ['not a JWT', 'not-a-jwt', 'malformed'],
      ['two parts', `${b64(HEADER)}.${b64(CLAIMS)}`, 'malformed'],
      ['empty signature (alg none style)', `${b64(HEADER)}.${b64(CLAIMS)}.`, 'malformed'],
      ['five parts (JWE)', `${b64({ alg: 'RSA-OAEP', enc: 'A256GCM' })}.a.b.c.d`, 'malformed'],
      ['standard base64 characters', `${b64(HEADER)}.${b64(CLAIMS)}.ab+/`, 'malformed'],
      ['header not JSON', `${b64('{oops')}.${b64(CLAIMS)}.${b64('s')}`, 'malformed'],
      ['claims an array', jwt(HEADER, [CLAIMS]), 'malformed'],
      ['alg none', jwt({ ...HEADER, alg: 'none' }, CLAIMS), 'algorithm'],
      ['alg HS256 (a shared secret)', jwt({ ...HEADER, alg: 'HS256' }, CLAIMS), 'algorithm'],
      ['no alg', jwt({ typ: 'at+jwt' }, CLAIMS), 'algorithm'],
      ['crit with CR LF', jwt({ ...HEADER, crit: ['x\r\nSet-Cookie: a=b'], 'x\r\nSet-Cookie: a=b': 1 }, CLAIMS), 'malformed'],
      ['crit beyond Latin-1', jwt({ ...HEADER, crit: ['ünï🙂'] }, CLAIMS), 'malformed'],
      ['typ of an ID token', jwt({ ...HEADER, typ: 'id_token+jwt' }, CLAIMS), 'type'],
      ['typ of a DPoP proof', jwt({ ...HEADER, typ: 'dpop+jwt' }, CLAIMS), 'type'],
      ['typ JOSE', jwt({ ...HEADER, typ: 'JOSE' }, CLAIMS), 'type'],
      ['typ not a string', jwt({ ...HEADER, typ: 7 }, CLAIMS), 'type'],
      ['another issuer', jwt(HEADER, { ...CLAIMS, iss: 'https://evil.example' }), 'issuer'],
      ['no issuer', jwt(HEADER, { ...CLAIMS, iss: undefined }), 'issuer'],
      ['another audience', jwt(HEADER, { ...CLAIMS, aud: 'https://elsewhere.example/mcp' }), 'audience'],
      ['no audience', jwt(HEADER, { ...CLAIMS, aud: undefined }), 'audience'],
      ['no subject', jwt(HEADER, { ...CLAIMS, sub: undefined }), 'no_subject'],
      ['empty subject', jwt(HEADER, { ...CLAIMS, sub: '' }), 'no_subject'],
      ['no exp', jwt(HEADER, { ...CLAIMS, exp: undefined }), 'no_expiry'],
      ['exp not a number', jwt(HEADER, { ...CLAIMS, exp: 'tomorrow' }), 'malformed'],
      ['expired beyond the tolerance', jwt(HEADER, { ...CLAIMS, exp: NOW - 6 }), 'expired'],
      ['nbf beyond the tolerance', jwt(HEADER, { ...CLAIMS, nbf: NOW + 6 }), 'not_yet_valid'],
      ['iat years ahead', jwt(HEADER, { ...CLAIMS, iat: NOW + 3 * 365 * 86_400 }), 'not_yet_valid'],
      ['iat beyond the tolerance', jwt(HEADER, { ...CLAIMS, iat: NOW + 6 }), 'not_yet_valid'],
    ];
    for (const [what, token, fault] of cases) assert.equal(faultOfToken(token), fault, what);
  });

  it('typ: at+jwt or JWT in any spelling RFC 7515 allows, or none at all', () => {
    for (const typ of ['at+jwt', 'AT+JWT', 'application/at+jwt', 'Application/AT+JWT', 'JWT', 'jwt', 'application/jwt', undefined]) {
      assert.equal(faultOfToken(jwt({ ...HEADER, typ }, CLAIMS)), undefined, String(typ));
    }
  });

  it('times within the clock tolerance pass; the tolerance is the configured one', () => {
    for (const claims of [{ exp: NOW - 4 }, { nbf: NOW + 5 }, { iat: NOW + 5 }]) assert.equal(faultOfToken(jwt(HEADER, { ...CLAIMS, ...claims })), undefined, JSON.stringify(claims));
    assert.throws(() => inspectAccessToken(jwt(HEADER, { ...CLAIMS, iat: NOW + 1 }), { ...EXPECTED, clockToleranceS: 0 }, NOW), TokenRefused);
    assert.doesNotThrow(() => inspectAccessToken(jwt(HEADER, { ...CLAIMS, iat: NOW + 60 }), { ...EXPECTED, clockToleranceS: 60 }, NOW));
  });

  it('jose\'s refusals map to the same faults; a JWKS that cannot be fetched is no fault of the token', () => {
    assert.equal(faultOf(new errors.JWSSignatureVerificationFailed())?.fault, 'signature');
    assert.equal(faultOf(new errors.JWKSNoMatchingKey())?.fault, 'signature');
    assert.equal(faultOf(new errors.JWTExpired('x', {}, 'exp'))?.fault, 'expired');
    assert.equal(faultOf(new errors.JWTClaimValidationFailed('x', {}, 'aud'))?.fault, 'audience');
    assert.equal(faultOf(new errors.JWTClaimValidationFailed('x', {}, 'iat'))?.fault, 'not_yet_valid');
    assert.equal(faultOf(new errors.JWSInvalid('x'))?.fault, 'malformed');
    assert.equal(faultOf(new errors.JWKSTimeout()), undefined);
    assert.equal(faultOf(new errors.JOSEError('Expected 200 OK from the JSON Web Key Set HTTP response')), undefined);
    assert.equal(faultOf(new TypeError('fetch failed')), undefined);
  });
});

describe('a refusal puts nothing untrusted into WWW-Authenticate', () => {
  const auth: AuthConfig = {
    resource: RESOURCE,
    apiKeys: [],
    oauth: { issuer: ISSUER, jwksUri: undefined, audience: RESOURCE, requiredScopes: ['mcp:tools'], clockToleranceSeconds: 5 },
    access: undefined,
    admin: undefined,
    rateLimits: { requestsPerSecond: 0, taskCreationsPerMinute: 0, rules: [] },
  };
  const authenticator = new Authenticator(auth, silent);

  it('every fault\'s description is fixed printable ASCII, a valid header value as the challenge quotes it', () => {
    for (const [fault, text] of Object.entries(TOKEN_FAULTS)) {
      assert.match(text, /^[\x20-\x7e]+$/, fault);
      const challenge = authenticator.challenge(new AuthError(401, text, 'invalid_token'));
      assert.doesNotThrow(() => validateHeaderValue('www-authenticate', challenge), challenge);
      assert.ok(challenge.includes(`error_description="${text}"`), challenge);
    }
  });

  it('the challenge stays a valid header value whatever a message held', () => {
    const challenge = authenticator.challenge(new AuthError(401, 'a "quoted" \\ line\r\nSet-Cookie: x=1 ü🙂', 'invalid_token'));
    assert.doesNotThrow(() => validateHeaderValue('www-authenticate', challenge), challenge);
    assert.ok(!/[\r\n]/.test(challenge));
    assert.equal((challenge.match(/"/g) ?? []).length % 2, 0, challenge);
  });

  it('forged tokens are refused with their fault\'s fixed text, without contacting the issuer (none is reachable here)', async () => {
    const forged = [
      jwt({ ...HEADER, crit: ['x\r\nSet-Cookie: a=b'] }, CLAIMS),
      jwt({ ...HEADER, crit: ['ünï🙂'] }, { ...CLAIMS, iss: ISSUER }),
      jwt({ ...HEADER, typ: 'x\r\ny' }, CLAIMS),
      jwt(HEADER, { ...CLAIMS, iss: 'https://evil.example\r\nX: y' }),
      'garbage',
    ];
    for (const token of forged) {
      const refusal = await authenticator.authenticate(`Bearer ${token}`).then(() => undefined, (error: unknown) => error);
      assert.ok(refusal instanceof AuthError, `${token}: ${String(refusal)}`);
      assert.equal(refusal.status, 401);
      assert.ok(Object.values(TOKEN_FAULTS).includes(refusal.message), refusal.message);
      assert.doesNotThrow(() => validateHeaderValue('www-authenticate', authenticator.challenge(refusal)));
    }
  });
});

describe('rate windows count a batch per message', () => {
  const limits = (rules: AuthConfig['rateLimits']['rules']): AuthConfig['rateLimits'] => ({ requestsPerSecond: 10, taskCreationsPerMinute: 0, rules });
  // The store's clock stands still: every count lands in one window.
  const store = (): MemoryTaskStore => new MemoryTaskStore({ now: () => NOW * 1000 });

  it('a batch of 20 against a limit of 10 is refused whole; smaller ones add up', async () => {
    const limiter = new RateLimiter(limits([]), store());
    const principal = apiKeyCaller('batcher', []).principal;
    await assert.rejects(limiter.request(principal, 20), RateLimited);
    const other = apiKeyCaller('other', []).principal;
    await limiter.request(other, 6);
    await limiter.request(other, 4);
    await assert.rejects(limiter.request(other, 1), /10 requests per second for 'key:other'/);
  });

  it('rate-limit rules name principals bare or qualified, like access rules', async () => {
    const limiter = new RateLimiter(limits([{ principals: ['key:ci-*'], requestsPerSecond: 100 }, { principals: ['oauth:bot'], requestsPerSecond: 50 }]), store());
    await limiter.request(apiKeyCaller('ci-1', []).principal, 100);
    await assert.rejects(limiter.request(oauthCaller(ISSUER, 'ci-1', []).principal, 11), RateLimited, 'the OAuth subject ci-1 is not the key ci-1');
    await limiter.request(oauthCaller(ISSUER, 'bot', []).principal, 50);
    await assert.rejects(limiter.request(apiKeyCaller('bot', []).principal, 11), RateLimited, 'the key bot is not the OAuth subject bot');
  });
});
