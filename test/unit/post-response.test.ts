// A POST's response taken from undici's dispatcher (post-response.ts): the readers get what a Readable would give
// them, however the body arrives: whole before they attach, in pieces, held back while paused, cut off.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import { readBoundedText } from '../../src/upstream/transports/body-reader.js';
import { MessageTooLargeError } from '../../src/upstream/transports/oversized.js';
import { dispatchPost } from '../../src/upstream/transports/post-response.js';
import { readSse } from '../../src/upstream/transports/sse-reader.js';

type Route = (request: IncomingMessage, response: ServerResponse) => void;
const routes = new Map<string, Route>();
let server: Server;
let origin: string;
const agent = new Agent({ connections: 4, pipelining: 1 });

before(async () => {
  server = createServer((request, response) => {
    request.resume();
    request.once('end', () => (routes.get(request.url ?? '') ?? ((_q, s) => s.writeHead(404).end()))(request, response));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  await agent.close();
  await new Promise((resolve) => server.close(resolve));
});

const post = (path: string, inflight = new Set<(reason: Error) => void>()) =>
  dispatchPost(agent, { origin, path, method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }, inflight);

describe('POST responses from the dispatcher', () => {
  it('picks the headers the transport reads, whatever their case, and joins a repeated Content-Type', async () => {
    routes.set('/headers', (_q, s) => {
      s.setHeader('Content-Type', ['application/json', 'charset=utf-8']);
      s.setHeader('MCP-Session-Id', 'abc');
      s.setHeader('X-Other', 'ignored');
      s.end('{"a":1}');
    });
    const response = await post('/headers');
    assert.equal(response.statusCode, 200);
    assert.equal(response.contentType, 'application/json,charset=utf-8');
    assert.equal(response.sessionId, 'abc');
    assert.equal(response.contentLength, '7');
    assert.equal(await readBoundedText(response.body, 100, response.contentLength), '{"a":1}');
  });

  it('holds a body that arrived whole until its reader attaches, then gives data, end and close in order', async () => {
    routes.set('/whole', (_q, s) => s.writeHead(200, { 'content-type': 'text/event-stream' }).end('id: 1\ndata: {"x":1}\n\nid: 2\ndata: {"x":2}\n\n'));
    const response = await post('/whole');
    await sleep(20); // everything is here before anyone reads
    const events: string[] = [];
    const order: string[] = [];
    response.body.once('end', () => order.push('end'));
    response.body.once('close', () => order.push('close'));
    const result = await readSse(response.body, (event) => events.push(event.data), { maxEventBytes: 1000 });
    await sleep(0);
    assert.deepEqual(events, ['{"x":1}', '{"x":2}']);
    assert.equal(result.lastEventId, '2');
    assert.deepEqual(order, ['end', 'close']);
  });

  it('holds chunks while paused, and the end behind them, until resumed', async () => {
    routes.set('/paused', (_q, s) => {
      s.writeHead(200, { 'content-type': 'text/event-stream' });
      s.write('data: one\n\n');
      setTimeout(() => s.end('data: two\n\n'), 30);
    });
    const response = await post('/paused');
    const seen: string[] = [];
    const reading = readSse(response.body, (event) => {
      seen.push(event.data);
      if (event.data === 'one') response.body.pause();
    }, { maxEventBytes: 1000 });
    await sleep(80);
    assert.deepEqual(seen, ['one']);
    response.body.resume();
    await reading;
    assert.deepEqual(seen, ['one', 'two']);
  });

  it('a reader that destroys the body past its bound gets its own error, and the request is aborted', async () => {
    routes.set('/large', (_q, s) => s.writeHead(200, { 'content-type': 'application/json' }).end(`"${'x'.repeat(5000)}"`));
    const inflight = new Set<(reason: Error) => void>();
    const response = await post('/large', inflight);
    await assert.rejects(readBoundedText(response.body, 100), MessageTooLargeError);
    assert.equal(response.body.destroyed, true);
    await sleep(10);
    assert.equal(inflight.size, 0);
  });

  it('aborting it in flight fails the POST before its headers, and the body after them', async () => {
    routes.set('/slow', () => undefined); // never answers
    const early = new Set<(reason: Error) => void>();
    const waiting = post('/slow', early);
    await sleep(20);
    for (const abort of early) abort(new Error('closed'));
    await assert.rejects(waiting, /closed/);

    routes.set('/open', (_q, s) => s.writeHead(200, { 'content-type': 'text/event-stream' }).write(': open\n\n'));
    const late = new Set<(reason: Error) => void>();
    const response = await post('/open', late);
    const reading = readSse(response.body, () => undefined, { maxEventBytes: 1000 });
    await sleep(20);
    for (const abort of late) abort(new Error('closed'));
    const result = await reading;
    assert.match(String(result.error?.message), /closed/);
  });

  it('dump() reads a body to its end', async () => {
    routes.set('/accepted', (_q, s) => s.writeHead(202).end('ignored'));
    const response = await post('/accepted');
    assert.equal(response.statusCode, 202);
    await response.body.dump();
    assert.equal(response.body.destroyed, true);
  });
});
