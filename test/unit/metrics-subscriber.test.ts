// The metrics subscriber: events and scopes in, Prometheus text out (parsed back, series by series). Each test
// builds its own gateway-like seam and registry, as several gateways in one process do.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayEvents } from '../../src/events.js';
import { GatewayMetrics } from '../../src/observability/metrics.js';
import { MAX_LABEL_VALUES } from '../../src/observability/metrics-labels.js';
import { MCP_METHODS } from '../../src/protocol/revisions.js';
import { parsePrometheus as parse, sampleValue, type Sample } from '../helpers/prometheus-text.js';

const value = sampleValue;

function setUp(options: { principalLabels?: boolean; tools?: string[] } = {}): { events: GatewayEvents; metrics: GatewayMetrics; scrape: () => Promise<Sample[]> } {
  const events = new GatewayEvents();
  const tools = new Set(options.tools ?? ['fx_add', 'fx_slow']);
  const metrics = new GatewayMetrics({ events, methods: MCP_METHODS, principalLabels: options.principalLabels ?? false, knownTool: (name) => tools.has(name) });
  return { events, metrics, scrape: async () => parse(await metrics.render()) };
}

const FACTS = { taskId: 't1', principal: 'key:alice', tool: 'fx_slow', upstream: 'fx' };

describe('metrics subscriber', () => {
  it('counts MCP requests by method, tool, upstream and outcome from the mcp.request scope', async () => {
    const { events, scrape } = setUp();
    const ok = await events.scope('mcp.request', { method: 'tools/call', target: 'fx_add', upstream: 'fx', protocolVersion: '2025-11-25' }, async () => 'done');
    assert.equal(ok, 'done');
    await events.scope('mcp.request', { method: 'tools/call', target: 'fx_add', upstream: 'fx', protocolVersion: '2025-11-25' }, async () => 'again');
    const info = { method: 'tools/call', target: 'nope', upstream: 'fx', protocolVersion: '2025-11-25', outcome: undefined as undefined | 'error' };
    await events.scope('mcp.request', info, async () => {
      info.outcome = 'error';
    });
    await assert.rejects(events.scope('mcp.request', { method: 'x/custom', protocolVersion: '2026-07-28' }, async () => Promise.reject(new Error('boom'))));
    const samples = await scrape();
    const count = (labels: Record<string, string>): number => value(samples, 'taskgate_request_duration_seconds_count', labels);
    assert.equal(count({ method: 'tools/call', tool: 'fx_add', upstream: 'fx', outcome: 'ok' }), 2);
    assert.equal(count({ method: 'tools/call', tool: 'other', upstream: 'fx', outcome: 'error' }), 1, 'a tool the catalog does not expose is "other"');
    assert.equal(count({ method: 'other', tool: '', upstream: '', outcome: 'error' }), 1, 'an unknown method is "other"; a throw is an error');
    assert.ok(value(samples, 'taskgate_request_duration_seconds_bucket', { method: 'tools/call', tool: 'fx_add', upstream: 'fx', outcome: 'ok', le: '+Inf' }) === 2);
  });

  it('times upstream requests from the upstream.request scope', async () => {
    const { events, scrape } = setUp();
    const info = { upstream: 'fx', method: 'tools/call', tool: 'slow', carrier: {}, outcome: undefined as undefined | 'cancelled' };
    await events.scope('upstream.request', info, async () => {
      info.outcome = 'cancelled';
    });
    const samples = await scrape();
    assert.equal(value(samples, 'taskgate_upstream_request_duration_seconds_count', { upstream: 'fx', method: 'tools/call', outcome: 'cancelled' }), 1);
  });

  it('tracks tasks: created, ended, the runs held here by status, and the wait for slots', async () => {
    const { events, scrape } = setUp({ principalLabels: true });
    events.emit('task.created', { ...FACTS, era: '2025-11-25', queued: true });
    let finish!: () => void;
    const run = events.scope('task.run', { ...FACTS, attempt: 1 }, () => new Promise<void>((resolve) => (finish = resolve)));
    let samples = await scrape();
    assert.equal(value(samples, 'taskgate_tasks', { status: 'working' }), 1);
    events.emit('task.status', { ...FACTS, status: 'working', queued: true });
    samples = await scrape();
    assert.equal(value(samples, 'taskgate_tasks', { status: 'working' }), 0);
    assert.equal(value(samples, 'taskgate_tasks', { status: 'queued' }), 1);
    events.emit('task.status', { ...FACTS, status: 'working', queued: false });
    events.emit('task.started', { ...FACTS, attempt: 1, waitedMs: 1500 });
    events.emit('task.status', { ...FACTS, status: 'input_required', message: 'asked' });
    events.emit('task.input.asked', { ...FACTS, method: 'elicitation/create' });
    samples = await scrape();
    assert.equal(value(samples, 'taskgate_tasks', { status: 'input_required' }), 1);
    assert.equal(value(samples, 'taskgate_tasks', { status: 'queued' }), 0);
    assert.equal(value(samples, 'taskgate_task_queue_wait_seconds_count', { tool: 'fx_slow' }), 1);
    assert.equal(value(samples, 'taskgate_task_queue_wait_seconds_bucket', { tool: 'fx_slow', le: '1' }), 0);
    assert.equal(value(samples, 'taskgate_task_queue_wait_seconds_bucket', { tool: 'fx_slow', le: '5' }), 1);
    assert.equal(value(samples, 'taskgate_task_input_requests_total', { method: 'elicitation/create' }), 1);
    events.emit('task.ended', { ...FACTS, status: 'failed', reason: 'maxRunMs', durationMs: 2000 });
    finish();
    await run;
    samples = await scrape();
    for (const status of ['working', 'input_required', 'queued']) assert.equal(value(samples, 'taskgate_tasks', { status }), 0, status);
    assert.equal(value(samples, 'taskgate_tasks_created_total', { tool: 'fx_slow', upstream: 'fx', era: '2025-11-25', principal: 'key:alice' }), 1);
    assert.equal(value(samples, 'taskgate_tasks_ended_total', { tool: 'fx_slow', status: 'failed', reason: 'maxRunMs', principal: 'key:alice' }), 1);
    assert.equal(value(samples, 'taskgate_task_duration_seconds_count', { tool: 'fx_slow', status: 'failed' }), 1);
  });

  it('counts per-user consent by upstream, with reasons from a fixed set (issue 41); no principal, never a token', async () => {
    const { events, scrape } = setUp();
    const who = { principal: 'oauth:https://idp#alice', upstream: 'gh', issuer: 'https://github.example' };
    events.emit('consent.requested', { ...who, via: 'call' });
    events.emit('consent.started', who);
    events.emit('consent.refused', { ...who, reason: 'wrong_user' });
    events.emit('consent.refused', { ...who, reason: 'a server\'s own word <script>' });
    events.emit('connection.created', { ...who, scopes: ['repo'] });
    events.emit('connection.refreshed', { ...who, rotated: true });
    events.emit('connection.failed', { ...who, reason: 'invalid_grant', step: 'refresh' });
    events.emit('connection.revoked', { ...who, by: 'server', revokedAtServer: false });
    const samples = await scrape();
    assert.equal(value(samples, 'taskgate_consent_requests_total', { upstream: 'gh', via: 'call' }), 1);
    assert.equal(value(samples, 'taskgate_consents_started_total', { upstream: 'gh' }), 1);
    assert.equal(value(samples, 'taskgate_consents_refused_total', { upstream: 'gh', reason: 'wrong_user' }), 1);
    assert.equal(value(samples, 'taskgate_consents_refused_total', { upstream: 'gh', reason: 'other' }), 1, 'a reason outside the set is "other"');
    assert.equal(value(samples, 'taskgate_connections_created_total', { upstream: 'gh' }), 1);
    assert.equal(value(samples, 'taskgate_connection_refreshes_total', { upstream: 'gh', rotated: 'true' }), 1);
    assert.equal(value(samples, 'taskgate_connection_failures_total', { upstream: 'gh', step: 'refresh', reason: 'invalid_grant' }), 1);
    assert.equal(value(samples, 'taskgate_connections_revoked_total', { upstream: 'gh', by: 'server' }), 1);
    assert.ok(!samples.some((sample) => Object.values(sample.labels).some((v) => v.includes('alice'))), 'no principal in a label');
  });

  it('has no principal label unless configured', async () => {
    const { events, scrape } = setUp();
    events.emit('task.created', { ...FACTS, era: '2026-07-28', queued: false });
    events.emit('access.denied', { principal: 'key:bob', kind: 'tools', name: 'secret' });
    const samples = await scrape();
    for (const s of samples) assert.equal(s.labels.principal, undefined, `${s.name} has a principal label`);
    assert.equal(value(samples, 'taskgate_tasks_created_total', { tool: 'fx_slow' }), 1);
    assert.equal(value(samples, 'taskgate_access_denied_total', { kind: 'tools' }), 1);
  });

  it('reports upstreams, the store, sessions, streams, refusals and reloads', async () => {
    const { events, scrape } = setUp();
    events.emit('upstream.up', { upstream: 'fx', transport: 'stdio' });
    events.emit('upstream.down', { upstream: 'fx', reason: 'exited' });
    events.emit('upstream.restarted', { upstream: 'fx', attempt: 1 });
    events.emit('upstream.up', { upstream: 'fx', transport: 'stdio' });
    events.emit('upstream.down', { upstream: 'gone', reason: 'refused' });
    events.emit('store.unavailable', { error: 'ECONNREFUSED' });
    let samples = await scrape();
    assert.equal(value(samples, 'taskgate_store_up'), 0);
    events.emit('store.back', { outageMs: 2500 });
    events.emit('store.operation', { operation: 'transition', durationMs: 0.3 });
    events.emit('store.slow', { operation: 'transition', durationMs: 150 });
    events.emit('session.opened', { sessionId: 's1', principal: 'anonymous', protocolVersion: '2025-11-25' });
    events.emit('session.opened', { sessionId: 's2', principal: 'anonymous', protocolVersion: '2025-11-25', resumed: true });
    events.emit('session.closed', { sessionId: 's1', principal: 'anonymous', reason: 'deleted' });
    events.emit('stream.opened', { kind: 'get' });
    events.emit('stream.opened', { kind: 'get' });
    events.emit('stream.closed', { kind: 'get' });
    events.emit('rate.limited', { principal: 'key:alice', limit: 'requests per second' });
    events.emit('config.rejected', { source: 'x.yaml', error: 'bad' });
    samples = await scrape();
    assert.equal(value(samples, 'taskgate_upstream_up', { upstream: 'fx' }), 1);
    assert.equal(value(samples, 'taskgate_upstream_up', { upstream: 'gone' }), 0);
    assert.equal(value(samples, 'taskgate_upstream_restarts_total', { upstream: 'fx' }), 1);
    assert.equal(value(samples, 'taskgate_store_up'), 1);
    assert.equal(value(samples, 'taskgate_store_outage_seconds_total'), 2.5);
    assert.equal(value(samples, 'taskgate_store_operation_duration_seconds_count', { operation: 'transition' }), 1);
    assert.equal(value(samples, 'taskgate_store_slow_operations_total', { operation: 'transition' }), 1);
    assert.equal(value(samples, 'taskgate_sessions'), 1);
    assert.equal(value(samples, 'taskgate_sessions_created_total'), 1);
    assert.equal(value(samples, 'taskgate_sessions_closed_total', { reason: 'deleted' }), 1);
    assert.equal(value(samples, 'taskgate_streams_open', { kind: 'get' }), 1);
    assert.equal(value(samples, 'taskgate_rate_limited_total', { limit: 'requests per second' }), 1);
    assert.equal(value(samples, 'taskgate_config_reloads_total', { result: 'rejected' }), 1);
    assert.ok(value(samples, 'taskgate_process_resident_memory_bytes') > 0, 'process metrics are there, prefixed');
  });

  it('caps distinct label values: a flood of names ends up as "other"', async () => {
    const names = Array.from({ length: MAX_LABEL_VALUES + 50 }, (_, i) => `tool_${i}`);
    const { events, scrape } = setUp({ tools: names });
    for (const name of names) events.emit('task.created', { ...FACTS, tool: name, era: '2026-07-28', queued: false });
    const samples = (await scrape()).filter((s) => s.name === 'taskgate_tasks_created_total');
    assert.equal(samples.length, MAX_LABEL_VALUES + 1);
    assert.equal(value(samples, 'taskgate_tasks_created_total', { tool: 'other' }), 50);
  });

  it('keeps two gateways apart, and stops counting when closed', async () => {
    const a = setUp();
    const b = setUp();
    a.events.emit('task.created', { ...FACTS, era: '2026-07-28', queued: false });
    assert.equal(value(await a.scrape(), 'taskgate_tasks_created_total', { tool: 'fx_slow' }), 1);
    assert.equal(value(await b.scrape(), 'taskgate_tasks_created_total', { tool: 'fx_slow' }), 0);
    a.metrics.close();
    a.events.emit('task.created', { ...FACTS, era: '2026-07-28', queued: false });
    assert.equal(value(await a.scrape(), 'taskgate_tasks_created_total', { tool: 'fx_slow' }), 1);
    assert.equal(a.events.wrapped('mcp.request'), false);
  });
});
