// Clients that do not read their streams, against a real gateway process and the misbehaving fixture upstream
// (test/fixtures/abusive-server.ts) over stdio, Streamable HTTP and legacy SSE. A slow reader here is a raw HTTP
// request whose response the test leaves paused, so the gateway's writes back up as they would for a client that
// stopped reading. What is asserted is mechanism: progress coalesced (few events, the latest value), logs dropped
// with a count the client is told, an upstream held back (the fixture reports where it had to wait), a call on a
// shared stdio upstream failed and the others served. Memory is only reported, or held to a bound a working gateway
// meets many times over. No clocks: every wait is for an event (a log line, the fixture's report, a response).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { abusiveFixtureCommand, spawnAbusiveFixture, type GatewayChild } from '../fixtures/spawn.js';
import { eventually, type Json, logEntries, testScope, type TestScope, textOf, whenLogged } from '../helpers/harness.js';
import { rev2026Request } from '../helpers/stateless-wire.js';

const MiB = 1024 * 1024;
const FLOOD_WAIT_MS = 120_000;

type FloodTool = 'progress_flood' | 'log_flood' | 'notification_flood';
interface FloodReport {
  count: number;
  sent: number;
  waiting: boolean;
  done: boolean;
}

/** Where a fixture's floods report how far they got (its `--stats` file). */
function statsFile(): string {
  return join(mkdtempSync(join(tmpdir(), 'taskgate-slow-')), 'stats.json');
}

function floodReport(file: string, tool: FloodTool): FloodReport | undefined {
  try {
    return (JSON.parse(readFileSync(file, 'utf8')) as Record<string, FloodReport>)[tool];
  } catch {
    return undefined; // not written yet, or being written
  }
}

/** An upstream entry of the abusive fixture over `transport`, reporting to `stats`. */
async function abusiveUpstream(scope: TestScope, transport: 'stdio' | 'stdio-per-session' | 'streamable-http' | 'sse', stats: string): Promise<Json> {
  if (transport === 'stdio' || transport === 'stdio-per-session') {
    return { ...abusiveFixtureCommand({ statsFile: stats }), ...(transport === 'stdio-per-session' ? { isolation: 'per-session' } : {}) };
  }
  const child = await spawnAbusiveFixture({ transport, statsFile: stats });
  scope.defer(() => child.kill());
  return { transport, url: child.url };
}

async function gatewayFor(scope: TestScope, upstream: Json, sse: Json = {}): Promise<GatewayChild> {
  return scope.spawnGateway({ config: { upstreams: { abuse: upstream }, log: { level: 'debug' }, sse } });
}

/** The gateway process's memory (MiB): resident now, and the most it has been. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
  return { rss: Math.round(kib('VmRSS') / 1024), peak: Math.round(kib('VmHWM') / 1024) };
}

function logged(gateway: GatewayChild, message: RegExp): boolean {
  return logEntries(gateway).some((entry) => typeof entry.msg === 'string' && message.test(entry.msg));
}

/** A response the test has not read: paused as it arrives, so what the gateway writes backs up. */
interface SlowResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  /**
   * Starts reading: every SSE message (or the JSON body) goes to `onMessage`, until it returns true or the
   * response ends. Resolves with the number of messages read.
   */
  read(onMessage: (message: Json, eventId: string | undefined) => boolean | void): Promise<number>;
  close(): void;
}

function slowPost(url: string, body: Json, headers: Record<string, string>): Promise<SlowResponse> {
  return slowRequest(url, 'POST', headers, JSON.stringify(body));
}

function slowRequest(url: string, method: string, headers: Record<string, string>, body?: string): Promise<SlowResponse> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method, headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers } }, (response) => {
      response.pause();
      resolve({
        status: response.statusCode ?? 0,
        headers: response.headers,
        read: (onMessage) => readMessages(response, onMessage),
        close: () => request.destroy(),
      });
    });
    request.on('error', reject);
    request.end(body);
  });
}

function readMessages(response: http.IncomingMessage, onMessage: (message: Json, eventId: string | undefined) => boolean | void): Promise<number> {
  const sse = String(response.headers['content-type'] ?? '').includes('text/event-stream');
  return new Promise((resolve, reject) => {
    let buffer = '';
    let count = 0;
    let done = false;
    const deliver = (data: string, eventId?: string): void => {
      if (done || data.trim() === '') return;
      count++;
      if (onMessage(JSON.parse(data) as Json, eventId) === true) {
        done = true;
        response.destroy();
        resolve(count);
      }
    };
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => {
      buffer += chunk;
      if (!sse) return;
      for (let end = buffer.indexOf('\n\n'); end >= 0 && !done; end = buffer.indexOf('\n\n')) {
        const lines = buffer.slice(0, end).split('\n');
        buffer = buffer.slice(end + 2);
        const field = (name: string): string[] => lines.filter((line) => line.startsWith(`${name}:`)).map((line) => line.slice(name.length + 1).trimStart());
        deliver(field('data').join('\n'), field('id')[0]);
      }
    });
    response.on('end', () => {
      if (!sse) deliver(buffer);
      if (!done) resolve(count);
    });
    response.on('error', (error) => (done ? undefined : reject(error)));
    response.resume(); // paused by hand when it arrived: a 'data' listener alone does not restart it
  });
}

const ACCEPT_BOTH = { accept: 'application/json, text/event-stream' };

/** A 2025-11-25 session made by hand: its id. */
async function openSession(url: string): Promise<string> {
  const answer = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...ACCEPT_BOTH },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'slow-reader', version: '1' } } }),
  });
  await answer.text();
  const session = answer.headers.get('mcp-session-id');
  assert.ok(session !== null, `initialize answered HTTP ${answer.status} without a session`);
  const headers = { 'content-type': 'application/json', ...ACCEPT_BOTH, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' };
  await (await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).text();
  return session;
}

function sessionHeaders(session: string, accept = ACCEPT_BOTH.accept): Record<string, string> {
  return { accept, 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' };
}

function toolCall(id: number, name: string, args: Json, meta: Json = {}): Json {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, _meta: meta } };
}

/** What a client that finally reads finds on its stream. */
interface Reading {
  progress: number[];
  /** Log messages the upstream sent that arrived, and what the gateway's warnings say it dropped. */
  logs: number;
  droppedLogs: number;
  floods: number[];
  warnings: string[];
  response: Json | undefined;
}

async function readAll(response: SlowResponse, id: number | undefined): Promise<Reading> {
  const reading: Reading = { progress: [], logs: 0, droppedLogs: 0, floods: [], warnings: [], response: undefined };
  await response.read((message) => {
    const params = (message.params ?? {}) as Json;
    if (message.method === 'notifications/progress') reading.progress.push(Number(params.progress));
    else if (message.method === 'notifications/flood') reading.floods.push(Number(params.n));
    else if (message.method === 'notifications/message' && params.logger === 'taskgate') {
      reading.warnings.push(String(params.data));
      reading.droppedLogs += Number(/dropped (\d+) log message/.exec(String(params.data))?.[1] ?? 0);
    } else if (message.method === 'notifications/message') reading.logs++;
    else if (message.id === id && ('result' in message || 'error' in message)) {
      reading.response = message;
      return true;
    }
    return false;
  });
  return reading;
}

function report(t: TestContext, what: string): void {
  t.diagnostic(what);
  if (process.env.SLOW_READERS_VERBOSE) console.log(`# ${t.name}: ${what}`);
}

describe('slow readers: 2025-11-25 sessions', () => {
  for (const transport of ['streamable-http', 'stdio'] as const) {
    test(`POST stream, ${transport} upstream: progress coalesces while the client does not read, and the latest arrives`, async (t) => {
      const scope = testScope(t);
      const stats = statsFile();
      const gateway = await gatewayFor(scope, await abusiveUpstream(scope, transport, stats));
      const session = await openSession(gateway.url);
      const before = memoryOf(gateway.pid);
      const count = 40_000;
      const size = 10_000; // 400 MB of progress offered
      const response = await slowPost(gateway.url, toolCall(1, 'progress_flood', { count, size }, { progressToken: 'p' }), sessionHeaders(session));
      assert.equal(response.status, 200);
      // The gateway reads the whole flood (progress is never worth holding the upstream back for) while the client reads nothing.
      await eventually(() => floodReport(stats, 'progress_flood')?.done === true, FLOOD_WAIT_MS);
      const during = memoryOf(gateway.pid);
      const reading = await readAll(response, 1);
      assert.equal(textOf((reading.response as { result?: unknown }).result), `sent ${count}`);
      assert.equal(reading.progress.at(-1), count, 'the latest progress wins');
      assert.ok(reading.progress.length < count / 10, `coalesced: ${reading.progress.length} progress notifications arrived of ${count} sent`);
      for (let i = 1; i < reading.progress.length; i++) assert.ok((reading.progress[i] as number) > (reading.progress[i - 1] as number), 'progress still increases');
      const growth = during.peak - before.rss;
      report(t, `${(count * size) / MiB} MiB of progress offered; ${reading.progress.length} notifications delivered; gateway RSS ${before.rss} → ${during.rss} MiB, peak ${during.peak} MiB`);
      assert.ok(growth < 300, `the gateway grew by ${growth} MiB while ${(count * size) / MiB} MiB of progress were offered`);
    });
  }

  test('POST stream: logs past the bound are dropped, and the client is told how many', async (t) => {
    const scope = testScope(t);
    const stats = statsFile();
    const gateway = await gatewayFor(scope, await abusiveUpstream(scope, 'streamable-http', stats), { maxBufferedBytesPerStream: 1 * MiB });
    const session = await openSession(gateway.url);
    const count = 20_000;
    const response = await slowPost(gateway.url, toolCall(1, 'log_flood', { count, size: 1000 }), sessionHeaders(session));
    await eventually(() => floodReport(stats, 'log_flood')?.done === true, FLOOD_WAIT_MS);
    const reading = await readAll(response, 1);
    assert.equal(textOf((reading.response as { result?: unknown }).result), `sent ${count}`);
    assert.ok(reading.droppedLogs > 0, 'some logs were dropped');
    assert.equal(reading.logs + reading.droppedLogs, count, 'every log either arrived or was counted as dropped');
    assert.ok(reading.warnings.every((warning) => warning.includes('sse.maxBufferedBytesPerStream (1048576 bytes)')), reading.warnings.join('\n'));
    // The log line travels through the child's stdout pipe: wait for it, as for any other event.
    await whenLogged(gateway, () => logged(gateway, /notifications dropped for a client that did not read its stream/));
    report(t, `${count} logs sent: ${reading.logs} delivered, ${reading.droppedLogs} dropped in ${reading.warnings.length} warning(s)`);
  });

  test('the bound on all streams together: logs are dropped once the replica\'s streams hold sse.maxBufferedBytes', async (t) => {
    const scope = testScope(t);
    const stats = statsFile();
    // One stream may hold 64 MiB, but all of them together only 2 MiB.
    const gateway = await gatewayFor(scope, await abusiveUpstream(scope, 'stdio', stats), { maxBufferedBytesPerStream: 64 * MiB, maxBufferedBytes: 2 * MiB });
    const session = await openSession(gateway.url);
    const count = 20_000;
    const response = await slowPost(gateway.url, toolCall(1, 'log_flood', { count, size: 1000 }), sessionHeaders(session));
    await eventually(() => floodReport(stats, 'log_flood')?.done === true, FLOOD_WAIT_MS);
    const reading = await readAll(response, 1);
    assert.ok(reading.droppedLogs > 0, 'some logs were dropped');
    assert.equal(reading.logs + reading.droppedLogs, count);
    assert.match(reading.warnings[0] ?? '', /sse\.maxBufferedBytes \(2097152 bytes for all streams together\)/);
    report(t, `${count} logs sent: ${reading.logs} delivered, ${reading.droppedLogs} dropped`);
  });

  for (const transport of ['streamable-http', 'sse', 'stdio-per-session'] as const) {
    test(`POST stream, ${transport} upstream of one client: notifications no one may drop hold the upstream back until the client reads`, async (t) => {
      const scope = testScope(t);
      const stats = statsFile();
      const gateway = await gatewayFor(scope, await abusiveUpstream(scope, transport, stats));
      const session = await openSession(gateway.url);
      const count = 10_000;
      const size = 10_000; // 100 MB offered, 8 MiB allowed to wait
      const response = await slowPost(gateway.url, toolCall(1, 'notification_flood', { count, size }), sessionHeaders(session));
      await eventually(() => logged(gateway, /holding back the upstream/) || floodReport(stats, 'notification_flood')?.done === true, FLOOD_WAIT_MS);
      assert.ok(logged(gateway, /holding back the upstream/), 'the gateway held the upstream back');
      let held: FloodReport | undefined;
      await eventually(() => (held = floodReport(stats, 'notification_flood'))?.waiting === true, FLOOD_WAIT_MS);
      if (held === undefined) throw new Error('no flood report');
      assert.equal(held.done, false);
      assert.ok(held.sent < count / 2, `the upstream waited after ${held.sent} of ${count} notifications (${(held.sent * size) / MiB} MiB)`);
      const reading = await readAll(response, 1);
      assert.equal(textOf((reading.response as { result?: unknown }).result), `sent ${count}`);
      assert.deepEqual(reading.floods, Array.from({ length: count }, (_, i) => i + 1), 'every notification arrived, once, in order');
      await whenLogged(gateway, () => logged(gateway, /reading the upstream again/));
      report(t, `the fixture waited after ${held.sent} notifications (${Math.round((held.sent * size) / MiB)} MiB of ${(count * size) / MiB} MiB); all ${count} arrived once the client read`);
    });
  }

  test('POST stream, shared stdio upstream: the call of a client that does not read fails, and the other clients are served', async (t) => {
    const scope = testScope(t);
    const stats = statsFile();
    const gateway = await gatewayFor(scope, await abusiveUpstream(scope, 'stdio', stats));
    const slow = await openSession(gateway.url);
    const count = 30_000;
    const response = await slowPost(gateway.url, toolCall(1, 'notification_flood', { count, size: 1000 }), sessionHeaders(slow));
    await whenLogged(gateway, () => logged(gateway, /a call failed: its client is not reading its stream/));
    // The one stdout kept being read: the fixture got to the end of its flood, which now reaches no one.
    await eventually(() => floodReport(stats, 'notification_flood')?.done === true, FLOOD_WAIT_MS);
    const other = await scope.plainClient(gateway.url);
    assert.equal(textOf(await other.callTool({ name: 'echo', arguments: { text: 'still served' } })), 'still served');
    const reading = await readAll(response, 1);
    const error = (reading.response as { error?: { code: number; message: string } }).error;
    assert.equal(error?.code, -32603);
    assert.match(error?.message ?? '', /not reading its stream .*sse\.maxBufferedBytesPerStream \(8388608 bytes\)/);
    assert.ok(reading.floods.length < count, `${reading.floods.length} of ${count} notifications reached the client before its call failed`);
    report(t, `the call failed after ${reading.floods.length} of ${count} notifications: ${error?.message}`);
  });

  test('GET stream: the progress of a call answered as JSON coalesces on the GET stream the client does not read', async (t) => {
    const scope = testScope(t);
    const stats = statsFile();
    const gateway = await gatewayFor(scope, await abusiveUpstream(scope, 'streamable-http', stats));
    const session = await openSession(gateway.url);
    const listening = await slowRequest(gateway.url, 'GET', sessionHeaders(session, 'text/event-stream'));
    assert.equal(listening.status, 200);
    const count = 20_000;
    // Accepting JSON only, the client gets its answer as JSON; the call's progress goes to its GET stream.
    const answer = await fetch(gateway.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...sessionHeaders(session, 'application/json') },
      body: JSON.stringify(toolCall(1, 'progress_flood', { count, size: 10_000 }, { progressToken: 'g' })),
    });
    assert.equal(textOf(((await answer.json()) as { result: unknown }).result), `sent ${count}`);
    const progress: number[] = [];
    await listening.read((message) => {
      if (message.method === 'notifications/progress') progress.push(Number((message.params as Json).progress));
      return progress.at(-1) === count;
    });
    assert.equal(progress.at(-1), count, 'the latest progress wins');
    assert.ok(progress.length < count / 10, `coalesced: ${progress.length} of ${count} progress notifications arrived`);
    report(t, `${progress.length} of ${count} progress notifications arrived on the GET stream`);
  });

  test('replay: events past the byte bound are gone for Last-Event-ID, as past the count bound; the newest stay', async (t) => {
    const scope = testScope(t);
    const stats = statsFile();
    const gateway = await gatewayFor(scope, await abusiveUpstream(scope, 'streamable-http', stats), { maxBufferedBytesPerStream: 256 * 1024 });
    const session = await openSession(gateway.url);
    // A client that reads: 100 notifications of 10 kB pass, more than the stream may keep for a resume (256 kB).
    const response = await slowPost(gateway.url, toolCall(1, 'notification_flood', { count: 100, size: 10_000 }), sessionHeaders(session));
    const ids: string[] = [];
    await response.read((message, eventId) => {
      if (eventId !== undefined) ids.push(eventId);
      return 'result' in message;
    });
    assert.equal(ids.length, 101, 'every notification and the result came with an id');
    const [oldest] = ids;
    const beforeLast = ids.at(-2) as string;

    // A recent id resumes: the stream replays what came after it.
    const resumed = await slowRequest(gateway.url, 'GET', { ...sessionHeaders(session, 'text/event-stream'), 'last-event-id': beforeLast });
    const replayed: Json[] = [];
    await resumed.read((message) => {
      replayed.push(message);
      return 'result' in message;
    });
    assert.equal(replayed.length, 1);
    assert.equal(textOf((replayed[0] as { result: unknown }).result), 'sent 100');

    // The oldest id is gone: as for one past sse.replayBufferSize, the client gets a new GET stream, without replay.
    const fresh = await slowRequest(gateway.url, 'GET', { ...sessionHeaders(session, 'text/event-stream'), 'last-event-id': oldest as string });
    assert.equal(fresh.status, 200);
    const seen: Json[] = [];
    const marker = fetch(gateway.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...sessionHeaders(session, 'application/json') },
      body: JSON.stringify(toolCall(2, 'progress_flood', { count: 1, size: 1 }, { progressToken: 'marker' })),
    }).then((answer) => answer.text());
    await fresh.read((message) => {
      seen.push(message);
      return message.method === 'notifications/progress';
    });
    await marker;
    assert.deepEqual(seen.map((message) => message.method), ['notifications/progress'], 'nothing of the old stream was replayed');
    report(t, `${ids.length} events; a resume from ${oldest} got a new stream, from ${beforeLast} the last event`);
  });
});

describe('slow readers: 2026-07-28 requests', () => {
  for (const transport of ['streamable-http', 'stdio'] as const) {
    test(`${transport} upstream: progress coalesces while the client does not read, and the latest arrives`, async (t) => {
      const scope = testScope(t);
      const stats = statsFile();
      const gateway = await gatewayFor(scope, await abusiveUpstream(scope, transport, stats));
      const before = memoryOf(gateway.pid);
      const count = 40_000;
      const size = 10_000;
      const { body, headers } = rev2026Request('tools/call', { name: 'progress_flood', arguments: { count, size } }, { meta: { progressToken: 'p' } });
      const response = await slowPost(gateway.url, body, headers);
      assert.equal(response.status, 200);
      await eventually(() => floodReport(stats, 'progress_flood')?.done === true, FLOOD_WAIT_MS);
      const during = memoryOf(gateway.pid);
      const reading = await readAll(response, body.id as number);
      assert.equal(textOf((reading.response as { result?: unknown }).result), `sent ${count}`);
      assert.equal(reading.progress.at(-1), count, 'the latest progress wins');
      assert.ok(reading.progress.length < count / 10, `coalesced: ${reading.progress.length} progress notifications arrived of ${count} sent`);
      const growth = during.peak - before.rss;
      report(t, `${(count * size) / MiB} MiB of progress offered; ${reading.progress.length} notifications delivered; gateway RSS ${before.rss} → ${during.rss} MiB, peak ${during.peak} MiB`);
      assert.ok(growth < 300, `the gateway grew by ${growth} MiB while ${(count * size) / MiB} MiB of progress were offered`);
    });
  }

  test('logs past the bound are dropped, and the client is told how many', async (t) => {
    const scope = testScope(t);
    const stats = statsFile();
    const gateway = await gatewayFor(scope, await abusiveUpstream(scope, 'stdio', stats), { maxBufferedBytesPerStream: 1 * MiB });
    const count = 20_000;
    const { body, headers } = rev2026Request('tools/call', { name: 'log_flood', arguments: { count, size: 1000 } }, { logLevel: 'info' });
    const response = await slowPost(gateway.url, body, headers);
    await eventually(() => floodReport(stats, 'log_flood')?.done === true, FLOOD_WAIT_MS);
    const reading = await readAll(response, body.id as number);
    assert.equal(textOf((reading.response as { result?: unknown }).result), `sent ${count}`);
    assert.ok(reading.droppedLogs > 0, 'some logs were dropped');
    assert.equal(reading.logs + reading.droppedLogs, count, 'every log either arrived or was counted as dropped');
    report(t, `${count} logs sent: ${reading.logs} delivered, ${reading.droppedLogs} dropped in ${reading.warnings.length} warning(s)`);
  });
});
