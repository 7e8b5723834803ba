// Request metrics on a real gateway: the histograms fed by the `mcp.request` scope (each client request) and the
// `upstream.request` scope (each request to an upstream). Those scopes are emitted by the routers and the upstream
// connections (the tracing work); these tests hold once both are in.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { eventually, testScope, type TestGateway } from '../helpers/harness.js';
import { parsePrometheus, sampleValue, type Sample } from '../helpers/prometheus-text.js';

async function scrape(gateway: TestGateway): Promise<Sample[]> {
  const response = await request(`${gateway.origin}/metrics`);
  assert.equal(response.statusCode, 200);
  return parsePrometheus(await response.body.text());
}

test('client requests and upstream requests are counted by method, tool, upstream and outcome', async (t) => {
  const scope = testScope(t);
  const upstream = await scope.upstream('streamable-http');
  const gateway = await scope.gateway({ upstreams: { fx: upstream.config } });
  const { client } = await scope.client(gateway.url);
  await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
  await client.callTool({ name: 'echo', arguments: { text: 'again' } });
  // Answered by the gateway as unknown (no upstream listed it): still one request.
  await client.callTool({ name: 'no_such_tool', arguments: {} }).catch(() => undefined);
  let samples: Sample[] = [];
  await eventually(async () => {
    samples = await scrape(gateway);
    return sampleValue(samples, 'taskgate_request_duration_seconds_count', { method: 'tools/call', tool: 'echo', upstream: 'fx', outcome: 'ok' }) === 2;
  }, 15_000);
  assert.ok(sampleValue(samples, 'taskgate_request_duration_seconds_count', { method: 'initialize', outcome: 'ok' }) >= 1);
  const calls = samples.filter((s) => s.name === 'taskgate_request_duration_seconds_count' && s.labels.method === 'tools/call');
  assert.deepEqual(new Set(calls.map((s) => s.labels.tool)), new Set(['echo', 'other']), 'a tool no upstream lists is labelled "other"');
  assert.equal(sampleValue(samples, 'taskgate_upstream_request_duration_seconds_count', { upstream: 'fx', method: 'tools/call', tool: 'echo', outcome: 'ok' }), 2);
});
