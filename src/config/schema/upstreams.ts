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
/** Each list of what an upstream exposes says what its globs match: `include` and `exclude` as the reference has them. */
const selectionShape = (include: string, exclude: string) => ({
  include: globList.optional().describe(include),
  exclude: globList.default(() => []).describe(exclude),
});
const promptSelection = selectionShape(`Globs on the upstream's prompt names: only prompts that match are exposed.
    Absent: every prompt.`, 'Globs of prompts left out; wins over `include`.');
const resourceSelection = selectionShape(`Globs on resource URIs and template texts: only those that match are exposed.
    Absent: all.`, `Globs of resources and templates left out, e.g. \`file:///etc/*\`; wins over
    \`include\`.`);
export const NameSelectionSchema = z.strictObject(promptSelection);
export const ToolOverrideSchema = z.strictObject({
  name: toolName.optional().describe(`A tool name (1-128 letters, digits, \`_\`, \`-\`, \`.\` or \`/\`),
    exposed as \`<prefix><name>\` instead: clients list and call only that name (the old one is unknown), task rules
    and access rules match it, and tasks report it. Two tools may not end up with one name.`),
  title: text.optional().describe("The title clients see instead of the upstream's."),
  description: text.optional().describe(`The description clients (and models) see instead of the
    upstream's.`),
});
export const ToolSelectionSchema = z
  .strictObject({
    ...selectionShape(`Globs (\`*\` any run of characters, \`?\` one) on the upstream's own tool names,
    before prefix and rename: only tools that match are exposed. Absent: every tool.`, 'Globs of tools left out, as in `include`; wins over `include`.'),
    overrides: z
      .record(z.string().min(1), ToolOverrideSchema.describe(`What changes for the tool the upstream calls \`<tool>\`.
        An override naming a tool the upstream does not list is reported by \`check-config --tools\`.`))
      .default(() => ({}))
      .describe(`A new name, title or description per tool, keyed by the upstream's own tool
    name.`),
  })
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
  prefix: prefix.optional().meta({
    description: `Put before each of its tool and prompt names as exposed: letters, digits, \`_\`, \`-\`,
    \`.\` and \`/\`. Adding or removing an upstream changes the default; write it out to keep names stable.`,
    derivedDefault: '`<name>__` with several upstreams, `""` with one',
  }),
  tools: ToolSelectionSchema.optional().describe(`Which of its tools the upstream exposes, and under what names (every
    transport). Absent: every tool under its own name. A tool left out is absent from lists and answered like an unknown
    tool (-32602 \`Unknown tool: <name>\`) without reaching the upstream.`),
  prompts: z.strictObject(promptSelection).optional().describe(`Which prompts the upstream exposes, by prompt name.
    Absent: every prompt. \`prompts/get\` of a left-out one: \`Unknown prompt: <name>\`.`),
  resources: z.strictObject(resourceSelection).optional().describe(`Which resources the upstream exposes, by resource
    URI, and by \`uriTemplate\` text for templates, both compared in RFC 3986 normal form (scheme and host without case,
    \`%65\` as \`e\`, dot segments resolved). Absent: every resource. Reading a left-out URI (or one only a left-out
    template matches): \`Resource not found\`.`),
  requestTimeoutMs: int(0).default(DEFAULTS.requestTimeoutMs).describe(`Deadline for everything but \`tools/call\`
    (lists, reads, prompts, completion). 0 = none.`),
  // Always bounded: an upstream that never finishes its handshake must not hold a connection attempt forever.
  initializeTimeoutMs: int(1).default(DEFAULTS.initializeTimeoutMs).describe(`Deadline for the handshake of every
    connection to the upstream (\`initialize\`, and \`server/discover\` on Streamable HTTP). An upstream that has not
    answered by then counts as down and is retried with backoff (a stdio child is stopped first); the gateway serves
    meanwhile. At start, lists and \`initialize\` wait for the upstream's first attempt at most this long.`),
  taskConcurrency: int(0).default(0).describe(`Tasks running on this upstream at once; more wait, queued in order. 0 =
    unlimited.`),
  // At least 64 KiB (a smaller one is a unit mistake: initialize and tools/list need more); at most 512 MiB, about the
  // longest string V8 can hold, which a message must become to be parsed.
  maxMessageBytes: int(64 * 1024, 512 * 1024 * 1024).default(DEFAULTS.maxMessageBytes).describe(`Largest message taken
    from the upstream, on every transport: a stdio line, an SSE event, a JSON body. A larger one is dropped as it
    streams and the call it answers fails: -32603 \`Upstream '<name>' sent a message larger than maxMessageBytes (<n>
    bytes)\` (a task fails with that message). Raise it for tools with big results; a task's result is also bounded by
    \`tasks.maxResultBytes\` when it is stored.`),
  maxSessions: int(0).default(DEFAULTS.maxUpstreamSessions).describe(`Connections of a client session's own this replica
    keeps to the upstream at once: HTTP upstream sessions (\`Mcp-Session-Id\`, one per client session that reached the
    upstream here, and one per principal of the 2026-07-28 clients where \`auth\` tells callers apart), children of a
    \`per-session\` stdio upstream, and of a \`per-principal\` one, whose children it caps (one per principal). At the
    bound the least recently used idle one (no call running on it) is closed (ended with DELETE; its client gets a new
    one on its next request), and when every one is busy a new client session's request fails: -32603 \`Upstream
    '<name>' has no session to spare\` (per-principal: \`… has no child process to spare for another principal: its cap
    of <n> children …\`). A busy one is never closed for another. 0 = unbounded. Each child is a process: on a
    per-principal upstream, set it to what the machine can run.`),
};

/** The keys every transport has alike (the types derive the shape they share from this). */
export type UpstreamCommonKey = keyof typeof upstreamCommon;

// Both kinds of upstream have these two; what they mean depends on the transport, and one text says both.
const idleTimeoutMs = int(0).default(DEFAULTS.principalIdleTimeoutMs).describe(`How long a principal's own connection to
  the upstream may have no call running before it is closed (checked a few times per period: it goes between this and
  1.5 × this after its last call; never while a call runs); the principal's next call opens a new one. 0 = never. stdio:
  a \`per-principal\` child, stopped. HTTP: where \`auth\` tells callers apart (\`tokenExchange\`, \`signedIdentity\`,
  \`claimHeaders\`), the upstream session of one principal's 2026-07-28 clients, ended (Streamable HTTP: with DELETE). A
  client session's own upstream session is not: it ends with its client session.`);
const upstreamAuth = UpstreamAuthSchema.optional().describe(`How the gateway authenticates to this upstream beyond
  \`headers\` (HTTP upstreams; on a stdio upstream only with \`isolation: per-principal\`, where its token for the
  caller is \`{{upstreamToken}}\` in \`env\`, \`resource\` (\`audience\` for signedIdentity) is required and
  \`claimHeaders\` is refused): at most one of \`clientCredentials\`, \`tokenExchange\`, \`signedIdentity\`, and
  \`claimHeaders\` with any or alone. What the gateway asks on its own behalf (handshake, lists) goes under its own
  identity; a caller's calls under the caller's. A setting asking to forward the client's own token (\`auth:
  passthrough\`, \`forwardToken\`, ...) is refused at load: the MCP authorization spec forbids token passthrough. The
  \`Authorization\` this sets wins over one in \`headers\`.`);
const transport = 'How the gateway reaches the server.';

export const RestartSchema = z
  .strictObject({
    initialDelayMs: int(1).default(DEFAULTS.restartInitialDelayMs).describe(`Delay before the first restart; each
      further one doubles it. A child that stayed up a while starts again from this.`),
    maxDelayMs: int(1).default(DEFAULTS.restartMaxDelayMs).describe('The longest delay between restarts; at least `initialDelayMs`.'),
  })
  .superRefine((v, ctx) => {
    if (v.maxDelayMs < v.initialDelayMs) {
      ctx.addIssue({ code: 'custom', path: ['maxDelayMs'], input: v.maxDelayMs, message: `must be >= initialDelayMs (${v.initialDelayMs})` });
    }
  });

export const StdioUpstreamSchema = z.strictObject({
  transport: z.literal('stdio').meta({ description: transport, derivedDefault: '`stdio` when `command` is given, `streamable-http` when `url` is' }),
  ...upstreamCommon,
  command: z.string().min(1).describe('The program to start as the server, e.g. `node`.'),
  args: z.array(text).default(() => []).describe('Its arguments. Numbers and booleans are taken as text.'),
  env: z.record(z.string().min(1), text).default(() => ({})).describe(`Variables added to a minimal environment (HOME,
    PATH, USER, LANG, TMPDIR, ...): the gateway's own variables (Redis URL, tokens) are not passed to children. With
    \`isolation: per-principal\` a value may name the child's caller, filled in when the child starts (unlike
    \`\${ENV}\`, read once at load): \`{{principal}}\` (the qualified principal, \`key:<name>\` or
    \`oauth:<issuer>#<sub>\`; empty for the anonymous principal), \`{{claims.<claim>}}\` (a verified claim of the
    caller's token; arrays joined by \`,\`, empty when absent) and \`{{upstreamToken}}\` (the token of this upstream's
    \`auth\` for the caller). E.g. \`GITHUB_TOKEN: "{{upstreamToken}}"\`. What is filled in loses CR, LF and NUL, may be
    at most 16384 characters (a longer one fails the call, naming the variable), and is never logged. There, every
    \`{{…}}\` is a placeholder (an unknown one is refused at load); in a \`shared\` or \`per-session\` upstream these
    placeholders are refused at load (its child serves several principals), and other \`{{…}}\` text is taken as it is.`),
  cwd: z.string().min(1).optional().describe("The child's working directory. Absent: the gateway's."),
  isolation: z.enum(['shared', 'per-session', 'per-principal']).default(DEFAULTS.isolation).describe(`\`shared\`: one
    child process serves all sessions (request ids and progress tokens are rewritten so clients cannot collide).
    \`per-session\`: one child per client session, started on first use and stopped when the session ends; use it for
    servers that ask the client for input or keep per-client state. \`per-principal\`: one child per principal, started
    on its first call, shared by all its sessions and clients, stopped after \`idleTimeoutMs\` without a call and capped
    by \`maxSessions\`; its \`env\` may name the caller (\`{{principal}}\`, \`{{claims.<claim>}}\`,
    \`{{upstreamToken}}\`), so a local server that reads e.g. \`GITHUB_TOKEN\` acts as its caller. Without \`auth\` on
    the gateway every caller is the one anonymous principal (one child). No child ever runs without a principal: such an
    upstream is ready at start with no child, and its lists are read from its principals' children.`),
  // per-principal: how long a principal's child may sit with no call before it is stopped (0 = never).
  idleTimeoutMs,
  restart: RestartSchema.prefault({}).describe('Backoff for restarting the child when it dies (or cannot be started).'),
  stopGraceMs: int(0).default(DEFAULTS.stopGraceMs).describe(`The child runs in a process group of its own; to stop it
    (shutdown, reload removal, restart, a handshake that timed out) the gateway closes its stdin and sends SIGTERM to
    the group, then SIGKILL after this long if any process of the group is left. Shutdown waits until the group is gone.`),
  // per-principal only: the credential whose token `{{upstreamToken}}` puts in the child's env (issue 33).
  auth: upstreamAuth,
}).superRefine(checkStdioCaller);

const headerValue = text.refine((v) => !hasControlChar(v), { error: 'header values may not contain control characters' });
const httpShape = {
  ...upstreamCommon,
  url: httpUrl.describe(`The server's http(s) URL: its MCP endpoint for \`streamable-http\`, its SSE endpoint for
    \`sse\`.`),
  headers: z
    .record(z.string().regex(HEADER_NAME, { error: 'not a valid HTTP header name' }), headerValue)
    .default(() => ({}))
    .describe(`HTTP headers (values without control characters) sent with every request to the upstream,
    e.g. \`{ Authorization: "Bearer \${CI_TOKEN}" }\`. A client's own credentials never reach an upstream: give it its
    own here.`),
  // How the gateway authenticates to the upstream beside (or instead of) static headers (issue 33).
  auth: upstreamAuth,
  // How long a principal's own upstream session (where `auth` tells callers apart) may sit with no call before it
  // is ended (0 = never).
  idleTimeoutMs,
  connectTimeoutMs: int(0).default(DEFAULTS.connectTimeoutMs).describe('Deadline for opening a connection to the upstream. 0 = none.'),
  headersTimeoutMs: int(0).default(DEFAULTS.headersTimeoutMs).describe(`Deadline for the headers of an upstream's
    response. 0 = none: no transport default may cut a long tool call.`),
  bodyTimeoutMs: int(0).default(DEFAULTS.bodyTimeoutMs).describe(`Longest silence while reading an upstream's response
    body. 0 = none: SSE streams may stay idle for a long time.`),
  protocol: z.enum(['auto', 'legacy', 'modern']).default(DEFAULTS.protocol).describe(`\`auto\`: ask on connect
    (\`server/discover\` for 2026-07-28, then \`initialize\`) and speak to it in each client's own revision where it
    can; \`legacy\`: sessions only; \`modern\`: 2026-07-28 only.`),
};
export const StreamableHttpUpstreamSchema = z.strictObject({ transport: z.literal('streamable-http').describe(transport), ...httpShape });
export const SseUpstreamSchema = z.strictObject({ transport: z.literal('sse').describe(transport), ...httpShape });

/** `transport` may be left out when obvious: `command` means stdio, `url` means streamable-http. */
function inferTransport(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || 'transport' in value) return value;
  if ('command' in value) return { transport: 'stdio', ...value };
  if ('url' in value) return { transport: 'streamable-http', ...value };
  return value;
}

export const UpstreamSchema = z
  .preprocess(inferTransport, z.discriminatedUnion('transport', [StdioUpstreamSchema, StreamableHttpUpstreamSchema, SseUpstreamSchema]))
  .describe(`One upstream: a \`stdio\` child process, a Streamable HTTP server or a legacy HTTP+SSE server.
    A key that belongs to another transport is an error that names the transport it belongs to.`);
