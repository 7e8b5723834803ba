// What the gateway leaves open at a Streamable HTTP upstream: the upstream sessions it opens for client sessions
// end (DELETE) with them, with the gateway, and with a replica that died (ended by the replica that sweeps it); their
// number per upstream is bounded; pooled connections are dropped before the upstream drops them, and a call whose
// connection failed while it was still being written goes once more, never twice. Real SDK clients, real gateways
// (in process, and as processes on one Redis for the replica case), the session fixture's Streamable HTTP side in
// this process so that its session counts can be read.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { describe, test } from 'node:test';
import { createSessionStreamableHttpHandler, startSessionServer, type SessionServerHandle } from '../fixtures/session-server.js';
import { eventually, type Json, logEntries, testScope, textOf, whenLogged } from '../helpers/harness.js';
import { redisTestPrefix, TEST_REDIS_URL } from '../helpers/shared-redis.js';

const PREFIX = redisTestPrefix('upstream-sessions');
const LEASE_MS = 1000;

/** The session fixture over Streamable HTTP in this process (so its session counts are at hand). */
async function countingUpstream(scope: { defer(stop: () => unknown): void }): Promise<SessionServerHandle & { counts(): { opened: number; deleted: number; open: number } }> {
  const server = await startSessionServer({ transport: 'streamable-http' });
  scope.defer(() => server.close());
  return { ...server, counts: () => server.sessionCounts() ?? { opened: 0, deleted: 0, open: 0 } };
}

function upstreamConfig(url: string, extra: Json = {}): Json {
  return { up: { transport: 'streamable-http', url, protocol: 'legacy', ...extra } };
}

describe('upstream sessions the gateway opens', () => {
  test('a client session that ends (DELETE) ends its upstream session; one left idle ends when it expires', async (t) => {
    const scope = testScope(t);
    const upstream = await countingUpstream(scope);
    const gateway = await scope.gateway({ upstreams: upstreamConfig(upstream.url), sessions: { idleTimeoutMs: 1500 } });
    assert.equal(upstream.counts().opened, 1, 'the gateway\'s own (control) session');

    const { client, transport } = await scope.client(gateway.url);
    assert.match(textOf(await client.callTool({ name: 'echo', arguments: { n: 1 } })), /"n":1/);
    assert.deepEqual(upstream.counts(), { opened: 2, deleted: 0, open: 2 });
    await transport.terminateSession();
    await eventually(() => upstream.counts().deleted === 1);
    assert.equal(upstream.counts().open, 1);

    // A client that goes away without DELETE: its session expires (sessions.idleTimeoutMs), and its upstream session with it.
    const idle = await scope.client(gateway.url);
    await idle.client.callTool({ name: 'echo', arguments: { n: 2 } });
    assert.equal(upstream.counts().open, 2);
    await eventually(() => upstream.counts().deleted === 2, 10_000);
    assert.equal(upstream.counts().open, 1);
  });

  test('the gateway stopping ends every upstream session it opened before close() resolves', async (t) => {
    const scope = testScope(t);
    const upstream = await countingUpstream(scope);
    const gateway = await scope.gateway({ upstreams: upstreamConfig(upstream.url) });
    for (let i = 0; i < 3; i++) {
      const { client } = await scope.client(gateway.url);
      await client.callTool({ name: 'echo', arguments: { i } });
    }
    assert.deepEqual(upstream.counts(), { opened: 4, deleted: 0, open: 4 });
    await gateway.close();
    assert.deepEqual(upstream.counts(), { opened: 4, deleted: 4, open: 0 }, 'three client sessions\' and the control session');
  });

  test('maxSessions: at the bound the least recently used idle session is closed; when all are busy a new session is refused', async (t) => {
    const scope = testScope(t);
    const upstream = await countingUpstream(scope);
    const gateway = await scope.gateway({ upstreams: upstreamConfig(upstream.url, { maxSessions: 2 }) });
    const first = await scope.client(gateway.url);
    const second = await scope.client(gateway.url);
    await first.client.callTool({ name: 'echo', arguments: { who: 'first' } });
    await second.client.callTool({ name: 'echo', arguments: { who: 'second' } });
    await first.client.callTool({ name: 'echo', arguments: { who: 'first again' } }); // second is now the least recently used
    const third = await scope.client(gateway.url);
    await third.client.callTool({ name: 'echo', arguments: { who: 'third' } });
    await eventually(() => upstream.counts().deleted === 1);
    assert.equal(upstream.counts().open, 3, 'two client sessions and the control session');
    // second comes back: it gets a new upstream session, in place of the least recently used idle one (first).
    assert.match(textOf(await second.client.callTool({ name: 'echo', arguments: { who: 'second again' } })), /second again/);
    await eventually(() => upstream.counts().deleted === 2);

    // Both sessions busy (their slow calls report progress once they run at the upstream): a fourth client's call
    // is refused, saying why; the busy calls are untouched.
    const running = [third, second].map(
      ({ client }) =>
        new Promise<void>((resolve) => {
          client.callTool({ name: 'slow', arguments: { ms: 600_000, steps: 6_000 } }, undefined, { onprogress: () => resolve(), timeout: 900_000 }).catch(() => undefined);
        }),
    );
    await Promise.all(running);
    const fourth = await scope.client(gateway.url);
    await assert.rejects(fourth.client.callTool({ name: 'echo', arguments: {} }), /has no session to spare: 2 client sessions each have a call running/);
    assert.equal(upstream.counts().open, 3);
  });
});

describe('a replica that dies leaves no upstream session behind', () => {
  test('kill -9: the replica that sweeps it ends the upstream sessions it had opened', async (t) => {
    const scope = testScope(t);
    const upstream = await countingUpstream(scope);
    const config = (): Json => ({
      store: { type: 'redis', url: TEST_REDIS_URL, prefix: PREFIX },
      upstreams: upstreamConfig(upstream.url),
      replicas: { leaseMs: LEASE_MS, drainTimeoutMs: 0 },
      log: { level: 'info' },
    });
    const doomed = await scope.spawnGateway({ config: config() });
    const sweeper = await scope.spawnGateway({ config: config() });
    for (let i = 0; i < 2; i++) {
      const { client } = await scope.client(doomed.url);
      await client.callTool({ name: 'echo', arguments: { i } });
    }
    assert.deepEqual(upstream.counts(), { opened: 4, deleted: 0, open: 4 }, 'two control sessions, two client sessions');

    process.kill(-doomed.pid, 'SIGKILL');
    await doomed.exited;
    await eventually(() => upstream.counts().deleted === 3, 20 * LEASE_MS);
    assert.equal(upstream.counts().open, 1, 'the sweeper\'s own control session stays');
    await whenLogged(sweeper, () => logEntries(sweeper).some((entry) => entry.msg === 'ended the upstream sessions of lost replicas' && entry.ended === 3));
  });
});

/**
 * The fixture's Streamable HTTP handler behind a node:http server of the test's own, which counts the tools/call
 * requests it really received, and can close idle sockets itself or reset a connection as a request arrives.
 */
async function rawUpstream(
  scope: { defer(stop: () => unknown): void },
  options: { resetFirstLarge?: boolean },
): Promise<{ url: string; calls: () => number; resets: () => number; endedByGateway: () => number }> {
  const handler = createSessionStreamableHttpHandler();
  let calls = 0;
  let resets = 0;
  let endedByGateway = 0;
  const server = http.createServer((req, res) => {
    const socket = req.socket;
    const large = Number(req.headers['content-length'] ?? 0) > 1024 * 1024;
    if (options.resetFirstLarge === true && large && resets === 0) {
      // As a server whose keep-alive timer fired just as the request came: the request is never read.
      resets++;
      socket.destroy();
      return;
    }
    void (async () => {
      let body: unknown;
      if (req.method === 'POST') {
        const chunks: Buffer[] = [];
        for await (const chunk of req) chunks.push(chunk as Buffer);
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        if ((body as { method?: string }).method === 'tools/call') calls++;
      }
      await handler.handle(req, res, body);
    })();
  });
  // No Keep-Alive header and no idle timeout of its own: the gateway alone decides when an idle connection goes.
  server.keepAliveTimeout = 0;
  server.requestTimeout = 0;
  server.on('connection', (socket: Socket) => socket.on('end', () => endedByGateway++));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  scope.defer(async () => {
    await handler.closeAll();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/mcp`, calls: () => calls, resets: () => resets, endedByGateway: () => endedByGateway };
}

describe('pooled upstream connections', () => {
  test('an idle connection is closed by the gateway when the upstream says nothing of its keep-alive', async (t) => {
    const scope = testScope(t);
    const upstream = await rawUpstream(scope, {});
    const gateway = await scope.gateway({ upstreams: upstreamConfig(upstream.url) });
    const { client } = await scope.client(gateway.url);
    await client.callTool({ name: 'echo', arguments: {} });
    // The upstream never closes idle connections here: only the gateway's idle timeout can end them.
    await eventually(() => upstream.endedByGateway() > 0, 20_000);
  });

  test('a call whose connection is reset while the call is still being written goes once more on a new one: answered once, received once', async (t) => {
    const scope = testScope(t);
    const upstream = await rawUpstream(scope, { resetFirstLarge: true });
    const gateway = await scope.gateway({ upstreams: upstreamConfig(upstream.url, { maxMessageBytes: 64 * 1024 * 1024 }), listen: { host: '127.0.0.1', port: 0, path: '/mcp', maxBodyBytes: 32 * 1024 * 1024 } });
    const { client } = await scope.client(gateway.url);
    await client.callTool({ name: 'echo', arguments: { warm: true } });
    const large = 'x'.repeat(8 * 1024 * 1024);
    const result = await client.callTool({ name: 'echo', arguments: { large } }, undefined, { timeout: 120_000 });
    assert.equal((result.structuredContent as { large?: string }).large?.length, large.length);
    assert.equal(upstream.resets(), 1, 'the first attempt was reset before the upstream read it');
    assert.equal(upstream.calls(), 2, 'each call reached the upstream exactly once');
  });
});
