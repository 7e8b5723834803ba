// The 2026-07-28 request envelope: which revision a POST speaks, the per-request `_meta` fields, and the MCP headers
// that must agree with the body (SEP-2575, SEP-2243). Everything here runs before dispatch.
import { GatewayError } from '../../errors.js';
import type { Caller } from '../../principals.js';
import { asObject, type JsonObject, type JsonRpcRequest } from '../../jsonrpc.js';
import {
  isSessionVersion,
  logLevelRank,
  LOG_LEVELS,
  mcpNameField,
  META_CLIENT_CAPABILITIES,
  META_CLIENT_INFO,
  META_LOG_LEVEL,
  META_PROTOCOL_VERSION,
  paramHeaders,
  TASKS_EXTENSION,
  type LogLevel,
} from '../../mcp.js';
import { isStatelessVersion } from './codec.js';

/** What a 2026-07-28 request says about its client; nothing is remembered between requests. */
export interface StatelessClient {
  protocolVersion: string;
  capabilities: JsonObject;
  clientInfo: JsonObject | undefined;
  /** Logs go to this request's stream only at or above this level; none when absent. */
  logLevel: LogLevel | undefined;
  /** Who sent the request, when the gateway authenticates: its tasks and parked calls are that principal's. */
  caller?: Caller | undefined;
}

/** Methods that exist only in 2026-07-28: a request for one is 2026-07-28's even without a valid envelope. */
const STATELESS_ONLY_METHODS = new Set(['server/discover', 'subscriptions/listen']);

type Headers = Record<string, string | string[] | undefined>;

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Whether one POSTed message is this revision's: yes when the body carries the 2026-07-28 envelope; otherwise no
 * when it belongs to a known session; otherwise yes when the MCP-Protocol-Version header names a revision that is
 * not a session revision, or the method exists only in 2026-07-28. Everything else (initialize, session traffic)
 * is the session revisions'.
 */
export function isStatelessMessage(body: unknown, headers: Headers, isKnownSession: (id: string) => boolean): boolean {
  // A batch is judged by its first message (2026-07-28 then refuses it as a batch).
  if (Array.isArray(body)) return body.length > 0 && isStatelessMessage(body[0], headers, isKnownSession);
  if (typeof body !== 'object' || body === null) return false;
  const message = body as JsonObject;
  const meta = asObject(asObject(message.params)?._meta);
  if (meta?.[META_PROTOCOL_VERSION] !== undefined) return true;
  const sessionId = header(headers, 'mcp-session-id');
  if (sessionId !== undefined && isKnownSession(sessionId)) return false;
  if (headersNameStatelessRevision(headers)) return true;
  return typeof message.method === 'string' && STATELESS_ONLY_METHODS.has(message.method);
}

/** Whether the MCP-Protocol-Version header names a revision that has no sessions (what a body not yet read can tell). */
export function headersNameStatelessRevision(headers: Headers): boolean {
  const version = header(headers, 'mcp-protocol-version');
  return version !== undefined && !isSessionVersion(version) && version !== '2024-11-05';
}

/**
 * Validates the envelope and the protocol headers in the order the revision's reference checks them: header
 * present, envelope complete, header equals envelope, version supported (a refusal lists `supported`: every version
 * the gateway speaks, as the registry lists them).
 */
export function readEnvelope(request: JsonRpcRequest, headers: Headers, supported: readonly string[]): StatelessClient {
  const headerVersion = header(headers, 'mcp-protocol-version');
  if (headerVersion === undefined) throw new GatewayError('header_mismatch', 'Header mismatch: the MCP-Protocol-Version header is required');
  const meta = asObject(request.params?._meta);
  if (meta === undefined) throw new GatewayError('invalid_envelope', 'Invalid params: params._meta with the request envelope is required');
  const version = meta[META_PROTOCOL_VERSION];
  if (typeof version !== 'string') throw new GatewayError('invalid_envelope', `Invalid params: _meta["${META_PROTOCOL_VERSION}"] must be a string`);
  const capabilities = asObject(meta[META_CLIENT_CAPABILITIES]);
  if (capabilities === undefined) throw new GatewayError('invalid_envelope', `Invalid params: _meta["${META_CLIENT_CAPABILITIES}"] must be an object`);
  if (headerVersion !== version) {
    throw new GatewayError('header_mismatch', `Header mismatch: MCP-Protocol-Version '${headerVersion}' does not match _meta protocolVersion '${version}'`);
  }
  if (!isStatelessVersion(version)) {
    throw new GatewayError('unsupported_version', 'Unsupported protocol version', { supported: [...supported], requested: version });
  }
  const logLevel = meta[META_LOG_LEVEL];
  if (logLevel !== undefined && logLevelRank(logLevel) < 0) {
    throw new GatewayError('invalid_envelope', `Invalid params: _meta["${META_LOG_LEVEL}"] must be one of ${LOG_LEVELS.join(', ')}`);
  }
  return {
    protocolVersion: version,
    capabilities,
    clientInfo: asObject(meta[META_CLIENT_INFO]),
    logLevel: logLevel as LogLevel | undefined,
  };
}

/**
 * Methods whose `Mcp-Name` may be left out. The header is for intermediaries that route on it; the gateway needs
 * none (any replica answers any task), the conformance suites check only a mismatched one on the tasks surface,
 * and a widely used client (Python `mcp` 2.3, the FastMCP Client) sends it only on tools/call, prompts/get and
 * resources/read. A missing one on those three stays refused: the suite requires it there.
 */
const NAME_OPTIONAL_METHODS: ReadonlySet<string> = new Set(['tasks/get', 'tasks/update', 'tasks/cancel']);

/** What a request was let off (announced as `request.lenient`); undefined when it followed the letter. */
export type Leniency = 'missing_mcp_name';

/**
 * `Mcp-Method` equals the body's method; `Mcp-Name` the name, URI or task id the method carries. A missing
 * `Mcp-Name` on a tasks method is accepted and said in the return value (a mismatched one never is).
 */
export function checkRoutingHeaders(request: JsonRpcRequest, headers: Headers): Leniency | undefined {
  const method = header(headers, 'mcp-method');
  if (method === undefined) throw new GatewayError('header_mismatch', 'Header mismatch: the Mcp-Method header is required');
  if (method.trim() !== request.method) {
    throw new GatewayError('header_mismatch', `Header mismatch: Mcp-Method '${method}' does not match the request method '${request.method}'`);
  }
  const field = mcpNameField(request.method);
  if (field === undefined) return undefined;
  const expected = request.params?.[field];
  if (typeof expected !== 'string') return undefined; // the handler reports the missing parameter
  const given = header(headers, 'mcp-name');
  if (given === undefined) {
    if (NAME_OPTIONAL_METHODS.has(request.method)) return 'missing_mcp_name';
    throw new GatewayError('header_mismatch', `Header mismatch: the Mcp-Name header is required for ${request.method}`);
  }
  if (decodeHeaderValue(given.trim()) !== expected) {
    throw new GatewayError('header_mismatch', `Header mismatch: Mcp-Name does not match params.${field}`);
  }
  return undefined;
}

/**
 * `Mcp-Param-<Name>` headers a tool's input schema asks clients to send (`x-mcp-header`), checked against the
 * arguments: a value in the body needs its header, and they must agree.
 */
export function checkParamHeaders(tool: JsonObject | undefined, args: JsonObject | undefined, headers: Headers): void {
  for (const { property, name: headerName, header: wanted } of paramHeaders(tool)) {
    const value = args?.[property];
    if (value === undefined || value === null) continue;
    const given = header(headers, wanted);
    if (given === undefined) throw new GatewayError('header_mismatch', `Header mismatch: Mcp-Param-${headerName} is required (argument '${property}')`);
    const decoded = decodeHeaderValue(given.trim());
    const matches = typeof value === 'number' ? decoded.trim() !== '' && Number(decoded) === value : String(value) === decoded;
    if (!matches) throw new GatewayError('header_mismatch', `Header mismatch: Mcp-Param-${headerName} does not match argument '${property}'`);
  }
}

const SENTINEL = /^=\?base64\?(.*)\?=$/s;
const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** A header value, decoded when wrapped in the `=?base64?…?=` sentinel; strict, because Buffer.from is not. */
export function decodeHeaderValue(value: string): string {
  const match = SENTINEL.exec(value);
  if (match === null) return value;
  const encoded = match[1] ?? '';
  if (!STRICT_BASE64.test(encoded)) throw new GatewayError('header_mismatch', 'Header mismatch: invalid base64 in an MCP header value');
  return Buffer.from(encoded, 'base64').toString('utf8');
}

/** Whether the request declared the Tasks extension in its client capabilities. */
export function declaresTasks(client: StatelessClient): boolean {
  return asObject(asObject(client.capabilities.extensions)?.[TASKS_EXTENSION]) !== undefined;
}

export function missingTasksExtension(what: string): GatewayError {
  return new GatewayError('missing_capability', `${what} requires the ${TASKS_EXTENSION} extension; declare it in clientCapabilities.extensions`, {
    requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
  });
}

/** The client's envelope without the Tasks extension: the gateway, not the upstream, runs the task. */
export function withoutTasksExtension(meta: JsonObject | undefined): JsonObject {
  const capabilities = asObject(meta?.[META_CLIENT_CAPABILITIES]) ?? {};
  const extensions = { ...asObject(capabilities.extensions) };
  delete extensions[TASKS_EXTENSION];
  return { ...meta, [META_CLIENT_CAPABILITIES]: { ...capabilities, extensions } };
}

/** `_meta` without the envelope keys (a progress token and vendor keys stay). */
export function withoutEnvelope(params: JsonObject): JsonObject {
  const meta = asObject(params._meta);
  if (meta === undefined) return params;
  const kept: JsonObject = {};
  for (const [key, value] of Object.entries(meta)) if (!key.startsWith('io.modelcontextprotocol/')) kept[key] = value;
  const out = { ...params };
  if (Object.keys(kept).length === 0) delete out._meta;
  else out._meta = kept;
  return out;
}
