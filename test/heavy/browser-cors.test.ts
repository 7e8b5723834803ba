// Browser clients through CORS, in a real headless Chromium (Debian's `chromium`; .ci/run installs it): a page
// served from another origin than the gateway's speaks MCP to it with fetch, as a web IDE or an agent in a page
// would, and POSTs what happened back to the page's own server. A page from an origin not listed is refused by the
// browser itself. Nothing here is skipped: without chromium the test fails, saying how to install it.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { request } from 'undici';
import { chromiumPath } from '../helpers/dashboard-browser.js';
import { testScope, type TestScope } from '../helpers/harness.js';
import { STATELESS_VERSION } from '../helpers/stateless-wire.js';

type Json = Record<string, unknown>;

const API_KEY = 'browser-cors-test-key';

/**
 * What the page runs in the browser: an MCP client written with fetch only. Each step's outcome goes into the
 * report; the first failure ends the run and is reported with the step it happened in.
 */
function pageScript(gateway: string, apiKey: string, rev2026Version: string): string {
  return `
const GATEWAY = ${JSON.stringify(gateway)};
const KEY = ${JSON.stringify(apiKey)};
const report = { steps: {} };
let step = 'start';

async function messagesOf(response) {
  const text = await response.text();
  if ((response.headers.get('content-type') || '').includes('text/event-stream')) {
    return text.split(/\\r?\\n\\r?\\n/)
      .map((event) => event.split(/\\r?\\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\\n'))
      .filter((data) => data !== '')
      .map((data) => JSON.parse(data));
  }
  return text.trim() === '' ? [] : [JSON.parse(text)];
}

function post(message, headers) {
  return fetch(GATEWAY, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(message),
  });
}

async function run() {
  step = 'initialize without a token';
  const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'browser-page', version: '1.0.0' } } };
  const refused = await post(initialize, {});
  report.steps.unauthenticated = { status: refused.status, wwwAuthenticate: refused.headers.get('www-authenticate') };

  step = 'initialize';
  const auth = { Authorization: 'Bearer ' + KEY };
  const init = await post(initialize, auth);
  const sessionId = init.headers.get('mcp-session-id');
  const [initialized] = await messagesOf(init);
  report.steps.initialize = { status: init.status, sessionId, protocolVersion: initialized.result.protocolVersion };
  const session = { ...auth, 'Mcp-Session-Id': sessionId, 'MCP-Protocol-Version': initialized.result.protocolVersion };

  step = 'notifications/initialized';
  const notified = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, session);
  report.steps.initialized = { status: notified.status };

  step = 'tools/list';
  const [list] = await messagesOf(await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, session));
  report.steps.toolsList = { names: list.result.tools.map((t) => t.name) };

  step = 'tools/call';
  const call = await post({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'slow', arguments: { ms: 100, steps: 2 }, _meta: { progressToken: 'p1' } } }, session);
  const answer = await messagesOf(call);
  report.steps.toolsCall = {
    contentType: call.headers.get('content-type'),
    progress: answer.filter((m) => m.method === 'notifications/progress').length,
    result: answer.find((m) => m.id === 3).result,
  };

  step = 'DELETE';
  const ended = await fetch(GATEWAY, { method: 'DELETE', headers: session });
  report.steps.deleted = { status: ended.status };

  step = '2026-07-28 tools/call';
  const envelope = {
    'io.modelcontextprotocol/protocolVersion': ${JSON.stringify(rev2026Version)},
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': { name: 'browser-page', version: '1.0.0' },
  };
  const rev2026Side = await post(
    { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'echo', arguments: { from: 'browser' }, _meta: envelope } },
    // Mcp-Param-* is matched by prefix in the preflight; the gateway ignores a parameter header no tool declares.
    { ...auth, 'MCP-Protocol-Version': ${JSON.stringify(rev2026Version)}, 'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo', 'Mcp-Param-Region': 'eu' },
  );
  const [rev2026Answer] = (await messagesOf(rev2026Side)).filter((m) => m.id === 4);
  report.steps.rev2026Side = { status: rev2026Side.status, structuredContent: rev2026Answer.result.structuredContent };
  report.ok = true;
}

run()
  .catch((error) => { report.ok = false; report.failedStep = step; report.error = { name: error.name, message: String(error.message) }; })
  .then(() => fetch('/report', { method: 'POST', body: JSON.stringify(report) }));
`;
}

interface PageServer {
  origin: string;
  /** The first report the page POSTs. */
  report: Promise<Json>;
}

/** Serves the page at `/` on `host`, a port of its own: its origin is the page's origin. */
async function servePage(scope: TestScope, host: string, script: () => string): Promise<PageServer> {
  let deliver: (report: Json) => void = () => {};
  const report = new Promise<Json>((resolve) => (deliver = resolve));
  const server: Server = createServer((request, response) => {
    if (request.method === 'GET' && request.url === '/') {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(`<!doctype html><title>mcp page</title><script>${script()}</script>`);
      return;
    }
    if (request.method === 'POST' && request.url === '/report') {
      let body = '';
      request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk)).on('end', () => {
        response.writeHead(204).end();
        deliver(JSON.parse(body) as Json);
      });
      return;
    }
    response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  scope.defer(() => new Promise<void>((resolve) => server.close(() => resolve())));
  scope.defer(() => server.closeAllConnections());
  return { origin: `http://${host}:${(server.address() as AddressInfo).port}`, report };
}

/** Opens `url` in a headless Chromium of its own (fresh profile), closed with the scope. */
function openInChromium(scope: TestScope, url: string): void {
  const profile = mkdtempSync(join(tmpdir(), 'taskgate-chromium-'));
  const browser: ChildProcess = spawn(
    chromiumPath(),
    ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check', `--user-data-dir=${profile}`, url],
    // Its own process group, so that its helper processes go with it.
    { stdio: ['ignore', 'ignore', 'pipe'], detached: true },
  );
  let stderr = '';
  browser.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
  const exited = new Promise<void>((resolve) => browser.once('exit', () => resolve()));
  browser.once('error', (error) => assert.fail(`chromium did not start: ${error.message}`));
  scope.defer(() => rmSync(profile, { recursive: true, force: true }));
  scope.defer(async () => {
    if (browser.exitCode === null && browser.signalCode === null && browser.pid !== undefined) process.kill(-browser.pid, 'SIGKILL');
    await exited;
  });
  scope.defer(() => {
    if (process.env.TEST_LOG_LEVEL !== undefined) process.stderr.write(stderr);
  });
}

/** A gateway that lists `origin` for CORS, with an API key and the stdio fixture behind it. */
async function corsGateway(scope: TestScope, origin: string): Promise<string> {
  const upstream = await scope.upstream('stdio');
  const gateway = await scope.gateway({
    listen: { host: '127.0.0.1', port: 0, path: '/mcp', cors: { origins: [origin] } },
    auth: { resource: 'http://gateway.example/mcp', apiKeys: [{ principal: 'page', key: API_KEY }] },
    upstreams: { fixture: upstream.config },
  });
  return gateway.url;
}

describe('browser clients through CORS (headless Chromium)', () => {
  test('a page on a listed origin initializes, reads Mcp-Session-Id, lists and calls tools, and ends its session', { timeout: 60_000 }, async (t) => {
    chromiumPath();
    const scope = testScope(t);
    let gatewayUrl = '';
    const page = await servePage(scope, '127.0.0.1', () => pageScript(gatewayUrl, API_KEY, STATELESS_VERSION));
    gatewayUrl = await corsGateway(scope, page.origin);
    assert.notEqual(new URL(gatewayUrl).origin, page.origin, 'the page must be cross-origin to the gateway');
    openInChromium(scope, `${page.origin}/`);

    const report = await page.report;
    assert.equal(report.ok, true, `the page failed: ${JSON.stringify(report)}`);
    const steps = report.steps as Record<string, Json>;
    // A 401 is readable too, challenge included: the page can find its way to credentials.
    assert.equal(steps.unauthenticated?.status, 401);
    assert.match(String(steps.unauthenticated?.wwwAuthenticate), /^Bearer /);
    assert.equal(steps.initialize?.status, 200);
    assert.match(String(steps.initialize?.sessionId), /^[0-9a-f-]{16,}$/, 'Mcp-Session-Id is exposed to the script');
    assert.equal(steps.initialize?.protocolVersion, '2025-11-25');
    assert.equal(steps.initialized?.status, 202);
    assert.ok((steps.toolsList?.names as string[]).includes('slow'));
    assert.deepEqual((steps.toolsCall?.result as Json).structuredContent, { sleptMs: 100, steps: 2 });
    // Progress came before the result, so the answer was an SSE stream: written on the raw response, with CORS.
    assert.equal(steps.toolsCall?.progress, 2);
    assert.match(String(steps.toolsCall?.contentType), /text\/event-stream/);
    assert.equal(steps.deleted?.status, 200);
    assert.equal(steps.rev2026Side?.status, 200);
    assert.deepEqual(steps.rev2026Side?.structuredContent, { from: 'browser' });
  });

  test('the same page from an origin not listed is refused by the browser: its first fetch rejects', { timeout: 60_000 }, async (t) => {
    chromiumPath();
    const scope = testScope(t);
    let gatewayUrl = '';
    const listed = await servePage(scope, '127.0.0.1', () => '');
    // A loopback origin passes the gateway's Origin guard when it is bound to loopback: only CORS stops this page.
    const other = await servePage(scope, '127.0.0.2', () => pageScript(gatewayUrl, API_KEY, STATELESS_VERSION));
    gatewayUrl = await corsGateway(scope, listed.origin);
    openInChromium(scope, `${other.origin}/`);

    const report = await other.report;
    assert.equal(report.ok, false, `the page was served: ${JSON.stringify(report)}`);
    assert.equal(report.failedStep, 'initialize without a token', 'the very first request fails');
    assert.deepEqual(report.steps, {}, 'no answer reached the script');
    assert.equal((report.error as Json).name, 'TypeError', 'fetch rejects with a network error, as CORS failures do');
  });
});

// What a browser does not show: the headers themselves, on each kind of answer, read with plain HTTP requests.
describe('CORS headers on the wire', () => {
  const INITIALIZE = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
  const LISTED = 'https://ide.app.example';

  async function send(url: string, method: 'GET' | 'POST' | 'DELETE' | 'OPTIONS', headers: Record<string, string>, body?: string) {
    const answer = await request(url, { method, headers, body });
    await answer.body.text();
    return { status: answer.statusCode, headers: answer.headers };
  }
  const corsHeaders = (headers: Record<string, unknown>) => Object.keys(headers).filter((name) => name.startsWith('access-control-')).sort();

  test('without listen.cors there is none: OPTIONS is not found, answers carry no CORS headers', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.gateway({ upstreams: { fixture: upstream.config } });
    const origin = 'http://127.0.0.1:3000'; // a loopback origin passes the guard of a loopback bind
    assert.equal((await send(gateway.url, 'OPTIONS', { origin, 'access-control-request-method': 'POST' })).status, 404);
    const init = await send(gateway.url, 'POST', { origin, 'content-type': 'application/json', accept: 'application/json' }, INITIALIZE);
    assert.equal(init.status, 200);
    assert.deepEqual(corsHeaders(init.headers), []);
  });

  test('listed origins get CORS on every answer of the MCP endpoint (errors and 401 too), others are refused by the guard', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.gateway({
      listen: { host: '127.0.0.1', port: 0, path: '/mcp', allowedOrigins: ['https://other.example'], cors: { origins: ['https://*.app.example'], credentials: true, maxAgeSeconds: 120 } },
      auth: { resource: 'http://gateway.example/mcp', apiKeys: [{ principal: 'page', key: API_KEY }] },
      upstreams: { fixture: upstream.config },
    });
    const url = gateway.url;

    const preflight = await send(url, 'OPTIONS', { origin: LISTED, 'access-control-request-method': 'DELETE', 'access-control-request-headers': 'authorization,mcp-session-id,mcp-param-region,x-evil' });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers['access-control-allow-origin'], LISTED);
    assert.equal(preflight.headers['access-control-allow-methods'], 'GET, POST, DELETE');
    assert.equal(preflight.headers['access-control-allow-headers'], 'authorization, mcp-session-id, mcp-param-region');
    assert.equal(preflight.headers['access-control-max-age'], '120');
    assert.equal(preflight.headers['access-control-allow-credentials'], 'true');
    assert.match(String(preflight.headers.vary), /^Origin, /);

    // Not a preflight: what the endpoint takes.
    const options = await send(url, 'OPTIONS', {});
    assert.equal(options.status, 204);
    assert.equal(options.headers.allow, 'GET, POST, DELETE, OPTIONS');

    // Not listed anywhere: the Origin guard refuses it before CORS (this bind takes only allowedOrigins and cors.origins).
    const foreign = await send(url, 'OPTIONS', { origin: 'https://evil.example', 'access-control-request-method': 'POST' });
    assert.equal(foreign.status, 403);
    assert.deepEqual(corsHeaders(foreign.headers), []);
    // Listed in allowedOrigins only: past the guard, but no CORS for it.
    const guardOnly = await send(url, 'OPTIONS', { origin: 'https://other.example', 'access-control-request-method': 'POST' });
    assert.equal(guardOnly.status, 204);
    assert.deepEqual(corsHeaders(guardOnly.headers), []);

    const unauthenticated = await send(url, 'POST', { origin: LISTED, 'content-type': 'application/json', accept: 'application/json' }, INITIALIZE);
    assert.equal(unauthenticated.status, 401);
    assert.equal(unauthenticated.headers['access-control-allow-origin'], LISTED);
    assert.equal(unauthenticated.headers['access-control-expose-headers'], 'Mcp-Session-Id, WWW-Authenticate, Retry-After');
    assert.equal(unauthenticated.headers['access-control-allow-credentials'], 'true');
    assert.equal(unauthenticated.headers.vary, 'Origin');

    const auth = { authorization: `Bearer ${API_KEY}` };
    const missingSession = await send(url, 'GET', { ...auth, origin: LISTED, accept: 'text/event-stream' });
    assert.equal(missingSession.status, 400);
    assert.equal(missingSession.headers['access-control-allow-origin'], LISTED, 'errors from the error handler carry CORS too');

    const plain = await send(url, 'POST', { ...auth, 'content-type': 'application/json', accept: 'application/json' }, INITIALIZE);
    assert.equal(plain.status, 200);
    assert.deepEqual(corsHeaders(plain.headers), [], 'no Origin, no CORS');
    assert.equal(plain.headers.vary, 'Origin', 'but caches learn the answer depends on it');

    // Only the MCP endpoint: health has none; the RFC 9728 metadata stays public to every origin, as before.
    const health = await send(new URL('/healthz', url).href, 'GET', { origin: LISTED });
    assert.equal(health.status, 200);
    assert.deepEqual(corsHeaders(health.headers), []);
    const metadata = await send(new URL('/.well-known/oauth-protected-resource/mcp', url).href, 'GET', { origin: LISTED });
    assert.equal(metadata.status, 200);
    assert.equal(metadata.headers['access-control-allow-origin'], '*');
  });
});
