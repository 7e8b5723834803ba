// The `webhooks` and `webhookDelivery` sections of the config schema (issue 34): which endpoints hear of which task and
// approval events, signed as Standard Webhooks with each endpoint's `whsec_` secret, and the bounds of delivering to
// them (timeout, retries' age, queue length, body size, concurrency per endpoint).
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { int, httpUrl } from './fields.js';

/** The event types an endpoint may subscribe to: the `type` of the deliveries it gets. */
export const WEBHOOK_EVENTS = [
  'task.created',
  'task.completed',
  'task.failed',
  'task.cancelled',
  'task.input_required',
  'approval.requested',
  'approval.decided',
] as const;

export const WEBHOOK_DEFAULTS = Object.freeze({
  timeoutMs: 10_000,
  maxAgeMs: 86_400_000,
  initialBackoffMs: 1_000,
  maxBackoffMs: 600_000,
  maxQueuedPerEndpoint: 10_000,
  maxQueuedBytesPerEndpoint: 64 * 1024 * 1024,
  maxBodyBytes: 256 * 1024,
  concurrency: 4,
});

/** Standard Webhooks secrets: `whsec_` and the base64 of 24 to 64 random bytes. */
const SECRET = /^whsec_([A-Za-z0-9+/]+={0,2})$/;

const secret = z.string().superRefine((value, ctx) => {
  const base64 = SECRET.exec(value)?.[1];
  const bytes = base64 === undefined ? 0 : Buffer.from(base64, 'base64').length;
  // The value is never echoed: it is a secret.
  if (bytes < 24 || bytes > 64) ctx.addIssue({ code: 'custom', input: '[redacted]', message: 'expected whsec_ followed by the base64 of 24 to 64 random bytes (e.g. "whsec_$(openssl rand -base64 32)")' });
});

const ENDPOINT_ID = /^[A-Za-z0-9_-]{1,64}$/;

export const WebhookSchema = z.strictObject({
  url: httpUrl,
  events: z.array(z.enum(WEBHOOK_EVENTS)).min(1, { error: 'name at least one event' }),
  secret,
  tools: z.array(z.string().min(1)).optional(),
  principals: z.array(z.string().min(1)).optional(),
  includeResult: z.boolean().default(false),
  id: z.string().regex(ENDPOINT_ID, { error: 'an id is 1-64 letters, digits, "_" or "-"' }).optional(),
});

/** An endpoint's id: the one configured, or one derived from its URL (stable across replicas and reloads). */
export function webhookEndpointId(entry: { url: string; id?: string | undefined }): string {
  return entry.id ?? `url-${createHash('sha256').update(entry.url).digest('hex').slice(0, 12)}`;
}

export const WebhooksSchema = z.array(WebhookSchema).superRefine((entries, ctx) => {
  const seen = new Set<string>();
  entries.forEach((entry, i) => {
    const id = webhookEndpointId(entry);
    if (seen.has(id)) ctx.addIssue({ code: 'custom', path: [i, 'id'], input: entry.id, message: `endpoint id '${id}' is used twice: give each endpoint (same URL included) an id of its own` });
    seen.add(id);
  });
});

export const WebhookDeliverySchema = z
  .strictObject({
    timeoutMs: int(100).default(WEBHOOK_DEFAULTS.timeoutMs),
    maxAgeMs: int(1_000).default(WEBHOOK_DEFAULTS.maxAgeMs),
    initialBackoffMs: int(1).default(WEBHOOK_DEFAULTS.initialBackoffMs),
    maxBackoffMs: int(1).default(WEBHOOK_DEFAULTS.maxBackoffMs),
    maxQueuedPerEndpoint: int(1).default(WEBHOOK_DEFAULTS.maxQueuedPerEndpoint),
    maxQueuedBytesPerEndpoint: int(1_024).default(WEBHOOK_DEFAULTS.maxQueuedBytesPerEndpoint),
    maxBodyBytes: int(1_024).default(WEBHOOK_DEFAULTS.maxBodyBytes),
    concurrency: int(1, 1_000).default(WEBHOOK_DEFAULTS.concurrency),
  })
  .superRefine((delivery, ctx) => {
    // A queue that cannot hold one body of the largest size would drop every such delivery.
    if (delivery.maxQueuedBytesPerEndpoint < delivery.maxBodyBytes) {
      ctx.addIssue({ code: 'custom', path: ['maxQueuedBytesPerEndpoint'], input: delivery.maxQueuedBytesPerEndpoint, message: `must be at least maxBodyBytes (${delivery.maxBodyBytes}): a queue must hold one body of the largest size` });
    }
  });
