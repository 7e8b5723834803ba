// One setup for the upstream-identity tests: an authorization server (the gateway is one of its clients), an
// OAuth-protected MCP upstream trusting it, and an in-process gateway whose front trusts it too and whose upstream
// `prot` authenticates as `auth` says. Callers' tokens are minted with the gateway's resource as audience.
import assert from 'node:assert/strict';
import { startAuthServer, type AuthServer, type MintOptions } from '../fixtures/auth-server.js';
import { startProtectedServer, type ProtectedServer, type Whoami } from '../fixtures/protected-server.js';
import { freePort } from '../fixtures/spawn.js';
import { bearer } from './auth-requests.js';
import { eventually, type Json, type TestGateway, type TestScope } from './harness.js';
import { sendRev2026 } from './stateless-wire.js';
import { HANG_MS } from './waits.js';

export const GATEWAY_CLIENT = {
  id: 'taskgate',
  secret: 'taskgate-client-secret-0123456789',
  config: { clientId: 'taskgate', clientSecret: 'taskgate-client-secret-0123456789' },
};

export interface IdentityGateway {
  gateway: TestGateway;
  /** The gateway's resource (the audience of callers' tokens). */
  resource: string;
  /** A caller's access token for the gateway, minted by the authorization server. */
  token(sub: string, extra?: Json, options?: MintOptions): Promise<string>;
}

export interface IdentitySetup {
  as: AuthServer;
  upstream: ProtectedServer;
  gw: IdentityGateway;
}

/**
 * Starts the three (stopped with `scope`). `auth` makes the upstream's `auth` from the running servers; `more` is
 * merged over the gateway's config (other upstreams, identity keys, task policy); `upstreamSettings` over the
 * protected upstream's (`prot`) own, and `echoHeaders` are request headers its whoami reports.
 */
export async function identityGateway(
  scope: TestScope,
  auth: (as: AuthServer, upstream: ProtectedServer, origin: string) => Json,
  more: (as: AuthServer, upstream: ProtectedServer, origin: string) => Json = () => ({}),
  options: { clientScope?: string; waitForTools?: boolean; apiKeys?: Json[]; upstreamSettings?: Json; echoHeaders?: string[] } = {},
): Promise<IdentitySetup> {
  const { clientScope, waitForTools = true, apiKeys, upstreamSettings, echoHeaders } = options;
  const as = await startAuthServer({ clients: { [GATEWAY_CLIENT.id]: { secret: GATEWAY_CLIENT.secret, ...(clientScope !== undefined && { scope: clientScope }) } } });
  scope.defer(() => as.close());
  const upstream = await startProtectedServer({ issuers: [{ issuer: as.issuer, jwksUri: as.jwksUri }], ...(echoHeaders !== undefined && { echoHeaders }) });
  scope.defer(() => upstream.close());
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const resource = `${origin}/mcp`;
  const extra = more(as, upstream, origin);
  const gateway = await scope.gateway({
    listen: { host: '127.0.0.1', port, path: '/mcp' },
    tasks: { defaults: { mode: 'optional', pollIntervalMs: 100 } },
    ...extra,
    upstreams: { prot: { url: upstream.url, auth: auth(as, upstream, origin), ...upstreamSettings }, ...(extra.upstreams as Json | undefined) },
    auth: { resource, oauth: { issuer: as.issuer }, ...(apiKeys !== undefined && { apiKeys }) },
  });
  const token = (sub: string, claims: Json = {}, options: MintOptions = {}) => as.mint({ sub, aud: resource, ...options, extra: claims });
  if (waitForTools) {
    // The gateway connects to upstreams in the background: wait until the protected upstream's tools are listed.
    const lister = await token('lister');
    await eventually(async () => {
      const listed = await sendRev2026(gateway.url, 'tools/list', {}, { headers: bearer(lister) });
      return ((listed.result?.tools as Json[] | undefined) ?? []).some((t) => t.name === 'whoami' || t.name === 'prot__whoami');
    }, HANG_MS);
  }
  return { as, upstream, gw: { gateway, resource, token } };
}

/** What whoami answered: the structured content of a tool result (2025-11-25 or 2026-07-28). */
export function whoamiOf(result: unknown): Whoami {
  const r = result as { isError?: boolean; structuredContent?: unknown } | undefined;
  assert.ok(r !== undefined && r.isError !== true, `not a whoami result: ${JSON.stringify(result)}`);
  return r.structuredContent as Whoami;
}
