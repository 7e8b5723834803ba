// The upstream-identity fixtures (issue 33, item 6) prove themselves together, over real loopback HTTP: the
// authorization server issues client-credentials and RFC 8693 exchanged tokens, the protected MCP server verifies
// them (signature, audience, expiry) and answers who called, a client without a token discovers the authorization
// server from the 401 (RFC 9728 → RFC 8414), and the authorization server's down and slow modes behave as documented.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import * as oauth from 'oauth4webapi';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE_GRANT, startAuthServer, type AuthServer } from '../fixtures/auth-server.js';
import { startProtectedServer, type ProtectedServer, type Whoami } from '../fixtures/protected-server.js';
import { bounded } from '../helpers/waits.js';

const GATEWAY_CLIENT = { id: 'gateway', secret: 'gateway-secret' };
const GATEWAY_RESOURCE = 'http://127.0.0.1:1/mcp'; // the audience of callers' tokens: never contacted

type Json = Record<string, unknown>;

/** POST /token with client_secret_basic; answers status and JSON body. */
async function tokenRequest(as: AuthServer, params: Record<string, string>): Promise<{ status: number; body: Json }> {
  const basic = Buffer.from(`${GATEWAY_CLIENT.id}:${GATEWAY_CLIENT.secret}`).toString('base64');
  const res = await fetch(`${as.issuer}/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(params),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

async function exchange(as: AuthServer, subjectToken: string, resource: string): Promise<{ status: number; body: Json }> {
  return tokenRequest(as, { grant_type: TOKEN_EXCHANGE_GRANT, subject_token: subjectToken, subject_token_type: ACCESS_TOKEN_TYPE, resource });
}

/** An SDK client on the protected server presenting `token` (and an x-* header whoami echoes). */
async function connect(url: string, token: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'identity-fixtures-test', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { authorization: `Bearer ${token}`, 'x-test-case': 'identity-fixtures' } },
  });
  await client.connect(transport);
  return { client, transport };
}

async function whoami(client: Client, tool = 'whoami', args: Json = {}, signal?: AbortSignal): Promise<Whoami> {
  const result = await client.callTool({ name: tool, arguments: args }, CallToolResultSchema, signal ? { signal } : undefined);
  assert.ok(!result.isError, JSON.stringify(result));
  return result.structuredContent as unknown as Whoami;
}

/** A raw JSON-RPC POST on /mcp. */
function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
}

const INITIALIZE = {
  jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

describe('upstream-identity fixtures', () => {
  let as: AuthServer;
  let upstream: ProtectedServer;
  const clients: Client[] = [];

  before(async () => {
    as = await startAuthServer({ clients: { [GATEWAY_CLIENT.id]: { secret: GATEWAY_CLIENT.secret } } });
    upstream = await startProtectedServer({ issuers: [{ issuer: as.issuer, jwksUri: as.jwksUri }] });
  });
  after(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    await upstream?.close();
    await as?.close();
  });

  test('a client-credentials token for the protected resource reaches whoami as the client', async () => {
    const { status, body } = await tokenRequest(as, { grant_type: 'client_credentials', resource: upstream.url });
    assert.equal(status, 200, JSON.stringify(body));
    const { client } = await connect(upstream.url, body.access_token as string);
    clients.push(client);
    const me = await whoami(client);
    assert.equal(me.sub, GATEWAY_CLIENT.id);
    assert.equal(me.aud, upstream.url);
    assert.equal(me.iss, as.issuer);
    assert.equal(me.client_id, GATEWAY_CLIENT.id);
    assert.equal(me.headers['x-test-case'], 'identity-fixtures');
    assert.equal(as.lastTokenRequest?.clientAuth, 'basic');
    assert.deepEqual(as.lastTokenRequest?.resource, [upstream.url]);

    as.setExpiresIn(7); // a lifetime set mid-test applies to the next token, in expires_in and exp alike
    try {
      const short = await tokenRequest(as, { grant_type: 'client_credentials', resource: upstream.url });
      const claims = decodeJwt(short.body.access_token as string);
      assert.deepEqual([short.body.expires_in, claims.exp! - claims.iat!], [7, 7]);
    } finally {
      as.setExpiresIn(300);
    }
  });

  test('RFC 8693: a minted alice token is exchanged for the upstream and whoami answers alice, acted for by the gateway', async () => {
    as.resetCounts();
    const alice = await as.mint({ sub: 'alice', aud: GATEWAY_RESOURCE, scope: 'read', extra: { email: 'alice@example.test', groups: ['eng'] } });
    const next = as.nextTokenRequest();
    const { status, body } = await exchange(as, alice, upstream.url);
    assert.equal(status, 200, JSON.stringify(body));
    assert.equal(body.issued_token_type, ACCESS_TOKEN_TYPE);
    assert.equal(body.token_type, 'Bearer');
    assert.equal(body.expires_in, as.expiresIn);
    const seen = await next;
    assert.equal(seen.subjectSub, 'alice');
    assert.equal(seen.status, 200);
    assert.deepEqual(as.tokenCounts(), { total: 1, byGrant: { [TOKEN_EXCHANGE_GRANT]: 1 }, byClient: { [GATEWAY_CLIENT.id]: 1 } });

    const { client, transport } = await connect(upstream.url, body.access_token as string);
    clients.push(client);
    const me = await whoami(client);
    assert.equal(me.sub, 'alice');
    assert.equal(me.aud, upstream.url);
    assert.deepEqual(me.act, { sub: GATEWAY_CLIENT.id });
    assert.equal(me.email, 'alice@example.test');
    assert.deepEqual(me.groups, ['eng']);
    assert.equal(me.scope, 'read');
    assert.equal(upstream.sessionsBySub().alice, 1);

    // Alice's session is hers: another subject's valid token on it is refused.
    const bob = await as.mint({ sub: 'bob', aud: upstream.url });
    const foreign = await post(upstream.url, { jsonrpc: '2.0', id: 9, method: 'tools/list' }, {
      authorization: `Bearer ${bob}`, 'mcp-session-id': transport.sessionId!, 'mcp-protocol-version': '2025-11-25',
    });
    assert.equal(foreign.status, 403);
    assert.match(((await foreign.json()) as Json).error_description as string, /another subject/);
  });

  test('exchange refuses subject tokens this server did not sign or that expired, and a missing target', async () => {
    const forged = await as.mint({ sub: 'alice', signWith: 'forged' });
    const expired = await as.mint({ sub: 'alice', expiresInSeconds: -60 });
    for (const [what, token] of [['forged', forged], ['expired', expired], ['unsigned', as.unsigned({ sub: 'alice' })]] as const) {
      const { status, body } = await exchange(as, token, upstream.url);
      assert.equal(status, 400, what);
      assert.equal(body.error, 'invalid_grant', what);
    }
    const noTarget = await tokenRequest(as, { grant_type: TOKEN_EXCHANGE_GRANT, subject_token: await as.mint(), subject_token_type: ACCESS_TOKEN_TYPE });
    assert.equal(noTarget.body.error, 'invalid_target');
  });

  test('the protected server refuses a wrong audience, an expired token, an untrusted issuer until trusted, and rejectNext', async () => {
    const init = (token: string) => post(upstream.url, INITIALIZE, { authorization: `Bearer ${token}` });
    const before = upstream.counts().unauthorized;
    for (const token of [await as.mint({ aud: GATEWAY_RESOURCE }), await as.mint({ aud: upstream.url, expiresInSeconds: -60 })]) {
      const res = await init(token);
      assert.equal(res.status, 401);
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer resource_metadata="[^"]+", error="invalid_token"$/);
    }
    const other = await startAuthServer();
    try {
      const stranger = await other.mint({ sub: 'carol', aud: upstream.url });
      assert.equal((await init(stranger)).status, 401);
      upstream.trust(other.issuer, other.jwksUri);
      assert.equal((await init(stranger)).status, 200);
    } finally {
      await other.close();
    }
    upstream.rejectNext(1);
    const good = await as.mint({ sub: 'dave', aud: upstream.url });
    assert.equal((await init(good)).status, 401);
    assert.equal((await init(good)).status, 200);
    assert.equal(upstream.counts().unauthorized - before, 4);
  });

  test('admin-only without scope admin is an HTTP 403 insufficient_scope; with it, the tool answers', async () => {
    const plain = await as.mint({ sub: 'erin', aud: upstream.url, scope: 'read' });
    const call = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'admin-only', arguments: {} } };
    const refused = await post(upstream.url, call, { authorization: `Bearer ${plain}` });
    assert.equal(refused.status, 403);
    assert.match(refused.headers.get('www-authenticate') ?? '', /^Bearer error="insufficient_scope", scope="admin"/);
    const { client } = await connect(upstream.url, await as.mint({ sub: 'erin', aud: upstream.url, scope: 'read admin' }));
    clients.push(client);
    assert.equal((await whoami(client, 'admin-only')).sub, 'erin');
  });

  test('slow waits for releaseSlow, a cancelled slow call is seen as cancelled, ask elicits from the client', async () => {
    const { client } = await connect(upstream.url, await as.mint({ sub: 'frank', aud: upstream.url }));
    clients.push(client);
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { answer: 'blue' } }));

    const started = upstream.nextEvent((e) => e.tool === 'slow' && e.type === 'started');
    const answer = whoami(client, 'slow');
    assert.equal((await bounded(started, 'slow started')).sub, 'frank');
    upstream.releaseSlow();
    assert.equal((await bounded(answer, 'slow answer')).sub, 'frank');

    const abort = new AbortController();
    const startedAgain = upstream.nextEvent((e) => e.tool === 'slow' && e.type === 'started');
    const cancelled = upstream.nextEvent((e) => e.tool === 'slow' && e.type === 'cancelled');
    const doomed = whoami(client, 'slow', {}, abort.signal);
    await bounded(startedAgain, 'second slow started');
    abort.abort();
    await assert.rejects(doomed);
    assert.equal((await bounded(cancelled, 'slow cancelled')).sub, 'frank');

    const asked = await client.callTool({ name: 'ask', arguments: {} });
    assert.deepEqual(asked.structuredContent, { sub: 'frank', action: 'accept', answer: 'blue' });
  });

  test('no token: 401 with resource_metadata, which leads to the authorization server (RFC 9728 → RFC 8414)', async () => {
    const res = await post(upstream.url, INITIALIZE);
    assert.equal(res.status, 401);
    const challenge = res.headers.get('www-authenticate') ?? '';
    assert.doesNotMatch(challenge, /error=/);
    const metadataUrl = /resource_metadata="([^"]+)"/.exec(challenge)?.[1];
    assert.equal(metadataUrl, upstream.resourceMetadataUrl);
    const prm = (await (await fetch(metadataUrl!)).json()) as Json;
    assert.equal(prm.resource, upstream.url);
    const [asIssuer] = prm.authorization_servers as string[];
    assert.equal(asIssuer, as.issuer);
    const asMeta = (await (await fetch(`${asIssuer}/.well-known/oauth-authorization-server`)).json()) as Json;
    assert.equal(asMeta.issuer, as.issuer);
    assert.equal(asMeta.token_endpoint, `${as.issuer}/token`);
    assert.ok((asMeta.grant_types_supported as string[]).includes(TOKEN_EXCHANGE_GRANT));
  });

  test('the gateway\'s OAuth client library (oauth4webapi) discovers, gets and exchanges tokens the protected server accepts', async () => {
    const insecure = { [oauth.allowInsecureRequests]: true }; // loopback http
    const resource = await oauth.processResourceDiscoveryResponse(new URL(upstream.url), await oauth.resourceDiscoveryRequest(new URL(upstream.url), insecure));
    const issuer = new URL(resource.authorization_servers![0]!);
    const server = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { ...insecure, algorithm: 'oauth2' }));
    const client: oauth.Client = { client_id: GATEWAY_CLIENT.id };

    const granted = await oauth.processClientCredentialsResponse(server, client,
      await oauth.clientCredentialsGrantRequest(server, client, oauth.ClientSecretPost(GATEWAY_CLIENT.secret), { resource: upstream.url }, insecure));
    assert.equal(as.lastTokenRequest?.clientAuth, 'post');
    const subject = await as.mint({ sub: 'gina', aud: GATEWAY_RESOURCE });
    const exchanged = await oauth.processGenericTokenEndpointResponse(server, client,
      await oauth.genericTokenEndpointRequest(server, client, oauth.ClientSecretBasic(GATEWAY_CLIENT.secret), TOKEN_EXCHANGE_GRANT,
        { subject_token: subject, subject_token_type: ACCESS_TOKEN_TYPE, resource: upstream.url }, insecure));
    assert.equal(exchanged.issued_token_type, ACCESS_TOKEN_TYPE);
    for (const [token, sub] of [[granted.access_token, GATEWAY_CLIENT.id], [exchanged.access_token, 'gina']] as const) {
      const { client: mcp } = await connect(upstream.url, token);
      clients.push(mcp);
      assert.equal((await whoami(mcp)).sub, sub);
    }
  });

  test('down refuses connections; up again serves on the same port', async () => {
    const port = as.port;
    await as.setMode('down');
    const attempt = async (): Promise<string | undefined> => {
      try {
        await fetch(`${as.issuer}/jwks`);
        return 'served';
      } catch (err) {
        return (err as { cause?: { code?: string } }).cause?.code;
      }
    };
    // A kept-alive connection from the tests above may first be seen closed; a new one is refused.
    assert.ok(['ECONNREFUSED', 'UND_ERR_SOCKET'].includes((await attempt()) ?? ''));
    assert.equal(await attempt(), 'ECONNREFUSED');
    await as.setMode('up');
    assert.equal(as.port, port);
    assert.equal((await tokenRequest(as, { grant_type: 'client_credentials', resource: upstream.url })).status, 200);
  });

  test('slow holds token requests until the mode changes (or holdMs); refuse and unavailable answer as documented', async () => {
    await as.setMode('slow');
    let settled = false;
    const arrived = as.nextTokenRequest();
    const held = tokenRequest(as, { grant_type: 'client_credentials', resource: upstream.url }).finally(() => { settled = true; });
    assert.equal((await bounded(arrived, 'held token request')).mode, 'slow');
    assert.equal(as.heldTokenRequests, 1);
    assert.equal((await fetch(as.jwksUri)).status, 200); // the rest of the server answers meanwhile
    assert.equal(settled, false);
    await as.setMode('up');
    assert.equal((await bounded(held, 'released token request')).status, 200);

    await as.setMode('slow', { holdMs: 20 });
    assert.equal((await bounded(tokenRequest(as, { grant_type: 'client_credentials' }), 'holdMs release')).status, 200);

    await as.setMode('refuse');
    const refused = await tokenRequest(as, { grant_type: 'client_credentials' });
    assert.deepEqual([refused.status, refused.body.error], [400, 'invalid_client']);
    await as.setMode('unavailable');
    const unavailable = await tokenRequest(as, { grant_type: 'client_credentials' });
    assert.equal(unavailable.status, 503);
    await as.setMode('up');
  });
});
