// Upstreams that bend the Streamable HTTP rules the way real servers do: what means one thing only is accepted
// (and warned about, once per kind), what means nothing fails the call naming the upstream. The upstream here
// is written by hand, since no SDK server can be made to misbehave like this.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { before, describe, test } from 'node:test';
import type { GatewayChild } from '../fixtures/spawn.js';
import { connectClient, eventually, logEntries, suiteScope, textOf, type Json } from '../helpers/harness.js';
import { parsePrometheus, sampleValue } from '../helpers/prometheus-text.js';

async function bodyOf(request: IncomingMessage): Promise<Json> {
  let text = '';
  for await (const chunk of request) text += String(chunk);
  return JSON.parse(text) as Json;
}

const TOOLS = ['two_values', 'no_content_type', 'garbage'].map((name) => ({ name, inputSchema: { type: 'object' } }));

/** A 2025-11-25 Streamable HTTP server answering each tool with a different quirk. */
function quirkyServer(): Server {
  return createServer((request, response) => {
    if (request.method !== 'POST') {
      response.writeHead(request.method === 'DELETE' ? 200 : 405).end();
      return;
    }
    void bodyOf(request).then((message) => {
      if (message.id === undefined) {
        response.writeHead(202).end();
        return;
      }
      const json = (value: unknown): string => JSON.stringify(value);
      const reply = (result: Json): string => json({ jsonrpc: '2.0', id: message.id, result });
      const params = (message.params ?? {}) as Json;
      const jsonHeaders = { 'content-type': 'application/json', 'mcp-session-id': 'quirky-session' };
      if (message.method === 'initialize') {
        response.writeHead(200, jsonHeaders).end(reply({ protocolVersion: params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'quirky-http', version: '1' } }));
      } else if (message.method === 'tools/list') {
        response.writeHead(200, jsonHeaders).end(`\uFEFF${reply({ tools: TOOLS })}`);
      } else if (message.method === 'tools/call' && params.name === 'two_values') {
        const token = ((params._meta ?? {}) as Json).progressToken;
        const progress = json({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: 1, total: 2 } });
        response.writeHead(200, jsonHeaders).end(`${progress}\n${reply({ content: [{ type: 'text', text: 'two values, one body' }] })}`);
      } else if (message.method === 'tools/call' && params.name === 'no_content_type') {
        response.writeHead(200, { 'mcp-session-id': 'quirky-session' }).end(reply({ content: [{ type: 'text', text: 'no content type' }] }));
      } else if (message.method === 'tools/call') {
        response.writeHead(200, jsonHeaders).end('this is not JSON');
      } else {
        response.writeHead(200, jsonHeaders).end(json({ jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'Method not found' } }));
      }
    });
  });
}

describe('a Streamable HTTP upstream with quirks', () => {
  const scope = suiteScope();
  let upstream: Server;
  let gateway: GatewayChild;

  before(async () => {
    upstream = quirkyServer();
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    scope.defer(() => new Promise((resolve) => upstream.close(resolve)));
    const port = (upstream.address() as AddressInfo).port;
    gateway = await scope.spawnGateway({ config: { upstreams: { quirky: { url: `http://127.0.0.1:${port}/mcp` } }, log: { level: 'info' } } });
  });

  test('a BOM, several JSON values in one body and a missing Content-Type are accepted, each kind warned about once; garbage fails the call', async () => {
    const { client } = await connectClient(gateway.url);
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name), ['two_values', 'no_content_type', 'garbage']);
      const progress: unknown[] = [];
      for (let i = 0; i < 3; i++) {
        const two = await client.callTool({ name: 'two_values', arguments: {} }, undefined, { onprogress: (p) => progress.push(p) });
        assert.equal(textOf(two), 'two values, one body');
      }
      assert.equal(progress.length, 3, 'the notification before the result reached the client');
      const bare = await client.callTool({ name: 'no_content_type', arguments: {} });
      assert.equal(textOf(bare), 'no content type');
      await assert.rejects(
        client.callTool({ name: 'garbage', arguments: {} }),
        /Upstream 'quirky' lost the call: the upstream answered without a response \(HTTP 200, Content-Type 'application\/json', body began "this is not JSON"\)/,
      );
    } finally {
      await client.close();
    }
    const warningsLogged = (): Json[] => logEntries(gateway).filter((entry) => Number(entry.level) === 40);
    // The log is written asynchronously: the last warning may reach the pipe after the client had its answer.
    await eventually(() => warningsLogged().some((w) => w.violation === 'data that is not JSON')).catch(() => undefined);
    const warnings = warningsLogged();
    const kinds = warnings.map((w) => w.violation);
    // (undici's text decoding drops a BOM by itself, as the Encoding standard says: nothing to warn about there.)
    for (const kind of ['2 JSON values in one body', 'a response without Content-Type', 'data that is not JSON']) {
      assert.equal(kinds.filter((k) => k === kind).length, 1, `${kind}: ${JSON.stringify(kinds)}`);
    }
    for (const warning of warnings) assert.equal(warning.upstream, 'quirky');
    // Logged once a minute per kind, counted every time: three calls with two values in one body, and the other two.
    const samples = parsePrometheus(await (await fetch(`${gateway.baseUrl}/metrics`)).text());
    assert.ok(sampleValue(samples, 'taskgate_upstream_violations_total', { upstream: 'quirky' }) >= 5);
  });
});
