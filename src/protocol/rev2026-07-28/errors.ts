// This revision's error edge: what a failure becomes on the wire. 2026-07-28 gives request-level failures an
// HTTP status of their own (a malformed envelope or header, a missing capability, an unsupported version: 400;
// an unknown method: 404), while a request that was dispatched and failed is a JSON-RPC error in a 200.
import {
  errorResponseFor,
  GatewayError,
  HeaderMismatch,
  type ErrorCode,
  InvalidParams,
  MissingRequiredClientCapability,
  ResourceNotFound,
  retryAfterHeaders,
  toJsonRpcError,
  UnsupportedProtocolVersion,
} from '../../errors.js';
import type { JsonRpcErrorObject, JsonRpcFailure, Outcome, RequestId } from '../../jsonrpc.js';

/** Request-level errors, whoever answered them (an upstream too): HTTP 400 in this revision. */
const REQUEST_LEVEL_ERRORS: ReadonlySet<number> = new Set([HeaderMismatch, MissingRequiredClientCapability, UnsupportedProtocolVersion]);

/** The JSON-RPC error a request gets for `error`; unexpected errors become -32603 without their stack. */
export function statelessError(error: unknown): JsonRpcErrorObject {
  return toJsonRpcError(error);
}

/**
 * A request refused before it was dispatched: the registry's HTTP status (500 for what is not the gateway's own;
 * a full budget keeps its 503 and too many streams their 429, with `data.retryAfterMs`: see retryAfterHeader).
 */
export function statelessRefusal(id: RequestId | null, error: unknown): { status: number; body: JsonRpcFailure } {
  return { status: error instanceof GatewayError ? error.httpStatus : 500, body: errorResponseFor(id, error) };
}

/**
 * Temporary refusals of a dispatched request: HTTP 503 with Retry-After, so that a client or proxy may try another
 * replica (a full one) or again shortly (a store that is away or slow, stored results that fill their budget, an
 * authorization server that is down or slow when the gateway needs a credential for the upstream).
 */
const TEMPORARY_REFUSALS: ReadonlySet<ErrorCode> = new Set(['replica_full', 'stored_results_full', 'store_unavailable', 'store_slow', 'auth_unavailable']);

/**
 * A dispatched request that failed here: request-level failures keep their HTTP status, and so do temporary
 * refusals (503); the rest are 200.
 */
export function statelessFailure(error: unknown): { outcome: Outcome; status: number } {
  const keepsStatus = error instanceof GatewayError && ((error.httpStatus >= 400 && error.httpStatus < 500) || TEMPORARY_REFUSALS.has(error.code));
  return { outcome: { error: statelessError(error) }, status: keepsStatus ? error.httpStatus : 200 };
}

/** Retry-After for an answer or refusal that says when to retry (a rate limit, a full replica, a full budget, too many streams). */
export function retryAfterHeader(outcome: Outcome): Record<string, string> {
  return 'error' in outcome ? retryAfterHeaders(outcome.error.data) : {};
}

/** The HTTP status an answered request is sent with: 400 for a request-level error (an upstream's too), else 200. */
export function statelessAnswerStatus(outcome: Outcome): number {
  return 'error' in outcome && REQUEST_LEVEL_ERRORS.has(outcome.error.code) ? 400 : 200;
}

/** A resource-not-found error names the URI (`data.uri`), as 2026-07-28 asks, whoever raised it. */
export function withUri(error: { code: number; data?: unknown }, uri: unknown): void {
  if ((error.code !== ResourceNotFound && error.code !== InvalidParams) || typeof uri !== 'string' || error.data !== undefined) return;
  error.data = { uri };
}
