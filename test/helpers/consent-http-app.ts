// The browser side of per-user consent (src/http/consent/) on a fastify instance of its own, listening on loopback:
// the Origin/Host guard, the consent routes, and (when asked) the dashboard, in front of the issuer fixture (whose
// browser login the gateway uses) and the real consent core (createUserConnections over the memory store) connecting
// users to a third-party authorization server fixture that protects an MCP upstream fixture. Not the whole gateway
// (consent.test.ts drives that): these tests look at the HTTP routes and pages closely.
import { randomBytes } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import type { GatewayConfig } from '../../src/config/types.js';
import { GatewayEvents, type GatewayEventMap } from '../../src/events.js';
import { createUserConnections, type UserConnectionsService } from '../../src/consent/user-connections.js';
import { registerConsentHttp } from '../../src/http/consent/register.js';
import { Authenticator } from '../../src/http/credentials.js';
import { dashboardPlugin } from '../../src/http/dashboard.js';
import { originGuardPlugin } from '../../src/http/guards.js';
import { createGatewayIdentity } from '../../src/identity/parts.js';
import type { Sealer } from '../../src/identity/sealing.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { startAuthServer, type AuthServer } from '../fixtures/auth-server.js';
import { freePort } from '../fixtures/spawn.js';
import { startThirdPartyAs, type ThirdPartyAs } from '../fixtures/third-party-as.js';
import { startThirdPartyUpstream, type ThirdPartyUpstream } from '../fixtures/third-party-upstream.js';

export const LOGIN_CLIENT = 'taskgate-login';
export const DASHBOARD_PATH = '/ui';

export interface ConsentApp {
  origin: string;
  issuer: AuthServer;
  /** The third-party authorization server users connect at (consents at once, as 'octocat' unless told otherwise). */
  thirdParty: ThirdPartyAs;
  /** The MCP upstream it protects (upstream `gh`). */
  upstream: ThirdPartyUpstream;
  store: MemoryTaskStore;
  connections: UserConnectionsService;
  /** Every consent.refused event, in order. */
  refusals: GatewayEventMap['consent.refused'][];
  config: GatewayConfig;
  app: FastifyInstance;
  /** Every log line written, as JSON text. */
  logLines: string[];
  close(): Promise<void>;
}

export async function startConsentApp(options: { dashboard?: boolean } = {}): Promise<ConsentApp> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const issuer = await startAuthServer({ loginClients: { [LOGIN_CLIENT]: { redirectUris: [`${origin}/oauth/login/callback`] } } });
  const thirdParty = await startThirdPartyAs({ autoApprove: true });
  const upstream = await startThirdPartyUpstream({ authorizationServer: thirdParty });
  const config = parseConfig(
    stringify({
      listen: { host: '127.0.0.1', port, path: '/mcp' },
      upstreams: { gh: { transport: 'streamable-http', url: upstream.url, auth: { authorizationCode: { scopes: ['repo'] } } } },
      auth: { resource: `${origin}/mcp`, oauth: { issuer: issuer.issuer, login: { clientId: LOGIN_CLIENT } } },
      identity: { sealingKeys: [{ kid: 'k1', key: randomBytes(32).toString('base64') }] },
    }),
    'consent-http.yaml',
    {},
  );
  const logLines: string[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => logLines.push(line) });
  const store = new MemoryTaskStore();
  const sealer = createGatewayIdentity(config.identity).sealer as Sealer;
  const events = new GatewayEvents();
  const refusals: ConsentApp['refusals'] = [];
  events.on('consent.refused', (refusal) => refusals.push(refusal));
  const connections = createUserConnections({ config, store, sealer, events, logger, replicaId: 'consent-http' });
  await connections.start();
  const authenticator = new Authenticator(config.auth!, logger);
  const app = Fastify();
  await app.register(originGuardPlugin, { listen: config.listen });
  registerConsentHttp(app, { connections, store, config: () => config, sealer, authenticator, events, logger });
  if (options.dashboard === true) {
    const tasks = { cancelAsAdmin: async () => ({ ok: false as const }) } as never;
    await app.register(dashboardPlugin, { path: DASHBOARD_PATH, store, tasks, upstreams: () => [], upstreamConfig: () => undefined, authenticator, admin: undefined, events, logger, listen: config.listen });
  }
  await app.listen({ host: '127.0.0.1', port });
  return {
    origin,
    issuer,
    thirdParty,
    upstream,
    store,
    connections,
    refusals,
    config,
    app,
    logLines,
    async close() {
      await app.close();
      await connections.stop();
      await upstream.close();
      await thirdParty.close();
      await issuer.close();
      await store.close();
    },
  };
}
