// Protocol revisions and the well-known names the gateway handles itself.
import { MethodNotFound } from './errors.js';
import type { Outcome } from './jsonrpc.js';

/**
 * A protocol revision's id, as the registry (src/protocol/revisions.ts) and the revision's codec name it: its newest
 * version ('2025-11-25', '2026-07-28'). Open by design: a new revision brings its own, and a task's stored era is
 * the id of the revision that created it (store/tasks.ts).
 */
export type RevisionId = string;

/** Revisions served as sessions (2025-11-25 and older), newest first. */
export const SESSION_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const;
export const LATEST_SESSION_VERSION = SESSION_VERSIONS[0];
/** The revision a request without `MCP-Protocol-Version` is assumed to speak (spec: 2025-03-26). */
export const DEFAULT_HEADER_VERSION = '2025-03-26';

export function isSessionVersion(version: string): boolean {
  return (SESSION_VERSIONS as readonly string[]).includes(version);
}

/** Revisions from which a POST SSE stream starts with a priming event (SEP-1699). */
export function supportsPrimingEvents(version: string): boolean {
  return version >= '2025-11-25';
}

/** Revisions with JSON-RPC batches (2025-06-18 removed them). */
export function supportsBatches(version: string): boolean {
  return version < '2025-06-18';
}

/** Revisions whose sessions get 2025-11-25 tasks (older clients are served without tasks). */
export function supportsSessionTasks(version: string): boolean {
  return version >= '2025-11-25';
}

/** `_meta` key tying a message to the 2025-11-25 task it belongs to. */
export const RELATED_TASK_META = 'io.modelcontextprotocol/related-task';

/** What the gateway declares in `capabilities.tasks` to sessions that support tasks. */
export const SESSION_TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } } as const;

export const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export function logLevelRank(level: unknown): number {
  return LOG_LEVELS.indexOf(level as LogLevel);
}

// ---- 2026-07-28: stateless requests with a per-request `_meta` envelope (its versions: its codec's; every version
// the gateway speaks: the registry's, src/protocol/revisions.ts) ----

export const META_PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
export const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
export const META_CLIENT_INFO = 'io.modelcontextprotocol/clientInfo';
export const META_LOG_LEVEL = 'io.modelcontextprotocol/logLevel';
export const META_SERVER_INFO = 'io.modelcontextprotocol/serverInfo';
export const META_SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

/**
 * The client capability each server→client request needs. A Map, as every lookup by a name that arrives on
 * the wire must be: a plain object would also "know" `constructor` or `__proto__`.
 */
export const INPUT_REQUEST_CAPABILITY: ReadonlyMap<string, string> = new Map([
  ['elicitation/create', 'elicitation'],
  ['sampling/createMessage', 'sampling'],
  ['roots/list', 'roots'],
]);

/**
 * What the requester hears of an input request (`method`) for a client that did not declare its capability, as
 * a client would answer it; undefined when the client may be sent it.
 */
export function refusedInput(method: string, capabilities: Readonly<Record<string, unknown>>): Outcome | undefined {
  const capability = INPUT_REQUEST_CAPABILITY.get(method);
  if (capability === undefined || capabilities[capability] !== undefined) return undefined;
  return { error: { code: MethodNotFound, message: `Client does not support ${method} (no '${capability}' capability)` } };
}

/** Whether a client declared URL-mode elicitation (SEP-1036: `capabilities.elicitation.url`), which a URL elicitation needs. */
export function acceptsUrlElicitation(capabilities: Readonly<Record<string, unknown>>): boolean {
  const elicitation = capabilities.elicitation;
  return typeof elicitation === 'object' && elicitation !== null && (elicitation as Record<string, unknown>).url !== undefined;
}

/** A URL-mode elicitation to a client that did not declare that mode, refused as a client would; undefined otherwise. */
export function refusedUrlElicitation(request: { method: string; params?: Readonly<Record<string, unknown>> | undefined }, capabilities: Readonly<Record<string, unknown>>): Outcome | undefined {
  if (request.method !== 'elicitation/create' || request.params?.mode !== 'url' || acceptsUrlElicitation(capabilities)) return undefined;
  return { error: { code: MethodNotFound, message: "Client does not support URL-mode elicitation (no 'elicitation.url' capability)" } };
}

/** The Tasks extension (SEP-2663): how 2026-07-28 clients and servers declare it under `capabilities.extensions`. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

// ---- 2026-07-28 HTTP headers that mirror the body ----

/** The body field the `Mcp-Name` header mirrors, per method (none for the others). */
export function mcpNameField(method: string): 'name' | 'uri' | 'taskId' | undefined {
  if (method === 'tools/call' || method === 'prompts/get') return 'name';
  if (method === 'resources/read') return 'uri';
  if (method === 'tasks/get' || method === 'tasks/update' || method === 'tasks/cancel') return 'taskId';
  return undefined;
}

/**
 * The `Mcp-Param-<Name>` headers a tool's input schema asks clients to send: each property whose schema names a
 * header (`x-mcp-header`), with the header's name in lower case.
 */
export function paramHeaders(tool: { inputSchema?: unknown } | undefined): { property: string; header: string; name: string }[] {
  const schema = tool?.inputSchema;
  const properties = typeof schema === 'object' && schema !== null ? (schema as { properties?: unknown }).properties : undefined;
  if (typeof properties !== 'object' || properties === null) return [];
  const headers: { property: string; header: string; name: string }[] = [];
  for (const [property, definition] of Object.entries(properties)) {
    const name = typeof definition === 'object' && definition !== null ? (definition as Record<string, unknown>)['x-mcp-header'] : undefined;
    if (typeof name === 'string' && name !== '') headers.push({ property, name, header: `mcp-param-${name.toLowerCase()}` });
  }
  return headers;
}

export type NamedKind = 'tools' | 'prompts';
export type ListKind = NamedKind | 'resources' | 'resourceTemplates';

/**
 * The list methods the gateway aggregates, with the capability an upstream needs to be asked. A Map: the method
 * name comes from the client, and a plain object would answer for `constructor` too.
 */
export const LIST_METHODS: ReadonlyMap<string, { key: ListKind; capability: string }> = new Map([
  ['tools/list', { key: 'tools', capability: 'tools' }],
  ['prompts/list', { key: 'prompts', capability: 'prompts' }],
  ['resources/list', { key: 'resources', capability: 'resources' }],
  ['resources/templates/list', { key: 'resourceTemplates', capability: 'resources' }],
] as const);
