// What an attacker on the network (or a page in a browser) can send, against a real gateway process: each probe
// of the hardening review, with the status, JSON-RPC code and message the gateway must answer, and the process
// still serving afterwards. Loopback only; every loop is bounded in count and time.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fixtureCommand, type GatewayChild } from '../fixtures/spawn.js';
import { eventually, fixtureExecutions, type Json, logEntries, suiteScope, testScope, whenLogged } from '../helpers/harness.js';
import { sendRev2026, STATELESS_VERSION, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';
import { createdTaskId } from '../helpers/session-wire.js';
import { twoReplicaProcesses } from '../helpers/replicas.js';

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

function fixtureUpstreams(): Json {
  const { command, args, cwd } = fixtureCommand('stdio');
  return { fx: { command, args, cwd } };
}

interface Answer {
  status: number;
  body: Json;
  headers: Headers;
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const response = await fetch(url, { method: 'POST', headers: { ...JSON_HEADERS, ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await response.text();
  const json = text.startsWith('{') || text.startsWith('[') ? (JSON.parse(text) as Json) : ({ text } as Json);
  return { status: response.status, body: json, headers: response.headers };
}

function errorOf(answer: Answer): { code?: number; message?: string } {
  return (answer.body.error ?? {}) as { code?: number; message?: string };
}

function show(answer: Answer): string {
  return `HTTP ${answer.status}: ${JSON.stringify(answer.body)}`;
}

async function openSession(url: string, protocolVersion = '2025-11-25'): Promise<string> {
  const answer = await post(url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion, capabilities: {}, clientInfo: { name: 'hostile', version: '1' } } });
  assert.equal(answer.status, 200, show(answer));
  const session = answer.headers.get('mcp-session-id');
  assert.ok(session !== null);
  return session;
}

function sessionHeaders(session: string, protocolVersion = '2025-11-25'): Record<string, string> {
  return { 'mcp-session-id': session, 'mcp-protocol-version': protocolVersion };
}

/** A raw HTTP request sent as given: what arrives back (until the server closes) and how the socket ended. */
function rawExchange(port: number, write: (socket: Socket) => void, waitMs: number): Promise<{ data: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let data = '';
    let closed = false;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (data += chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      clearTimeout(timer);
      resolve({ data, closed });
    });
    socket.on('connect', () => write(socket));
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ data, closed });
    }, waitMs);
  });
}

/** Lines the gateway logged at `warn` (40) or above; pino writes JSON lines to stdout. */
function loudLines(gateway: GatewayChild): Json[] {
  return logEntries(gateway).filter((entry) => Number(entry.level) >= 40);
}

describe('hostile input against a gateway process bound to loopback', () => {
  const scope = suiteScope();
  let gateway: GatewayChild;

  before(async () => {
    gateway = await scope.spawnGateway({
      config: {
        upstreams: fixtureUpstreams(),
        listen: { requestTimeoutMs: 1000, headersTimeoutMs: 1000, maxBatchSize: 4, maxJsonDepth: 32 },
        tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 } },
        log: { level: 'info' },
      },
    });
  });

  test('DNS rebinding: look-alike Host and Origin names are refused on every route; loopback names pass', async () => {
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {} } };
    const hostile = ['127.evil.com', '127.0.0.1.evil.com', '127.0.0.1@evil.com', `[::1]evil.com`, '[::1].evil.com', 'localhost.evil.com', 'evil.com', '127.0.0.1:80@evil.com'];
    for (const host of hostile) {
      for (const path of ['/mcp', '/healthz', '/readyz', '/nowhere']) {
        const answer = await rawExchange(gateway.port, (s) => {
          const body = JSON.stringify(initialize);
          s.write(`POST ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
        }, 5000);
        assert.match(answer.data, /^HTTP\/1\.1 403 /, `Host ${host} on ${path}: ${answer.data.slice(0, 200)}`);
        assert.match(answer.data, /"code":-32600.*Host '.*' is not allowed/s);
      }
    }
    for (const origin of ['http://127.evil.com', 'http://127.0.0.1.evil.com', 'http://evil.com', 'null', 'http://[::1].evil.com']) {
      const answer = await post(gateway.url, initialize, { origin });
      assert.equal(answer.status, 403, `Origin ${origin}: ${show(answer)}`);
      const health = await fetch(`${gateway.baseUrl}/readyz`, { headers: { origin } });
      assert.equal(health.status, 403, `Origin ${origin} on /readyz`);
      await health.arrayBuffer();
    }
    for (const [host, origin] of [[`127.0.0.1:${gateway.port}`, `http://127.0.0.1:${gateway.port}`], [`localhost:${gateway.port}`, 'http://localhost:5173'], [`[::1]:${gateway.port}`, `http://[::1]:${gateway.port}`], [`127.1.2.3:${gateway.port}`, undefined]] as const) {
      const answer = await rawExchange(gateway.port, (s) => {
        s.write(`GET /healthz HTTP/1.1\r\nHost: ${host}\r\n${origin === undefined ? '' : `Origin: ${origin}\r\n`}Connection: close\r\n\r\n`);
      }, 5000);
      assert.match(answer.data, /^HTTP\/1\.1 200 /, `Host ${host}: ${answer.data.slice(0, 200)}`);
    }
  });

  test('a body that never finishes arriving gets 408 and its connection closed; slow headers too', async () => {
    const unfinished = await Promise.all(
      Array.from({ length: 10 }, () =>
        rawExchange(gateway.port, (s) => {
          s.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"jsonrpc":"2.0",`);
        }, 10_000),
      ),
    );
    for (const answer of unfinished) {
      assert.match(answer.data, /^HTTP\/1\.1 408 /, answer.data);
      assert.equal(answer.closed, true);
    }
    const slowHeaders = await rawExchange(gateway.port, (s) => s.write('POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n'), 10_000);
    assert.match(slowHeaders.data, /^HTTP\/1\.1 408 /, slowHeaders.data);
    assert.equal(slowHeaders.closed, true);
  });

  test('only the arrival of a request is timed: a call longer than requestTimeoutMs is answered', async () => {
    const session = await openSession(gateway.url);
    const answer = await post(gateway.url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'slow_compute', arguments: { seconds: 2.5 } } }, { ...sessionHeaders(session), accept: 'application/json' });
    assert.equal(answer.status, 200, show(answer));
    assert.match(JSON.stringify(answer.body.result), /slow_compute finished after 2.5s/);
  });

  test('batches: at most maxBatchSize messages, and only on 2025-03-26 sessions', async () => {
    const old = await openSession(gateway.url, '2025-03-26');
    const before = await fixtureExecutions(gateway.url);
    const pings = (n: number): Json[] => Array.from({ length: n }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'slow_compute', arguments: { seconds: 0, label: 'batch' } } }));
    const tooMany = await post(gateway.url, pings(5), { 'mcp-session-id': old });
    assert.equal(tooMany.status, 400, show(tooMany));
    assert.equal(errorOf(tooMany).code, -32600);
    assert.match(String(errorOf(tooMany).message), /at most 4 messages \(listen\.maxBatchSize\)/);
    const huge = await post(gateway.url, pings(10_000), { 'mcp-session-id': old });
    assert.equal(huge.status, 400, show(huge));
    assert.equal((await fixtureExecutions(gateway.url)).batch, before.batch, 'a refused batch made no upstream call');
    // JSON only: four answers as one JSON array however long the calls take (past sse.jsonWindowMs on a busy machine
    // the answer would otherwise become a stream, and this test is about the batch's size, not its transport).
    const fits = await post(gateway.url, pings(4), { 'mcp-session-id': old, accept: 'application/json' });
    assert.equal(fits.status, 200);
    assert.equal((fits.body as unknown as Json[]).length, 4);

    for (const version of ['2025-06-18', '2025-11-25']) {
      const session = await openSession(gateway.url, version);
      const refused = await post(gateway.url, pings(2), sessionHeaders(session, version));
      assert.equal(refused.status, 400, show(refused));
      assert.equal(errorOf(refused).code, -32600);
      assert.match(String(errorOf(refused).message), new RegExp(`batches are not part of protocol ${version}`));
    }
    const initializeBatch = await post(gateway.url, [{ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {} } }]);
    assert.equal(initializeBatch.status, 400, show(initializeBatch));
  });

  test('method names of Object.prototype are unknown methods in both eras', async () => {
    const session = await openSession(gateway.url);
    for (const method of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', '__defineGetter__']) {
      const rev2025Side = await post(gateway.url, { jsonrpc: '2.0', id: 3, method, params: {} }, sessionHeaders(session));
      assert.equal(rev2025Side.status, 200, show(rev2025Side));
      assert.equal(errorOf(rev2025Side).code, -32601, `${method}: ${show(rev2025Side)}`);
      assert.match(String(errorOf(rev2025Side).message), /Method not found/);
      const current = await sendRev2026(gateway.url, method, {});
      assert.equal(current.status, 404, JSON.stringify(current.messages));
      assert.equal(current.error?.code, -32601, `${method}: ${JSON.stringify(current.messages)}`);
    }
  });

  test('JSON nested deeper than maxJsonDepth is refused at the door in both eras, without blaming an upstream', async () => {
    const deep = (depth: number): string => `${'['.repeat(depth)}${']'.repeat(depth)}`;
    const session = await openSession(gateway.url);
    for (const depth of [33, 20_000]) {
      const body = `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"x":${deep(depth)}}}}`;
      const rev2025Side = await post(gateway.url, body, sessionHeaders(session));
      assert.equal(rev2025Side.status, 400, show(rev2025Side));
      assert.equal(errorOf(rev2025Side).code, -32600);
      assert.match(String(errorOf(rev2025Side).message), /nested deeper than 32 levels \(listen\.maxJsonDepth\)/);
      assert.doesNotMatch(String(errorOf(rev2025Side).message), /Upstream/);
      const rev2026Body = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"x":${deep(depth)}},"_meta":{"io.modelcontextprotocol/protocolVersion":"${STATELESS_VERSION}","io.modelcontextprotocol/clientCapabilities":{}}}}`;
      const current = await post(gateway.url, rev2026Body, { 'mcp-protocol-version': STATELESS_VERSION, 'mcp-method': 'tools/call', 'mcp-name': 'echo' });
      assert.equal(current.status, 400, show(current));
      assert.equal(errorOf(current).code, -32600);
    }
    // Within the limit, nesting is passed through untouched.
    const fine = await post(gateway.url, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"test_simple_text","arguments":{"x":${deep(20)}}}}`, sessionHeaders(session));
    assert.equal(fine.status, 200, show(fine));
    assert.equal(errorOf(fine).code, undefined, show(fine));
  });

  test('strict shapes: params.task, responses, the MCP-Protocol-Version header on a session, the 2026 log level', async () => {
    const session = await openSession(gateway.url);
    // A ttl is a whole number of milliseconds from 1: a fraction (1e-9 once floored to a retention of 0) and 0 (once
    // the policy's default) are refused too, as is one past 2^53 - 1.
    for (const task of [true, 'x', [1], null, 7, { ttl: 'soon' }, { ttl: -1 }, { ttl: 1e-9 }, { ttl: 0 }, { ttl: 1500.5 }, { ttl: 1e300 }, { ttl: null }]) {
      const answer = await post(gateway.url, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'slow_compute', arguments: { seconds: 0 }, task } }, sessionHeaders(session));
      assert.equal(errorOf(answer).code, -32602, `task ${JSON.stringify(task)}: ${show(answer)}`);
      assert.match(String(errorOf(answer).message), /params\.task must be an object/);
    }
    const listed = await post(gateway.url, { jsonrpc: '2.0', id: 8, method: 'tasks/list' }, sessionHeaders(session));
    assert.deepEqual((listed.body.result as Json).tasks, [], 'no task was created by a malformed params.task');

    const both = await post(gateway.url, { jsonrpc: '2.0', id: 9, result: {}, error: { code: 1, message: 'x' } }, sessionHeaders(session));
    assert.equal(both.status, 400, show(both));
    assert.equal(errorOf(both).code, -32600);
    assert.match(String(errorOf(both).message), /either result or error, not both/);

    // Any supported session-era version is accepted (the reference server's rule, what conformance 0.1.x sends);
    // the session's own revision still decides what it is served: tasks stay available on this 2025-11-25 session.
    for (const version of ['2025-03-26', '2025-06-18']) {
      const otherVersion = await post(gateway.url, { jsonrpc: '2.0', id: 10, method: 'tasks/list' }, sessionHeaders(session, version));
      assert.equal(otherVersion.status, 200, show(otherVersion));
      assert.deepEqual((otherVersion.body.result as Json).tasks, [], show(otherVersion));
    }
    for (const version of ['2099-01-01', '2025-3-26', 'latest', '2024-11-05', '']) {
      const unknown = await post(gateway.url, { jsonrpc: '2.0', id: 11, method: 'tools/list' }, sessionHeaders(session, version));
      assert.equal(unknown.status, 400, `${version}: ${show(unknown)}`);
      assert.equal(errorOf(unknown).code, -32600);
      assert.match(String(errorOf(unknown).message), /Unsupported protocol version/);
    }

    const badLevel = await sendRev2026(gateway.url, 'tools/list', {}, { logLevel: 'loud' });
    assert.equal(badLevel.status, 400, JSON.stringify(badLevel.messages));
    assert.equal(badLevel.error?.code, -32602);
  });

  test('a params._meta that is not an object is the gateway\'s -32602 in both eras, never an upstream\'s failure', async () => {
    const session = await openSession(gateway.url);
    let id = 20;
    for (const meta of [5, 'x', [1, 2], null, true]) {
      for (const [method, params] of [['tools/call', { name: 'greet', arguments: { name: 'm' } }], ['tools/list', {}], ['prompts/get', { name: 'test_simple_prompt' }]] as const) {
        const answer = await post(gateway.url, { jsonrpc: '2.0', id: ++id, method, params: { ...params, _meta: meta } }, sessionHeaders(session));
        assert.equal(errorOf(answer).code, -32602, `${method} _meta ${JSON.stringify(meta)}: ${show(answer)}`);
        assert.equal(errorOf(answer).message, `${method}: params._meta must be an object`, show(answer));
      }
      const rev2026Answer = await sendRev2026(gateway.url, 'tools/call', { name: 'greet', arguments: { name: 'm' }, _meta: meta }, { meta: null });
      assert.equal(rev2026Answer.status, 400, JSON.stringify(rev2026Answer.messages));
      assert.equal(rev2026Answer.error?.code, -32602, JSON.stringify(rev2026Answer.messages));
      assert.match(String(rev2026Answer.error?.message), /params\._meta with the request envelope is required/);
    }
    // The upstream saw none of it: the session and the upstream serve on, and nothing was logged as a failure.
    const fine = await post(gateway.url, { jsonrpc: '2.0', id: id + 1, method: 'tools/call', params: { name: 'greet', arguments: { name: 'm' }, _meta: { progressToken: 1 } } }, sessionHeaders(session));
    assert.match(JSON.stringify(fine.body), /Hello, m!/, show(fine));
    assert.deepEqual(loudLines(gateway).filter((line) => /_meta|unavailable/.test(JSON.stringify(line))), []);
  });

  test('aborted uploads and unknown Last-Event-IDs leave no error lines and cost no waiting', async () => {
    await Promise.all(
      Array.from({ length: 20 }, () =>
        rawExchange(gateway.port, (s) => {
          s.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n${'{"a":'.padEnd(5000, ' ')}`);
          setTimeout(() => s.destroy(), 50);
        }, 2000),
      ),
    );
    const started = Date.now();
    for (let i = 0; i < 5; i++) {
      const controller = new AbortController();
      const response = await fetch(gateway.url, {
        headers: { ...sessionHeaders(await openSession(gateway.url)), accept: 'text/event-stream', 'last-event-id': `no-such-replica_${i}_1` },
        signal: controller.signal,
      });
      assert.equal(response.status, 200);
      controller.abort();
    }
    // Each lookup of a replica that does not exist used to wait 2 s for an answer that never comes: 10 s for five.
    assert.ok(Date.now() - started < 5000, `five resumes of unknown streams took ${Date.now() - started} ms`);
    await sleep(200);
    assert.deepEqual(loudLines(gateway), []);
    assert.equal((await fetch(`${gateway.baseUrl}/healthz`)).status, 200);
  });
});

describe('default caps: sessions and tasks per principal', () => {
  test('initialize beyond sessions.maxPerPrincipal is refused with 429 until a session ends', async (t) => {
    const gateway = await testScope(t).spawnGateway({ config: { upstreams: fixtureUpstreams(), sessions: { maxPerPrincipal: 3 } } });
    const sessions = [await openSession(gateway.url), await openSession(gateway.url), await openSession(gateway.url)];
    const refused = await post(gateway.url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {} } });
    assert.equal(refused.status, 429, show(refused));
    assert.equal(errorOf(refused).code, -32600);
    assert.match(String(errorOf(refused).message), /Too many sessions: 3 are open \(sessions\.maxPerPrincipal: 3\)/);
    const ended = await fetch(gateway.url, { method: 'DELETE', headers: sessionHeaders(sessions[0] as string) });
    assert.equal(ended.status, 200);
    await openSession(gateway.url);
  });

  test('connections beyond listen.maxConnections are closed as they arrive; the gateway serves again once they go', async (t) => {
    const gateway = await testScope(t).spawnGateway({ config: { upstreams: fixtureUpstreams(), listen: { maxConnections: 5, requestTimeoutMs: 1500, headersTimeoutMs: 1500 } } });
    // Eight slow-header connections against a cap of five (the test's own HTTP pool may hold one more).
    const answers = await Promise.all(Array.from({ length: 8 }, () => rawExchange(gateway.port, (s) => s.write('POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n'), 10_000)));
    const refused = answers.filter((a) => a.data === '');
    assert.ok(refused.length >= 3, `${refused.length} of 8 refused`);
    for (const answer of answers) {
      assert.equal(answer.closed, true);
      if (answer.data !== '') assert.match(answer.data, /^HTTP\/1\.1 408 /);
    }
    assert.equal((await fetch(`${gateway.baseUrl}/healthz`)).status, 200);
    await whenLogged(gateway, () => loudLines(gateway).some((l) => /listen\.maxConnections/.test(String(l.msg))));
  });

  test('the session cap is counted in Redis across replicas', async (t) => {
    const [a, b] = await twoReplicaProcesses(testScope(t), { upstreams: fixtureUpstreams(), sessions: { maxPerPrincipal: 2 } }, 'hostile');
    await openSession(a.url);
    await openSession(b.url);
    const refused = await post(a.url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {} } });
    assert.equal(refused.status, 429, show(refused));
  });

  test('by default a principal holds at most 1,000 unfinished tasks; without auth every client is that principal', async (t) => {
    const gateway = await testScope(t).spawnGateway({ config: { upstreams: fixtureUpstreams(), tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 } } } });
    const session = await openSession(gateway.url);
    const call = (id: number): Promise<Answer> =>
      post(gateway.url, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'slow_compute', arguments: { seconds: 30, label: 'cap' }, task: {} } }, { ...sessionHeaders(session), accept: 'application/json' });
    for (let batch = 0; batch < 10; batch++) {
      const created = await Promise.all(Array.from({ length: 100 }, (_, i) => call(batch * 100 + i)));
      for (const answer of created) assert.ok(createdTaskId(answer.body), show(answer));
    }
    const refused = await call(1000);
    const full = /Too many unfinished tasks: clients without authentication \(counted together\) already have 1000 \(maxTasksPerPrincipal: 1000\)/;
    assert.match(String(errorOf(refused).message), full, show(refused));
    // Neither a new session nor a 2026-07-28 client opens new room: without auth they are all one principal.
    const other = await openSession(gateway.url);
    const fromOther = await post(gateway.url, { jsonrpc: '2.0', id: 1001, method: 'tools/call', params: { name: 'slow_compute', arguments: { seconds: 0 }, task: {} } }, { ...sessionHeaders(other), accept: 'application/json' });
    assert.match(String(errorOf(fromOther).message), full, show(fromOther));
    const rev2026Task = await sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0 } }, { capabilities: TASKS_CAPABILITIES });
    assert.match(String(rev2026Task.error?.message), full, JSON.stringify(rev2026Task.messages));
  });
});

describe('a parked 2026-07-28 call nobody resumes on a shared stdio upstream', () => {
  test('is cleared after mrtr.parkTimeoutMs: later calls are asked their questions again', async (t) => {
    const gateway = await testScope(t).spawnGateway({ config: { upstreams: fixtureUpstreams(), mrtr: { parkTimeoutMs: 500 } } });
    const asks = { elicitation: {} };
    const burst = await Promise.all(Array.from({ length: 30 }, () => sendRev2026(gateway.url, 'tools/call', { name: 'test_tool_with_task', arguments: {} }, { capabilities: asks })));
    // Several calls on one stdio child: a question may not be attributable, and is refused; each call is answered.
    for (const answer of burst) assert.ok(answer.result !== undefined || answer.error !== undefined, JSON.stringify(answer.messages));
    // Nobody retries. Once the park timeout has cancelled them, a single call is the only one running again.
    await eventually(async () => {
      const single = await sendRev2026(gateway.url, 'tools/call', { name: 'test_tool_with_task', arguments: {} }, { capabilities: asks });
      return single.result?.resultType === 'input_required';
    }, 10_000);
    await sleep(700);
    const again = await sendRev2026(gateway.url, 'tools/call', { name: 'test_tool_with_task', arguments: {} }, { capabilities: asks });
    assert.equal(again.result?.resultType, 'input_required', JSON.stringify(again.messages));
    assert.deepEqual(loudLines(gateway).filter((l) => Number(l.level) >= 50), []);
  });
});

/** A stdio MCP server written by hand that answers every tools/call with both `result` and `error`. */
const QUIRKY_SERVER = `
const send = (message) => process.stdout.write(JSON.stringify(message) + '\\n');
require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  if (m.method === 'initialize') send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'quirky', version: '1' } } });
  else if (m.method === 'tools/list') send({ jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'both', inputSchema: { type: 'object' } }] } });
  else if (m.method === 'tools/call') send({ jsonrpc: '2.0', id: m.id, result: { content: [] }, error: { code: 1, message: 'and also an error' } });
  else send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found' } });
});`;

describe('an upstream response carrying both result and error', () => {
  test('fails its call at once, naming the upstream, instead of leaving it waiting', async (t) => {
    const gateway = await testScope(t).spawnGateway({ config: { upstreams: { quirky: { command: process.execPath, args: ['-e', QUIRKY_SERVER] } } } });
    const session = await openSession(gateway.url);
    const answer = await post(gateway.url, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'both', arguments: {} } }, { ...sessionHeaders(session), accept: 'application/json' });
    assert.equal(answer.status, 200, show(answer));
    assert.equal(errorOf(answer).code, -32603, show(answer));
    assert.match(String(errorOf(answer).message), /Upstream 'quirky' lost the call: the upstream answered with an invalid response \(a response carries either result or error, not both\)/);
  });
});
