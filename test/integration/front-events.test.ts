// What the HTTP front announces through the event seam (src/events.ts): SSE streams of both revisions opened and
// closed, credentials refused (access.denied), and the refusals it decides itself (rate.limited: open streams,
// bytes in flight, connections). In-process gateways with real upstreams; each test subscribes to its gateway's
// events and waits for the events themselves, bounded only against hangs.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { describe, test } from 'node:test';
import type { GatewayEventMap, GatewayEventName, GatewayEvents } from '../../src/events.js';
import { abusiveFixtureCommand } from '../fixtures/spawn.js';
import { testScope, type Json } from '../helpers/harness.js';
import { sendRev2026, rev2026Request, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';

const REV2025 = '2025-11-25';
/** Only against hangs: every wait below ends with the event it waits for. */
const HANG_MS = 30_000;

type Seen = { [K in GatewayEventName]: { name: K; payload: GatewayEventMap[K] } }[GatewayEventName];

/** Every event of the given names, in order, and a way to wait until what was seen satisfies a condition. */
class EventLog {
  readonly seen: Seen[] = [];
  private readonly waiters: { check: () => boolean; resolve: () => void }[] = [];

  constructor(events: GatewayEvents, names: GatewayEventName[]) {
    for (const name of names) {
      events.on(name, (payload) => {
        this.seen.push({ name, payload } as Seen);
        for (const waiter of this.waiters.filter((w) => w.check())) {
          this.waiters.splice(this.waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      });
    }
  }

  of<K extends GatewayEventName>(name: K): GatewayEventMap[K][] {
    return this.seen.filter((event) => event.name === name).map((event) => event.payload as GatewayEventMap[K]);
  }

  /** Resolves once `check` holds (at once if it does already). */
  until(check: () => boolean, what: string): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`not seen: ${what}; seen: ${JSON.stringify(this.seen)}`)), HANG_MS);
      this.waiters.push({ check, resolve: () => (clearTimeout(timer), resolve()) });
    });
  }

  count(name: 'stream.opened' | 'stream.closed', kind: string): number {
    return this.of(name).filter((event) => event.kind === kind).length;
  }
}

function rev2025Headers(session?: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': REV2025,
    ...(session === undefined ? {} : { 'mcp-session-id': session }),
  };
}

/** A 2025-11-25 session, initialized. */
async function openSession(url: string, headers: Record<string, string> = {}): Promise<string> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { ...rev2025Headers(), ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: REV2025, capabilities: {}, clientInfo: { name: 'front-events', version: '1' } } }),
  });
  await response.text();
  const session = response.headers.get('mcp-session-id');
  assert.ok(session !== null, `initialize answered HTTP ${response.status}`);
  const initialized = await fetch(url, { method: 'POST', headers: { ...rev2025Headers(session), ...headers }, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  await initialized.text();
  return session;
}

/** A session's GET stream; resolves once its headers arrived. */
function getStream(url: string, session: string, signal: AbortSignal): Promise<Response> {
  return fetch(url, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': session, 'mcp-protocol-version': REV2025 }, signal });
}

describe('the front announces what it does', { timeout: 120_000 }, () => {
  test('every SSE stream of either revision is announced opened, then closed; a JSON answer is no stream', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.gateway({ upstreams: { fx: upstream.config } });
    const log = new EventLog(gateway.events, ['stream.opened', 'stream.closed']);

    // 2025-11-25: a GET stream, held until the client lets go of it.
    const session = await openSession(gateway.url);
    const abortGet = new AbortController();
    const get = await getStream(gateway.url, session, abortGet.signal);
    assert.equal(get.status, 200);
    await log.until(() => log.count('stream.opened', 'get') === 1, 'get opened');
    abortGet.abort();
    await log.until(() => log.count('stream.closed', 'get') === 1, 'get closed');

    // 2025-11-25: a POST whose call reports progress becomes a stream.
    const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'test_tool_with_progress', arguments: {}, _meta: { progressToken: 'p' } } };
    const streamed = await fetch(gateway.url, { method: 'POST', headers: rev2025Headers(session), body: JSON.stringify(call) });
    assert.match(String(streamed.headers.get('content-type')), /text\/event-stream/);
    await streamed.text();
    await log.until(() => log.count('stream.closed', 'post') === 1, '2025-11-25 post closed');

    // 2026-07-28: a call with progress streams; one without is plain JSON, and no stream.
    const progress = await sendRev2026(gateway.url, 'tools/call', { name: 'test_tool_with_progress', arguments: {} }, { meta: { progressToken: 'm' } });
    assert.equal(progress.sse, true);
    await log.until(() => log.count('stream.closed', 'post') === 2, '2026-07-28 post closed');
    const plain = await sendRev2026(gateway.url, 'tools/list');
    assert.equal(plain.sse, false);

    // 2026-07-28: a listen stream, open until the client goes.
    const { body, headers } = rev2026Request('subscriptions/listen', { notifications: { toolsListChanged: true } });
    const abortListen = new AbortController();
    const listen = await fetch(gateway.url, { method: 'POST', headers, body: JSON.stringify(body), signal: abortListen.signal });
    assert.equal(listen.status, 200);
    await log.until(() => log.count('stream.opened', 'listen') === 1, 'listen opened');
    abortListen.abort();
    await log.until(() => log.count('stream.closed', 'listen') === 1, 'listen closed');

    assert.deepEqual(
      log.seen.map((event) => `${event.name} ${(event.payload as { kind: string }).kind}`),
      ['stream.opened get', 'stream.closed get', 'stream.opened post', 'stream.closed post', 'stream.opened post', 'stream.closed post', 'stream.opened listen', 'stream.closed listen'],
    );
  });

  test('refused credentials are access.denied (kind credentials, with the status and reason); a valid key is not', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const key = 'alice-key-0123456789abcdef';
    const gateway = await scope.gateway({
      upstreams: { fx: upstream.config },
      auth: { resource: 'http://127.0.0.1/mcp', apiKeys: [{ principal: 'alice', key }] },
    });
    const log = new EventLog(gateway.events, ['access.denied']);
    await openSession(gateway.url, { authorization: `Bearer ${key}` });
    assert.equal(log.seen.length, 0);

    const wrong = await fetch(gateway.url, { method: 'POST', headers: { ...rev2025Headers(), authorization: 'Bearer wrong-key-0123456789' }, body: '{}' });
    assert.equal(wrong.status, 401);
    await wrong.text();
    const none = await fetch(gateway.url, { method: 'POST', headers: rev2025Headers(), body: '{}' });
    assert.equal(none.status, 401);
    await none.text();
    await log.until(() => log.seen.length === 2, 'two refusals');
    const [first, second] = log.of('access.denied');
    assert.equal(first?.kind, 'credentials');
    assert.equal(first?.status, 401);
    assert.equal(first?.principal, undefined, 'no principal: the credential named none');
    assert.ok(typeof first?.reason === 'string' && first.reason.length > 0);
    assert.doesNotMatch(JSON.stringify(log.seen), /wrong-key/, 'the token is never part of the event');
    assert.match(String(second?.reason), /Authentication required/);
  });

  test('past sessions.maxStreamsPerPrincipal: rate.limited maxStreamsPerPrincipal, with when to retry', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.gateway({ upstreams: { fx: upstream.config }, sessions: { maxStreamsPerPrincipal: 1 } });
    const log = new EventLog(gateway.events, ['rate.limited']);
    const abort = new AbortController();
    t.after(() => abort.abort());
    const held = await getStream(gateway.url, await openSession(gateway.url), abort.signal);
    assert.equal(held.status, 200);
    const refused = await getStream(gateway.url, await openSession(gateway.url), abort.signal);
    assert.equal(refused.status, 429);
    await refused.text();
    await log.until(() => log.seen.length === 1, 'the refusal');
    const [event] = log.of('rate.limited');
    assert.equal(event?.limit, 'maxStreamsPerPrincipal');
    assert.equal(typeof event?.principal, 'string');
    assert.equal(event?.retryAfterMs, 5000);
  });

  test('past listen.maxInflightBytesPerPrincipal: rate.limited names the budget', async (t) => {
    const scope = testScope(t);
    const { command, args, cwd } = abusiveFixtureCommand();
    const KiB = 1024;
    const gateway = await scope.gateway({
      upstreams: { abusive: { command, args, cwd } },
      listen: { host: '127.0.0.1', port: 0, path: '/mcp', maxBodyBytes: 100 * KiB, maxInflightBytesPerPrincipal: 200 * KiB },
      tasks: { defaults: { taskAfterMs: 0 } },
    });
    const log = new EventLog(gateway.events, ['rate.limited']);
    // A call that is never answered holds its ~90 KiB of arguments as a task; a second does not fit beside it
    // (bodies past 64 KiB leave the budget's last eighth free: 175 KiB of room).
    const blob = 'x'.repeat(90 * KiB);
    const call = (): ReturnType<typeof sendRev2026> => sendRev2026(gateway.url, 'tools/call', { name: 'never_answers', arguments: { blob } }, { capabilities: TASKS_CAPABILITIES });
    const first = await call();
    assert.equal((first.result as Json | undefined)?.resultType, 'task', JSON.stringify(first.messages));
    const second = await call();
    assert.equal(second.status, 503, JSON.stringify(second.messages));
    await log.until(() => log.seen.length === 1, 'the refusal');
    const [event] = log.of('rate.limited');
    assert.equal(event?.limit, 'maxInflightBytesPerPrincipal');
    assert.equal(event?.retryAfterMs, 5000);
  });

  test('past listen.maxConnectionsPerAddress: the refused connection is rate.limited maxConnectionsPerAddress', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.gateway({ upstreams: { fx: upstream.config }, listen: { host: '127.0.0.1', port: 0, path: '/mcp', maxConnectionsPerAddress: 1 } });
    const log = new EventLog(gateway.events, ['rate.limited']);
    const { hostname, port } = new URL(gateway.url);
    const sockets: Socket[] = [];
    t.after(() => sockets.forEach((socket) => socket.destroy()));
    const open = async (): Promise<Socket> => {
      const socket = connect(Number(port), hostname);
      sockets.push(socket);
      socket.on('error', () => undefined); // a refused connection may be reset: its close is what is awaited
      await once(socket, 'connect');
      return socket;
    };
    // The first connection is the gateway's once it answered a request on it.
    const first = await open();
    first.write(`GET /healthz HTTP/1.1\r\nHost: ${hostname}:${port}\r\n\r\n`);
    const [answer] = (await once(first, 'data')) as [Buffer];
    assert.match(answer.toString('utf8'), /^HTTP\/1\.1 200/);
    const second = await open();
    second.resume();
    await once(second, 'close');
    await log.until(() => log.seen.length === 1, 'the refusal');
    assert.deepEqual(log.of('rate.limited'), [{ limit: 'maxConnectionsPerAddress' }]);
  });
});
