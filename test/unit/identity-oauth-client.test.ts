// The gateway as an OAuth client (src/identity/oauth-client.ts) against the real authorization-server fixture:
// client credentials (basic and post, RFC 8707 resource), discovery from the upstream's 401 (RFC 9728 → RFC 8414,
// OIDC fallback) cached, RFC 8693 exchange against a small token endpoint that checks what it is sent, and every
// failure typed: refused client, server down, slow past the deadline, 503 with Retry-After.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { decodeJwt } from 'jose';
import type { OAuthClientConfig } from '../../src/config/identity.js';
import { UpstreamCredentialError } from '../../src/identity/credential-error.js';
import { ACCESS_TOKEN_TYPE, DiscoveryCache, resourceMetadataOf, TOKEN_EXCHANGE_GRANT, UpstreamOAuthClient } from '../../src/identity/oauth-client.js';
import { startAuthServer, type AuthServer } from '../fixtures/auth-server.js';

type Handler = (req: http.IncomingMessage, body: string, res: http.ServerResponse) => void;

/** A loopback HTTP server for what the fixture does not serve (an upstream's 401 and RFC 9728 document, odd token endpoints). */
async function serve(handler: Handler): Promise<{ url: string; requests: string[]; close: () => Promise<void> }> {
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push(`${req.method} ${req.url}`);
      handler(req, Buffer.concat(chunks).toString('utf8'), res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

const json = (res: http.ServerResponse, status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}) =>
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));

function failureOf(err: unknown): UpstreamCredentialError {
  assert.ok(err instanceof UpstreamCredentialError, `expected UpstreamCredentialError, got ${String(err)}`);
  return err;
}

describe('identity: OAuth client', () => {
  let as: AuthServer;
  let oidcOnly: AuthServer;
  before(async () => {
    as = await startAuthServer({ clients: { gw: { secret: 'gw-secret', scope: 'mcp:read mcp:write' } }, discovery: 'oauth' });
    oidcOnly = await startAuthServer({ clients: { gw: { secret: 'gw-secret' } }, discovery: 'oidc' });
  });
  after(async () => {
    await as.close();
    await oidcOnly.close();
  });

  const clientConfig = (over: Partial<OAuthClientConfig> = {}): OAuthClientConfig => ({
    clientId: 'gw', clientSecret: 'gw-secret', tokenUrl: `${as.issuer}/token`, resource: 'http://127.0.0.1:1/mcp', scope: undefined,
    tokenEndpointAuthMethod: 'client_secret_basic', ...over,
  });
  const client = (over: Partial<OAuthClientConfig> = {}, upstreamUrl = 'http://127.0.0.1:1/mcp', timeoutMs = 5_000, discovery = new DiscoveryCache(), mode: 'clientCredentials' | 'tokenExchange' = 'clientCredentials') =>
    new UpstreamOAuthClient({ upstream: 'docs', mode, upstreamUrl, client: clientConfig(over), timeoutMs, discovery });

  for (const method of ['client_secret_basic', 'client_secret_post'] as const) {
    it(`client credentials with ${method}: a token for the resource, with its lifetime`, async () => {
      const obtained = await client({ tokenEndpointAuthMethod: method, scope: 'mcp:read' }).clientCredentials();
      assert.equal(obtained.expiresInSeconds, 300);
      const claims = decodeJwt(obtained.token);
      assert.equal(claims.aud, 'http://127.0.0.1:1/mcp');
      assert.equal(claims.scope, 'mcp:read');
      assert.equal(claims.client_id, 'gw');
    });
  }

  it('discovers the token endpoint from the upstream\'s 401 (RFC 9728 → RFC 8414) and caches it', async () => {
    const upstream = await serve((req, _body, res) => {
      const self = `http://${req.headers.host}`;
      if (req.url === '/.well-known/oauth-protected-resource/mcp') return json(res, 200, { resource: `${self}/mcp`, authorization_servers: [as.issuer] });
      json(res, 401, { error: 'unauthorized' }, { 'www-authenticate': `Bearer error="invalid_token", resource_metadata="${self}/.well-known/oauth-protected-resource/mcp"` });
    });
    try {
      const discovery = new DiscoveryCache();
      const url = `${upstream.url}/mcp`;
      const c = client({ tokenUrl: undefined, resource: url, trustedIssuers: [as.issuer] }, url, 5_000, discovery);
      const { token } = await c.clientCredentials();
      assert.equal(decodeJwt(token).aud, url);
      const discoveries = as.discoveryRequests;
      await c.clientCredentials();
      await client({ tokenUrl: undefined, resource: url, trustedIssuers: [as.issuer] }, url, 5_000, discovery).clientCredentials();
      assert.equal(as.discoveryRequests, discoveries, 'discovery is cached per upstream');
      assert.deepEqual(upstream.requests, ['POST /mcp', 'GET /.well-known/oauth-protected-resource/mcp']);
    } finally {
      await upstream.close();
    }
  });

  it('without a challenge, finds the RFC 9728 document at its well-known URL; falls back to OIDC discovery', async () => {
    const upstream = await serve((req, _body, res) => {
      const self = `http://${req.headers.host}`;
      if (req.url === '/.well-known/oauth-protected-resource/mcp') return json(res, 200, { resource: `${self}/mcp`, authorization_servers: [oidcOnly.issuer] });
      json(res, 405, {});
    });
    try {
      const url = `${upstream.url}/mcp`;
      const { token } = await client({ tokenUrl: undefined, resource: url, trustedIssuers: [oidcOnly.issuer] }, url).clientCredentials();
      assert.equal(decodeJwt(token).iss, oidcOnly.issuer);
    } finally {
      await upstream.close();
    }
  });

  it('falls back to the origin\'s RFC 9728 document when the path-inserted one is missing', async () => {
    const upstream = await serve((req, _body, res) => {
      const self = `http://${req.headers.host}`;
      if (req.url === '/.well-known/oauth-protected-resource') return json(res, 200, { resource: `${self}/mcp`, authorization_servers: [as.issuer] });
      json(res, 404, {});
    });
    try {
      const url = `${upstream.url}/mcp`;
      const { token } = await client({ tokenUrl: undefined, resource: url, trustedIssuers: [`${as.issuer}/`] }, url).clientCredentials();
      assert.equal(decodeJwt(token).aud, url, 'an issuer is compared as a URL: a trailing slash on an origin is the same issuer');
      assert.deepEqual(upstream.requests, ['POST /mcp', 'GET /.well-known/oauth-protected-resource/mcp', 'GET /.well-known/oauth-protected-resource']);
    } finally {
      await upstream.close();
    }
  });

  it('a discovered server the config does not trust is refused before anything is sent to it; the first trusted one named is used', async () => {
    const hostile = await serve((_req, _body, res) => json(res, 200, { issuer: 'x', token_endpoint: 'x' }));
    const upstream = await serve((req, _body, res) => {
      const self = `http://${req.headers.host}`;
      if (req.url === '/.well-known/oauth-protected-resource/mcp') return json(res, 200, { resource: `${self}/mcp`, authorization_servers: [self, hostile.url, as.issuer] });
      json(res, 401, { error: 'unauthorized' }, { 'www-authenticate': `Bearer resource_metadata="${self}/.well-known/oauth-protected-resource/mcp"` });
    });
    try {
      const url = `${upstream.url}/mcp`;
      const err = failureOf(await client({ tokenUrl: undefined, resource: url }, url, 5_000, new DiscoveryCache(), 'tokenExchange').exchange('a-callers-token').catch((e: unknown) => e));
      assert.equal(err.step, 'discovery');
      assert.equal(err.reason, 'untrusted_server');
      assert.equal(err.retryable, false);
      assert.ok(err.message.includes(upstream.url) && err.message.includes(hostile.url), err.message);
      assert.match(err.message, /upstreams\.docs\.auth\.tokenExchange\.tokenUrl or \.issuer, or list it in \.trustedIssuers/);
      assert.deepEqual(upstream.requests, ['POST /mcp', 'GET /.well-known/oauth-protected-resource/mcp'], 'the upstream got no token request');
      assert.deepEqual(hostile.requests, [], 'nor did the other server it named');

      const trusting = client({ tokenUrl: undefined, resource: url, trustedIssuers: [as.issuer] }, url);
      assert.equal(decodeJwt((await trusting.clientCredentials()).token).iss, as.issuer);
      assert.ok(upstream.requests.every((r) => !r.includes('token')) && hostile.requests.length === 0);
    } finally {
      await upstream.close();
      await hostile.close();
    }
  });

  it('with issuer, the token endpoint comes from that server\'s own metadata: the upstream is not asked', async () => {
    const upstream = await serve((_req, _body, res) => json(res, 401, {}, { 'www-authenticate': 'Bearer resource_metadata="http://127.0.0.1:1/elsewhere"' }));
    try {
      const url = `${upstream.url}/mcp`;
      const { token } = await client({ tokenUrl: undefined, issuer: as.issuer, resource: url }, url).clientCredentials();
      assert.equal(decodeJwt(token).iss, as.issuer);
      assert.deepEqual(upstream.requests, []);
    } finally {
      await upstream.close();
    }
  });

  it('refused client credentials: an OAuth error naming the upstream and code, not worth retrying', async () => {
    const err = failureOf(await client({ clientSecret: 'bad-secret-x1' }).clientCredentials().catch((e: unknown) => e));
    assert.equal(err.upstream, 'docs');
    assert.equal(err.step, 'token');
    assert.equal(err.reason, 'oauth_error');
    assert.equal(err.oauthError, 'invalid_client');
    assert.equal(err.status, 401);
    assert.equal(err.retryable, false);
    assert.match(err.message, /upstream 'docs'.*invalid_client/);
    assert.ok(!err.message.includes('bad-secret-x1'), 'never the secret');
    assert.equal(err.toGatewayError().code, 'upstream_unavailable');
  });

  it('authorization server down: unreachable, worth retrying (503 + Retry-After at the edge)', async () => {
    const gone = await serve(() => {});
    await gone.close();
    const err = failureOf(await client({ tokenUrl: `${gone.url}/token` }).clientCredentials().catch((e: unknown) => e));
    assert.equal(err.reason, 'unreachable');
    assert.equal(err.retryable, true);
    const edge = err.toGatewayError();
    assert.equal(edge.code, 'auth_unavailable');
    assert.equal(edge.httpStatus, 503);
    assert.equal((edge.data as { retryAfterMs: number }).retryAfterMs, 5_000);
  });

  it('a slow server fails the request at the deadline with a timeout', async () => {
    const slow = await serve(() => {}); // never answers
    try {
      const err = failureOf(await client({ tokenUrl: `${slow.url}/token` }, undefined, 200).clientCredentials().catch((e: unknown) => e));
      assert.equal(err.reason, 'timeout');
      assert.equal(err.retryable, true);
      assert.match(err.message, /no answer within 200 ms/);
    } finally {
      await slow.close();
    }
  });

  it('503 with Retry-After: an HTTP status, worth retrying when the server says', async () => {
    const busy = await serve((_req, _body, res) => json(res, 503, { error: 'temporarily_unavailable' }, { 'retry-after': '7' }));
    try {
      const err = failureOf(await client({ tokenUrl: `${busy.url}/token` }).clientCredentials().catch((e: unknown) => e));
      assert.equal(err.status, 503);
      assert.equal(err.retryable, true);
      assert.equal(err.retryAfterMs, 7_000);
    } finally {
      await busy.close();
    }
  });

  it('RFC 8693 exchange: the subject token as an access token, resource, audience and scope, client authenticated', async () => {
    let form = new URLSearchParams();
    let authorization: string | undefined;
    const exchange = await serve((req, body, res) => {
      form = new URLSearchParams(body);
      authorization = req.headers.authorization;
      json(res, 200, { access_token: 'exchanged-token', token_type: 'Bearer', expires_in: 120, issued_token_type: ACCESS_TOKEN_TYPE });
    });
    try {
      const obtained = await client({ tokenUrl: `${exchange.url}/token`, scope: 'mcp:read' }).exchange('caller-token', 'docs-api');
      assert.deepEqual(obtained, { token: 'exchanged-token', expiresInSeconds: 120 });
      assert.equal(form.get('grant_type'), TOKEN_EXCHANGE_GRANT);
      assert.equal(form.get('subject_token'), 'caller-token');
      assert.equal(form.get('subject_token_type'), ACCESS_TOKEN_TYPE);
      assert.equal(form.get('resource'), 'http://127.0.0.1:1/mcp');
      assert.equal(form.get('audience'), 'docs-api');
      assert.equal(form.get('scope'), 'mcp:read');
      // RFC 6749 §2.3.1: id and secret are form-urlencoded before base64 ("-" is %2D to oauth4webapi).
      assert.equal(authorization, `Basic ${Buffer.from('gw:gw%2Dsecret').toString('base64')}`);
    } finally {
      await exchange.close();
    }
  });

  it('reads resource_metadata from a Bearer challenge', () => {
    assert.equal(resourceMetadataOf('Bearer realm="x", resource_metadata="https://a.example/.well-known/oauth-protected-resource"'), 'https://a.example/.well-known/oauth-protected-resource');
    assert.equal(resourceMetadataOf('Bearer resource_metadata=https://a.example/m'), 'https://a.example/m');
    assert.equal(resourceMetadataOf('Bearer error="invalid_token"'), undefined);
    assert.equal(resourceMetadataOf(undefined), undefined);
  });
});
