// A user's connections as JSON: GET /connections lists the caller's own, one entry per upstream that needs the
// user's account and that the caller may use (usable-upstreams.ts); DELETE /connections/{upstream} disconnects one
// (the consent core revokes at the server when it can): 204, or 404 when there was none. The caller is the bearer
// of a credential checked exactly as on the MCP endpoint (same Authenticator, challenge and rate limit), or a
// browser signed in at the front door (the dashboard's Connections view). A browser's DELETE must come from the
// gateway's own page: its Origin is the public origin (a browser always sends Origin on a DELETE), and a page on
// another site cannot send it with the session cookie anyway (SameSite=Lax).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { GatewayError } from '../../errors.js';
import { nameOf } from '../../principals.js';
import { RateLimited } from '../../tasks/rate-limits.js';
import { AuthError } from '../credentials.js';
import { sendRateLimited } from '../replies.js';
import type { AccessSubject } from '../../config/access.js';
import type { ConsentHttpContext } from './context.js';
import { publicOrigin } from '../../consent/settings.js';
import { usableUpstreams } from './usable-upstreams.js';

export const CONNECTIONS_PATH = '/connections';

interface Asker {
  principal: string;
  subject: AccessSubject | undefined;
  /** A browser session (ambient credential) rather than a bearer token. */
  browser: boolean;
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export function registerConnectionsApi(app: FastifyInstance, context: ConsentHttpContext): void {
  const { deps } = context;
  void app.register(async (api) => {
    api.setErrorHandler((error: Error & { statusCode?: number }, request, reply) => {
      const status = error instanceof ApiError ? error.status : error instanceof GatewayError ? 503 : (error.statusCode ?? 500);
      if (status >= 500) deps.logger.warn({ route: request.routeOptions.url, reason: error.message }, 'connections API request failed');
      void reply.code(status).headers(status === 503 ? { 'retry-after': '5' } : {}).send({ error: status >= 500 && !(error instanceof ApiError) ? 'The gateway cannot answer this now; try again shortly' : error.message });
    });
    api.addHook('onSend', async (_request, reply) => {
      reply.header('cache-control', 'no-store');
    });

    api.get(CONNECTIONS_PATH, async (request, reply) => {
      const asker = await askerOf(context, request, reply);
      if (asker === undefined) return reply;
      const connections = await deps.connections.list(asker.principal, upstreamsFor(context, asker));
      return reply.send({ connections });
    });

    api.delete(`${CONNECTIONS_PATH}/:upstream`, async (request, reply) => {
      const asker = await askerOf(context, request, reply);
      if (asker === undefined) return reply;
      if (asker.browser) checkSameOrigin(context, request);
      const { upstream } = request.params as { upstream: string };
      if (!upstreamsFor(context, asker).includes(upstream)) throw new ApiError(404, `No connection to '${upstream}'`);
      const removed = await deps.connections.disconnect(asker.principal, upstream);
      if (!removed) throw new ApiError(404, `No connection to '${upstream}'`);
      return reply.code(204).send();
    });
  });
}

function upstreamsFor(context: ConsentHttpContext, asker: Asker): string[] {
  const { deps } = context;
  return usableUpstreams({ config: deps.config(), subject: asker.subject, upstreams: deps.connections.upstreams(), ...(deps.toolsOf !== undefined && { toolsOf: deps.toolsOf }) });
}

/**
 * Who asks: the bearer of an Authorization header (checked, refused as the MCP endpoint refuses), else the browser
 * signed in, else a 401 with the MCP endpoint's challenge. Undefined: the refusal was sent.
 */
async function askerOf(context: ConsentHttpContext, request: FastifyRequest, reply: FastifyReply): Promise<Asker | undefined> {
  const { authenticator, events, logger, rateLimiter } = context.deps;
  try {
    let asker: Asker;
    if (request.headers.authorization !== undefined) {
      const header = request.headers.authorization;
      const caller = await authenticator.authenticate(Array.isArray(header) ? header[0] : header);
      asker = { principal: caller.principal, subject: caller, browser: false };
    } else {
      const principal = await context.sessions.browserPrincipal(request);
      if (principal === undefined) throw new AuthError(401, 'Authentication required: send Authorization: Bearer <token>, or sign in at /oauth/login', undefined);
      const name = nameOf(principal);
      // A session names who signed in, not a token's scopes: rules that name the principal apply to it.
      asker = { principal, subject: name === undefined ? undefined : { ...name, scopes: [] }, browser: true };
    }
    if (rateLimiter?.limitsRequests === true) await rateLimiter.request(asker.principal);
    return asker;
  } catch (error) {
    if (error instanceof RateLimited) {
      await sendRateLimited(reply, error);
      return undefined;
    }
    if (error instanceof GatewayError && error.code === 'auth_unavailable') {
      await reply.code(503).header('retry-after', '5').send({ error: error.message });
      return undefined;
    }
    if (!(error instanceof AuthError)) throw error;
    events.emit('access.denied', { kind: 'credentials', name: 'connections', reason: error.message, status: error.status });
    if (error.detail !== undefined) logger.debug({ reason: error.detail, status: error.status }, 'refused token, in detail');
    await reply.code(error.status).header('www-authenticate', authenticator.challenge(error)).send({ error: error.message });
    return undefined;
  }
}

/** A browser's write must come from the gateway's own page (its Origin the public origin, never cross-site). */
function checkSameOrigin(context: ConsentHttpContext, request: FastifyRequest): void {
  const origin = request.headers.origin;
  const site = request.headers['sec-fetch-site'];
  const own = publicOrigin(context.deps.config());
  if (origin === undefined || own === undefined || origin !== own || (site !== undefined && site !== 'same-origin')) {
    context.deps.events.emit('access.denied', { kind: 'cross-site', name: 'connections', reason: 'a browser session write from another origin', status: 403 });
    throw new ApiError(403, "Forbidden: a signed-in browser may disconnect only from the gateway's own page");
  }
}
