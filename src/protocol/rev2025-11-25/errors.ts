// This revision's error edge: what a failure becomes on the wire. Within a session, an answered request's error
// travels as a JSON-RPC error in a 200 response (or on its SSE stream); where the transport itself refuses a
// POST, GET or DELETE (no such session, a second GET stream, a body it cannot read) the HTTP status says so too.
// This revision also answers what reaches the endpoint before any revision is known (see http/server.ts).
import { GatewayError, InvalidRequest, toJsonRpcError } from '../../errors.js';
import { errorResponse, type JsonRpcErrorObject, type JsonRpcFailure, type RequestId } from '../../jsonrpc.js';

/** The JSON-RPC error a request gets for `error`; unexpected errors become -32603 without their stack. */
export function legacyError(error: unknown): JsonRpcErrorObject {
  return toJsonRpcError(error);
}

/** The error response to request `id` (null when it has none, or none could be read). */
export function legacyErrorResponse(id: RequestId | null, error: unknown): JsonRpcFailure {
  const { code, message, data } = legacyError(error);
  return errorResponse(id, code, message, data);
}

/**
 * What the transport answers when it refuses a request: the registry's HTTP status (500 where that is not an
 * error status) and the error's code, message and data (a full budget's `retryAfterMs`, which the front end also
 * sends as Retry-After). Failures that are not the gateway's own (the HTTP server's) keep their status and count
 * as invalid requests.
 */
export function legacyRefusal(id: RequestId | null, error: unknown): { status: number; body: JsonRpcFailure } {
  if (error instanceof GatewayError) {
    const { code, message, data } = legacyError(error);
    return { status: error.httpStatus >= 400 ? error.httpStatus : 500, body: errorResponse(id, code, message, data) };
  }
  const statusCode = (error as { statusCode?: unknown } | null)?.statusCode;
  const status = typeof statusCode === 'number' && statusCode >= 400 ? statusCode : 500;
  return { status, body: errorResponse(id, InvalidRequest, error instanceof Error ? error.message : String(error)) };
}
