// What several plugins of the front do with a request or a reply: read a header, send JSON, drop an unread body.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errorResponseFor, retryAfterHeaders } from '../errors.js';
import type { JsonRpcFailure, RequestId } from '../jsonrpc.js';
import type { RateLimited } from '../tasks/rate-limits.js';

/** Request headers as node gives them. */
export type RequestHeaders = Record<string, string | string[] | undefined>;

/** A protocol revision's error edge: the HTTP status and JSON-RPC error a refused request gets in it. */
export type Refusal = (id: RequestId | null, error: unknown) => { status: number; body: JsonRpcFailure };

/** A request header's first value. */
export function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Whether the request's Accept takes `type` (no Accept takes anything). */
export function accepts(request: FastifyRequest, type: string): boolean {
  const accept = header(request, 'accept');
  return accept === undefined || accept.includes(type) || accept.includes('*/*');
}

export function sendJson(reply: FastifyReply, status: number, body: unknown, headers: Record<string, string> = {}): FastifyReply {
  return reply.code(status).headers(headers).type('application/json').send(JSON.stringify(body));
}

/** A request past auth.rateLimits: 429, Retry-After, and the JSON-RPC error that says when (no request id: none was read). */
export function sendRateLimited(reply: FastifyReply, error: RateLimited): FastifyReply {
  return sendJson(reply, error.httpStatus, errorResponseFor(null, error), retryAfterHeaders(error.data));
}

/**
 * Reads and drops what is left of a request's body before the request is refused unread: a client still sending
 * it would otherwise see its connection reset instead of the answer (what nginx's lingering close is for). Nothing
 * is kept, the body is at most listen.maxBodyBytes, and listen.requestTimeoutMs bounds a slow sender.
 */
export function discardBody(request: FastifyRequest): Promise<void> {
  const raw = request.raw;
  if (raw.complete || raw.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    raw.once('end', resolve).once('close', resolve).once('error', () => resolve());
    raw.resume();
  });
}
