// The upstream-identity config (issue 33) as the gateway runs with it: the top-level `identity` (issuer, signing and
// sealing keys) and an HTTP upstream's `auth`, with every default resolved (the token `resource` and signed `aud`
// default to the upstream's URL, the issuer to the gateway's public origin). Secrets stay as written (PEM text,
// base64): the config is frozen and plain; src/identity/ turns them into keys.
import type { z } from 'zod';
import { signingAlgorithmOf, type AuthorizationCodeSchema, type ClientCredentialsSchema, type IdentitySchema, type SealingKeySchema, type SignedIdentitySchema, type SigningKeySchema, type TokenExchangeSchema, type UpstreamAuthSchema } from './schema/identity.js';
import type { Loaded } from './loaded.js';

// Each type is the schema's output with only what is resolved here named again.
type RawIdentity = z.output<typeof IdentitySchema>;
type RawUpstreamAuth = z.output<typeof UpstreamAuthSchema>;

/** A signing key; `alg` follows from the key: EC P-256 signs ES256, RSA signs RS256. */
export type SigningKeyConfig = Loaded<z.output<typeof SigningKeySchema>> & { alg: 'ES256' | 'RS256' };
export type SealingKeyConfig = Loaded<z.output<typeof SealingKeySchema>>;

/** `issuer` resolved: `identity.issuer`, else the origin of `auth.resource`, else the listen address. */
export type IdentityConfig = Loaded<Omit<RawIdentity, 'issuer' | 'keys'>> & { issuer: string; keys: readonly SigningKeyConfig[] };

/**
 * The gateway as an OAuth client of the upstream's authorization server: `resource` resolved (the upstream's URL
 * unless configured), `trustedIssuers` with `auth.oauth.issuer` added.
 */
export type OAuthClientConfig = Loaded<Omit<z.output<typeof ClientCredentialsSchema>, 'resource'>> & { resource: string };
export type TokenExchangeConfig = Loaded<Omit<z.output<typeof TokenExchangeSchema>, 'resource'>> & { resource: string };
/** `audience` resolved: the upstream's URL unless configured. */
export type SignedIdentityConfig = Loaded<Omit<z.output<typeof SignedIdentitySchema>, 'audience'>> & { audience: string };

/** Per-user consent (issue 41): `resource` resolved, the upstream's URL unless configured. */
export type AuthorizationCodeConfig = Loaded<Omit<z.output<typeof AuthorizationCodeSchema>, 'resource'>> & { resource: string };

/** `upstreams.<name>.auth`: at most one of the four modes, claimHeaders with any or alone (empty when none). */
export type UpstreamAuthConfig = Loaded<Omit<RawUpstreamAuth, 'clientCredentials' | 'tokenExchange' | 'signedIdentity' | 'authorizationCode' | 'claimHeaders'>> & {
  clientCredentials: OAuthClientConfig | undefined;
  tokenExchange: TokenExchangeConfig | undefined;
  signedIdentity: SignedIdentityConfig | undefined;
  authorizationCode: AuthorizationCodeConfig | undefined;
  claimHeaders: Readonly<Record<string, string>>;
};

/**
 * The issuer when none is configured: the origin clients already reach the gateway at (`auth.resource`), else the
 * listen address (fine on loopback; behind a proxy, set `identity.issuer`).
 */
export function defaultIssuer(authResource: string | undefined, listen: { host: string; port: number }): string {
  if (authResource !== undefined) return new URL(authResource).origin;
  const host = listen.host.includes(':') ? `[${listen.host}]` : listen.host;
  return `http://${host}:${listen.port}`;
}

export function identityConfig(raw: RawIdentity | undefined, authResource: string | undefined, listen: { host: string; port: number }): IdentityConfig | undefined {
  if (raw === undefined) return undefined;
  return {
    issuer: raw.issuer ?? defaultIssuer(authResource, listen),
    keys: raw.keys.map(({ kid, privateKey }) => {
      const parsed = signingAlgorithmOf(privateKey);
      if ('problem' in parsed) throw new Error(`unreachable: identity key ${kid} passed validation: ${parsed.problem}`);
      return { kid, privateKey, alg: parsed.alg };
    }),
    sealingKeys: raw.sealingKeys.map(({ kid, key }) => ({ kid, key: key.trim() })),
    ...(raw.allowedAuthorizationServers !== undefined && { allowedAuthorizationServers: raw.allowedAuthorizationServers }),
  };
}

/**
 * The resource (audience) an `auth` names for its tokens, raw or resolved: what stands for the URL of an upstream
 * that has none (stdio, whose schema requires it).
 */
export function resourceNamedIn(auth: {
  clientCredentials?: { resource?: string | undefined } | undefined;
  tokenExchange?: { resource?: string | undefined } | undefined;
  signedIdentity?: { audience?: string | undefined } | undefined;
}): string {
  return auth.clientCredentials?.resource ?? auth.tokenExchange?.resource ?? auth.signedIdentity?.audience ?? '';
}

/** A stdio upstream's `auth`: its token is for the resource it names, in place of a URL. */
export function stdioAuthConfig(raw: RawUpstreamAuth, gatewayIssuer: string | undefined): UpstreamAuthConfig | undefined {
  return upstreamAuthConfig(raw, resourceNamedIn(raw), gatewayIssuer);
}

/**
 * `gatewayIssuer`: `auth.oauth.issuer`. The gateway already trusts it with every caller's identity, so a discovered
 * authorization server that is the same one may have the client's secret and the caller's token too.
 */
export function upstreamAuthConfig(raw: RawUpstreamAuth | undefined, upstreamUrl: string, gatewayIssuer: string | undefined): UpstreamAuthConfig | undefined {
  if (raw === undefined) return undefined;
  const client = (c: NonNullable<RawUpstreamAuth['clientCredentials']>): OAuthClientConfig => ({
    clientId: c.clientId,
    clientSecret: c.clientSecret,
    tokenUrl: c.tokenUrl,
    issuer: c.issuer,
    trustedIssuers: [...new Set([...(c.trustedIssuers ?? []), ...(gatewayIssuer !== undefined ? [gatewayIssuer] : [])])],
    resource: c.resource ?? upstreamUrl,
    scope: c.scope,
    tokenEndpointAuthMethod: c.tokenEndpointAuthMethod,
  });
  const { clientCredentials, tokenExchange, signedIdentity, authorizationCode } = raw;
  return {
    authorizationCode: authorizationCode === undefined ? undefined : { ...authorizationCode, resource: authorizationCode.resource ?? upstreamUrl },
    clientCredentials: clientCredentials === undefined ? undefined : client(clientCredentials),
    tokenExchange: tokenExchange === undefined ? undefined : { ...client(tokenExchange), audience: tokenExchange.audience },
    signedIdentity:
      signedIdentity === undefined
        ? undefined
        : { ttlSeconds: signedIdentity.ttlSeconds, claims: signedIdentity.claims, audience: signedIdentity.audience ?? upstreamUrl },
    claimHeaders: raw.claimHeaders ?? {},
    timeoutMs: raw.timeoutMs,
  };
}
