// Who is calling. A bearer token is first looked up among the API keys (by its SHA-256), then verified as an OAuth
// access token: a JWT the configured issuer signed (keys from its JWKS, found through its metadata) for this
// resource (`aud`). A recognised token (key or JWT) is remembered until it expires, so a client polling with one
// token costs one hash or verification, not one per request. The token itself never goes further than this file: upstreams get their own
// credentials from their `headers`.
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import { hashApiKey } from '../config/api-keys.js';
import type { ApiKeyConfig, AuthConfig, OAuthConfig } from '../config/types.js';
import { GatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import { apiKeyCaller, oauthCaller, type Caller } from '../tasks/principals.js';

/** Verified tokens remembered at most (the oldest is forgotten first), and for at most this long each. */
const MAX_CACHED_TOKENS = 10_000;
const MAX_CACHE_MS = 5 * 60_000;
/** A token signed with a key the JWKS does not have makes it refetched at most this often (key rotation). */
const JWKS_COOLDOWN_MS = 1_000;
const CLOCK_TOLERANCE_S = 5;
/** Only asymmetric signatures: the resource server holds no secret shared with the issuer. */
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];
const METADATA_PATH = '/.well-known/oauth-protected-resource';

/** Why a request is refused: 401 asks for (another) token, 403 says the token lacks a scope. */
export class AuthError extends Error {
  constructor(
    readonly status: 401 | 403,
    message: string,
    /** RFC 6750 error code: absent when no token was presented at all. */
    readonly code: 'invalid_token' | 'insufficient_scope' | undefined,
  ) {
    super(message);
  }
}

export class Authenticator {
  private readonly apiKeys: ReadonlyMap<string, ApiKeyConfig>;
  private readonly verified = new Map<string, { caller: Caller; until: number }>();
  private keySet: Promise<ReturnType<typeof createRemoteJWKSet>> | undefined;

  constructor(
    private readonly auth: AuthConfig,
    private readonly logger: Logger,
  ) {
    this.apiKeys = new Map(auth.apiKeys.map((key) => [key.sha256, key]));
  }

  /** The caller an `Authorization` header names; throws AuthError when it names none. */
  async authenticate(authorization: string | undefined): Promise<Caller> {
    const match = /^Bearer[ \t]+([A-Za-z0-9\-._~+/]+=*)[ \t]*$/i.exec(authorization ?? '');
    if (authorization === undefined || authorization === '') throw new AuthError(401, 'Authentication required: send Authorization: Bearer <token>', undefined);
    if (match === null) throw new AuthError(401, 'Malformed Authorization header: expected "Bearer <token>"', 'invalid_token');
    const token = match[1] as string;
    const remembered = this.verified.get(token);
    if (remembered !== undefined && remembered.until > Date.now()) return remembered.caller;
    const key = this.apiKeys.get(hashApiKey(token));
    if (key !== undefined) return this.remember(token, apiKeyCaller(key.principal, key.scopes), undefined);
    const oauth = this.auth.oauth;
    if (oauth === undefined) throw new AuthError(401, 'Invalid token: not a known API key', 'invalid_token');
    const verified = await this.verify(token, oauth);
    return this.remember(token, verified.caller, verified.expiresAt);
  }

  /** Remembers a recognised token until it expires, for at most MAX_CACHE_MS (a key removed from the config, a revoked signing key). */
  private remember(token: string, caller: Caller, expiresAt: number | undefined): Caller {
    if (this.verified.size >= MAX_CACHED_TOKENS) this.verified.delete(this.verified.keys().next().value as string);
    const until = Math.min(expiresAt ?? Number.POSITIVE_INFINITY, Date.now() + MAX_CACHE_MS);
    this.verified.set(token, { caller, until });
    return caller;
  }

  /** RFC 9728 Protected Resource Metadata. */
  metadata(): Record<string, unknown> {
    const metadata: Record<string, unknown> = { resource: this.auth.resource, bearer_methods_supported: ['header'], resource_name: 'taskgate' };
    if (this.auth.oauth !== undefined) {
      metadata.authorization_servers = [this.auth.oauth.issuer];
      if (this.auth.oauth.requiredScopes.length > 0) metadata.scopes_supported = [...this.auth.oauth.requiredScopes];
    }
    return metadata;
  }

  /** Where the metadata is served: the well-known root, and suffixed with the resource's path (RFC 9728 §3.1). */
  metadataPaths(listenPath: string): string[] {
    return [...new Set([METADATA_PATH, this.resourceMetadataPath(), `${METADATA_PATH}${listenPath}`])];
  }

  /** The metadata's path for this resource: the well-known prefix, then the resource's own path. */
  private resourceMetadataPath(): string {
    return `${METADATA_PATH}${new URL(this.auth.resource).pathname.replace(/\/$/, '')}`;
  }

  /** The WWW-Authenticate value for a refusal: where the metadata is, the scopes wanted, and what was wrong. */
  challenge(error: AuthError): string {
    const parts = [`resource_metadata="${new URL(this.auth.resource).origin}${this.resourceMetadataPath()}"`];
    const scopes = this.auth.oauth?.requiredScopes ?? [];
    if (scopes.length > 0) parts.push(`scope="${scopes.join(' ')}"`);
    if (error.code !== undefined) parts.push(`error="${error.code}"`, `error_description="${error.message.replace(/["\\]/g, "'")}"`);
    return `Bearer ${parts.join(', ')}`;
  }

  private async verify(token: string, oauth: OAuthConfig): Promise<{ caller: Caller; expiresAt: number | undefined }> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, await this.jwks(oauth), {
        issuer: oauth.issuer,
        audience: oauth.audience,
        algorithms: ALGORITHMS,
        clockTolerance: CLOCK_TOLERANCE_S,
      }));
    } catch (error) {
      if (error instanceof GatewayError) throw error;
      throw new AuthError(401, `Invalid token: ${(error as Error).message}`, 'invalid_token');
    }
    if (typeof payload.sub !== 'string' || payload.sub === '') throw new AuthError(401, 'Invalid token: it names no subject (sub)', 'invalid_token');
    const scopes = scopesOf(payload);
    const missing = oauth.requiredScopes.filter((scope) => !scopes.includes(scope));
    if (missing.length > 0) throw new AuthError(403, `Insufficient scope: the token lacks ${missing.join(', ')}`, 'insufficient_scope');
    return { caller: oauthCaller(oauth.issuer, payload.sub, scopes), expiresAt: typeof payload.exp === 'number' ? payload.exp * 1000 : undefined };
  }

  /** The issuer's key set: its jwks_uri from configuration or from its metadata, fetched again on failure. */
  private jwks(oauth: OAuthConfig): Promise<ReturnType<typeof createRemoteJWKSet>> {
    this.keySet ??= (async () => {
      const uri = oauth.jwksUri ?? (await discoverJwksUri(oauth.issuer));
      return createRemoteJWKSet(new URL(uri), { cooldownDuration: JWKS_COOLDOWN_MS });
    })().catch((error: unknown) => {
      this.keySet = undefined;
      this.logger.warn({ err: error, issuer: oauth.issuer }, 'cannot reach the authorization server\'s metadata');
      throw new GatewayError('auth_unavailable', `Cannot verify the token now: the authorization server's metadata is unavailable (${(error as Error).message})`);
    });
    return this.keySet;
  }
}

/** Scopes from `scope` (space-separated, RFC 9068) or `scp` (a list or a string, as some issuers write it). */
function scopesOf(payload: JWTPayload): string[] {
  const raw = payload.scope ?? payload.scp;
  if (typeof raw === 'string') return raw.split(' ').filter((s) => s !== '');
  if (Array.isArray(raw)) return raw.filter((s): s is string => typeof s === 'string');
  return [];
}

/** jwks_uri from the issuer's RFC 8414 metadata, else its OpenID Connect discovery document. */
async function discoverJwksUri(issuer: string): Promise<string> {
  const url = new URL(issuer);
  const path = url.pathname.replace(/\/$/, '');
  const candidates = [`${url.origin}/.well-known/oauth-authorization-server${path}`, `${url.origin}${path}/.well-known/openid-configuration`];
  let lastError = 'no metadata found';
  for (const candidate of candidates) {
    try {
      const response = await fetch(candidate, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(5_000) });
      if (!response.ok) {
        lastError = `${candidate}: HTTP ${response.status}`;
        continue;
      }
      const metadata = (await response.json()) as { issuer?: unknown; jwks_uri?: unknown };
      // RFC 8414 §3.3: the metadata must be the issuer's own.
      if (metadata.issuer !== issuer) throw new Error(`${candidate} names issuer ${String(metadata.issuer)}, not ${issuer}`);
      if (typeof metadata.jwks_uri !== 'string') throw new Error(`${candidate} has no jwks_uri`);
      return metadata.jwks_uri;
    } catch (error) {
      lastError = (error as Error).message;
    }
  }
  throw new Error(lastError);
}
