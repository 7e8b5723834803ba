// GET /metrics on a real gateway (memory store) in front of a real fixture upstream, driven by the SDK client:
// a synchronous call, a task run to its end, a session opened and deleted, all read back from the scrape.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { request } from 'undici';
import { eventually, suiteScope, testScope, type TestGateway } from '../helpers/harness.js';
import { parsePrometheus, sampleValue, type Sample } from '../helpers/prometheus-text.js';

const TASKS = { defaults: { mode: 'optional', pollIntervalMs: 100 }, rules: [{ match: 'echo', mode: 'forbidden' }] };

async function scrape(gateway: TestGateway, path = '/metrics'): Promise<{ status: number; contentType: string; samples: Sample[] }> {
  const response = await request(`${gateway.origin}${path}`);
  const text = await response.body.text();
  const contentType = String(response.headers['content-type']);
  return { status: response.statusCode, contentType, samples: response.statusCode === 200 ? parsePrometheus(text) : [] };
}

/** Scrapes until `check` holds for the samples (the counts change as events arrive; a hang guard only). */
async function scrapeUntil(gateway: TestGateway, check: (samples: Sample[]) => boolean): Promise<Sample[]> {
  let samples: Sample[] = [];
  await eventually(async () => check((samples = (await scrape(gateway)).samples)), 15_000);
  return samples;
}

describe('GET /metrics', () => {
  const scope = suiteScope();
  let gateway: TestGateway;
  let client: Client;
  let transport: StreamableHTTPClientTransport;

  before(async () => {
    const upstream = await scope.upstream('streamable-http');
    gateway = await scope.gateway({ upstreams: { fx: upstream.config }, tasks: TASKS });
    ({ client, transport } = await scope.client(gateway.url));
  });

  test('serves Prometheus text with the process metrics, the upstream up and the session held', async () => {
    const { status, contentType, samples } = await scrape(gateway);
    assert.equal(status, 200);
    assert.match(contentType, /^text\/plain; version=0\.0\.4/);
    assert.ok(sampleValue(samples, 'taskgate_process_resident_memory_bytes') > 0);
    assert.equal(sampleValue(samples, 'taskgate_upstream_up', { upstream: 'fx' }), 1);
    assert.equal(sampleValue(samples, 'taskgate_sessions'), 1);
    assert.equal(sampleValue(samples, 'taskgate_sessions_created_total'), 1);
    assert.equal(sampleValue(samples, 'taskgate_store_up'), 1);
  });

  test('a task: created, run, ended, and no run left held', async () => {
    const echoed = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
    assert.notEqual(echoed.isError, true);
    const created = (await client.request(
      { method: 'tools/call', params: { name: 'slow', arguments: { ms: 100 }, task: {} } },
      CreateTaskResultSchema.passthrough(),
    )) as unknown as { task: { taskId: string } };
    await client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
    const samples = await scrapeUntil(gateway, (s) => sampleValue(s, 'taskgate_tasks_ended_total', { tool: 'slow', status: 'completed' }) === 1);
    assert.equal(sampleValue(samples, 'taskgate_tasks_created_total', { tool: 'slow', upstream: 'fx', era: '2025-11-25' }), 1);
    assert.equal(sampleValue(samples, 'taskgate_tasks_ended_total', { tool: 'slow', status: 'completed', reason: '' }), 1);
    assert.equal(sampleValue(samples, 'taskgate_task_duration_seconds_count', { tool: 'slow', status: 'completed' }), 1);
    assert.equal(sampleValue(samples, 'taskgate_task_queue_wait_seconds_count', { tool: 'slow' }), 1);
    for (const status of ['working', 'input_required', 'queued']) assert.equal(sampleValue(samples, 'taskgate_tasks', { status }), 0, status);
    assert.equal(sampleValue(samples, 'taskgate_tasks_created_total', { tool: 'echo' }), 0, 'a synchronous call is no task');
  });

  test('a task cancelled while it runs is counted as cancelled by the client', async () => {
    const created = (await client.request(
      { method: 'tools/call', params: { name: 'slow', arguments: { ms: 60_000 }, task: {} } },
      CreateTaskResultSchema.passthrough(),
    )) as unknown as { task: { taskId: string } };
    await scrapeUntil(gateway, (s) => sampleValue(s, 'taskgate_tasks', { status: 'working' }) === 1);
    await client.experimental.tasks.cancelTask(created.task.taskId);
    const samples = await scrapeUntil(gateway, (s) => sampleValue(s, 'taskgate_tasks', { status: 'working' }) === 0);
    assert.equal(sampleValue(samples, 'taskgate_tasks_ended_total', { tool: 'slow', status: 'cancelled', reason: 'cancelled' }), 1);
  });

  test('a deleted session is no longer held', async () => {
    await transport.terminateSession();
    const samples = await scrapeUntil(gateway, (s) => sampleValue(s, 'taskgate_sessions') === 0);
    assert.equal(sampleValue(samples, 'taskgate_sessions_closed_total', { reason: 'deleted' }), 1);
  });
});

describe('metrics configuration', () => {
  test('metrics.enabled: false serves no route; metrics.path moves it', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const off = await scope.gateway({ upstreams: { fx: upstream.config }, metrics: { enabled: false } });
    assert.equal((await scrape(off)).status, 404);
    const moved = await scope.gateway({ upstreams: { fx: upstream.config }, metrics: { path: '/internal/prom' } });
    assert.equal((await scrape(moved)).status, 404);
    const { status, samples } = await scrape(moved, '/internal/prom');
    assert.equal(status, 200);
    assert.equal(sampleValue(samples, 'taskgate_upstream_up', { upstream: 'fx' }), 1);
  });

  test('metrics.principalLabels adds the principal to task and denial counters', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.gateway({ upstreams: { fx: upstream.config }, tasks: TASKS, metrics: { principalLabels: true } });
    const { client } = await scope.client(gateway.url);
    const created = (await client.request(
      { method: 'tools/call', params: { name: 'slow', arguments: { ms: 10 }, task: {} } },
      CreateTaskResultSchema.passthrough(),
    )) as unknown as { task: { taskId: string } };
    await client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
    const samples = await scrapeUntil(gateway, (s) => s.some((x) => x.name === 'taskgate_tasks_ended_total'));
    const series = samples.find((s) => s.name === 'taskgate_tasks_created_total');
    assert.ok(series !== undefined && typeof series.labels.principal === 'string' && series.labels.principal !== '', JSON.stringify(series));
  });
});
