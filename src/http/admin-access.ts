// Who may use the operator endpoints (the dashboard's API, /metrics). Without `auth` they are open, like the MCP
// endpoint (the gateway listens on loopback by default). With `auth` the caller authenticates exactly as on the
// MCP endpoint (same Authenticator, same challenge) and must be an admin: a principal `auth.admin.principals`
// names (globs, bare or qualified as in access rules), or a credential carrying one of `auth.admin.scopes`.
// Without `auth.admin` nobody is. With or without `auth`, a write must be one no page on another origin could
// have sent (admin-writes.ts). Refusals are announced as `access.denied` and answered in fixed words.
import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { principalMatches } from '../config/access.js';
import type { AdminAccess, ListenConfig } from '../config/types.js';
import { GatewayError } from '../errors.js';
import type { GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import type { Caller } from '../principals.js';
import { checkAdminWrite } from './admin-writes.js';
import { AuthError, type Authenticator } from './credentials.js';

export interface AdminAccessOptions {
  /** Undefined without `auth`: every request is let through. */
  authenticator: Authenticator | undefined;
  /**
   * `auth.admin`; undefined refuses every caller (403) while auth is on. A function is asked on every request (a
   * config reload may change it).
   */
  admin: AdminAccess | undefined | (() => AdminAccess | undefined);
  events: GatewayEvents;
  logger: Logger;
  /** What the endpoint is, for `access.denied` and the log: `dashboard`, `metrics`. */
  endpoint: string;
  /** The listen config: which origins besides the gateway's own may send writes (`allowedOrigins`). */
  listen: ListenConfig;
}

/** Who is using an admin endpoint, once admitted (authenticated gateways only). */
const admins = new WeakMap<FastifyRequest, Caller>();

/** The admin behind a request the hook let through; undefined without auth. */
export function adminOf(request: FastifyRequest): Caller | undefined {
  return admins.get(request);
}

/** Whether `caller` is an admin under `admin`. */
export function isAdmin(admin: AdminAccess | undefined, caller: Caller): boolean {
  if (admin === undefined) return false;
  return admin.principals.some((glob) => principalMatches(glob, caller)) || admin.scopes.some((scope) => caller.scopes.includes(scope));
}

/** The onRequest hook that guards an admin endpoint (register it on the endpoint's routes). */
export function adminAccess(options: AdminAccessOptions): onRequestAsyncHookHandler {
  const { authenticator, events, logger, endpoint, listen } = options;
  return async function guardAdmin(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    // Answering early: the reply is returned, so fastify goes no further (no handler runs).
    try {
      checkAdminWrite(listen, request);
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
      const status = error.httpStatus;
      events.emit('access.denied', { kind: 'cross-site', name: endpoint, reason: error.message, status });
      logger.info({ audit: 'access.denied', endpoint, method: request.method, origin: request.headers.origin, reason: error.message, status }, 'admin endpoint refused: a write a page on another origin could have sent');
      return reply.code(status).send({ error: error.message });
    }
    if (authenticator === undefined) return undefined;
    let caller: Caller;
    try {
      caller = await authenticator.authenticate(headerOf(request, 'authorization'));
    } catch (error) {
      if (error instanceof GatewayError) {
        // The authorization server's keys are unavailable: nothing the caller can fix now.
        return reply.code(503).header('retry-after', '5').send({ error: error.message });
      }
      if (!(error instanceof AuthError)) throw error;
      events.emit('access.denied', { kind: 'credentials', name: endpoint, reason: error.message });
      logger.info({ audit: 'access.denied', endpoint, reason: error.message, status: error.status }, 'admin endpoint refused: credentials');
      return reply.code(error.status).header('www-authenticate', authenticator.challenge(error)).send({ error: error.message });
    }
    const admin = typeof options.admin === 'function' ? options.admin() : options.admin;
    if (!isAdmin(admin, caller)) {
      const reason = admin === undefined ? 'auth.admin is not configured: nobody is an admin' : 'not an admin (auth.admin)';
      events.emit('access.denied', { principal: caller.principal, kind: 'admin', name: endpoint, reason });
      logger.info({ audit: 'access.denied', principal: caller.principal, endpoint, reason }, 'admin endpoint refused: not an admin');
      return reply.code(403).send({ error: `Forbidden: ${reason}` });
    }
    admins.set(request, caller);
    return undefined;
  };
}

function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
