// The `upstreams` section of the config schema: one map per MCP server behind the gateway, a union over its
// transport (stdio, streamable-http, sse), with what it exposes (tools, prompts, resources) and how it restarts.
import { z } from 'zod';
import { DEFAULTS } from './defaults.js';
import { httpUrl, int, prefix, text, toolName } from './fields.js';
import { UpstreamAuthSchema } from './identity.js';
import { checkStdioCaller } from './stdio-caller.js';

export const UPSTREAM_NAME = /^[A-Za-z0-9_-]+$/;
export const TRANSPORTS = ['stdio', 'streamable-http', 'sse'] as const;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** C0 controls but tab, and DEL: what may not be in a header value (RFC 9110 §5.5). */
function hasControlChar(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if ((code < 0x20 && code !== 0x09) || code === 0x7f) return true;
  }
  return false;
}

// What an upstream exposes (`upstreams.<name>.tools|prompts|resources`). Globs match the upstream's own names
// (tool and prompt names before prefix and rename, resource URIs and templates' uriTemplate text).
const globList = z.array(z.string().min(1, { error: 'expected a non-empty glob' }));
const selectionShape = { include: globList.optional(), exclude: globList.default(() => []) };
export const NameSelectionSchema = z.strictObject(selectionShape);
export const ToolOverrideSchema = z.strictObject({
  name: toolName.optional(),
  title: text.optional(),
  description: text.optional(),
});
export const ToolSelectionSchema = z
  .strictObject({ ...selectionShape, overrides: z.record(z.string().min(1), ToolOverrideSchema).default(() => ({})) })
  .superRefine((selection, ctx) => {
    // Two tools of one upstream renamed alike would be one exposed name with two meanings.
    const claimed = new Map<string, string>();
    for (const [tool, override] of Object.entries(selection.overrides)) {
      if (override.name === undefined) continue;
      const first = claimed.get(override.name);
      if (first !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['overrides', tool, 'name'], input: override.name, message: `'${override.name}' is already the new name of tool '${first}'` });
      } else claimed.set(override.name, tool);
    }
  });

const upstreamCommon = {
  prefix: prefix.optional(),
  tools: ToolSelectionSchema.optional(),
  prompts: NameSelectionSchema.optional(),
  resources: NameSelectionSchema.optional(),
  requestTimeoutMs: int(0).default(DEFAULTS.requestTimeoutMs),
  // Always bounded: an upstream that never finishes its handshake must not hold a connection attempt forever.
  initializeTimeoutMs: int(1).default(DEFAULTS.initializeTimeoutMs),
  taskConcurrency: int(0).default(0),
  // At least 64 KiB (a smaller one is a unit mistake: initialize and tools/list need more); at most 512 MiB, about the
  // longest string V8 can hold, which a message must become to be parsed.
  maxMessageBytes: int(64 * 1024, 512 * 1024 * 1024).default(DEFAULTS.maxMessageBytes),
  maxSessions: int(0).default(DEFAULTS.maxUpstreamSessions),
};

export const RestartSchema = z
  .strictObject({
    initialDelayMs: int(1).default(DEFAULTS.restartInitialDelayMs),
    maxDelayMs: int(1).default(DEFAULTS.restartMaxDelayMs),
  })
  .superRefine((v, ctx) => {
    if (v.maxDelayMs < v.initialDelayMs) {
      ctx.addIssue({ code: 'custom', path: ['maxDelayMs'], input: v.maxDelayMs, message: `must be >= initialDelayMs (${v.initialDelayMs})` });
    }
  });

export const StdioUpstreamSchema = z.strictObject({
  transport: z.literal('stdio'),
  ...upstreamCommon,
  command: z.string().min(1),
  args: z.array(text).default(() => []),
  env: z.record(z.string().min(1), text).default(() => ({})),
  cwd: z.string().min(1).optional(),
  isolation: z.enum(['shared', 'per-session', 'per-principal']).default(DEFAULTS.isolation),
  // per-principal: how long a principal's child may sit with no call before it is stopped (0 = never).
  idleTimeoutMs: int(0).default(DEFAULTS.principalIdleTimeoutMs),
  restart: RestartSchema.prefault({}),
  stopGraceMs: int(0).default(DEFAULTS.stopGraceMs),
  // per-principal only: the credential whose token `{{upstreamToken}}` puts in the child's env (issue 33).
  auth: UpstreamAuthSchema.optional(),
}).superRefine(checkStdioCaller);

const headerValue = text.refine((v) => !hasControlChar(v), { error: 'header values may not contain control characters' });
const httpShape = {
  ...upstreamCommon,
  url: httpUrl,
  headers: z
    .record(z.string().regex(HEADER_NAME, { error: 'not a valid HTTP header name' }), headerValue)
    .default(() => ({})),
  // How the gateway authenticates to the upstream beside (or instead of) static headers (issue 33).
  auth: UpstreamAuthSchema.optional(),
  // How long a principal's own upstream session (where `auth` tells callers apart) may sit with no call before it
  // is ended (0 = never).
  idleTimeoutMs: int(0).default(DEFAULTS.principalIdleTimeoutMs),
  connectTimeoutMs: int(0).default(DEFAULTS.connectTimeoutMs),
  headersTimeoutMs: int(0).default(DEFAULTS.headersTimeoutMs),
  bodyTimeoutMs: int(0).default(DEFAULTS.bodyTimeoutMs),
  protocol: z.enum(['auto', 'legacy', 'modern']).default(DEFAULTS.protocol),
};
export const StreamableHttpUpstreamSchema = z.strictObject({ transport: z.literal('streamable-http'), ...httpShape });
export const SseUpstreamSchema = z.strictObject({ transport: z.literal('sse'), ...httpShape });

/** `transport` may be left out when obvious: `command` means stdio, `url` means streamable-http. */
function inferTransport(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || 'transport' in value) return value;
  if ('command' in value) return { transport: 'stdio', ...value };
  if ('url' in value) return { transport: 'streamable-http', ...value };
  return value;
}

export const UpstreamSchema = z.preprocess(
  inferTransport,
  z.discriminatedUnion('transport', [StdioUpstreamSchema, StreamableHttpUpstreamSchema, SseUpstreamSchema]),
);
