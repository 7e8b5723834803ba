// The pure rules of per-user consent (src/consent/, issue 41): when a token is refreshed (half its lifetime at most
// early), which discovered authorization servers may be used (https or loopback, and the allowlist), what the
// authorization request carries, how the vault binds sealed tokens to their user, upstream and server, and the
// public links and the Client ID Metadata Document built from the public origin.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { discoveredServerRefusal } from '../../src/consent/authorization-servers.js';
import { clientMetadataDocument, usesClientMetadataDocument } from '../../src/consent/clients.js';
import { authorizationRequestUrl, browserBinding } from '../../src/consent/flows.js';
import { clientMetadataUrl, connectUrl, consentRedirectUri, publicOrigin } from '../../src/consent/settings.js';
import { refreshDue } from '../../src/consent/tokens.js';
import { ConsentVault, tokenAad } from '../../src/consent/vault.js';
import { Sealer, UnsealError } from '../../src/identity/sealing.js';

describe('consent: refresh ahead of expiry', () => {
  it('a 4 s token is served for its first half and refreshed from 2 s on, not on every call', () => {
    const token = { issuedAtMs: 10_000, expiresAtMs: 14_000 };
    assert.equal(refreshDue(token, 10_000), false);
    assert.equal(refreshDue(token, 11_999), false);
    assert.equal(refreshDue(token, 12_000), true);
    assert.equal(refreshDue(token, 20_000), true);
  });

  it('an hour token is refreshed after half an hour at the earliest', () => {
    const token = { issuedAtMs: 0, expiresAtMs: 3_600_000 };
    assert.equal(refreshDue(token, 1_799_999), false);
    assert.equal(refreshDue(token, 1_800_000), true);
  });

  it('a token without an expiry is never refreshed by time', () => {
    assert.equal(refreshDue({ issuedAtMs: 0 }, Number.MAX_SAFE_INTEGER), false);
  });
});

describe('consent: discovered authorization servers', () => {
  it('https ones are allowed, plain http only on loopback', () => {
    assert.equal(discoveredServerRefusal('https://github.com/login/oauth', undefined), undefined);
    assert.equal(discoveredServerRefusal('http://127.0.0.1:8080', undefined), undefined);
    assert.equal(discoveredServerRefusal('http://127.9.0.1', undefined), undefined);
    assert.equal(discoveredServerRefusal('http://localhost:3000/as', undefined), undefined);
    assert.equal(discoveredServerRefusal('http://[::1]:9000', undefined), undefined);
    assert.match(discoveredServerRefusal('http://as.example.com', undefined) ?? '', /not https/);
    assert.match(discoveredServerRefusal('http://10.0.0.1', undefined) ?? '', /not https/);
    assert.match(discoveredServerRefusal('ftp://as.example.com', undefined) ?? '', /not https/);
    assert.match(discoveredServerRefusal('not a url', undefined) ?? '', /not a URL/);
  });

  it('with an allowlist, only the servers it lists (compared as issuer identifiers)', () => {
    const allowed = ['https://as.example.com', 'https://other.example/tenant/'];
    assert.equal(discoveredServerRefusal('https://as.example.com/', allowed), undefined);
    assert.equal(discoveredServerRefusal('https://AS.example.com', allowed), undefined);
    assert.equal(discoveredServerRefusal('https://other.example/tenant/', allowed), undefined);
    assert.match(discoveredServerRefusal('https://other.example/tenant', allowed) ?? '', /allowedAuthorizationServers/);
    assert.match(discoveredServerRefusal('https://evil.example', allowed) ?? '', /allowedAuthorizationServers/);
    assert.match(discoveredServerRefusal('http://127.0.0.1:1', allowed) ?? '', /allowedAuthorizationServers/, 'loopback is not exempt from the allowlist');
  });
});

describe('consent: the authorization request', () => {
  const request = {
    authorizationEndpoint: 'https://as.example/authorize?tenant=t1',
    clientId: 'client-1',
    redirectUri: 'https://gw.example/oauth/callback',
    codeChallenge: 'challenge-abc',
    state: 'state-xyz',
    scopes: ['repo', 'read:user'],
    resource: 'https://mcp.example/mcp',
    extra: { prompt: 'consent', access_type: 'offline' },
  };

  it('carries the code flow with PKCE S256, state, scope, resource and the extra parameters', () => {
    const url = new URL(authorizationRequestUrl(request));
    assert.equal(url.origin + url.pathname, 'https://as.example/authorize');
    const p = url.searchParams;
    assert.equal(p.get('tenant'), 't1', 'the endpoint\'s own query is kept');
    assert.equal(p.get('response_type'), 'code');
    assert.equal(p.get('client_id'), 'client-1');
    assert.equal(p.get('redirect_uri'), 'https://gw.example/oauth/callback');
    assert.equal(p.get('code_challenge'), 'challenge-abc');
    assert.equal(p.get('code_challenge_method'), 'S256');
    assert.equal(p.get('state'), 'state-xyz');
    assert.equal(p.get('scope'), 'repo read:user');
    assert.equal(p.get('resource'), 'https://mcp.example/mcp');
    assert.equal(p.get('prompt'), 'consent');
    assert.equal(p.get('access_type'), 'offline');
  });

  it('sends no scope when none is asked for, and the flow\'s parameters win over extra ones', () => {
    const url = new URL(authorizationRequestUrl({ ...request, scopes: [], extra: { state: 'forged', scope: 'admin', code_challenge_method: 'plain' } }));
    assert.equal(url.searchParams.has('scope'), false);
    assert.equal(url.searchParams.get('state'), 'state-xyz');
    assert.equal(url.searchParams.get('code_challenge_method'), 'S256');
    assert.deepEqual(url.searchParams.getAll('state'), ['state-xyz']);
  });

  it('binds the flow to the browser by a hash of its cookie, never the cookie itself', () => {
    const cookie = randomBytes(32).toString('base64url');
    const binding = browserBinding(cookie);
    assert.notEqual(binding, cookie);
    assert.equal(binding, browserBinding(cookie));
    assert.notEqual(binding, browserBinding(`${cookie}x`));
  });
});

describe('consent: the vault', () => {
  const vault = new ConsentVault(new Sealer([{ kid: 'k1', key: randomBytes(32) }]));
  const alice = { principal: 'oauth:https://idp.example#alice', upstream: 'github', issuer: 'https://github.com/login/oauth' };
  const tokens = { access_token: 'gho_access_of_alice', refresh_token: 'ghr_refresh_of_alice', token_type: 'bearer' };

  it('seals the token set so that none of it is readable, and opens it for the same binding', () => {
    const sealed = vault.sealTokens(tokens, alice);
    assert.ok(!sealed.includes('gho_') && !sealed.includes('ghr_') && !sealed.includes('alice'));
    assert.deepEqual(vault.openTokens(sealed, alice), tokens);
  });

  it('a record copied to another user, upstream or server does not open', () => {
    const sealed = vault.sealTokens(tokens, alice);
    for (const other of [{ ...alice, principal: 'oauth:https://idp.example#bob' }, { ...alice, upstream: 'linear' }, { ...alice, issuer: 'https://evil.example' }]) {
      assert.throws(() => vault.openTokens(sealed, other), (err: unknown) => err instanceof UnsealError && err.fault === 'tampered');
    }
  });

  it('the binding cannot be forged by moving text between its parts', () => {
    assert.notEqual(tokenAad({ principal: 'a', upstream: 'b\0c', issuer: 'd' }), tokenAad({ principal: 'a\0b', upstream: 'c', issuer: 'd' }));
    assert.notEqual(tokenAad({ principal: 'a', upstream: 'b","c', issuer: 'd' }), tokenAad({ principal: 'a","b', upstream: 'c', issuer: 'd' }));
    assert.notEqual(tokenAad(alice), tokenAad({ ...alice, upstream: 'github2' }));
  });

  it('keeps a token set without a refresh token as one', () => {
    const sealed = vault.sealTokens({ access_token: 'a', token_type: 'bearer' }, alice);
    assert.deepEqual(vault.openTokens(sealed, alice), { access_token: 'a', token_type: 'bearer' });
  });

  it('binds a verifier to its state and a client secret to its server and redirect URI', () => {
    const verifier = vault.sealVerifier('verifier-1', 'state-1');
    assert.equal(vault.openVerifier(verifier, 'state-1'), 'verifier-1');
    assert.throws(() => vault.openVerifier(verifier, 'state-2'), UnsealError);
    const secret = vault.sealClientSecret('s3cret', 'https://as', 'https://gw/oauth/callback');
    assert.equal(vault.openClientSecret(secret, 'https://as', 'https://gw/oauth/callback'), 's3cret');
    assert.throws(() => vault.openClientSecret(secret, 'https://other-as', 'https://gw/oauth/callback'), UnsealError);
  });
});

describe('consent: links from the public origin', () => {
  const listen = { host: '127.0.0.1', port: 8080, path: '/mcp' };
  const auth = (resource: string) => ({ resource }) as never;

  it('listen.publicUrl first, else the origin of auth.resource', () => {
    assert.equal(publicOrigin({ listen: { ...listen, publicUrl: 'https://gw.example' }, auth: auth('https://internal:9000/mcp') } as never), 'https://gw.example');
    assert.equal(publicOrigin({ listen, auth: auth('https://gw.example:8443/mcp') } as never), 'https://gw.example:8443');
    assert.throws(() => publicOrigin({ listen, auth: undefined } as never), /listen.publicUrl or auth.resource/);
  });

  it('builds the connect link, the exact redirect URI and the client metadata URL from it', () => {
    assert.equal(connectUrl('https://gw.example', 'abc'), 'https://gw.example/connect/abc');
    assert.equal(consentRedirectUri('https://gw.example'), 'https://gw.example/oauth/callback');
    assert.equal(clientMetadataUrl('https://gw.example'), 'https://gw.example/oauth/client-metadata.json');
  });

  it('the Client ID Metadata Document names itself as client id and the redirect URI, a public client', () => {
    const doc = clientMetadataDocument('https://gw.example');
    assert.equal(doc.client_id, 'https://gw.example/oauth/client-metadata.json');
    assert.deepEqual(doc.redirect_uris, ['https://gw.example/oauth/callback']);
    assert.equal(doc.token_endpoint_auth_method, 'none');
    assert.deepEqual(doc.grant_types, ['authorization_code', 'refresh_token']);
  });

  it('uses the document only where the server supports it and the public origin is https', () => {
    const as = { issuer: 'https://as', client_id_metadata_document_supported: true };
    assert.equal(usesClientMetadataDocument(as, 'https://gw.example'), true);
    assert.equal(usesClientMetadataDocument(as, 'http://127.0.0.1:8080'), false);
    assert.equal(usesClientMetadataDocument({ issuer: 'https://as' }, 'https://gw.example'), false);
  });
});
