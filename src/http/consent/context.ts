// What the routes of per-user consent share: their dependencies, the front-door login, the browser sessions, and
// the one way a page route answers a failure nobody planned for (the store away): a 503 page, logged in words
// that hold nothing of a token, code, state or cookie.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { GatewayConfig } from '../../config/types.js';
import type { UserConnections } from '../../consent/ports.js';
import type { GatewayEvents } from '../../events.js';
import type { Sealer } from '../../identity/sealing.js';
import type { Logger } from '../../log.js';
import type { TaskStore } from '../../store/task-store.js';
import type { RateLimiter } from '../../tasks/rate-limits.js';
import type { Authenticator } from '../credentials.js';
import type { BrowserSessions } from './browser-session.js';
import type { FrontDoorLogin } from './front-door-login.js';
import { sendPage } from './html.js';
import { UNAVAILABLE } from './pages.js';

export interface ConsentHttpDeps {
  connections: UserConnections;
  store: Pick<TaskStore, 'connections' | 'signingSecret'>;
  /** The config as it is now (a reload may change access rules, the login client, the public URL). */
  config: () => GatewayConfig;
  /** identity.sealingKeys' sealer: a login flow's verifier is stored sealed. */
  sealer: Sealer;
  /** The MCP endpoint's: bearer credentials here are checked exactly as there. */
  authenticator: Authenticator;
  events: GatewayEvents;
  logger: Logger;
  /** Per-principal request rate (auth.rateLimits), applied to /connections as to the MCP endpoint. */
  rateLimiter?: RateLimiter;
  /** The exposed tool names the catalog lists for an upstream now (for access rules); undefined when unknown. */
  toolsOf?: (upstream: string) => readonly string[] | undefined;
  now?: () => number;
}

export interface ConsentHttpContext {
  deps: ConsentHttpDeps;
  login: FrontDoorLogin;
  sessions: BrowserSessions;
  /** Whether the public origin is https (cookies Secure and prefixed). */
  secure(): boolean;
}

type PageHandler = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>;

/** A page route whose unplanned failures answer the 503 page. */
export function pageRoute(context: ConsentHttpContext, route: string, handler: PageHandler): PageHandler {
  return async (request, reply) => {
    try {
      return await handler(request, reply);
    } catch (error) {
      context.deps.logger.warn({ route, reason: (error as Error).message }, 'consent page failed');
      return sendPage(reply, UNAVAILABLE);
    }
  };
}

/** A query parameter given exactly once; undefined when absent or repeated (a repeated one is never chosen from). */
export function single(query: unknown, name: string): string | undefined {
  const value = (query as Record<string, unknown> | undefined)?.[name];
  return typeof value === 'string' ? value : undefined;
}
