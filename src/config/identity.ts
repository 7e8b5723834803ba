// The upstream-identity config (issue 33) as the gateway runs with it: the top-level `identity` (issuer, signing and
// sealing keys) and an HTTP upstream's `auth`, with every default resolved (the token `resource` and signed `aud`
// default to the upstream's URL, the issuer to the gateway's public origin). Secrets stay as written (PEM text,
// base64): the config is frozen and plain; src/identity/ turns them into keys.
import { signingAlgorithmOf } from './schema/identity.js';
import type { z } from 'zod';
import type { IdentitySchema, UpstreamAuthSchema } from './schema/identity.js';

export interface SigningKeyConfig {
  kid: string;
  /** PEM PKCS#8, validated at load. */
  privateKey: string;
  /** Follows from the key: EC P-256 signs ES256, RSA signs RS256. */
  alg: 'ES256' | 'RS256';
}

export interface SealingKeyConfig {
  kid: string;
  /** Base64 of 32 bytes, validated at load. */
  key: string;
}

export interface IdentityConfig {
  /** `iss` of what the gateway signs: `identity.issuer`, else the origin of `auth.resource`, else the listen address. */
  issuer: string;
  /** The first signs; all are published at /.well-known/jwks.json. */
  keys: readonly SigningKeyConfig[];
  /** The first seals; all open. */
  sealingKeys: readonly SealingKeyConfig[];
}

/** The gateway as an OAuth client of the upstream's authorization server. */
export interface OAuthClientConfig {
  clientId: string;
  clientSecret: string;
  /** Absent: read from `issuer`'s metadata, or discovered from the upstream (RFC 9728, then RFC 8414 / OIDC discovery). */
  tokenUrl: string | undefined;
  /** The authorization server named by its issuer: its token endpoint comes from its own metadata, the upstream is not asked. */
  issuer?: string | undefined;
  /**
   * The authorization servers a discovered one may be (the configured `trustedIssuers`, plus `auth.oauth.issuer`):
   * the client's secret and a caller's token go to no other. Empty: discovery finds nothing it may use.
   */
  trustedIssuers?: readonly string[];
  /** RFC 8707 `resource`; the upstream's URL unless configured. */
  resource: string;
  scope: string | undefined;
  tokenEndpointAuthMethod: 'client_secret_basic' | 'client_secret_post';
}

export interface TokenExchangeConfig extends OAuthClientConfig {
  audience: string | undefined;
}

export interface SignedIdentityConfig {
  ttlSeconds: number;
  /** Claims copied from the caller's verified token. */
  claims: readonly string[];
  /** `aud`; the upstream's URL unless configured. */
  audience: string;
}

/** `upstreams.<name>.auth`: at most one of the three modes, claimHeaders with any or alone. */
export interface UpstreamAuthConfig {
  clientCredentials: OAuthClientConfig | undefined;
  tokenExchange: TokenExchangeConfig | undefined;
  signedIdentity: SignedIdentityConfig | undefined;
  /** Header name → claim name, or "principal". Empty when none. */
  claimHeaders: Readonly<Record<string, string>>;
  /** Deadline of one token request (discovery included). */
  timeoutMs: number;
}

/**
 * What a stdio upstream with `isolation: per-principal` adds (issue 33): one child per principal, shared by that
 * principal's sessions and clients, whose `env` may name the caller (`{{principal}}`, `{{claims.<claim>}}`,
 * `{{upstreamToken}}`), stopped after `idleTimeoutMs` without a call.
 */
export interface PrincipalChildSettings {
  /** How long a per-principal child may have no call before it is stopped. 0 = never. */
  idleTimeoutMs: number;
  /** per-principal only: the mode whose token for the caller `{{upstreamToken}}` is. */
  auth?: UpstreamAuthConfig;
}

type RawIdentity = z.output<typeof IdentitySchema>;
type RawUpstreamAuth = z.output<typeof UpstreamAuthSchema>;

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
  const { clientCredentials, tokenExchange, signedIdentity } = raw;
  return {
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
