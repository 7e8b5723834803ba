// Per-user consent's routes on the gateway's listener (issue 41), registered by the front (src/http/server.ts)
// when the consent core runs: the front door's browser sign-in (/oauth/login, /oauth/login/callback), a user's
// connect links and the authorization server's callback (/connect/{id}, /oauth/callback), a user's connections
// (GET /connections, DELETE /connections/{upstream}) and the gateway's Client ID Metadata Document. Registered
// after the Origin/Host guard, whose hook applies to them as to every route.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { BrowserSessions } from './browser-session.js';
import { registerClientMetadataRoute } from './client-metadata.js';
import { registerConnectionsApi } from './connections-api.js';
import { registerConsentRoutes } from './consent-routes.js';
import type { ConsentHttpContext, ConsentHttpDeps } from './context.js';
import { FrontDoorLogin } from './front-door-login.js';
import { registerLoginRoutes } from './login-routes.js';
import { isSecureOrigin, publicOrigin } from '../../consent/settings.js';

export type { ConsentHttpDeps } from './context.js';

export interface ConsentHttp {
  /** The principal signed in at the request's browser (its session cookie), if any: for the dashboard. */
  browserPrincipal(request: FastifyRequest): Promise<string | undefined>;
}

export function registerConsentHttp(app: FastifyInstance, deps: ConsentHttpDeps): ConsentHttp {
  const secure = (): boolean => isSecureOrigin(publicOrigin(deps.config()));
  const sessions = new BrowserSessions({ secret: () => deps.store.signingSecret(), secure, ...(deps.now !== undefined && { now: deps.now }) });
  const login = new FrontDoorLogin({
    connections: deps.store.connections,
    sealer: deps.sealer,
    authenticator: deps.authenticator,
    config: deps.config,
    logger: deps.logger,
    ...(deps.now !== undefined && { now: deps.now }),
  });
  const context: ConsentHttpContext = { deps, login, sessions, secure };
  void app.register(async (scope) => {
    registerLoginRoutes(scope, context);
    registerConsentRoutes(scope, context);
    registerConnectionsApi(scope, context);
    registerClientMetadataRoute(scope, { config: deps.config });
  });
  return { browserPrincipal: (request) => sessions.browserPrincipal(request) };
}
