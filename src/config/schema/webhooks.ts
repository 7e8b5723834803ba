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
  'connection.created',
  'connection.refreshed',
  'connection.revoked',
  'connection.failed',
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
  url: httpUrl.describe(`The endpoint, an http(s) URL: every delivery is a POST here. Its query is redacted by
    \`check-config\`.`),
  events: z
    .array(z.enum(WEBHOOK_EVENTS))
    .min(1, { error: 'name at least one event' })
    .describe(`What it hears: ${WEBHOOK_EVENTS.map((event) => `\`${event}\``).join(', ')}.`),
  secret: secret.describe(`\`whsec_\` and the base64 of 24-64 random bytes (\`echo "whsec_$(openssl rand -base64
    32)"\`; use \`\${ENV}\`): the key of the \`webhook-signature\` HMAC. Redacted by \`check-config\`, never logged.`),
  tools: z
    .array(z.string().min(1))
    .optional()
    .describe('Globs on exposed tool names (prefixes included): only tasks of these tools. Absent: every tool.'),
  principals: z.array(z.string().min(1)).optional().describe(`Principal globs as \`auth.access\` names them (\`alice\`,
    \`key:ci-*\`, \`oauth:*\`): only their tasks. Absent: every principal (without \`auth\` tasks have no named
    principal, and a list matches none).`),
  includeResult: z.boolean().default(false).describe(`\`true\`: deliveries of ended tasks carry the result (or error)
    in \`data.result\`; left out, with \`data.resultOmitted: true\`, when it would make the body larger than
    \`webhookDelivery.maxBodyBytes\`. \`false\`: nothing of the tool's output goes, not even its error text: a
    failure the upstream reported has the \`statusMessage\` "The tool reported an error; its text goes only to
    endpoints with includeResult" (the gateway's own reasons, such as \`maxRunMs\`, stay as they are).`),
  id: z
    .string()
    .regex(ENDPOINT_ID, { error: 'an id is 1-64 letters, digits, "_" or "-"' })
    .optional()
    .describe(`Names the endpoint's queue in the store and its \`endpoint\` metrics label: 1-64 letters, digits, \`_\`
      or \`-\`, unique. Changing it (or, without it, the URL) starts a new queue: the old one's deliveries are not
      sent.`),
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
    timeoutMs: int(100).default(WEBHOOK_DEFAULTS.timeoutMs).describe(`One try may take this long, until the
      response's headers; longer is a failed try (the connection is dropped).`),
    maxAgeMs: int(1_000).default(WEBHOOK_DEFAULTS.maxAgeMs).describe(`Tries stop this long after the event: the
      delivery is dead-lettered (a log line with \`audit: webhook.dead_lettered\` and a metric). Also how long an
      endpoint's queue is kept after it was last used.`),
    initialBackoffMs: int(1).default(WEBHOOK_DEFAULTS.initialBackoffMs).describe(`The wait after the first failed try
      (non-2xx, network error, timeout); each next wait doubles, with full jitter, up to \`maxBackoffMs\`.`),
    maxBackoffMs: int(1).default(WEBHOOK_DEFAULTS.maxBackoffMs).describe('The longest wait between two tries.'),
    maxQueuedPerEndpoint: int(1).default(WEBHOOK_DEFAULTS.maxQueuedPerEndpoint).describe(`Deliveries one endpoint's
      queue holds, waiting or in flight, across replicas. When full, the newest event is dropped for that endpoint (a
      warning and \`taskgate_webhook_dropped_total{reason="queue_full"}\`).`),
    maxQueuedBytesPerEndpoint: int(1_024).default(WEBHOOK_DEFAULTS.maxQueuedBytesPerEndpoint).describe(`Bytes of
      bodies one endpoint's queue holds, waiting or in flight, across replicas: the results \`includeResult\`
      endpoints get are copies, counted here (and not in \`tasks.maxStoredBytes\`) until the endpoint acknowledges
      them or they are dead-lettered. When a body would pass it, that newest event is dropped for that endpoint, as at
      \`maxQueuedPerEndpoint\` (a warning and \`taskgate_webhook_dropped_total{reason="queue_full"}\`). At least
      \`maxBodyBytes\`.`),
    maxBodyBytes: int(1_024).default(WEBHOOK_DEFAULTS.maxBodyBytes).describe(`Largest body of a delivery. A result that
      would pass it is left out; a body still larger is dropped (\`reason="too_large"\`).`),
    concurrency: int(1, 1_000).default(WEBHOOK_DEFAULTS.concurrency).describe(`Tries in flight to one endpoint at once,
      across every replica (leases in the store). An endpoint that is slow or down holds up only its own queue.`),
  })
  .superRefine((delivery, ctx) => {
    // A queue that cannot hold one body of the largest size would drop every such delivery.
    if (delivery.maxQueuedBytesPerEndpoint < delivery.maxBodyBytes) {
      ctx.addIssue({ code: 'custom', path: ['maxQueuedBytesPerEndpoint'], input: delivery.maxQueuedBytesPerEndpoint, message: `must be at least maxBodyBytes (${delivery.maxBodyBytes}): a queue must hold one body of the largest size` });
    }
  });
