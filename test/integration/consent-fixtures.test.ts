// The per-user consent fixtures (issue 41) prove themselves over real loopback HTTP, before any gateway test leans on
// them: the front-door issuer's browser login (authorization code + PKCE, login form or auto login, ID token), the
// third-party authorization server's consent, code exchange, refresh rotation with reuse detection, revocation and
// injected failures, and the third-party MCP upstream that accepts only that server's live tokens.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import * as oauth from 'oauth4webapi';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LOGIN_COOKIE, formFields, startAuthServer, type AuthServer } from '../fixtures/auth-server.js';
import { USER_COOKIE, startThirdPartyAs, type ThirdPartyAs } from '../fixtures/third-party-as.js';
import { startThirdPartyUpstream, type ThirdPartyUpstream, type ThirdPartyWhoami } from '../fixtures/third-party-upstream.js';
import { bounded } from '../helpers/waits.js';

type Json = Record<string, unknown>;

const insecure = { [oauth.allowInsecureRequests]: true } as const; // loopback http
const CALLBACK = 'http://127.0.0.1:1/oauth/callback'; // never contacted: the tests read the redirect themselves
const GATEWAY_RESOURCE = 'http://127.0.0.1:1/mcp';

/** A PKCE pair and a state, as a client starts each authorization. */
async function pkce(): Promise<{ verifier: string; challenge: string; state: string }> {
  const verifier = oauth.generateRandomCodeVerifier();
  return { verifier, challenge: await oauth.calculatePKCECodeChallenge(verifier), state: oauth.generateRandomState() };
}

function authorizeUrl(endpoint: string, params: Record<string, string>): string {
  const url = new URL(endpoint);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return url.href;
}

/** GET without following redirects. */
function visit(url: string, cookie?: string): Promise<Response> {
  return fetch(url, { redirect: 'manual', ...(cookie !== undefined && { headers: { cookie } }) });
}

/** Submits a fixture page's form (its hidden fields plus `extra`) to its action, as a browser would. */
async function submit(origin: string, page: Response, extra: Record<string, string>): Promise<Response> {
  const html = await page.text();
  const action = /<form method="post" action="([^"]+)"/.exec(html)?.[1];
  assert.ok(action, html);
  return fetch(new URL(action, origin), { method: 'POST', redirect: 'manual', body: formFields(html, extra) });
}

function redirectParams(res: Response): URLSearchParams {
  assert.equal(res.status, 302);
  return new URL(res.headers.get('location')!).searchParams;
}

async function discover(issuer: string): Promise<oauth.AuthorizationServer> {
  const url = new URL(issuer);
  return oauth.processDiscoveryResponse(url, await oauth.discoveryRequest(url, { ...insecure, algorithm: 'oauth2' }));
}

async function postForm(url: string, params: Record<string, string>, basic?: [string, string]): Promise<{ status: number; body: Json }> {
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  if (basic) headers.authorization = `Basic ${Buffer.from(`${basic[0]}:${basic[1]}`).toString('base64')}`;
  const res = await fetch(url, { method: 'POST', headers, body: new URLSearchParams(params) });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
}

describe('front-door login on the auth-server fixture', () => {
  const login = { id: 'gateway-login', secret: 'login-secret' };
  let issuer: AuthServer;
  let as: oauth.AuthorizationServer;

  before(async () => {
    issuer = await startAuthServer({ loginClients: { [login.id]: { secret: login.secret, redirectUris: [CALLBACK] } } });
    as = await discover(issuer.issuer);
  });
  after(async () => { await issuer?.close(); });

  test('metadata advertises the code flow: S256, response type code, iss in the authorization response', () => {
    assert.equal(as.authorization_endpoint, `${issuer.issuer}/authorize`);
    assert.deepEqual(as.code_challenge_methods_supported, ['S256']);
    assert.deepEqual(as.response_types_supported, ['code']);
    assert.equal(as.authorization_response_iss_parameter_supported, true);
  });

  test('the login form signs alice in; the code gives an at+jwt for the resource and an ID token with the nonce, once', async () => {
    const { verifier, challenge, state } = await pkce();
    const nonce = oauth.generateRandomNonce();
    const form = await visit(authorizeUrl(as.authorization_endpoint!, {
      client_id: login.id, redirect_uri: CALLBACK, response_type: 'code', code_challenge: challenge, code_challenge_method: 'S256',
      state, nonce, scope: 'openid',
    }));
    assert.equal(form.status, 200);
    assert.match(form.headers.get('content-type') ?? '', /text\/html/);
    const callback = redirectParams(await submit(issuer.issuer, form, { username: 'alice' }));
    assert.equal(callback.get('iss'), issuer.issuer);
    const client: oauth.Client = { client_id: login.id };
    const params = oauth.validateAuthResponse(as, client, callback, state);
    const exchange = () => oauth.authorizationCodeGrantRequest(as, client, oauth.ClientSecretBasic(login.secret), params, CALLBACK, verifier,
      { ...insecure, additionalParameters: { resource: GATEWAY_RESOURCE } });
    const tokens = await oauth.processAuthorizationCodeResponse(as, client, await exchange(), { expectedNonce: nonce, requireIdToken: true });

    const jwks = createRemoteJWKSet(new URL(issuer.jwksUri));
    const access = await jwtVerify(tokens.access_token, jwks, { issuer: issuer.issuer, audience: GATEWAY_RESOURCE, typ: 'at+jwt' });
    assert.equal(access.payload.sub, 'alice');
    assert.equal(access.payload.scope, 'openid');
    const id = await jwtVerify(tokens.id_token!, jwks, { issuer: issuer.issuer, audience: login.id });
    assert.equal(decodeProtectedHeader(tokens.id_token!).typ, 'JWT');
    assert.deepEqual([id.payload.sub, id.payload.nonce], ['alice', nonce]);
    assert.equal(issuer.lastTokenRequest?.grantType, 'authorization_code');
    assert.deepEqual(issuer.logins().map((l) => [l.method, l.outcome, l.user]), [['GET', 'form', undefined], ['POST', 'code', 'alice']]);

    const replay = await exchange();
    assert.equal(replay.status, 400);
    assert.equal(((await replay.json()) as Json).error, 'invalid_grant');
  });

  test('a registered public client: the cookie or autoLogin logs in without the form; aud is the client id without resource', async () => {
    const reg = await fetch(`${issuer.issuer}/register`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' }),
    });
    const { client_id: clientId } = (await reg.json()) as { client_id: string };
    const flow = async (cookie?: string) => {
      const { verifier, challenge, state } = await pkce();
      const res = await visit(authorizeUrl(as.authorization_endpoint!, {
        client_id: clientId, redirect_uri: CALLBACK, response_type: 'code', code_challenge: challenge, code_challenge_method: 'S256', state,
      }), cookie);
      if (res.status !== 302) return { status: res.status };
      const params = oauth.validateAuthResponse(as, { client_id: clientId }, redirectParams(res), state);
      const tokens = await oauth.processAuthorizationCodeResponse(as, { client_id: clientId },
        await oauth.authorizationCodeGrantRequest(as, { client_id: clientId }, oauth.None(), params, CALLBACK, verifier, insecure));
      return { status: 302, claims: (await jwtVerify(tokens.access_token, createRemoteJWKSet(new URL(issuer.jwksUri)))).payload };
    };
    assert.equal((await flow()).status, 200, 'no cookie, no autoLogin: the form');
    const bob = await flow(`${LOGIN_COOKIE}=bob`);
    assert.deepEqual([bob.claims?.sub, bob.claims?.aud], ['bob', clientId]);
    issuer.setAutoLogin('carol');
    try {
      assert.equal((await flow()).claims?.sub, 'carol');
      assert.equal((await flow(`${LOGIN_COOKIE}=dave`)).claims?.sub, 'dave', 'the cookie wins');
    } finally {
      issuer.setAutoLogin(undefined);
    }
  });

  test('refusals: unknown redirect_uri is not redirected; no PKCE or no state is redirected with iss; a wrong verifier is invalid_grant', async () => {
    const { verifier, challenge, state } = await pkce();
    const base = { client_id: login.id, redirect_uri: CALLBACK, response_type: 'code', code_challenge: challenge, code_challenge_method: 'S256', state };
    const elsewhere = await visit(authorizeUrl(as.authorization_endpoint!, { ...base, redirect_uri: `${CALLBACK}/other` }));
    assert.equal(elsewhere.status, 400);
    const plain = redirectParams(await visit(authorizeUrl(as.authorization_endpoint!, { ...base, code_challenge_method: 'plain' })));
    assert.deepEqual([plain.get('error'), plain.get('state'), plain.get('iss')], ['invalid_request', state, issuer.issuer]);
    const { state: _omitted, ...stateless } = base;
    assert.equal(redirectParams(await visit(authorizeUrl(as.authorization_endpoint!, stateless))).get('error'), 'invalid_request');

    const code = redirectParams(await visit(authorizeUrl(as.authorization_endpoint!, base), `${LOGIN_COOKIE}=erin`)).get('code')!;
    const token = (params: Record<string, string>) => postForm(`${issuer.issuer}/token`, { grant_type: 'authorization_code', code, redirect_uri: CALLBACK, ...params }, [login.id, login.secret]);
    assert.equal((await token({ code_verifier: oauth.generateRandomCodeVerifier() })).body.error, 'invalid_grant');
    assert.equal((await token({ code_verifier: verifier })).body.error, 'invalid_grant', 'a code fails once tried: single use');
  });
});

describe('third-party authorization server and upstream', () => {
  let tp: ThirdPartyAs;
  let upstream: ThirdPartyUpstream;
  let as: oauth.AuthorizationServer;
  let confidential: { client_id: string; client_secret: string };
  const clients: Client[] = [];

  before(async () => {
    tp = await startThirdPartyAs();
    upstream = await startThirdPartyUpstream({ authorizationServer: tp });
    as = await discover(tp.issuer);
    const registered = await oauth.dynamicClientRegistrationRequest(as, { redirect_uris: [CALLBACK], client_name: 'taskgate' }, insecure);
    confidential = (await oauth.processDynamicClientRegistrationResponse(registered)) as typeof confidential;
  });
  after(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    await upstream?.close();
    await tp?.close();
  });

  /** One authorization by the confidential client: consent as `consent` says (or by the page), then the code exchange. */
  async function authorize(options: { cookie?: string; scope?: string } = {}): Promise<oauth.TokenEndpointResponse> {
    const { verifier, challenge, state } = await pkce();
    const page = await visit(authorizeUrl(as.authorization_endpoint!, {
      client_id: confidential.client_id, redirect_uri: CALLBACK, response_type: 'code', code_challenge: challenge, code_challenge_method: 'S256', state,
      ...(options.scope !== undefined && { scope: options.scope }),
    }), options.cookie);
    const answer = page.status === 200 ? await submit(tp.issuer, page, { decision: 'approve' }) : page;
    const client: oauth.Client = { client_id: confidential.client_id };
    const params = oauth.validateAuthResponse(as, client, redirectParams(answer), state);
    return oauth.processAuthorizationCodeResponse(as, client,
      await oauth.authorizationCodeGrantRequest(as, client, oauth.ClientSecretBasic(confidential.client_secret), params, CALLBACK, verifier, insecure));
  }

  const refresh = (refreshToken: string) => postForm(tp.tokenEndpoint, { grant_type: 'refresh_token', refresh_token: refreshToken }, [confidential.client_id, confidential.client_secret]);

  test('metadata: RFC 8414 with registration, revocation, S256, both grants and iss in responses', () => {
    assert.equal(as.issuer, tp.issuer);
    assert.equal(as.registration_endpoint, `${tp.issuer}/register`);
    assert.equal(as.revocation_endpoint, `${tp.issuer}/revoke`);
    assert.deepEqual(as.code_challenge_methods_supported, ['S256']);
    assert.deepEqual(as.grant_types_supported, ['authorization_code', 'refresh_token']);
    assert.equal(as.authorization_response_iss_parameter_supported, true);
    assert.equal(as.client_id_metadata_document_supported, undefined);
    assert.equal(tp.counts().registrations, 1);
  });

  test('the consent page approves for octocat; the code is exchanged once for a token the AS validates', async () => {
    const tokens = await authorize({ scope: 'repo' });
    assert.equal(tokens.scope, 'repo');
    assert.ok(tokens.refresh_token);
    const seen = tp.validate(tokens.access_token);
    assert.ok(seen.active);
    assert.deepEqual([seen.user, seen.scopes, seen.clientId], ['octocat', ['repo'], confidential.client_id]);
    const exchange = tp.requests().filter((r) => r.path === '/token').at(-1)!;
    assert.equal(exchange.clientAuth, 'basic');
    assert.ok(exchange.form.code_verifier, 'the request log holds every parameter');
    assert.deepEqual([tp.counts().approvals, tp.counts().codeExchanges], [1, 1]);
  });

  test('deny redirects with access_denied, state and iss', async () => {
    const { challenge, state } = await pkce();
    const page = await visit(authorizeUrl(as.authorization_endpoint!, {
      client_id: confidential.client_id, redirect_uri: CALLBACK, response_type: 'code', code_challenge: challenge, code_challenge_method: 'S256', state,
    }));
    assert.match(await page.clone().text(), /octocat/);
    const denied = redirectParams(await submit(tp.issuer, page, { decision: 'deny' }));
    assert.deepEqual([denied.get('error'), denied.get('state'), denied.get('iss')], ['access_denied', state, tp.issuer]);
    assert.equal(tp.counts().denials, 1);
  });

  test('refresh rotates; a reused refresh token is invalid_grant and revokes the family, access tokens included', async () => {
    tp.setConsent('approve');
    const first = await authorize();
    const seen = tp.validate(first.access_token);
    assert.ok(seen.active);
    const rotated = await refresh(first.refresh_token!);
    assert.equal(rotated.status, 200);
    const second = rotated.body.refresh_token as string;
    assert.ok(second && second !== first.refresh_token);
    assert.ok(tp.validate(rotated.body.access_token as string).active);

    const reuse = await refresh(first.refresh_token!);
    assert.deepEqual([reuse.status, reuse.body.error], [400, 'invalid_grant']);
    assert.equal((await refresh(second)).body.error, 'invalid_grant', 'the newest refresh token died with its family');
    for (const t of [first.access_token, rotated.body.access_token as string]) assert.deepEqual(tp.validate(t), { active: false, reason: 'revoked' });
    const family = tp.families().find((f) => f.id === seen.familyId)!;
    assert.deepEqual([family.revoked, family.revokedBecause, family.refreshes], [true, 'reuse', 1]);
    assert.equal(tp.counts().reuseDetected, 1);
  });

  test('without rotation the refresh answer has no refresh token and the old one keeps working', async () => {
    tp.setRotateRefreshTokens(false);
    try {
      const tokens = await authorize();
      for (let i = 0; i < 2; i++) {
        const again = await refresh(tokens.refresh_token!);
        assert.equal(again.status, 200);
        assert.equal(again.body.refresh_token, undefined);
      }
    } finally {
      tp.setRotateRefreshTokens(true);
    }
  });

  test('revocation: an access token alone, a refresh token its family; unknown tokens are 200', async () => {
    const tokens = await authorize();
    const client: oauth.Client = { client_id: confidential.client_id };
    const auth = oauth.ClientSecretBasic(confidential.client_secret);
    await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, auth, tokens.access_token, insecure));
    assert.deepEqual(tp.validate(tokens.access_token), { active: false, reason: 'revoked' });
    const refreshed = await refresh(tokens.refresh_token!);
    assert.equal(refreshed.status, 200, 'the family lives on');
    await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, auth, refreshed.body.refresh_token as string, insecure));
    assert.equal(tp.validate(refreshed.body.access_token as string).active, false);
    await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, auth, 'never-issued', insecure));
    assert.equal(tp.counts().revocations, 3);
  });

  test('injected refresh failures, expireAccessTokens and revokeAll', async () => {
    const tokens = await authorize({ cookie: `${USER_COOKIE}=hubot` });
    assert.equal(tp.expireAccessTokens('hubot'), 1);
    assert.deepEqual(tp.validate(tokens.access_token), { active: false, reason: 'expired' });
    tp.failNextRefresh('temporarily_unavailable');
    assert.equal((await refresh(tokens.refresh_token!)).status, 503);
    const ok = await refresh(tokens.refresh_token!);
    assert.equal(ok.status, 200, 'a transient failure leaves the grant alone');
    tp.failNextRefresh('invalid_grant');
    assert.equal((await refresh(ok.body.refresh_token as string)).body.error, 'invalid_grant');
    assert.equal(tp.validate(ok.body.access_token as string).active, false, 'an injected invalid_grant revokes the family');

    const again = await authorize({ cookie: `${USER_COOKIE}=hubot` });
    assert.equal(tp.revokeAll('hubot'), 1);
    assert.equal(tp.validate(again.access_token).active, false);
    assert.equal((await refresh(again.refresh_token!)).body.error, 'invalid_grant');
  });

  test('a code used twice is invalid_grant and revokes what its first use issued', async () => {
    const { verifier, challenge, state } = await pkce();
    const code = redirectParams(await visit(authorizeUrl(as.authorization_endpoint!, {
      client_id: confidential.client_id, redirect_uri: CALLBACK, response_type: 'code', code_challenge: challenge, code_challenge_method: 'S256', state,
    }))).get('code')!;
    const exchange = () => postForm(tp.tokenEndpoint, { grant_type: 'authorization_code', code, redirect_uri: CALLBACK, code_verifier: verifier },
      [confidential.client_id, confidential.client_secret]);
    const first = await exchange();
    assert.ok(tp.validate(first.body.access_token as string).active);
    assert.equal((await exchange()).body.error, 'invalid_grant');
    assert.deepEqual(tp.validate(first.body.access_token as string), { active: false, reason: 'revoked' });
  });

  test('slow holds token requests (seen on arrival) until the mode changes', async () => {
    const tokens = await authorize();
    await tp.setMode('slow');
    const arrived = tp.nextRequest((r) => r.path === '/token' && r.form.grant_type === 'refresh_token', 'arrived');
    const held = refresh(tokens.refresh_token!);
    await bounded(arrived, 'held refresh');
    assert.equal(tp.heldTokenRequests, 1);
    const answered = tp.nextRequest((r) => r.path === '/token');
    await tp.setMode('up');
    assert.equal((await bounded(held, 'released refresh')).status, 200);
    assert.equal((await answered).status, 200);
  });

  test('client authentication follows the registration: a public client sends no secret, a basic one not by post', async () => {
    const reg = await oauth.dynamicClientRegistrationRequest(as, { redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' }, insecure);
    const pub = await oauth.processDynamicClientRegistrationResponse(reg);
    assert.equal(pub.client_secret, undefined);
    const code = redirectParams(await visit(authorizeUrl(as.authorization_endpoint!, {
      client_id: pub.client_id, redirect_uri: CALLBACK, response_type: 'code', code_challenge: (await pkce()).challenge, code_challenge_method: 'S256',
    }))).get('code')!;
    const withSecret = await postForm(tp.tokenEndpoint, { grant_type: 'authorization_code', code, redirect_uri: CALLBACK, code_verifier: 'x'.repeat(43) }, [pub.client_id, 'guess']);
    assert.deepEqual([withSecret.status, withSecret.body.error], [401, 'invalid_client']);
    const byPost = await postForm(tp.tokenEndpoint, { grant_type: 'refresh_token', refresh_token: 'x', client_id: confidential.client_id, client_secret: confidential.client_secret });
    assert.equal(byPost.body.error, 'invalid_client');
  });

  test('the upstream: 401 with resource_metadata naming the AS; an SDK client calls whoami, echo and slow as the token\'s user', async () => {
    const res = await fetch(upstream.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(res.status, 401);
    assert.equal(res.headers.get('www-authenticate'), `Bearer resource_metadata="${upstream.resourceMetadataUrl}"`);
    const prm = await oauth.processResourceDiscoveryResponse(new URL(upstream.url), await oauth.resourceDiscoveryRequest(new URL(upstream.url), insecure));
    assert.deepEqual(prm.authorization_servers, [tp.issuer]);

    const tokens = await authorize({ scope: 'repo read:org' });
    const client = new Client({ name: 'consent-fixtures-test', version: '1.0.0' });
    clients.push(client);
    await client.connect(new StreamableHTTPClientTransport(new URL(upstream.url), { requestInit: { headers: { authorization: `Bearer ${tokens.access_token}` } } }));
    const me = (await client.callTool({ name: 'whoami', arguments: {} })).structuredContent as unknown as ThirdPartyWhoami;
    assert.deepEqual(me, { user: 'octocat', scopes: ['repo', 'read:org'], clientId: confidential.client_id });
    assert.deepEqual((await client.callTool({ name: 'echo', arguments: { text: 'hi' } })).content, [{ type: 'text', text: 'hi' }]);
    const started = upstream.nextToolCall((c) => c.tool === 'slow' && c.phase === 'started');
    const slow = client.callTool({ name: 'slow', arguments: { ms: 5 } });
    assert.equal((await bounded(started, 'slow started')).user, 'octocat');
    assert.equal(((await slow).structuredContent as unknown as ThirdPartyWhoami).user, 'octocat');
    assert.ok(upstream.counts().requestsByToken[tokens.access_token]! >= 4);
    assert.equal(upstream.counts().toolCallsByUser.octocat, 3);
  });

  test('the upstream refuses a revoked token (invalid_token) and another user\'s token on a session', async () => {
    const mine = await authorize({ cookie: `${USER_COOKIE}=mona` });
    const theirs = await authorize({ cookie: `${USER_COOKIE}=lisa` });
    const transport = new StreamableHTTPClientTransport(new URL(upstream.url), { requestInit: { headers: { authorization: `Bearer ${mine.access_token}` } } });
    const client = new Client({ name: 'consent-fixtures-test', version: '1.0.0' });
    clients.push(client);
    await client.connect(transport);
    assert.equal(upstream.sessionsByUser().mona, 1);
    const call = (token: string) => fetch(upstream.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}`,
        'mcp-session-id': transport.sessionId!, 'mcp-protocol-version': '2025-11-25',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' }),
    });
    assert.equal((await call(theirs.access_token)).status, 403);
    tp.revokeAll('mona');
    const revoked = await call(mine.access_token);
    assert.equal(revoked.status, 401);
    assert.match(revoked.headers.get('www-authenticate') ?? '', /error="invalid_token"$/);
  });
});

describe('third-party authorization server options', () => {
  test('no registration or revocation endpoints; URL client ids by metadata document', async () => {
    const docs = http.createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
        client_id: `http://127.0.0.1:${(docs.address() as AddressInfo).port}${req.url}`, client_name: 'taskgate', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none',
      }));
    });
    await new Promise<void>((resolve) => docs.listen(0, '127.0.0.1', resolve));
    const tp = await startThirdPartyAs({ registration: false, revocation: false, clientIdMetadataDocuments: true, autoApprove: true, user: 'monalisa' });
    try {
      const meta = (await (await fetch(tp.metadataUrl)).json()) as Json;
      assert.deepEqual([meta.registration_endpoint, meta.revocation_endpoint, meta.client_id_metadata_document_supported], [undefined, undefined, true]);
      assert.equal((await fetch(`${tp.issuer}/register`, { method: 'POST', body: '{}' })).status, 404);
      assert.equal((await fetch(`${tp.issuer}/revoke`, { method: 'POST', body: 'token=x' })).status, 404);

      const clientId = `http://127.0.0.1:${(docs.address() as AddressInfo).port}/client.json`;
      const { verifier, challenge, state } = await pkce();
      const callback = redirectParams(await visit(authorizeUrl(`${tp.issuer}/authorize`, {
        client_id: clientId, redirect_uri: CALLBACK, response_type: 'code', code_challenge: challenge, code_challenge_method: 'S256', state,
      })));
      const tokens = await postForm(tp.tokenEndpoint, { grant_type: 'authorization_code', client_id: clientId, code: callback.get('code')!, redirect_uri: CALLBACK, code_verifier: verifier });
      assert.equal(tokens.status, 200, JSON.stringify(tokens.body));
      const seen = tp.validate(tokens.body.access_token as string);
      assert.ok(seen.active && seen.user === 'monalisa');
      assert.equal(tp.counts().metadataDocumentFetches, 2);
    } finally {
      await tp.close();
      await new Promise<void>((resolve) => docs.close(() => resolve()));
    }
  });
});
