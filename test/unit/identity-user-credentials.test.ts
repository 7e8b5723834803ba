// What an authorizationCode upstream's requests carry (issue 41, src/identity/credential-sources.ts): each caller's
// own token, asked of UserTokens at every request (none cached here: a disconnected user's next request fails), the
// gateway's own requests with a connected user's token, a clear failure while nobody connected, the 401 told to
// UserTokens. UserTokens here is a small one in memory (the consent service keeps them sealed in the store).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { UpstreamAuthConfig } from '../../src/config/identity.js';
import { UpstreamCredentialError } from '../../src/identity/credential-error.js';
import { ConsentUnavailable, UpstreamCredentials } from '../../src/identity/credential-sources.js';
import { createGatewayIdentity } from '../../src/identity/parts.js';
import { ConsentRequiredError, type UserTokens } from '../../src/identity/user-tokens.js';

const ALICE = { principal: 'oauth:https://idp#alice', claims: {} };
const BOB = { principal: 'oauth:https://idp#bob', claims: {} };

/** Connections in memory: a token per (principal, upstream), a new one after each refusal. */
class MemoryUserTokens implements UserTokens {
  readonly tokens = new Map<string, { token: string; n: number }>();
  readonly refusals: string[] = [];
  connect(principal: string, upstream: string): void {
    this.tokens.set(`${principal} ${upstream}`, { token: `${principal}-1`, n: 1 });
  }
  disconnect(principal: string, upstream: string): void {
    this.tokens.delete(`${principal} ${upstream}`);
  }
  async accessToken(principal: string, upstream: string): Promise<string> {
    if (!principal.startsWith('oauth:')) throw new ConsentRequiredError(upstream, principal, 'no_user');
    const entry = this.tokens.get(`${principal} ${upstream}`);
    if (entry === undefined) throw new ConsentRequiredError(upstream, principal, 'not_connected');
    return entry.token;
  }
  refused(principal: string, upstream: string, token: string): boolean {
    this.refusals.push(token);
    const entry = this.tokens.get(`${principal} ${upstream}`);
    if (entry?.token !== token) return false;
    entry.n++;
    entry.token = `${principal}-${entry.n}`;
    return true;
  }
  async anyConnected(upstream: string): Promise<string | undefined> {
    return [...this.tokens.keys()].find((key) => key.endsWith(` ${upstream}`))?.split(' ')[0];
  }
}

const AUTH: UpstreamAuthConfig = {
  clientCredentials: undefined, tokenExchange: undefined, signedIdentity: undefined, claimHeaders: {}, timeoutMs: 5_000,
  authorizationCode: { clientId: undefined, clientSecret: undefined, scopes: ['repo'], resource: 'https://mcp.github.example/mcp', authorizationServer: undefined, extraAuthorizeParams: {} },
} as unknown as UpstreamAuthConfig;

function credentials(userTokens: UserTokens | undefined, headers: Record<string, string> = {}): UpstreamCredentials {
  const parts = { ...createGatewayIdentity(undefined), ...(userTokens === undefined ? {} : { userTokens }) };
  return new UpstreamCredentials({ name: 'github', url: 'https://mcp.github.example/mcp', headers, auth: AUTH }, parts);
}

describe('identity: per-user credentials (authorizationCode)', () => {
  it("carries each caller's own token, over the static headers, and asks again at every request", async () => {
    const tokens = new MemoryUserTokens();
    tokens.connect(ALICE.principal, 'github');
    tokens.connect(BOB.principal, 'github');
    const upstream = credentials(tokens, { 'x-tenant': 't1', Authorization: 'Bearer static' });
    const alice = await upstream.forCaller(ALICE).headers();
    assert.deepEqual(alice, { 'x-tenant': 't1', Authorization: `Bearer ${ALICE.principal}-1` });
    assert.equal(await upstream.forCaller(ALICE).headers(), alice, 'the same object while the token is the same');
    assert.equal((await upstream.forCaller(BOB).headers()).Authorization, `Bearer ${BOB.principal}-1`);
    tokens.disconnect(ALICE.principal, 'github');
    await assert.rejects(upstream.forCaller(ALICE).headers(), (error: unknown) => error instanceof ConsentUnavailable && error.reason === 'not_connected');
  });

  it('fails a caller without a connection with a consent error the client can be told, never a token', async () => {
    const upstream = credentials(new MemoryUserTokens());
    const error = await upstream.forCaller(ALICE).headers().then(() => undefined, (e: unknown) => e);
    assert.ok(error instanceof ConsentRequiredError && error instanceof ConsentUnavailable);
    const told = error.toGatewayError();
    assert.equal(told.code, 'consent_required');
    assert.deepEqual(told.data, { upstream: 'github', reason: 'not_connected' });
    const apiKey = await upstream.forCaller({ principal: 'key:ci', claims: {} }).headers().then(() => undefined, (e: unknown) => e);
    assert.ok(apiKey instanceof ConsentUnavailable && apiKey.reason === 'no_user');
  });

  it('tells UserTokens of a 401, and the retry carries the new token', async () => {
    const tokens = new MemoryUserTokens();
    tokens.connect(ALICE.principal, 'github');
    const source = credentials(tokens).forCaller(ALICE);
    const sent = await source.headers();
    assert.equal(source.refreshAfterUnauthorized(sent), true);
    assert.deepEqual(tokens.refusals, [`${ALICE.principal}-1`]);
    assert.equal((await source.headers()).Authorization, `Bearer ${ALICE.principal}-2`);
    assert.equal(source.refreshAfterUnauthorized({}), false, 'nothing was sent to refuse');
  });

  it("reads the catalog with a connected user's token, and says it waits for a first connection before", async () => {
    const tokens = new MemoryUserTokens();
    const gateway = credentials(tokens).forGateway();
    await assert.rejects(gateway.headers(), (error: unknown) => error instanceof UpstreamCredentialError && error.reason === 'no_connection' && /waiting for a first connection/.test(error.message));
    tokens.connect(BOB.principal, 'github');
    const sent = await gateway.headers();
    assert.equal(sent.Authorization, `Bearer ${BOB.principal}-1`);
    assert.equal(gateway.refreshAfterUnauthorized(sent), true);
    assert.deepEqual(tokens.refusals, [`${BOB.principal}-1`]);
  });

  it('fails clearly when the gateway has no consent service', async () => {
    const error = await credentials(undefined).forCaller(ALICE).headers().then(() => undefined, (e: unknown) => e);
    assert.ok(error instanceof ConsentUnavailable);
    assert.match(error.message, /not set up/);
  });
});
