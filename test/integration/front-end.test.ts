// The HTTP rules of the 2025-11-25 front end, exercised with raw requests (undici): sessions, headers,
// security checks, error shapes, SSE streams and resumption.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { request } from 'undici';
import { suiteScope, testScope, type TestGateway } from '../helpers/harness.js';

const JSON_AND_SSE = 'application/json, text/event-stream';

interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json(): Record<string, unknown>;
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<RawResponse> {
  const response = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: JSON_AND_SSE, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.body.text();
  return { status: response.statusCode, headers: response.headers, text, json: () => JSON.parse(text) as Record<string, unknown> };
}

function sseMessages(text: string): Record<string, unknown>[] {
  return text
    .split('\n\n')
    .map((event) => event.split('\n').filter((line) => line.startsWith('data: ')).map((line) => line.slice(6)).join(''))
    .filter((data) => data.trim() !== '')
    .map((data) => JSON.parse(data) as Record<string, unknown>);
}

/** The JSON-RPC messages of a POST answer, whether it came as JSON or as an SSE stream. */
function messagesOf(response: RawResponse): Record<string, unknown>[] {
  if (String(response.headers['content-type']).includes('text/event-stream')) return sseMessages(response.text);
  const body = JSON.parse(response.text) as Record<string, unknown> | Record<string, unknown>[];
  return Array.isArray(body) ? body : [body];
}

function initialize(version = '2025-11-25'): Record<string, unknown> {
  return { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
}

describe('2025-11-25 front end', () => {
  const scope = suiteScope();
  let gateway: TestGateway;
  let url: string;

  before(async () => {
    const upstream = await scope.upstream('streamable-http');
    gateway = await scope.gateway({ upstreams: { fixture: upstream.config }, listen: { host: '127.0.0.1', port: 0, path: '/mcp', maxBodyBytes: 65536 } });
    url = gateway.url;
  });

  async function openSession(version = '2025-11-25', at = url): Promise<string> {
    const response = await post(at, initialize(version));
    assert.equal(response.status, 200);
    const id = response.headers['mcp-session-id'];
    assert.equal(typeof id, 'string');
    await post(at, { jsonrpc: '2.0', method: 'notifications/initialized' }, { 'mcp-session-id': id as string });
    return id as string;
  }

  test('version negotiation: a supported version is echoed, an unknown one answered with the latest', async () => {
    for (const version of ['2025-11-25', '2025-06-18', '2025-03-26']) {
      const result = (await post(url, initialize(version))).json().result as Record<string, unknown>;
      assert.equal(result.protocolVersion, version);
    }
    const result = (await post(url, initialize('1999-01-01'))).json().result as Record<string, unknown>;
    assert.equal(result.protocolVersion, '2025-11-25');
  });

  test('sessions: missing id is 400, unknown id is 404, DELETE ends one', async () => {
    const ping = { jsonrpc: '2.0', id: 2, method: 'ping' };
    assert.equal((await post(url, ping)).status, 400);
    assert.equal((await post(url, ping, { 'mcp-session-id': 'no-such-session' })).status, 404);
    const session = await openSession();
    const pong = await post(url, ping, { 'mcp-session-id': session });
    assert.equal(pong.status, 200);
    assert.deepEqual(pong.json(), { jsonrpc: '2.0', id: 2, result: {} });
    const deleted = await request(url, { method: 'DELETE', headers: { 'mcp-session-id': session } });
    await deleted.body.dump();
    assert.equal(deleted.statusCode, 200);
    assert.equal((await post(url, ping, { 'mcp-session-id': session })).status, 404);
  });

  test('notifications and responses get 202 with no body', async () => {
    const session = await openSession();
    const response = await post(url, { jsonrpc: '2.0', method: 'notifications/roots/list_changed' }, { 'mcp-session-id': session });
    assert.equal(response.status, 202);
    assert.equal(response.text, '');
  });

  test('MCP-Protocol-Version: unsupported is 400; absent is accepted', async () => {
    const session = await openSession();
    const ping = { jsonrpc: '2.0', id: 3, method: 'ping' };
    const bad = await post(url, ping, { 'mcp-session-id': session, 'mcp-protocol-version': '2099-01-01' });
    assert.equal(bad.status, 400);
    assert.match(String((bad.json().error as Record<string, unknown>).message), /Unsupported protocol version/);
    assert.equal((await post(url, ping, { 'mcp-session-id': session })).status, 200);
  });

  test('Origin and Host are checked when bound to loopback', async () => {
    const evilOrigin = await post(url, initialize(), { origin: 'http://evil.example' });
    assert.equal(evilOrigin.status, 403);
    const localOrigin = await post(url, initialize(), { origin: 'http://localhost:3000' });
    assert.equal(localOrigin.status, 200);
    const evilHost = await post(url, initialize(), { host: 'evil.example' });
    assert.equal(evilHost.status, 403);
  });

  test('bad input gets JSON-RPC errors: parse error, invalid request, unknown method, bad cursor, too large', async () => {
    const parse = await post(url, '{"jsonrpc": "2.0", "id": 1, "method": ');
    assert.equal(parse.status, 400);
    assert.equal((parse.json().error as Record<string, unknown>).code, -32700);

    const session = await openSession();
    const invalid = await post(url, { jsonrpc: '1.0', id: 4, method: 'ping' }, { 'mcp-session-id': session });
    assert.equal((invalid.json().error as Record<string, unknown>).code, -32600);

    const unknown = await post(url, { jsonrpc: '2.0', id: 5, method: 'no/such/method' }, { 'mcp-session-id': session });
    assert.equal((unknown.json().error as Record<string, unknown>).code, -32601);

    const cursor = await post(url, { jsonrpc: '2.0', id: 6, method: 'tools/list', params: { cursor: 'garbage!' } }, { 'mcp-session-id': session });
    assert.equal((cursor.json().error as Record<string, unknown>).code, -32602);

    const unknownTool = await post(url, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'nope', arguments: {} } }, { 'mcp-session-id': session });
    const messages = messagesOf(unknownTool);
    assert.ok(messages.some((m) => m.id === 7 && ('error' in m || (m.result as Record<string, unknown>)?.isError === true)));

    const big = await post(url, { jsonrpc: '2.0', id: 8, method: 'ping', params: { pad: 'x'.repeat(70_000) } }, { 'mcp-session-id': session });
    assert.equal(big.status, 413);
    assert.equal((big.json().error as Record<string, unknown>).code, -32600);

    const wrongType = await post(url, initialize(), { 'content-type': 'text/plain' });
    assert.equal(wrongType.status, 415);
  });

  test('batches of requests get a batch of responses', async () => {
    const session = await openSession('2025-03-26');
    const response = await post(
      url,
      [
        { jsonrpc: '2.0', id: 'a', method: 'ping' },
        { jsonrpc: '2.0', id: 'b', method: 'tools/list' },
      ],
      { 'mcp-session-id': session },
    );
    const body = JSON.parse(response.text) as { id: string }[];
    assert.deepEqual(body.map((r) => r.id).sort(), ['a', 'b']);
  });

  test('a quick call is answered as JSON; one that streams or outlasts the window becomes SSE with a priming event', async (t) => {
    // A window of 1 s (not the default 50 ms): "quick" must hold on a busy machine too, where the first call also
    // opens the session's upstream connection; the call that outlasts it takes 1.5 s.
    const own = testScope(t);
    const fixture = await own.upstream('streamable-http');
    const windowed = (await own.gateway({ upstreams: { fixture: fixture.config }, sse: { jsonWindowMs: 1_000 } })).url;
    const session = await openSession('2025-11-25', windowed);
    const quick = await post(windowed, { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'test_simple_text', arguments: {} } }, { 'mcp-session-id': session });
    assert.match(String(quick.headers['content-type']), /application\/json/);
    assert.equal(quick.json().id, 9);

    const streamed = await post(
      windowed,
      { jsonrpc: '2.0', id: 10, method: 'tools/call', params: { name: 'slow', arguments: { ms: 30, steps: 2 }, _meta: { progressToken: 'p' } } },
      { 'mcp-session-id': session },
    );
    assert.match(String(streamed.headers['content-type']), /text\/event-stream/);
    assert.match(streamed.text, /^id: \S+\nretry: \d+\ndata: \n\n/);
    const messages = sseMessages(streamed.text);
    assert.deepEqual(messages.filter((m) => m.method === 'notifications/progress').map((m) => (m.params as { progressToken: string }).progressToken), ['p', 'p']);
    assert.equal(messages.at(-1)?.id, 10);

    const long = await post(windowed, { jsonrpc: '2.0', id: 11, method: 'tools/call', params: { name: 'slow', arguments: { ms: 1_500 } } }, { 'mcp-session-id': session });
    assert.match(String(long.headers['content-type']), /text\/event-stream/);
    assert.match(long.text, /^id: \S+\nretry: \d+\ndata: \n\n/);
    assert.equal(sseMessages(long.text).at(-1)?.id, 11);
  });

  test('a second GET stream is a conflict; Last-Event-ID resumes a dropped POST stream', async () => {
    const session = await openSession();
    const first = await request(url, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': session } });
    assert.equal(first.statusCode, 200);
    const second = await request(url, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': session } });
    assert.equal(second.statusCode, 409);
    await second.body.dump();
    first.body.destroy();

    // Start a slow call, read only the priming event, drop the connection, then resume.
    const abort = new AbortController();
    const call = await request(url, {
      method: 'POST',
      signal: abort.signal,
      headers: { 'content-type': 'application/json', accept: JSON_AND_SSE, 'mcp-session-id': session },
      body: JSON.stringify({ jsonrpc: '2.0', id: 10, method: 'tools/call', params: { name: 'slow', arguments: { ms: 400 } } }),
    });
    let received = '';
    for await (const chunk of call.body) {
      received += Buffer.from(chunk as Uint8Array).toString();
      if (received.includes('\n\n')) break;
    }
    abort.abort();
    const lastEventId = /^id: (\S+)/.exec(received)?.[1];
    assert.ok(lastEventId, 'priming event id');
    const resumed = await request(url, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': session, 'last-event-id': lastEventId } });
    assert.equal(resumed.statusCode, 200);
    const text = await resumed.body.text();
    const messages = sseMessages(text);
    assert.equal(messages.at(-1)?.id, 10);
    assert.ok('result' in (messages.at(-1) ?? {}));
  });

  test('health and readiness', async () => {
    const health = await request(`${gateway.origin}/healthz`);
    assert.equal(health.statusCode, 200);
    await health.body.dump();
    const ready = await request(`${gateway.origin}/readyz`);
    assert.equal(ready.statusCode, 200);
    const body = (await ready.body.json()) as { ready: boolean; store: { ok: boolean }; upstreams: { name: string; state: string }[] };
    assert.equal(body.ready, true);
    assert.equal(body.store.ok, true);
    assert.deepEqual(body.upstreams.map((u) => [u.name, u.state]), [['fixture', 'ready']]);
  });
});
