// One setup for the per-user consent tests (issue 41): the front door's issuer with a browser login, a third-party
// authorization server, an MCP upstream it protects, and a gateway that trusts the first and connects each user to
// the second (`auth.authorizationCode`), with a sealing key; plus what a test does as a user: an access token for
// the MCP endpoint, and a browser (plain HTTP) signed in at the issuer as that user.
import { randomBytes } from 'node:crypto';
import { LOGIN_COOKIE, startAuthServer, type AuthServer } from '../fixtures/auth-server.js';
import { freePort } from '../fixtures/spawn.js';
import { startThirdPartyAs, type ThirdPartyAs, type ThirdPartyAsOptions } from '../fixtures/third-party-as.js';
import { startThirdPartyUpstream, type ThirdPartyUpstream } from '../fixtures/third-party-upstream.js';
import { HttpBrowser } from './http-browser.js';
import type { Json, TestGateway, TestScope } from './harness.js';

export const LOGIN_CLIENT = 'taskgate-login';
export const SEALING_KEY = randomBytes(32).toString('base64');

export interface ConsentSetup {
  issuer: AuthServer;
  thirdParty: ThirdPartyAs;
  upstream: ThirdPartyUpstream;
  gateway: TestGateway;
  /** The gateway's public origin (links and redirect URIs are built on it). */
  origin: string;
  /** The MCP endpoint URL (also `auth.resource`). */
  resource: string;
  /** The gateway config it was started with (to start a second replica alike). */
  config: Json;
  /** An access token for the MCP endpoint, as `user`. */
  tokenFor(user: string): Promise<string>;
  /** The qualified principal of `user`. */
  principalOf(user: string): string;
  /** A browser signed in at the issuer as `user` (the gateway still signs it in itself, through the issuer). */
  browserOf(user: string): HttpBrowser;
}

export interface ConsentOptions {
  thirdParty?: ThirdPartyAsOptions;
  /** The upstream's `auth.authorizationCode` (default `{}`: discovered server, dynamic registration). */
  authorizationCode?: Json;
  /** Merged over the gateway config. */
  gateway?: Json;
  /** The store (default memory). */
  store?: Json;
  /** `auth.apiKeys` beside the OAuth front door. */
  apiKeys?: Json[];
}

/** Starts everything in `scope`; the gateway listens on a port chosen first, so its public origin is known. */
export async function consentSetup(scope: TestScope, options: ConsentOptions = {}): Promise<ConsentSetup> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const resource = `${origin}/mcp`;
  const issuer = await startAuthServer({ loginClients: { [LOGIN_CLIENT]: { secret: 'login-secret', redirectUris: [`${origin}/oauth/login/callback`] } } });
  scope.defer(() => issuer.close());
  const thirdParty = await startThirdPartyAs({ autoApprove: true, ...options.thirdParty });
  scope.defer(() => thirdParty.close());
  const upstream = await startThirdPartyUpstream({ authorizationServer: thirdParty });
  scope.defer(() => upstream.close());
  const config: Json = {
    listen: { host: '127.0.0.1', port, path: '/mcp' },
    ...(options.store !== undefined && { store: options.store }),
    auth: { resource, ...(options.apiKeys !== undefined && { apiKeys: options.apiKeys }), oauth: { issuer: issuer.issuer, login: { clientId: LOGIN_CLIENT, clientSecret: 'login-secret' } } },
    identity: { sealingKeys: [{ kid: 's1', key: SEALING_KEY }] },
    upstreams: { tp: { url: upstream.url, prefix: 'tp_', auth: { authorizationCode: options.authorizationCode ?? {} } } },
    tasks: { defaults: { mode: 'optional', pollIntervalMs: 100 } },
    ...options.gateway,
  };
  const gateway = await scope.gateway(config);
  const principalOf = (user: string): string => `oauth:${issuer.issuer}#${user}`;
  return {
    issuer,
    thirdParty,
    upstream,
    gateway,
    origin,
    resource,
    config,
    tokenFor: (user) => issuer.mint({ sub: user, aud: resource }),
    principalOf,
    browserOf: (user) => {
      const browser = new HttpBrowser();
      browser.setCookie(issuer.issuer, LOGIN_COOKIE, user);
      return browser;
    },
  };
}
