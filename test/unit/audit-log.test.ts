// The audit log as a subscriber of the event seam: each event becomes the line log pipelines already filter on
// (same `audit` value, fields and message), written by a real pino logger; and a rate limit hammered by one client
// is one audit line per window, however many refusals it counts.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { GatewayEvents } from '../../src/events.js';
import { subscribeAuditLog } from '../../src/observability/audit.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { RateLimited, RateLimiter } from '../../src/tasks/rate-limits.js';

type Line = Record<string, unknown>;

/** A gateway's event seam with the audit log listening, writing into `lines` through pino. */
function audited(): { events: GatewayEvents; lines: Line[] } {
  const lines: Line[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const text of chunk.toString('utf8').split('\n')) if (text !== '') lines.push(JSON.parse(text) as Line);
      done();
    },
  });
  const logger = pino({ level: 'info', base: undefined, timestamp: false }, sink);
  const events = new GatewayEvents(logger);
  subscribeAuditLog(events, logger);
  return { events, lines };
}

/** Waits until pino's stream has written `count` lines (it writes asynchronously). */
async function linesOf(state: { lines: Line[] }, count: number): Promise<Line[]> {
  const deadline = Date.now() + 10_000; // a hang guard only
  while (state.lines.length < count) {
    if (Date.now() > deadline) assert.fail(`expected ${count} audit lines, got ${JSON.stringify(state.lines)}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
  return state.lines.map(({ level, ...rest }) => ({ ...rest, level: pino.levels.labels[level as number] }));
}

const FACTS = { taskId: 't1', principal: 'key:alice', tool: 'slow_add', upstream: 'fx' };

describe('audit log subscriber', () => {
  it('writes the lines the gateway always wrote, one per audited event', async () => {
    const state = audited();
    const { events } = state;
    events.emit('task.created', { ...FACTS, era: '2025-11-25', queued: false });
    events.emit('task.ended', { ...FACTS, status: 'completed', durationMs: 5 });
    events.emit('task.ended', { ...FACTS, status: 'failed', reason: 'maxRunMs', durationMs: 5 });
    events.emit('task.ended', { ...FACTS, status: 'cancelled', reason: 'cancelled', durationMs: 5, era: '2026-07-28' });
    events.emit('task.ended', { ...FACTS, status: 'completed', durationMs: 5, kept: true });
    events.emit('task.retrieved', { ...FACTS, via: 'tasks/result' });
    events.emit('task.retrieved', { ...FACTS, via: 'task tool' });
    events.emit('task.deleted', FACTS);
    events.emit('task.recovered', { ...FACTS, action: 'lost', previousOwner: 'r1' });
    events.emit('task.recovered', { ...FACTS, action: 'requeued', previousOwner: 'r1' });
    events.emit('task.recovered', { ...FACTS, action: 'retried', previousOwner: 'r1', attempt: 2 });
    events.emit('access.denied', { principal: 'key:bob', kind: 'tools', name: 'secret' });
    events.emit('access.denied', { principal: 'key:bob', kind: 'tools', name: 'secret', taskId: 't2' });
    events.emit('access.denied', { kind: 'credentials', reason: 'Unknown API key', status: 401 });
    const lines = await linesOf(state, 14);
    assert.deepEqual(lines, [
      { level: 'info', audit: 'task.created', task: 't1', principal: 'key:alice', tool: 'slow_add', upstream: 'fx', era: '2025-11-25', msg: 'task created' },
      { level: 'info', audit: 'task.completed', task: 't1', principal: 'key:alice', msg: 'task completed' },
      { level: 'info', audit: 'task.failed', task: 't1', principal: 'key:alice', reason: 'maxRunMs', msg: 'task failed' },
      { level: 'info', audit: 'task.cancelled', task: 't1', principal: 'key:alice', era: '2026-07-28', msg: 'task cancelled' },
      { level: 'info', audit: 'task.completed', task: 't1', msg: 'kept task outcome written' },
      { level: 'info', audit: 'task.retrieved', task: 't1', principal: 'key:alice', msg: 'task result retrieved' },
      { level: 'info', audit: 'task.retrieved', task: 't1', principal: 'key:alice', via: 'task tool', msg: 'task result retrieved' },
      { level: 'info', audit: 'task.deleted', task: 't1', principal: 'key:alice', msg: 'task deleted' },
      { level: 'warn', audit: 'task.lost', task: 't1', principal: 'key:alice', owner: 'r1', msg: 'task failed: its replica stopped' },
      { level: 'warn', audit: 'task.requeued', task: 't1', principal: 'key:alice', owner: 'r1', msg: 'queued task taken over: its replica stopped' },
      { level: 'warn', audit: 'task.retried', task: 't1', principal: 'key:alice', owner: 'r1', attempt: 2, msg: 'task re-run: its replica stopped' },
      { level: 'info', audit: 'access.denied', principal: 'key:bob', kind: 'tools', name: 'secret', msg: 'access denied by auth.access' },
      { level: 'info', audit: 'access.denied', principal: 'key:bob', kind: 'tools', name: 'secret', task: 't2', msg: 'task hidden: auth.access denies its tool' },
      { level: 'info', audit: 'access.denied', reason: 'Unknown API key', status: 401, msg: 'request refused: credentials' },
    ]);
  });

  it('issue 39 #11: a refusal names its own cause: only tool, prompt and resource refusals blame auth.access', async () => {
    const state = audited();
    const { events } = state;
    events.emit('access.denied', { principal: 'key:mallory', kind: 'approval', name: 'deploy', taskId: 't1', reason: 'not an approver of this tool' });
    events.emit('access.denied', { principal: 'key:alice', kind: 'approval', name: 'deploy', taskId: 't1', reason: 'own call: the rule does not allow self-approval' });
    events.emit('access.denied', { kind: 'cross-site', name: 'approvals', reason: 'Forbidden: a page on http://evil.example may not change state here', status: 403 });
    events.emit('access.denied', { principal: 'key:bob', kind: 'admin', name: 'reload', reason: 'not an admin' });
    events.emit('access.denied', { kind: 'credentials', name: 'approvals', reason: 'Unknown API key' });
    const lines = await linesOf(state, 5);
    assert.deepEqual(lines, [
      { level: 'info', audit: 'access.denied', principal: 'key:mallory', kind: 'approval', tool: 'deploy', task: 't1', reason: 'not an approver of this tool', msg: 'approval refused: not an approver of this tool' },
      { level: 'info', audit: 'access.denied', principal: 'key:alice', kind: 'approval', tool: 'deploy', task: 't1', reason: 'own call: the rule does not allow self-approval', msg: 'approval refused: own call: the rule does not allow self-approval' },
      { level: 'info', audit: 'access.denied', kind: 'cross-site', endpoint: 'approvals', reason: 'Forbidden: a page on http://evil.example may not change state here', status: 403, msg: 'request refused: a write a page on another origin could have sent' },
      { level: 'info', audit: 'access.denied', principal: 'key:bob', kind: 'admin', endpoint: 'reload', reason: 'not an admin', msg: 'request refused: not an admin' },
      { level: 'info', audit: 'access.denied', endpoint: 'approvals', reason: 'Unknown API key', msg: 'request refused: credentials' },
    ]);
    for (const line of lines) assert.doesNotMatch(String(line.msg), /auth\.access/);
  });

  it('leaves out what was never audited: ends told by task.recovered, shutdown failures, progress', async () => {
    const state = audited();
    const { events } = state;
    events.emit('task.ended', { ...FACTS, status: 'failed', reason: 'lost', durationMs: 5 });
    events.emit('task.ended', { ...FACTS, status: 'failed', reason: 'drained', durationMs: 5 });
    events.emit('task.status', { ...FACTS, status: 'working', message: '1/2' });
    events.emit('rate.limited', { principal: 'key:alice', limit: 'maxInflightBytes' });
    events.emit('task.created', { ...FACTS, era: '2026-07-28', queued: false }); // a marker: everything before it was silent
    const lines = await linesOf(state, 1);
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.audit, 'task.created');
  });

  it('a rate limit refusing many requests is one audit line per window', async () => {
    const state = audited();
    const limiter = new RateLimiter({ requestsPerSecond: 0, taskCreationsPerMinute: 2, rules: [] }, new MemoryTaskStore(), state.events);
    let refusals = 0;
    for (let i = 0; i < 6; i++) {
      await limiter.taskCreation('key:alice').catch((error: unknown) => {
        assert.ok(error instanceof RateLimited);
        refusals++;
      });
    }
    assert.equal(refusals, 4);
    state.events.emit('task.created', { ...FACTS, era: '2026-07-28', queued: false }); // marker
    const lines = await linesOf(state, 2);
    assert.equal(lines.length, 2);
    const { retryAfterMs, ...line } = lines[0] as Line;
    assert.deepEqual(line, { level: 'info', audit: 'rate.limited', principal: 'key:alice', limit: 'task creations per minute', msg: 'rate limit reached' });
    assert.ok(typeof retryAfterMs === 'number' && retryAfterMs > 0);
  });

  it('per-user consent (issue 41): who was asked, refused, connected, refreshed, disconnected; the level says what went wrong', async () => {
    const state = audited();
    const who = { principal: 'oauth:https://idp#alice', upstream: 'gh', issuer: 'https://github.example' };
    state.events.emit('consent.requested', { principal: who.principal, upstream: 'gh', via: 'task' });
    state.events.emit('consent.refused', { ...who, reason: 'wrong_user' });
    state.events.emit('connection.created', { ...who, scopes: ['repo'] });
    state.events.emit('connection.failed', { ...who, reason: 'invalid_grant', step: 'refresh' });
    state.events.emit('connection.revoked', { ...who, by: 'user', revokedAtServer: true });
    const lines = await linesOf(state, 5);
    assert.deepEqual(lines.map((line) => [line.audit, line.level]), [
      ['consent.requested', 'info'],
      ['consent.refused', 'warn'],
      ['connection.created', 'info'],
      ['connection.failed', 'warn'],
      ['connection.revoked', 'info'],
    ]);
    assert.deepEqual(lines[0], { level: 'info', audit: 'consent.requested', principal: who.principal, upstream: 'gh', via: 'task', msg: 'connect link made for a caller without a connection' });
    assert.equal(lines[1]?.reason, 'wrong_user');
    assert.deepEqual(lines[2]?.scopes, ['repo']);
  });
});
