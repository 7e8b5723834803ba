// Credentials on the MCP endpoint: who calls (the configured Authenticator), at what rate (auth.rateLimits
// requestsPerSecond), and the 401/403 with a challenge for those refused. callerOf and authenticateRequest are
// for any plugin that serves authenticated callers (the admin endpoints build their own guard on them).
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { GatewayEvents } from '../events.js';
import { errorResponseFor, GatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Caller } from '../principals.js';
import { RateLimited, type RateLimiter } from '../tasks/rate-limits.js';
import type { ConnectionGuard } from './connections.js';
import { AuthError, type Authenticator } from './credentials.js';
import { discardBody, header, sendRateLimited } from './replies.js';

/** Who sent each request, once its credentials were checked (requests of an authenticated gateway only). */
const callers = new WeakMap<FastifyRequest, Caller>();

/** The authenticated caller of a request; undefined before authentication, and always without `auth`. */
export function callerOf(request: FastifyRequest): Caller | undefined {
  return callers.get(request);
}

/** Authenticates the request's bearer token and records its caller (callerOf); throws AuthError when refused. */
export async function authenticateRequest(authenticator: Authenticator, request: FastifyRequest): Promise<Caller> {
  const caller = await authenticator.authenticate(header(request, 'authorization'));
  callers.set(request, caller);
  return caller;
}

/** The refusal of a credential: its status, the challenge that says what to send, and a JSON-RPC error body. */
export function sendCredentialsRefusal(reply: FastifyReply, authenticator: Authenticator, error: AuthError): FastifyReply {
  return reply
    .code(error.status)
    .header('www-authenticate', authenticator.challenge(error))
    .type('application/json')
    .send(JSON.stringify(errorResponseFor(null, new GatewayError('invalid_request', error.message))));
}

export interface CredentialsGuardDeps {
  authenticator: Authenticator;
  /** Per-principal request rate; it announces its own refusals (rate.limited). */
  rateLimiter: RateLimiter | undefined;
  /** Told which connections presented valid credentials: those are the last reclaimed. */
  connections: ConnectionGuard;
  events: GatewayEvents;
  logger: Logger;
}

/** A request hook; what it returns is the reply it sent, or undefined to go on. */
export type RequestGuard = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined>;

/** The credentials check of the MCP endpoint: a refused request gets its answer unread (its body is drained). */
export function credentialsGuard(deps: CredentialsGuardDeps): RequestGuard {
  const { authenticator, rateLimiter, connections, events, logger } = deps;
  return async (request, reply) => {
    try {
      const caller = await authenticateRequest(authenticator, request);
      connections.proven(request.raw.socket);
      // Asked per request: a config reload may turn the limit on or off.
      if (rateLimiter?.limitsRequests === true) await rateLimiter.request(caller.principal);
      return undefined;
    } catch (error) {
      if (!(error instanceof RateLimited) && !(error instanceof AuthError)) throw error;
      await discardBody(request);
      if (error instanceof RateLimited) return sendRateLimited(reply, error);
      events.emit('access.denied', { kind: 'credentials', reason: error.message, status: error.status });
      if (error.detail !== undefined) logger.debug({ reason: error.detail, status: error.status }, 'refused token, in detail');
      return sendCredentialsRefusal(reply, authenticator, error);
    }
  };
}
