// What a webhook delivery is made of, without a network: the body (Standard Webhooks' `{ type, timestamp, data }`,
// the result only where asked and only within maxBodyBytes), the signature headers (verified with the
// `standardwebhooks` package receivers use), the backoff between tries, and which endpoints want an event.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import type { WebhookConfig } from '../../src/config/types.js';
import type { TaskRecord } from '../../src/store/task-store.js';
import { retryDelayMs } from '../../src/webhooks/backoff.js';
import { endpointWants } from '../../src/webhooks/endpoint-filter.js';
import { WebhookSender } from '../../src/webhooks/sender.js';
import { typeOfBody, webhookBody } from '../../src/webhooks/webhook-body.js';
import type { WebhookEvent } from '../../src/webhooks/webhook-events.js';

const facts = { taskId: 't1', principal: 'key:alice', tool: 'deploy_app', upstream: 'ops' };
const event = (type: WebhookEvent['type'], extra: Partial<WebhookEvent> = {}): WebhookEvent => ({ type, facts, atMs: Date.UTC(2026, 0, 2, 3, 4, 5), details: {}, ended: type !== 'task.created', ...extra });
const task: TaskRecord = {
  ...facts,
  era: '2025-11-25',
  status: 'completed',
  message: 'done',
  createdMs: Date.UTC(2026, 0, 2, 3, 4, 0),
  createdUs: 0,
  updatedMs: Date.UTC(2026, 0, 2, 3, 4, 5),
  retentionMs: 60_000,
  pollMs: 1_000,
  outcome: { result: { content: [{ type: 'text', text: 'x'.repeat(2_000) }] } },
};
const endpoint = (extra: Partial<WebhookConfig> = {}): WebhookConfig => ({ id: 'e', url: 'https://e.example', events: ['task.completed'], secret: 'whsec_x', includeResult: false, ...extra });

describe('webhook body', () => {
  it('is { type, timestamp, data } with the task as stored, type first', () => {
    const body = webhookBody(event('task.completed'), task, false, 100_000) as string;
    const parsed = JSON.parse(body) as { type: string; timestamp: string; data: Record<string, unknown> };
    assert.deepEqual(Object.keys(parsed), ['type', 'timestamp', 'data']);
    assert.equal(typeOfBody(body), 'task.completed');
    assert.equal(parsed.timestamp, '2026-01-02T03:04:05.000Z');
    assert.deepEqual(parsed.data, {
      taskId: 't1',
      tool: 'deploy_app',
      upstream: 'ops',
      principal: 'key:alice',
      status: 'completed',
      statusMessage: 'done',
      createdAt: '2026-01-02T03:04:00.000Z',
      lastUpdatedAt: '2026-01-02T03:04:05.000Z',
    });
  });

  it('carries the result only with includeResult, and leaves it out (saying so) past maxBodyBytes', () => {
    assert.ok('result' in (JSON.parse(webhookBody(event('task.completed'), task, true, 100_000) as string) as { data: object }).data);
    const small = JSON.parse(webhookBody(event('task.completed'), task, true, 1_000) as string) as { data: Record<string, unknown> };
    assert.equal(small.data.result, undefined);
    assert.equal(small.data.resultOmitted, true);
    assert.equal(webhookBody(event('task.completed'), task, true, 50), undefined, 'too large even without it: not sent');
    assert.ok(!('result' in (JSON.parse(webhookBody(event('task.created'), task, true, 100_000) as string) as { data: object }).data), 'only an ended task has one');
  });

  it('names only authenticated principals: without auth a principal is a session id, a bearer', () => {
    const anonymous = { ...event('task.created'), facts: { ...facts, principal: 'session:secret-session-id' } };
    assert.match(webhookBody(anonymous, undefined, false, 10_000) as string, /"principal":"anonymous"/);
  });
});

describe('webhook signature', () => {
  it('verifies with the standardwebhooks package: v1, HMAC-SHA256 over id.timestamp.body', () => {
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const headers = new WebhookSender().headers(secret, 'msg_1', '{"type":"task.created"}');
    assert.match(headers['webhook-signature'] ?? '', /^v1,[A-Za-z0-9+/]+=*$/);
    assert.match(headers['webhook-timestamp'] ?? '', /^\d+$/);
    assert.deepEqual(new Webhook(secret).verify('{"type":"task.created"}', headers), { type: 'task.created' });
    assert.throws(() => new Webhook(`whsec_${randomBytes(32).toString('base64')}`).verify('{"type":"task.created"}', headers));
    assert.throws(() => new Webhook(secret).verify('{"type":"task.failed"}', headers));
  });
});

describe('webhook retries', () => {
  it('back off exponentially with jitter between half and all of the bound, capped', () => {
    const settings = { initialBackoffMs: 1_000, maxBackoffMs: 10_000 };
    assert.equal(retryDelayMs(1, settings, () => 0), 500);
    assert.equal(retryDelayMs(1, settings, () => 1), 1_000);
    assert.equal(retryDelayMs(3, settings, () => 1), 4_000);
    assert.equal(retryDelayMs(50, settings, () => 1), 10_000);
    assert.equal(retryDelayMs(50, settings, () => 0), 5_000);
  });
});

describe('which endpoints want an event', () => {
  it('by type, tool globs and principal globs as auth.access names them', () => {
    assert.equal(endpointWants(endpoint(), event('task.completed')), true);
    assert.equal(endpointWants(endpoint(), event('task.failed')), false);
    assert.equal(endpointWants(endpoint({ tools: ['deploy_*'] }), event('task.completed')), true);
    assert.equal(endpointWants(endpoint({ tools: ['read_*'] }), event('task.completed')), false);
    assert.equal(endpointWants(endpoint({ principals: ['alice'] }), event('task.completed')), true);
    assert.equal(endpointWants(endpoint({ principals: ['key:alice'] }), event('task.completed')), true);
    assert.equal(endpointWants(endpoint({ principals: ['oauth:alice'] }), event('task.completed')), false);
    const anonymous = { ...event('task.completed'), facts: { ...facts, principal: 'session:abc' } };
    assert.equal(endpointWants(endpoint({ principals: ['*'] }), anonymous), false, 'no authenticated principal: no glob names it');
  });
});
