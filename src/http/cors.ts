// CORS on the MCP endpoint, for browser-based clients (web IDEs, the Inspector in direct mode, agents in a page)
// served from another origin. Off unless `listen.cors` is configured. Written here rather than with @fastify/cors:
// its headers go through reply.header(), which never reaches an answer written on the raw response (every SSE
// stream is), and it can only allow a fixed list of request headers or all of them, not the `Mcp-Param-*` family.
import type { FastifyPluginCallback, FastifyReply, FastifyRequest } from 'fastify';
import type { ListenConfig } from '../config/types.js';
import { corsAllows } from './guards.js';

/** The methods of the MCP endpoint. */
export const CORS_METHODS = 'GET, POST, DELETE';

/** Request headers MCP clients send (lowercase), beyond the ones every browser may send without asking. */
const REQUEST_HEADERS: ReadonlySet<string> = new Set([
  'authorization',
  'content-type',
  'accept',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
  // 2026-07-28: what a request is, repeated in headers so that intermediaries can route without the body.
  'mcp-method',
  'mcp-name',
]);
/** 2026-07-28 `Mcp-Param-<Name>`: a tool's parameters chosen to travel as headers; any name. */
const PARAM_HEADER_PREFIX = 'mcp-param-';

/** Response headers a page's script may read: the session, the credential challenge, when to retry. */
export const EXPOSED_HEADERS = 'Mcp-Session-Id, WWW-Authenticate, Retry-After';

/** Whether a client may send this request header (case-insensitive). */
export function requestHeaderAllowed(name: string): boolean {
  const lower = name.trim().toLowerCase();
  return REQUEST_HEADERS.has(lower) || (lower.startsWith(PARAM_HEADER_PREFIX) && lower.length > PARAM_HEADER_PREFIX.length);
}

type Headers = Record<string, string>;

/**
 * The CORS headers of an answer (not a preflight) from the MCP endpoint. `Vary: Origin` always, since the answer
 * differs by origin; the rest only for a listed origin.
 */
export function responseHeaders(listen: ListenConfig, origin: string | undefined): Headers {
  const headers: Headers = { vary: 'Origin' };
  const cors = listen.cors;
  if (cors === undefined || origin === undefined || !corsAllows(listen, origin)) return headers;
  // The origin itself, never "*": "*" is refused with credentials, and echoing is what Vary: Origin is for.
  headers['access-control-allow-origin'] = origin;
  headers['access-control-expose-headers'] = EXPOSED_HEADERS;
  if (cors.credentials) headers['access-control-allow-credentials'] = 'true';
  return headers;
}

/**
 * The answer to a preflight (OPTIONS with Access-Control-Request-Method). A listed origin learns the methods and,
 * of the headers it asked for, those MCP uses: a browser then names exactly what it refused (a method or header
 * the endpoint does not take), where no CORS headers at all would only say "CORS failed". An origin not listed
 * gets no CORS headers, which the browser takes as a refusal.
 */
export function preflightHeaders(listen: ListenConfig, origin: string | undefined, requestedHeaders: string | undefined): Headers {
  const headers: Headers = { vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers' };
  const cors = listen.cors;
  if (cors === undefined || origin === undefined || !corsAllows(listen, origin)) return headers;
  headers['access-control-allow-origin'] = origin;
  headers['access-control-allow-methods'] = CORS_METHODS;
  const allowed = (requestedHeaders ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '' && requestHeaderAllowed(name));
  if (allowed.length > 0) headers['access-control-allow-headers'] = [...new Set(allowed)].join(', ');
  headers['access-control-max-age'] = String(cors.maxAgeSeconds);
  if (cors.credentials) headers['access-control-allow-credentials'] = 'true';
  return headers;
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/**
 * Registers CORS for the MCP endpoint at `listen.path`, when `listen.cors` is configured. The app-wide Origin/Host
 * guard runs first (it is added before this plugin loads), so a refused origin is refused before any of this.
 * Not encapsulated (skip-override, as fastify-plugin does it): its hook must see the MCP routes, declared outside.
 */
export const corsPlugin: FastifyPluginCallback<{ listen: ListenConfig }> = (app, { listen }, done) => {
  if (listen.cors === undefined) {
    done();
    return;
  }
  // Set on the raw response: fastify's own headers are merged into writeHead, and answers that hijack the reply
  // (SSE streams, 2026-07-28 answers) write the raw response directly. Every hook runs before authentication,
  // so a 401 carries them too and the page can read its WWW-Authenticate.
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.routeOptions.url !== listen.path || request.method === 'OPTIONS') return;
    for (const [name, value] of Object.entries(responseHeaders(listen, header(request, 'origin')))) reply.raw.setHeader(name, value);
  });
  app.options(listen.path, async (request, reply) => {
    if (header(request, 'access-control-request-method') === undefined) {
      // Not a preflight: an OPTIONS request asking what the endpoint takes.
      return reply.code(204).header('allow', `${CORS_METHODS}, OPTIONS`).send();
    }
    return reply.code(204).headers(preflightHeaders(listen, header(request, 'origin'), header(request, 'access-control-request-headers'))).send();
  });
  done();
};
(corsPlugin as unknown as Record<symbol, boolean>)[Symbol.for('skip-override')] = true;
