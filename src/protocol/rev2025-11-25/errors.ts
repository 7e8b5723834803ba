// This revision's error edge: what a failure becomes on the wire. Within a session, an answered request's error
// travels as a JSON-RPC error in a 200 response (or on its SSE stream); where the transport itself refuses a
// POST, GET or DELETE (no such session, a second GET stream, a body it cannot read) the HTTP status says so too.
// This revision also answers what reaches the endpoint before any revision is known (see http/server.ts).
import { errorResponseFor, GatewayError, InvalidRequest, retryAfterHeaders, toJsonRpcError, type ErrorCode } from '../../errors.js';
import { errorResponse, type JsonRpcErrorObject, type JsonRpcFailure, type Outcome, type RequestId } from '../../jsonrpc.js';

/**
 * Failures of a dispatched request that refuse its whole HTTP exchange, with the status (and Retry-After) the
 * same limit gets at the door or in the other revision: a task creation past
 * `auth.rateLimits.taskCreationsPerMinute` is a 429 like a request past `requestsPerSecond`, and one past
 * `replicas.maxRunningTasks` a 503, as for 2026-07-28 clients, so that a client or a load balancer may try again
 * (on another replica). So is a call whose upstream credential cannot be had for now (the authorization server
 * down, slow or failing: issue 33 asks for 503 + Retry-After wherever the revision answers in HTTP).
 */
const EXCHANGE_REFUSALS: ReadonlySet<ErrorCode> = new Set(['rate_limited', 'replica_full', 'stored_results_full', 'auth_unavailable']);

/** A request's failure that may answer its POST with an HTTP status of its own (see `exchangeAnswer`). */
export interface SessionRefusedOutcome {
  error: JsonRpcErrorObject;
  httpStatus: number;
}

/** What a dispatched request answers: an outcome, or a failure that refuses its exchange. */
export type SessionOutcome = Outcome | SessionRefusedOutcome;

/** The outcome of a request that failed with `error`: a refusal of the exchange where the error is one. */
export function sessionFailure(error: unknown): SessionOutcome {
  const rpc = sessionError(error);
  return error instanceof GatewayError && EXCHANGE_REFUSALS.has(error.code) ? { error: rpc, httpStatus: error.httpStatus } : { error: rpc };
}

/**
 * The HTTP status and headers of a POST answered with one request's outcome as plain JSON (nothing of it streamed
 * yet): a refusal's own status and Retry-After, else 200.
 */
export function exchangeAnswer(outcome: SessionOutcome): { status: number; headers: Record<string, string> } {
  if (!('httpStatus' in outcome)) return { status: 200, headers: {} };
  return { status: outcome.httpStatus, headers: retryAfterHeaders(outcome.error.data) };
}

/** The JSON-RPC error a request gets for `error`; unexpected errors become -32603 without their stack. */
export function sessionError(error: unknown): JsonRpcErrorObject {
  return toJsonRpcError(error);
}

/** The error response to request `id` (null when it has none, or none could be read). */
export function sessionErrorResponse(id: RequestId | null, error: unknown): JsonRpcFailure {
  return errorResponseFor(id, error);
}

/**
 * What the transport answers when it refuses a request: the registry's HTTP status (500 where that is not an
 * error status) and the error's code, message and data (a full budget's `retryAfterMs`, which the front end also
 * sends as Retry-After). Failures that are not the gateway's own (the HTTP server's) keep their status and count
 * as invalid requests.
 */
export function sessionRefusal(id: RequestId | null, error: unknown): { status: number; body: JsonRpcFailure } {
  if (error instanceof GatewayError) return { status: error.httpStatus >= 400 ? error.httpStatus : 500, body: errorResponseFor(id, error) };
  const statusCode = (error as { statusCode?: unknown } | null)?.statusCode;
  const status = typeof statusCode === 'number' && statusCode >= 400 ? statusCode : 500;
  return { status, body: errorResponse(id, InvalidRequest, error instanceof Error ? error.message : String(error)) };
}
