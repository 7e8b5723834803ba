// The one place a request to an HTTP upstream gets its credential and trace context (outbound.ts, composed in
// http-agent.ts), against a real loopback server: which credential goes, in which order the headers win, and the
// one retry after a 401 (with the body sent again, and only when the source has a new credential).
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Agent, request, type Dispatcher } from 'undici';
import type { CredentialSource } from '../../src/identity/credential-source.js';
import { upstreamDispatcher } from '../../src/upstream/transports/http-agent.js';
import type { OutboundDispatchOptions } from '../../src/upstream/transports/outbound.js';

interface Seen {
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** Answers 401 to a request whose Authorization is in `refused`, 200 echoing nothing otherwise; records each request. */
function recordingServer(): { seen: Seen[]; refused: Set<string>; server: http.Server } {
  const seen: Seen[] = [];
  const refused = new Set<string>();
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      seen.push({ headers: req.headers, body });
      const denied = refused.has(String(req.headers.authorization));
      res.writeHead(denied ? 401 : 200, { 'content-type': 'text/plain' });
      res.end(denied ? 'refused: a body the retry must not leave unread' : 'ok');
    });
  });
  return { seen, refused, server };
}

/** A source that hands out `Bearer t1`, `Bearer t2`… and counts the 401s it was told of. */
function rotatingSource(options: { refreshes?: boolean } = {}): CredentialSource & { told: number; next?: Promise<void> } {
  let token = 1;
  let current: Readonly<Record<string, string>> = { authorization: 'Bearer t1', 'x-configured': 'configured' };
  const source: CredentialSource & { told: number; next?: Promise<void> } = {
    told: 0,
    async headers() {
      await source.next;
      return current;
    },
  };
  if (options.refreshes !== false) {
    source.refreshAfterUnauthorized = (sent) => {
      source.told++;
      if (sent !== current) return true;
      token++;
      current = { authorization: `Bearer t${token}`, 'x-configured': 'configured' };
      return true;
    };
  }
  return source;
}

describe('upstream requests: credential and trace context (outbound.ts)', () => {
  const { seen, refused, server } = recordingServer();
  let url: string;
  const pool = new Agent();

  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });
  after(async () => {
    await pool.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  function post(dispatcher: Dispatcher, extra: Partial<OutboundDispatchOptions> = {}, signal?: AbortSignal): Promise<Dispatcher.ResponseData> {
    const options: Omit<OutboundDispatchOptions, 'origin' | 'path'> & { dispatcher: Dispatcher; signal?: AbortSignal } = {
      method: 'POST',
      dispatcher,
      headers: { 'content-type': 'application/json', 'x-configured': 'own' },
      body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
      ...extra,
      ...(signal === undefined ? {} : { signal }),
    };
    return request(url, options);
  }

  test('the connection\'s credential goes first: the request\'s own headers and its trace context replace a configured one', async () => {
    seen.length = 0;
    const connection: CredentialSource = { headers: async () => ({ authorization: 'Bearer gateway', 'x-configured': 'configured', traceparent: 'configured' }) };
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const response = await post(upstreamDispatcher(pool, connection), { outbound: { traceHeaders: { traceparent, tracestate: 'k=v' } } });
    await response.body.dump();
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.headers.authorization, 'Bearer gateway');
    assert.equal(seen[0]?.headers['x-configured'], 'own');
    assert.equal(seen[0]?.headers.traceparent, traceparent);
    assert.equal(seen[0]?.headers.tracestate, 'k=v');
  });

  test('a request that carries its caller\'s credential goes with it, not the connection\'s', async () => {
    seen.length = 0;
    const connection: CredentialSource = { headers: async () => ({ authorization: 'Bearer gateway' }) };
    const caller: CredentialSource = { headers: async () => ({ authorization: 'Bearer caller' }) };
    const dispatcher = upstreamDispatcher(pool, connection);
    await (await post(dispatcher, { outbound: { credentials: caller } })).body.dump();
    await (await post(dispatcher)).body.dump();
    assert.deepEqual(seen.map((s) => s.headers.authorization), ['Bearer caller', 'Bearer gateway']);
    assert.equal(seen[1]?.headers.traceparent, undefined);
  });

  test('a 401 is retried once, with the new credential and the same body; a second 401 is the answer', async () => {
    seen.length = 0;
    const source = rotatingSource();
    refused.add('Bearer t1');
    const first = await post(upstreamDispatcher(pool, source));
    assert.equal(first.statusCode, 200);
    await first.body.dump();
    assert.deepEqual(seen.map((s) => s.headers.authorization), ['Bearer t1', 'Bearer t2']);
    assert.equal(seen[1]?.body, seen[0]?.body);
    assert.equal(source.told, 1);

    seen.length = 0;
    refused.add('Bearer t2');
    refused.add('Bearer t3');
    const second = await post(upstreamDispatcher(pool, source));
    assert.equal(second.statusCode, 401, 'the retry\'s own 401 reaches the caller');
    assert.match(await second.body.text(), /refused/);
    assert.deepEqual(seen.map((s) => s.headers.authorization), ['Bearer t2', 'Bearer t3']);
    assert.equal(source.told, 2, 'only the first 401 is told to the source');
    refused.clear();
  });

  test('a 401 from a source that cannot get a new credential is the answer, sent once', async () => {
    seen.length = 0;
    const source = rotatingSource({ refreshes: false });
    refused.add('Bearer t1');
    const response = await post(upstreamDispatcher(pool, source));
    assert.equal(response.statusCode, 401);
    await response.body.dump();
    assert.equal(seen.length, 1);
    refused.clear();
  });

  test('a credential that cannot be had fails the request with its error, and nothing is sent', async () => {
    seen.length = 0;
    const failure = new Error('no token for this caller');
    const source: CredentialSource = { headers: () => Promise.reject(failure) };
    await assert.rejects(post(upstreamDispatcher(pool, source)), (error) => error === failure);
    assert.equal(seen.length, 0);
  });

  test('an abort while the new credential is fetched ends the request: the retry is not sent', async () => {
    seen.length = 0;
    const source = rotatingSource();
    refused.add('Bearer t1');
    const abort = new AbortController();
    let release!: () => void;
    const told = source.refreshAfterUnauthorized?.bind(source);
    source.refreshAfterUnauthorized = (sent) => {
      // The retry's credential waits until the caller has aborted.
      source.next = new Promise<void>((resolve) => (release = resolve));
      queueMicrotask(() => {
        abort.abort(new Error('the caller went away'));
        release();
      });
      return told?.(sent) ?? false;
    };
    await assert.rejects(post(upstreamDispatcher(pool, source), {}, abort.signal), /the caller went away/);
    assert.equal(seen.length, 1, 'only the refused attempt reached the upstream');
    refused.clear();
  });
});
