// Cross-site writes on the operator endpoints. A page on another origin can make the operator's browser send a
// "simple" request (a form, or fetch with mode: 'no-cors'): no preflight, a text/plain or form body, and no
// answer the page may read; but the request itself arrives, and without auth nothing else would stop it. The
// gateway-wide guard (guards.ts) admits every loopback origin when bound to loopback, so a page served from
// another local port gets through it. So a request that changes state must be one no browser sends
// cross-site without the server's consent: a JSON body (`Content-Type: application/json` makes a browser
// preflight, which these endpoints never grant), and, when it carries an Origin, the gateway's own origin or one
// `listen.allowedOrigins` names exactly.
import type { FastifyRequest } from 'fastify';
import type { ListenConfig } from '../config/types.js';
import { GatewayError } from '../errors.js';
import { parseHostHeader, parseOrigin } from './guards.js';

/** Methods that only read: everything else is a write. */
const READS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Throws the refusal of a write a browser could have sent cross-site; reads pass. */
export function checkAdminWrite(listen: ListenConfig, request: FastifyRequest): void {
  if (READS.has(request.method)) return;
  const type = request.headers['content-type'];
  const mediaType = (Array.isArray(type) ? type[0] : type)?.split(';')[0]?.trim().toLowerCase();
  if (mediaType !== 'application/json') {
    throw new GatewayError('unsupported_media_type', 'Unsupported Media Type: a request that changes state must send Content-Type: application/json');
  }
  const origin = request.headers.origin;
  if (origin === undefined || isOwnOrigin(origin, request.headers.host) || listedOrigin(listen, origin)) return;
  throw new GatewayError('origin_forbidden', `Forbidden: a request from Origin '${origin}' may not change state here (only the gateway's own origin, or one listen.allowedOrigins names)`);
}

/** Whether `origin` is the origin the request was sent to (its Host): the dashboard's own page. */
function isOwnOrigin(origin: string, host: string | undefined): boolean {
  const parsed = parseOrigin(origin);
  const authority = host === undefined ? undefined : parseHostHeader(host);
  if (parsed === undefined || authority === undefined) return false;
  // The URL parser drops a scheme's default port; a Host header may still carry it.
  const defaultPort = parsed.protocol === 'https:' ? '443' : '80';
  const hostPort = authority.port === defaultPort ? '' : (authority.port ?? '');
  return parseHostHeader(parsed.host)?.hostname === authority.hostname && parsed.port === hostPort;
}

/** An exact entry of listen.allowedOrigins (its `*` admits any reader of the MCP endpoint, not any writer here). */
function listedOrigin(listen: ListenConfig, origin: string): boolean {
  const parsed = parseOrigin(origin);
  return parsed !== undefined && listen.allowedOrigins.some((entry) => entry !== '*' && parseOrigin(entry)?.origin === parsed.origin);
}
