// The upstream connection pool against real loopback servers: how long it keeps idle connections, and which failed
// POSTs it sends again (only one whose bytes had not all left the gateway; never one the upstream may have read).
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { UPSTREAM_IDLE_KEEP_ALIVE_MS, UpstreamAgent } from '../../src/upstream/transports/http-agent.js';

/** A server that resets the connection of the first request larger than `resetAbove` bytes as its headers arrive (never reading it), and counts the requests it read whole. */
async function resettingServer(resetAbove: number): Promise<{ origin: string; received: () => number; resets: () => number; close(): Promise<void> }> {
  let received = 0;
  let resets = 0;
  const server = http.createServer((req, res) => {
    if (Number(req.headers['content-length'] ?? 0) > resetAbove && resets === 0) {
      resets++;
      req.socket.destroy();
      return;
    }
    let bytes = 0;
    req.on('data', (chunk: Buffer) => (bytes += chunk.length));
    req.on('end', () => {
      received++;
      res.end(String(bytes));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    received: () => received,
    resets: () => resets,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('upstream agent', () => {
  test('keeps an idle connection less long than a Node server keeps it by default', () => {
    assert.ok(UPSTREAM_IDLE_KEEP_ALIVE_MS < new http.Server().keepAliveTimeout, `${UPSTREAM_IDLE_KEEP_ALIVE_MS} ms`);
  });

  test('a connection that cannot be made fails its request, and nothing else', async () => {
    const server = await resettingServer(0);
    const origin = server.origin;
    await server.close(); // nothing listens on the port now
    const agent = new UpstreamAgent({ connectTimeoutMs: 5_000, headersTimeoutMs: 0, bodyTimeoutMs: 0 });
    try {
      await assert.rejects(agent.request({ origin, path: '/', method: 'POST', body: '{}' }), /ECONNREFUSED/);
    } finally {
      await agent.close();
    }
  });

  test('a POST reset while its body was still being written is sent once more, and reaches the server once', async () => {
    const server = await resettingServer(1024 * 1024);
    const agent = new UpstreamAgent({ connectTimeoutMs: 5_000, headersTimeoutMs: 0, bodyTimeoutMs: 0 });
    try {
      const body = Buffer.alloc(8 * 1024 * 1024, 120);
      const response = await agent.request({ origin: server.origin, path: '/', method: 'POST', body });
      assert.equal(await response.body.text(), String(body.length));
      assert.equal(server.resets(), 1);
      assert.equal(server.received(), 1);
    } finally {
      await agent.close();
      await server.close();
    }
  });

  test('a POST reset after it was fully written fails: the upstream may have it, so it is not sent again', async () => {
    const server = await resettingServer(0);
    const agent = new UpstreamAgent({ connectTimeoutMs: 5_000, headersTimeoutMs: 0, bodyTimeoutMs: 0 });
    try {
      await assert.rejects(agent.request({ origin: server.origin, path: '/', method: 'POST', body: '{"small":true}' }));
      assert.equal(server.resets(), 1);
      // The next request is served: one that is read whole, once.
      const response = await agent.request({ origin: server.origin, path: '/', method: 'POST', body: '{"next":true}' });
      assert.equal(await response.body.text(), '13');
      assert.equal(server.received(), 1);
    } finally {
      await agent.close();
      await server.close();
    }
  });
});
