// What one client may take of a gateway process, and what the others keep (issue 20, items 3 and 4): bytes of
// requests in flight per principal and in total, connections (reclaimed when idle, per address, closed when idle
// too long) and open streams per principal. The upstream is the misbehaving fixture, whose `never_answers` holds
// every call (and so its arguments) until it is cancelled. Loopback only; every wait is for an event (an answer,
// a socket closing), bounded by the test's own timeout.
// One file because its groups are those two issue items on one setup: the principals' API keys, the misbehaving
// upstream's config, and the refusal and connection helpers (refusalOf, assertBudgetFull, holdConnection).
import assert from 'node:assert/strict';
import { request as nodeRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { before, describe, test } from 'node:test';
import { Agent, request as httpRequest } from 'undici';
import { abusiveFixtureCommand, type GatewayChild } from '../fixtures/spawn.js';
import { eventually, type Json, logEntries, suiteScope, testScope, textOf, whenLogged } from '../helpers/harness.js';
import { sendRev2026, STATELESS_VERSION, sseMessages, TASKS_CAPABILITIES, type Rev2026Response } from '../helpers/stateless-wire.js';

const MiB = 1024 * 1024;
const KEYS: Record<string, string> = Object.fromEntries(
  ['alice', 'bob', 'carol', 'dave', 'erin', 'frank', 'gina'].map((name) => [name, `${name}-key-0123456789abcdef`]),
);
const RESOURCE = 'http://127.0.0.1/mcp';
const AUTH = { resource: RESOURCE, apiKeys: Object.entries(KEYS).map(([principal, key]) => ({ principal, key })) };
/** About 1 MB of arguments: a request body of a little more than that. */
const BLOB = 'x'.repeat(1_000_000);
const REV2025 = '2025-11-25';

function bearer(who: string): Record<string, string> {
  return { authorization: `Bearer ${KEYS[who] ?? ''}` };
}

function upstreams(): Json {
  const { command, args, cwd } = abusiveFixtureCommand();
  return { abusive: { command, args, cwd } };
}

interface Refusal {
  status: number;
  retryAfter: string | null;
  error: { code: number; message: string; data?: Json };
}

/** A 2025-11-25 session of `who`, initialized. */
async function openSession(url: string, who: string): Promise<string> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...bearer(who) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: REV2025, capabilities: {}, clientInfo: { name: 'admission', version: '1' } } }),
  });
  await response.text();
  const session = response.headers.get('mcp-session-id');
  assert.ok(session !== null, `initialize answered HTTP ${response.status}`);
  await rev2025Post(url, who, session, { jsonrpc: '2.0', method: 'notifications/initialized' }).then((r) => r.text());
  return session;
}

/** A POST in `session`; resolves with the response once its headers arrived (a streamed answer may go on). */
function rev2025Post(url: string, who: string, session: string, message: Json, signal?: AbortSignal): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': session, 'mcp-protocol-version': REV2025, ...bearer(who) },
    body: JSON.stringify(message),
    ...(signal === undefined ? {} : { signal }),
  });
}

/** A refused request's answer: HTTP status, Retry-After and the JSON-RPC error. */
async function refusalOf(response: Response): Promise<Refusal> {
  const body = (await response.json()) as { id: unknown; error: Refusal['error'] };
  assert.equal(body.id, null, 'refused before the message was read');
  return { status: response.status, retryAfter: response.headers.get('retry-after'), error: body.error };
}

function statelessRefusal(answer: Rev2026Response): Refusal {
  const retryAfter = answer.headers['retry-after'];
  return { status: answer.status, retryAfter: typeof retryAfter === 'string' ? retryAfter : null, error: answer.error as Refusal['error'] };
}

/** The refusal a full budget gives: 503, Retry-After, -32001 naming the budget. */
function assertBudgetFull(refusal: Refusal, budget: string): void {
  assert.equal(refusal.status, 503, JSON.stringify(refusal));
  assert.equal(refusal.retryAfter, '5');
  assert.equal(refusal.error.code, -32001);
  assert.match(refusal.error.message, new RegExp(`Too many request bytes in flight.*\\(${budget.replace('.', '\\.')}\\).*retry in 5 s`));
  assert.equal(refusal.error.data?.budget, budget);
  assert.equal(refusal.error.data?.retryAfterMs, 5000);
}

/** A never-answered call of `who` as a 2026-07-28 task (the gateway makes it one at once). */
function rev2026Call(url: string, who: string, args: Json = { blob: BLOB }): Promise<Rev2026Response> {
  return sendRev2026(url, 'tools/call', { name: 'never_answers', arguments: args }, { capabilities: TASKS_CAPABILITIES, headers: bearer(who) });
}

function rev2026TaskId(answer: Rev2026Response): string {
  assert.equal(answer.result?.resultType, 'task', JSON.stringify(answer.messages));
  return String(answer.result?.taskId);
}

async function rev2026Cancel(url: string, who: string, taskId: string): Promise<void> {
  const answer = await sendRev2026(url, 'tasks/cancel', { taskId }, { capabilities: TASKS_CAPABILITIES, headers: bearer(who) });
  assert.equal(answer.status, 200, JSON.stringify(answer.messages));
}

describe('bytes in flight: listen.maxInflightBytesPerPrincipal (4 MiB) and listen.maxInflightBytes (8 MiB)', { timeout: 120_000 }, () => {
  // With ~1 MB calls: three fit in a principal's 4 MiB (its last eighth is kept for small requests), the fourth
  // does not; seven fit in the 8 MiB total.
  const scope = suiteScope();
  let gateway: GatewayChild;

  before(async () => {
    gateway = await scope.spawnGateway({
      config: {
        upstreams: upstreams(),
        listen: { maxBodyBytes: 2 * MiB, maxInflightBytes: 8 * MiB, maxInflightBytesPerPrincipal: 4 * MiB },
        tasks: { defaults: { taskAfterMs: 0 } },
        auth: AUTH,
      },
    });
  });

  test('2025-11-25 plain calls hold their bytes until answered: 503 past the budget, small requests served, a cancel frees it', async () => {
    const session = await openSession(gateway.url, 'alice');
    const abort = new AbortController();
    const calls = new Map<number, Response>();
    const call = (id: number): Promise<Response> =>
      rev2025Post(gateway.url, 'alice', session, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'never_answers', arguments: { blob: BLOB } } }, abort.signal);
    try {
      for (const id of [1, 2, 3]) {
        const accepted = await call(id);
        assert.equal(accepted.status, 200);
        assert.match(accepted.headers.get('content-type') ?? '', /text\/event-stream/, 'running: its answer streams');
        calls.set(id, accepted);
      }
      assertBudgetFull(await refusalOf(await call(4)), 'listen.maxInflightBytesPerPrincipal');

      const ping = await rev2025Post(gateway.url, 'alice', session, { jsonrpc: '2.0', id: 5, method: 'ping' });
      assert.deepEqual(await ping.json(), { jsonrpc: '2.0', id: 5, result: {} });
      const tools = (await (await rev2025Post(gateway.url, 'alice', session, { jsonrpc: '2.0', id: 6, method: 'tools/list' })).text());
      assert.match(tools, /never_answers/);

      const cancelled = await rev2025Post(gateway.url, 'alice', session, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, reason: 'test' } });
      assert.equal(cancelled.status, 202);
      await calls.get(1)?.text(); // the cancelled call's stream ends without an answer
      calls.delete(1);
      const again = await call(7);
      assert.equal(again.status, 200, 'the cancelled call\'s bytes went back');
      calls.set(7, again);
    } finally {
      for (const id of calls.keys()) await rev2025Post(gateway.url, 'alice', session, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id } }).then((r) => r.text());
      await Promise.all([...calls.values()].map((r) => r.text().catch(() => '')));
      abort.abort();
    }
  });

  test('2025-11-25 tasks hold their bytes until their upstream call ends: 503 past the budget, tasks/get served, tasks/cancel frees it', async () => {
    const session = await openSession(gateway.url, 'bob');
    const call = async (id: number): Promise<Response> =>
      rev2025Post(gateway.url, 'bob', session, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'never_answers', arguments: { blob: BLOB }, task: {} } });
    const taskIds: string[] = [];
    try {
      for (const id of [1, 2, 3]) {
        const created = (await (await call(id)).json()) as Json;
        taskIds.push(String(((created.result as Json).task as Json).taskId));
      }
      assertBudgetFull(await refusalOf(await call(4)), 'listen.maxInflightBytesPerPrincipal');

      const got = (await (await rev2025Post(gateway.url, 'bob', session, { jsonrpc: '2.0', id: 5, method: 'tasks/get', params: { taskId: taskIds[0] } })).json()) as Json;
      assert.equal((got.result as Json).status, 'working');
      const cancelled = (await (await rev2025Post(gateway.url, 'bob', session, { jsonrpc: '2.0', id: 6, method: 'tasks/cancel', params: { taskId: taskIds.shift() } })).json()) as Json;
      assert.equal((cancelled.result as Json).status, 'cancelled');
      const again = (await (await call(7)).json()) as Json;
      assert.ok(((again.result as Json).task as Json).taskId, `accepted again: ${JSON.stringify(again)}`);
      taskIds.push(String(((again.result as Json).task as Json).taskId));
    } finally {
      for (const [i, taskId] of taskIds.entries()) await rev2025Post(gateway.url, 'bob', session, { jsonrpc: '2.0', id: 100 + i, method: 'tasks/cancel', params: { taskId } }).then((r) => r.text());
    }
  });

  test('2026-07-28 tasks: 503 with the same error past the budget, tasks/get served, tasks/cancel frees it', async () => {
    const taskIds: string[] = [];
    try {
      for (let i = 0; i < 3; i++) taskIds.push(rev2026TaskId(await rev2026Call(gateway.url, 'carol')));
      assertBudgetFull(statelessRefusal(await rev2026Call(gateway.url, 'carol')), 'listen.maxInflightBytesPerPrincipal');

      const got = await sendRev2026(gateway.url, 'tasks/get', { taskId: taskIds[0] }, { capabilities: TASKS_CAPABILITIES, headers: bearer('carol') });
      assert.equal(got.result?.status, 'working');
      await rev2026Cancel(gateway.url, 'carol', taskIds.shift() as string);
      taskIds.push(rev2026TaskId(await rev2026Call(gateway.url, 'carol')));
    } finally {
      for (const taskId of taskIds) await rev2026Cancel(gateway.url, 'carol', taskId);
    }
  });

  test('answers and errors give the bytes back: each path many times over what the budget holds', async () => {
    const session = await openSession(gateway.url, 'gina');
    let id = 0;
    const send = async (params: Json, method = 'tools/call'): Promise<Json> => {
      const response = await rev2025Post(gateway.url, 'gina', session, { jsonrpc: '2.0', id: ++id, method, params });
      assert.equal(response.status, 200, `call ${id}`);
      const text = await response.text();
      return (text.startsWith('{') ? JSON.parse(text) : sseMessages(text).find((m) => m.id === id)) as Json;
    };
    for (let i = 0; i < 6; i++) {
      // Answered (a forwarded call), a tool error, refused by the gateway (an unlisted name, no name), and a task
      // that completes.
      assert.equal(textOf((await send({ name: 'echo', arguments: { text: BLOB } })).result).length, BLOB.length);
      assert.equal(((await send({ name: 'tool_error', arguments: { blob: BLOB } })).result as Json).isError, true);
      assert.match(String(((await send({ name: 'no_such_tool', arguments: { blob: BLOB } })).error as Json | undefined)?.message), /Unknown tool: no_such_tool/);
      const invalid = await send({ arguments: { blob: BLOB } });
      assert.match(String((invalid.error as Json | undefined)?.message), /params\.name must be a string/, JSON.stringify(invalid).slice(0, 300));
      const created = await send({ name: 'echo', arguments: { text: BLOB }, task: {} });
      const taskId = String(((created.result as Json).task as Json).taskId);
      assert.equal(textOf((await send({ taskId }, 'tasks/result')).result).length, BLOB.length);
    }
    const plain = await sendRev2026(gateway.url, 'tools/call', { name: 'echo', arguments: { text: BLOB } }, { headers: bearer('gina') });
    assert.equal(textOf(plain.result).length, BLOB.length);
  });

  test('each principal has its own budget; the total binds them all, and small requests still pass it', async () => {
    const held: [string, string][] = [];
    try {
      for (let i = 0; i < 3; i++) held.push(['dave', rev2026TaskId(await rev2026Call(gateway.url, 'dave'))]);
      assertBudgetFull(statelessRefusal(await rev2026Call(gateway.url, 'dave')), 'listen.maxInflightBytesPerPrincipal');
      // Another principal is not affected by dave's budget...
      for (let i = 0; i < 3; i++) held.push(['erin', rev2026TaskId(await rev2026Call(gateway.url, 'erin'))]);
      // ...but seven calls fill the gateway's: frank's second call is refused by the total, not by his own budget.
      held.push(['frank', rev2026TaskId(await rev2026Call(gateway.url, 'frank'))]);
      assertBudgetFull(statelessRefusal(await rev2026Call(gateway.url, 'frank')), 'listen.maxInflightBytes');
      // A small call is still served out of the total's reserve.
      held.push(['frank', rev2026TaskId(await rev2026Call(gateway.url, 'frank', {}))]);
      const discovered = await sendRev2026(gateway.url, 'server/discover', {}, { headers: bearer('frank') });
      assert.equal(discovered.status, 200);
    } finally {
      for (const [who, taskId] of held) await rev2026Cancel(gateway.url, who, taskId);
    }
    // All given back: the budget takes three calls of one principal again.
    const again: string[] = [];
    for (let i = 0; i < 3; i++) again.push(rev2026TaskId(await rev2026Call(gateway.url, 'dave')));
    for (const taskId of again) await rev2026Cancel(gateway.url, 'dave', taskId);
  });
});

/** A client connection held open by the test: what arrived on it, and whether the gateway closed it. */
interface HeldConnection {
  socket: Socket;
  data: string;
  closed: Promise<void>;
  isClosed: boolean;
  /** Sends a request and resolves with the response's head and body once a whole response has arrived. */
  request(text: string): Promise<string>;
}

function holdConnection(port: number, localAddress = '127.0.0.1'): Promise<HeldConnection> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress });
    let waiter: (() => void) | undefined;
    const held: HeldConnection = {
      socket,
      data: '',
      isClosed: false,
      closed: new Promise((done) => socket.once('close', () => {
        held.isClosed = true;
        waiter?.();
        done();
      })),
      request(text) {
        const start = held.data.length;
        socket.write(text);
        return new Promise((done, fail) => {
          const check = (): void => {
            const response = held.data.slice(start);
            const length = /content-length: (\d+)/i.exec(response)?.[1];
            const bodyAt = response.indexOf('\r\n\r\n');
            if (length !== undefined && bodyAt >= 0 && response.length >= bodyAt + 4 + Number(length)) {
              waiter = undefined;
              done(response);
            } else if (held.isClosed) fail(new Error(`closed before a whole response: ${JSON.stringify(response)}`));
          };
          waiter = check;
          check();
        });
      },
    };
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      held.data += chunk;
      waiter?.();
    });
    socket.on('error', () => undefined);
    // A connection the gateway closes at once may report that before it reports being connected.
    socket.once('connect', () => resolve(held));
    void held.closed.then(() => resolve(held));
  });
}

const HEALTH = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';

function discoverRequest(who: string): string {
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'server/discover',
    params: { _meta: { 'io.modelcontextprotocol/protocolVersion': STATELESS_VERSION, 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'held', version: '1' } } },
  });
  return [
    'POST /mcp HTTP/1.1',
    'Host: 127.0.0.1',
    'Content-Type: application/json',
    'Accept: application/json, text/event-stream',
    `MCP-Protocol-Version: ${STATELESS_VERSION}`,
    'Mcp-Method: server/discover',
    `Authorization: Bearer ${KEYS[who] ?? ''}`,
    `Content-Length: ${Buffer.byteLength(body)}`,
    '',
    body,
  ].join('\r\n');
}

/** A fresh connection (not a pooled one) that asks /healthz. */
async function freshHealth(baseUrl: string): Promise<number> {
  const agent = new Agent();
  try {
    const response = await httpRequest(`${baseUrl}/healthz`, { dispatcher: agent });
    await response.body.text();
    return response.statusCode;
  } finally {
    await agent.close();
  }
}

describe('a refusal of a body still being sent', { timeout: 60_000 }, () => {
  const scope = suiteScope();

  test('a client still sending its body when the budget refuses it gets the 503, not a reset connection', async () => {
    const gateway = await scope.spawnGateway({
      config: { upstreams: upstreams(), listen: { maxBodyBytes: 4 * MiB, maxInflightBytesPerPrincipal: 8 * MiB }, auth: AUTH },
    });
    const session = await openSession(gateway.url, 'alice');
    const big = (id: number): string =>
      JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'never_answers', arguments: { blob: 'x'.repeat(4 * MiB - 4096) } } });
    const abort = new AbortController();
    const held = await rev2025Post(gateway.url, 'alice', session, JSON.parse(big(1)) as Json, abort.signal);
    assert.equal(held.status, 200);
    try {
      // node:http writes each whole body at once, far more than a socket buffer holds: the refusals come while the
      // bodies are still being sent, and the gateway must read the rest before answering and closing.
      const send = (id: number): Promise<{ status: number; retryAfter: string | undefined; text: string }> => new Promise((resolve, reject) => {
        const body = big(id);
        const request = nodeRequest(gateway.url, {
          method: 'POST',
          agent: false,
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'content-length': Buffer.byteLength(body),
            'mcp-session-id': session,
            'mcp-protocol-version': REV2025,
            ...bearer('alice'),
          },
        }, (response) => {
          let text = '';
          response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, retryAfter: response.headers['retry-after'], text }));
        });
        request.on('error', reject);
        request.end(body);
      });
      for (const refused of await Promise.all([2, 3, 4, 5, 6, 7, 8, 9, 10, 11].map(send))) {
        assert.equal(refused.status, 503, refused.text);
        assert.ok(refused.retryAfter !== undefined);
        assert.match(refused.text, /maxInflightBytesPerPrincipal/);
      }
    } finally {
      await rev2025Post(gateway.url, 'alice', session, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }).then((r) => r.text());
      await held.text().catch(() => '');
      abort.abort();
    }
  });
});

describe('connections: listen.maxConnections (20) reclaims idle keep-alive connections', { timeout: 60_000 }, () => {
  test('20 idle keep-alive connections do not lock a new client out: the longest idle ones are closed for it', async (t) => {
    const gateway = await testScope(t).spawnGateway({ config: { upstreams: upstreams(), listen: { maxConnections: 20, keepAliveTimeoutMs: 600_000 } } });
    const idle: HeldConnection[] = [];
    try {
      for (let i = 0; i < 20; i++) {
        const connection = await holdConnection(gateway.port);
        assert.match(await connection.request(HEALTH), /^HTTP\/1\.1 200 /);
        idle.push(connection);
      }
      assert.equal(await freshHealth(gateway.baseUrl), 200, 'a new client is served');
      await idle[0]?.closed; // the one idle longest went
      // The newest is still open and usable.
      assert.match(await (idle[19] as HeldConnection).request(HEALTH), /^HTTP\/1\.1 200 /);
      await whenLogged(gateway, () => logEntries(gateway).some((l) => /idle connections closed to make room: near listen\.maxConnections/.test(String(l.msg))));
    } finally {
      for (const connection of idle) connection.socket.destroy();
    }
  });

  test('with auth, connections that never presented valid credentials go first, even if newer', async (t) => {
    const gateway = await testScope(t).spawnGateway({ config: { upstreams: upstreams(), auth: AUTH, listen: { maxConnections: 20, keepAliveTimeoutMs: 600_000 } } });
    const proven: HeldConnection[] = [];
    const anonymous: HeldConnection[] = [];
    try {
      for (let i = 0; i < 10; i++) {
        const connection = await holdConnection(gateway.port);
        assert.match(await connection.request(discoverRequest('alice')), /^HTTP\/1\.1 200 /);
        proven.push(connection);
      }
      for (let i = 0; i < 14; i++) {
        const connection = await holdConnection(gateway.port);
        assert.match(await connection.request(HEALTH), /^HTTP\/1\.1 200 /);
        anonymous.push(connection);
      }
      await anonymous[0]?.closed;
      // Every connection that presented credentials is still there, although older than every anonymous one.
      for (const connection of proven) assert.match(await connection.request(discoverRequest('alice')), /^HTTP\/1\.1 200 /);
    } finally {
      for (const connection of [...proven, ...anonymous]) connection.socket.destroy();
    }
  });
});

describe('connections: listen.maxConnectionsPerAddress and listen.keepAliveTimeoutMs', { timeout: 60_000 }, () => {
  test('past 3 connections from one address a new one is closed at once; other addresses are served; idle ones close after the keep-alive timeout', async (t) => {
    const gateway = await testScope(t).spawnGateway({
      config: { upstreams: upstreams(), listen: { maxConnectionsPerAddress: 3, keepAliveTimeoutMs: 500 }, log: { level: 'info' } },
    });
    // 127.0.0.2: an address of the test's own (the test's HTTP pool connects from 127.0.0.1).
    const held = [await holdConnection(gateway.port, '127.0.0.2'), await holdConnection(gateway.port, '127.0.0.2'), await holdConnection(gateway.port, '127.0.0.2')];
    const refused = await holdConnection(gateway.port, '127.0.0.2');
    try {
      await refused.closed;
      assert.equal(refused.data, '', 'closed without an answer');
      assert.equal(await freshHealth(gateway.baseUrl), 200, 'another address is served');
      await whenLogged(gateway, () => logEntries(gateway).some((l) => Number(l.level) === 40 && /listen\.maxConnectionsPerAddress/.test(String(l.msg)) && l.address === '127.0.0.2'));

      // A request, then silence: the gateway closes the connection after listen.keepAliveTimeoutMs.
      for (const connection of held) assert.match(await connection.request(HEALTH), /^HTTP\/1\.1 200 /);
      await Promise.all(held.map((connection) => connection.closed));
      // Their places are free again.
      await eventually(async () => {
        const next = await holdConnection(gateway.port, '127.0.0.2');
        try {
          return /^HTTP\/1\.1 200 /.test(await next.request(HEALTH));
        } catch {
          return false;
        } finally {
          next.socket.destroy();
        }
      });
    } finally {
      for (const connection of [...held, refused]) connection.socket.destroy();
    }
  });
});

describe('streams: sessions.maxStreamsPerPrincipal (2)', { timeout: 60_000 }, () => {
  test('a third open stream of a principal gets 429 + Retry-After, in either revision; other principals are not affected; a closed stream frees its place', async (t) => {
    const gateway = await testScope(t).spawnGateway({ config: { upstreams: upstreams(), auth: AUTH, sessions: { maxStreamsPerPrincipal: 2 } } });
    const abort = new AbortController();
    const getStream = (who: string, session: string, signal: AbortSignal = abort.signal): Promise<Response> =>
      fetch(gateway.url, { headers: { accept: 'text/event-stream', 'mcp-session-id': session, 'mcp-protocol-version': REV2025, ...bearer(who) }, signal });
    try {
      const sessions = [await openSession(gateway.url, 'alice'), await openSession(gateway.url, 'alice'), await openSession(gateway.url, 'alice')];
      const first = new AbortController();
      const open = [await getStream('alice', sessions[0] as string, first.signal), await getStream('alice', sessions[1] as string)];
      for (const stream of open) assert.equal(stream.status, 200);

      const tooMany = (refusal: Refusal): void => {
        assert.equal(refusal.status, 429, JSON.stringify(refusal));
        assert.equal(refusal.retryAfter, '5');
        assert.equal(refusal.error.code, -32600);
        assert.match(refusal.error.message, /Too many open streams: 'key:alice' holds 2 on this gateway replica \(sessions\.maxStreamsPerPrincipal: 2\)/);
      };
      tooMany(await refusalOf(await getStream('alice', sessions[2] as string)));
      // A POST whose answer may stream is one too.
      tooMany(await refusalOf(await rev2025Post(gateway.url, 'alice', sessions[2] as string, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'hi' } } })));
      const listen = await sendRev2026(gateway.url, 'subscriptions/listen', { notifications: { toolsListChanged: true } }, { headers: bearer('alice'), id: 9 });
      tooMany(statelessRefusal(listen));
      assert.equal(listen.response.id, 9, 'the listen request was read: its id is answered');

      // Another principal opens streams of its own.
      const bobs = await getStream('bob', await openSession(gateway.url, 'bob'));
      assert.equal(bobs.status, 200);

      first.abort();
      await eventually(async () => {
        const next = await getStream('alice', sessions[2] as string);
        if (next.status !== 200) await next.text();
        return next.status === 200;
      });
    } finally {
      abort.abort();
    }
  });
});
