// One setup for the OAuth tests: a local authorization server and an in-process gateway trusting it.
import { startAuthServer, type AuthServer } from '../fixtures/auth-server.js';
import { freePort } from '../fixtures/spawn.js';
import type { Json, TestGateway, TestScope } from './harness.js';

/**
 * A local authorization server (`issuerOptions`) and a gateway (fixture upstream over stdio) whose `auth` trusts
 * it, with `resource` the gateway's own URL (the SDK client requires it to be the URL it connects to), `auth`'s
 * other fields and the task policy `tasks`.
 */
export async function oauthGateway(
  scope: TestScope,
  issuerOptions: Parameters<typeof startAuthServer>[0],
  auth: Json & { oauth?: Json },
  tasks: Json = { defaults: { mode: 'optional', pollIntervalMs: 100 } },
): Promise<{ issuer: AuthServer; gateway: TestGateway; resource: string }> {
  const issuer = await startAuthServer(issuerOptions);
  scope.defer(() => issuer.close());
  const port = await freePort();
  const resource = `http://127.0.0.1:${port}/mcp`;
  const upstream = await scope.upstream('stdio');
  const gateway = await scope.gateway({
    listen: { host: '127.0.0.1', port, path: '/mcp' },
    upstreams: { fx: upstream.config },
    tasks,
    auth: { ...auth, resource, oauth: { ...auth.oauth, issuer: issuer.issuer } },
  });
  return { issuer, gateway, resource };
}
