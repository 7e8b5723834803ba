// The browser side of per-user consent (src/http/consent/) on a fastify instance of its own, listening on loopback:
// the Origin/Host guard, the consent routes, and (when asked) the dashboard, in front of the issuer fixture (whose
// browser login the gateway uses) and a UserConnections over the real memory store (store-user-connections.ts) whose
// authorization server is never reached. Not the whole gateway: the lead wires these routes into it.
import { randomBytes } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import type { GatewayConfig } from '../../src/config/types.js';
import { GatewayEvents } from '../../src/events.js';
import { registerConsentHttp } from '../../src/http/consent/register.js';
import { Authenticator } from '../../src/http/credentials.js';
import { dashboardPlugin } from '../../src/http/dashboard.js';
import { originGuardPlugin } from '../../src/http/guards.js';
import { createGatewayIdentity } from '../../src/identity/parts.js';
import type { Sealer } from '../../src/identity/sealing.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { startAuthServer, type AuthServer } from '../fixtures/auth-server.js';
import { freePort } from '../fixtures/spawn.js';
import { StoreUserConnections } from './store-user-connections.js';

export const LOGIN_CLIENT = 'taskgate-login';
/** The third-party authorization server the stand-in consent core names (nothing listens there). */
export const AS_ISSUER = 'http://127.0.0.1:1/as';
export const DASHBOARD_PATH = '/ui';

export interface ConsentApp {
  origin: string;
  issuer: AuthServer;
  store: MemoryTaskStore;
  connections: StoreUserConnections;
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
  const config = parseConfig(
    stringify({
      listen: { host: '127.0.0.1', port, path: '/mcp' },
      upstreams: { gh: { transport: 'streamable-http', url: 'http://127.0.0.1:1/mcp', auth: { authorizationCode: { scopes: ['repo'] } } } },
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
  const connections = new StoreUserConnections({ connections: store.connections, sealer, origin, upstreams: { gh: { issuer: AS_ISSUER, authorizeEndpoint: `${AS_ISSUER}/authorize`, scopes: ['repo'] } } });
  const authenticator = new Authenticator(config.auth!, logger);
  const events = new GatewayEvents();
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
    store,
    connections,
    config,
    app,
    logLines,
    async close() {
      await app.close();
      await issuer.close();
      await store.close();
    },
  };
}
