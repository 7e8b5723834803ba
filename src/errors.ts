// The one error registry. Internal failures carry a stable code; this module alone decides which JSON-RPC
// code and HTTP status each one becomes. Upstream JSON-RPC errors never pass through here: they are forwarded
// unchanged.
import { errorResponse, MessageEncodingError, type JsonRpcErrorObject, type JsonRpcFailure, type RequestId } from './jsonrpc.js';

/** JSON-RPC's codes, and MCP's. Used by name everywhere else. */
export const ParseError = -32700;
export const InvalidRequest = -32600;
export const MethodNotFound = -32601;
export const InvalidParams = -32602;
export const InternalError = -32603;
/** MCP: the request was cancelled (by the client, or because what it belonged to ended). */
export const RequestCancelled = -32800;
/** MCP: no upstream serves the resource URI (2025 revisions; 2026-07-28 says invalid params instead). */
export const ResourceNotFound = -32002;
/** The gateway's own server error: a deadline passed, or a session it does not know. */
export const GatewayServerError = -32001;
/** URLElicitationRequiredError (SEP-1036): the request needs the user to open a URL first (`data.elicitations`). */
export const UrlElicitationRequired = -32042;
/** 2026-07-28: an MCP header is missing, malformed, or disagrees with the body. */
export const HeaderMismatch = -32020;
/** 2026-07-28: the request needs a client capability it did not declare. */
export const MissingRequiredClientCapability = -32021;
/** 2026-07-28: the request's protocol version is one the server does not speak. */
export const UnsupportedProtocolVersion = -32022;

const REGISTRY = {
  parse_error: { rpc: ParseError, http: 400 },
  invalid_request: { rpc: InvalidRequest, http: 400 },
  method_not_found: { rpc: MethodNotFound, http: 200 },
  invalid_params: { rpc: InvalidParams, http: 200 },
  internal: { rpc: InternalError, http: 500 },
  /** Resource URI that no upstream serves (the spec's "Resource not found"). */
  resource_not_found: { rpc: ResourceNotFound, http: 200 },
  /** The upstream cannot be reached, crashed, or closed its connection during the call. */
  upstream_unavailable: { rpc: InternalError, http: 200 },
  /**
   * The upstream already has upstreams.<name>.maxSessions connections of client sessions' own from this replica,
   * every one with a call running: a new client session's request is refused (a temporary condition).
   */
  upstream_sessions_full: { rpc: InternalError, http: 200 },
  /** The upstream sent a message larger than its maxMessageBytes; the message was dropped. */
  upstream_message_too_large: { rpc: InternalError, http: 200 },
  /**
   * The upstream broke the protocol on this call: an answer it was not asked for (a task), an answer with an id the
   * gateway never sent, a notifications/cancelled for the gateway's own request. `data.violation` says which.
   */
  upstream_violation: { rpc: InternalError, http: 200 },
  /** The upstream did not answer within the configured request deadline. */
  upstream_timeout: { rpc: GatewayServerError, http: 200 },
  /**
   * The client does not read its stream past sse.maxBufferedBytesPerStream (or the replica's sse.maxBufferedBytes),
   * and the call's upstream cannot wait for it without stalling other clients (a shared stdio child).
   */
  client_not_reading: { rpc: InternalError, http: 200 },
  /**
   * The task store (Redis) cannot be reached: the request fails at once instead of hanging. A temporary refusal:
   * `data.retryAfterMs` says when to try again (HTTP 503 + Retry-After where the revision answers with a status).
   */
  store_unavailable: { rpc: InternalError, http: 503 },
  /**
   * The task store is connected but did not answer within store.commandTimeoutMs (a blocked or overloaded Redis):
   * temporary, with `data.retryAfterMs`, as store_unavailable.
   */
  store_slow: { rpc: InternalError, http: 503 },
  /** A task's result (or error) is larger than tasks.maxResultBytes: the task fails with this instead of storing it. */
  result_too_large: { rpc: InternalError, http: 200 },
  /**
   * Finished tasks' results fill tasks.maxStoredBytesPerPrincipal or tasks.maxStoredBytes: a new task is refused
   * until some expire or are deleted. `data.budget` names which, `data.retryAfterMs` says when the oldest expires
   * (HTTP 503 + Retry-After where the revision answers with a status).
   */
  stored_results_full: { rpc: InternalError, http: 503 },
  /** The principal already holds maxTasksPerPrincipal unfinished tasks. */
  too_many_tasks: { rpc: InternalError, http: 200 },
  /**
   * This replica already runs replicas.maxRunningTasks tasks: a temporary refusal (another replica may have room);
   * `data.retryAfterMs` says when to try again (HTTP 503 + Retry-After where the revision answers with a status).
   */
  replica_full: { rpc: InternalError, http: 503 },
  /**
   * Another replica holds the task of a call's idempotency key but has not stored it within a few lease periods
   * (it died creating it, and the sweep has not dropped its reservation yet): temporary, with `data.retryAfterMs`.
   */
  key_busy: { rpc: InternalError, http: 503 },
  /** The principal already holds sessions.maxPerPrincipal open sessions. */
  too_many_sessions: { rpc: InvalidRequest, http: 429 },
  /** The principal already holds sessions.maxStreamsPerPrincipal open SSE streams on this replica. */
  too_many_streams: { rpc: InvalidRequest, http: 429 },
  /**
   * listen.maxInflightBytes or listen.maxInflightBytesPerPrincipal is full: `data.budget` names which, and
   * `data.retryAfterMs` says when to try again (HTTP Retry-After too).
   */
  inflight_budget_full: { rpc: GatewayServerError, http: 503 },
  session_required: { rpc: InvalidRequest, http: 400 },
  session_not_found: { rpc: GatewayServerError, http: 404 },
  unsupported_protocol_version: { rpc: InvalidRequest, http: 400 },
  origin_forbidden: { rpc: InvalidRequest, http: 403 },
  host_forbidden: { rpc: InvalidRequest, http: 403 },
  not_acceptable: { rpc: InvalidRequest, http: 406 },
  unsupported_media_type: { rpc: InvalidRequest, http: 415 },
  body_too_large: { rpc: InvalidRequest, http: 413 },
  method_not_allowed: { rpc: InvalidRequest, http: 405 },
  conflict: { rpc: InvalidRequest, http: 409 },
  shutting_down: { rpc: InternalError, http: 503 },
  /** A principal went past auth.rateLimits; `data.retryAfterMs` says when to try again (HTTP Retry-After too). */
  rate_limited: { rpc: GatewayServerError, http: 429 },
  /**
   * The caller has no connection to an upstream that acts as each user at their own account (issue 41): answered
   * with the link to connect it, `data.elicitations: [{ mode: "url", elicitationId, url, message }]`.
   */
  url_elicitation_required: { rpc: UrlElicitationRequired, http: 200 },
  /**
   * An upstream that acts as each user at their own account cannot serve this caller: `data.reason` says why
   * (`no_user`: an API key or no authentication, nobody a browser can sign in as; `not_connected`, `grant_refused`:
   * the credential failed mid-call, which the call plan answers with a link instead wherever it can).
   */
  consent_required: { rpc: InvalidRequest, http: 200 },
  /** The authorization server's metadata or keys cannot be fetched: tokens cannot be verified for now. */
  auth_unavailable: { rpc: InternalError, http: 503 },
  // 2026-07-28: request-level failures answer with an HTTP status of their own.
  /** A required `_meta` envelope key is missing or malformed. */
  invalid_envelope: { rpc: InvalidParams, http: 400 },
  /** An MCP header is missing, malformed, or disagrees with the body (HeaderMismatch). */
  header_mismatch: { rpc: HeaderMismatch, http: 400 },
  /** The request needs a client capability it did not declare (MissingRequiredClientCapability). */
  missing_capability: { rpc: MissingRequiredClientCapability, http: 400 },
  /** The request's protocol version is one the gateway does not speak (UnsupportedProtocolVersion). */
  unsupported_version: { rpc: UnsupportedProtocolVersion, http: 400 },
  /** Unknown or removed method, as a 2026-07-28 client is told (HTTP 404). */
  stateless_method_not_found: { rpc: MethodNotFound, http: 404 },
} as const satisfies Record<string, { rpc: number; http: number }>;

export type ErrorCode = keyof typeof REGISTRY;

/** The Retry-After header for an error whose data says when to retry (`retryAfterMs`): whole seconds, rounded up. */
export function retryAfterHeaders(data: unknown): Record<string, string> {
  const retryAfterMs = (data as { retryAfterMs?: unknown } | undefined)?.retryAfterMs;
  return typeof retryAfterMs === 'number' ? { 'retry-after': String(Math.ceil(retryAfterMs / 1000)) } : {};
}

export class GatewayError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'GatewayError';
  }

  get httpStatus(): number {
    return REGISTRY[this.code].http;
  }

  toJsonRpc(): JsonRpcErrorObject {
    const error: JsonRpcErrorObject = { code: REGISTRY[this.code].rpc, message: this.message };
    if (this.data !== undefined) error.data = this.data;
    return error;
  }
}

/** Any thrown value as a JSON-RPC error object; unexpected errors become -32603 without leaking stack traces. */
export function toJsonRpcError(error: unknown): JsonRpcErrorObject {
  if (error instanceof GatewayError) return error.toJsonRpc();
  const message = error instanceof Error ? error.message : String(error);
  return { code: InternalError, message: `Internal error: ${message}` };
}

/** The error response to request `id` (null when it has none, or none could be read) for any thrown value. */
export function errorResponseFor(id: RequestId | null, error: unknown): JsonRpcFailure {
  const { code, message, data } = toJsonRpcError(error);
  return errorResponse(id, code, message, data);
}

export function upstreamUnavailable(upstream: string, reason: string): GatewayError {
  return new GatewayError('upstream_unavailable', `Upstream '${upstream}' is unavailable: ${reason}`, { upstream });
}

/** A new client session's request, when every one of the upstream's maxSessions connections here is busy. */
export function upstreamSessionsFull(upstream: string, maxSessions: number): GatewayError {
  return new GatewayError(
    'upstream_sessions_full',
    `Upstream '${upstream}' has no session to spare: ${maxSessions} client sessions each have a call running on their own connection to it (upstreams.${upstream}.maxSessions); try again when one ends`,
    { upstream, maxSessions },
  );
}

/** A per-principal stdio upstream runs maxSessions children, every one with a call running: a new principal waits. */
export function upstreamChildrenFull(upstream: string, maxSessions: number): GatewayError {
  return new GatewayError(
    'upstream_sessions_full',
    `Upstream '${upstream}' has no child process to spare for another principal: its cap of ${maxSessions} children (upstreams.${upstream}.maxSessions, one child per principal) is reached and every one has a call running; try again when one ends`,
    { upstream, maxSessions },
  );
}

/** A call whose answer (or whose stream) carried a message larger than the upstream's maxMessageBytes. */
export function upstreamMessageTooLarge(upstream: string, maxMessageBytes: number): GatewayError {
  return new GatewayError('upstream_message_too_large', `Upstream '${upstream}' sent a message larger than maxMessageBytes (${maxMessageBytes} bytes)`, { upstream, maxMessageBytes });
}

/** A call the upstream broke the protocol on (`violation`: what, in a few words; `what`: the sentence for the client). */
export function upstreamViolation(upstream: string, violation: string, what: string): GatewayError {
  return new GatewayError('upstream_violation', `Upstream '${upstream}' broke the protocol: ${what}`, { upstream, violation });
}

/** An error of a lower layer that knows what a client is told of it. */
export interface ClientFacing {
  toGatewayError(): GatewayError;
}

/** An error of a lower layer that says itself what the client is told (a credential failure). */
export function isClientFacing(error: unknown): error is Error & ClientFacing {
  return error instanceof Error && typeof (error as Partial<ClientFacing>).toGatewayError === 'function';
}

/**
 * Why a message could not be sent to an upstream, as the client is told: the upstream is named only when the
 * failure was the upstream's (or the way to it), never for a message the gateway itself could not encode.
 */
export function sendFailure(upstream: string, error: unknown): GatewayError {
  // A credential the gateway could not obtain for the upstream (src/identity): it says itself what the client is told.
  if (isClientFacing(error)) return error.toGatewayError();
  if (error instanceof MessageEncodingError) return new GatewayError('internal', `Internal error: taskgate could not forward the request: ${error.message}`);
  return upstreamUnavailable(upstream, error instanceof Error ? error.message : String(error));
}

/** What a store refusal (store_unavailable, store_slow) tells a client to wait before it tries again. */
export const STORE_RETRY_AFTER_MS = 1000;

/** The Redis client's words for a command that got no answer in time, though it was sent (or queued). */
const STORE_TIMEOUT = /Command timed out/i;
/** Its words for a connection that is not there (refused, reset, closed, reconnecting past the retry limit). */
const STORE_DISCONNECTED =
  /No connection to Redis within the command timeout|max retries per request|Connection is closed|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|Stream isn't writeable|All sentinels are unreachable|None of startup nodes is available|Failed to refresh slots cache/i;

/** Whether a store failure was the store being slow (connected, no answer in time) or away; undefined when neither. */
export function storeFailureKind(error: unknown): 'slow' | 'unavailable' | undefined {
  const message = error instanceof Error ? error.message : String(error);
  if (STORE_TIMEOUT.test(message)) return 'slow';
  if (STORE_DISCONNECTED.test(message)) return 'unavailable';
  return undefined;
}

/**
 * A failed store operation as the client meets it: prompt, temporary (`data.retryAfterMs`), and saying what is
 * wrong in the gateway's words. A store that is connected but does not answer in time is slow (store_slow), not
 * away: the same Redis answers again once it is done with whatever blocks it.
 */
export function storeUnavailable(error: unknown): GatewayError {
  if (error instanceof GatewayError && (error.code === 'store_unavailable' || error.code === 'store_slow')) return error;
  const retry = { retryAfterMs: STORE_RETRY_AFTER_MS };
  const kind = storeFailureKind(error);
  if (kind === 'slow') {
    return new GatewayError('store_slow', 'The task store is slow: it did not answer within store.commandTimeoutMs; try again shortly', retry);
  }
  // The Redis client's own wording names its settings, which mean nothing to a client of the gateway.
  const reason = kind === 'unavailable' ? 'no connection to Redis; try again shortly' : error instanceof Error ? error.message : String(error);
  return new GatewayError('store_unavailable', `The task store is unavailable: ${reason}`, retry);
}

/** A task's result (or error) of `bytes` as JSON, over tasks.maxResultBytes: the task fails with this instead. */
export function resultTooLarge(upstream: string, bytes: number, maxResultBytes: number): GatewayError {
  return new GatewayError(
    'result_too_large',
    `Task result too large: upstream '${upstream}' answered ${bytes} bytes, more than tasks.maxResultBytes (${maxResultBytes} bytes); the result was not stored`,
    { upstream, bytes, maxResultBytes },
  );
}

/**
 * A new task refused because stored tasks (records, kept calls, results) fill a stored-bytes budget (`budget`: its config key) until
 * `freesAtMs` (epoch ms), when the oldest of them expires; deleting results frees it sooner. `together`: the caller
 * is counted with every client without authentication.
 */
export function storedResultsFull(
  budget: 'tasks.maxStoredBytesPerPrincipal' | 'tasks.maxStoredBytes',
  storedBytes: number,
  limit: number,
  freesAtMs: number,
  now: number,
  together = false,
): GatewayError {
  const whose =
    budget === 'tasks.maxStoredBytes'
      ? 'All principals\' stored tasks and results'
      : together
        ? 'Stored tasks and results of clients without authentication (counted together)'
        : 'Your stored tasks and results';
  const retryAfterMs = Math.max(1000, freesAtMs - now);
  return new GatewayError(
    'stored_results_full',
    `${whose} fill ${budget} (${storedBytes} of ${limit} bytes stored): no new task until some expire (the oldest at ${new Date(freesAtMs).toISOString()}) or are deleted; try again then`,
    { budget, storedBytes, limit, retryAfterMs },
  );
}
