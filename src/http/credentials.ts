// Who is calling. A bearer token is first looked up among the API keys (by its SHA-256), then verified as an OAuth
// access token: a JWT the configured issuer signed (keys from its JWKS, found through its metadata) for this
// resource (`aud`), checked as RFC 9068 asks (access-token.ts) before any key is fetched. A recognised token (key
// or JWT) is remembered until it expires, so a client polling with one token costs one hash or verification, not
// one per request. The token never reaches an upstream: upstreams get their own credentials from their `headers`
// and `auth`; an upstream whose `auth` exchanges the caller's token (RFC 8693) reads it through the caller's
// `subjectToken`, to send it to the authorization server only. Nothing of the token reaches a response header: a
// refusal says what was wrong in fixed words.
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import { hashApiKey } from '../config/api-keys.js';
import type { ApiKeyConfig, AuthConfig, OAuthConfig } from '../config/types.js';
import { GatewayError } from '../errors.js';
import type { Logger } from '../log.js';
import { apiKeyCaller, oauthCaller, type Caller } from '../principals.js';
import { faultOf, inspectAccessToken, TokenRefused } from './access-token.js';

/** Verified tokens remembered at most (the oldest is forgotten first), and for at most this long each. */
const MAX_CACHED_TOKENS = 10_000;
const MAX_CACHE_MS = 5 * 60_000;
/** A token signed with a key the JWKS does not have makes it refetched at most this often (key rotation). */
const JWKS_COOLDOWN_MS = 1_000;
/** Only asymmetric signatures: the resource server holds no secret shared with the issuer. */
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];
const METADATA_PATH = '/.well-known/oauth-protected-resource';

/**
 * Why a request is refused: 401 asks for (another) token, 403 says the token lacks a scope. The message is the
 * gateway's own fixed text (it becomes the challenge's error_description); `detail` is for the debug log only.
 */
export class AuthError extends Error {
  constructor(
    readonly status: 401 | 403,
    message: string,
    /** RFC 6750 error code: absent when no token was presented at all. */
    readonly code: 'invalid_token' | 'insufficient_scope' | undefined,
    readonly detail?: string,
  ) {
    super(message);
  }
}

export class Authenticator {
  private apiKeys: ReadonlyMap<string, ApiKeyConfig>;
  private readonly verified = new Map<string, { caller: Caller; until: number }>();
  private keySet: Promise<ReturnType<typeof createRemoteJWKSet>> | undefined;

  constructor(
    private auth: AuthConfig,
    private readonly logger: Logger,
  ) {
    this.apiKeys = new Map(auth.apiKeys.map((key) => [key.sha256, key]));
  }

  /**
   * A config reload's keys and OAuth settings, for the next request: remembered tokens are forgotten (a removed
   * key stops working at once), and the key set is found again when the issuer or its jwks_uri changed.
   */
  reconfigure(auth: AuthConfig): void {
    if (auth.oauth?.issuer !== this.auth.oauth?.issuer || auth.oauth?.jwksUri !== this.auth.oauth?.jwksUri) this.keySet = undefined;
    this.auth = auth;
    this.apiKeys = new Map(auth.apiKeys.map((key) => [key.sha256, key]));
    this.verified.clear();
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
    if (oauth === undefined) throw new AuthError(401, 'The token is not a known API key', 'invalid_token');
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

  /**
   * The WWW-Authenticate value for a refusal: where the metadata is, the scopes wanted, and what was wrong. Every
   * value is the gateway's (configuration, fixed text), and is made a valid quoted-string whatever it holds.
   */
  challenge(error: AuthError): string {
    const parts = [`resource_metadata=${quoted(`${new URL(this.auth.resource).origin}${this.resourceMetadataPath()}`)}`];
    const scopes = this.auth.oauth?.requiredScopes ?? [];
    if (scopes.length > 0) parts.push(`scope=${quoted(scopes.join(' '))}`);
    if (error.code !== undefined) parts.push(`error="${error.code}"`, `error_description=${quoted(error.message)}`);
    return `Bearer ${parts.join(', ')}`;
  }

  /**
   * The caller a JWT access token names. Its shape and claims are checked first, from the token alone, so a
   * malformed or misdirected token never waits on the issuer; then jose verifies the signature with the issuer's keys.
   */
  private async verify(token: string, oauth: OAuthConfig): Promise<{ caller: Caller; expiresAt: number }> {
    const expected = { issuer: oauth.issuer, audience: oauth.audience, algorithms: ALGORITHMS, clockToleranceS: oauth.clockToleranceSeconds };
    let payload: JWTPayload;
    try {
      inspectAccessToken(token, expected);
      ({ payload } = await jwtVerify(token, await this.jwks(oauth), {
        issuer: oauth.issuer,
        audience: oauth.audience,
        algorithms: ALGORITHMS,
        clockTolerance: oauth.clockToleranceSeconds,
        requiredClaims: ['exp', 'sub'],
      }));
    } catch (error) {
      if (error instanceof GatewayError) throw error;
      const refused = error instanceof TokenRefused ? error : faultOf(error);
      if (refused !== undefined) throw new AuthError(401, refused.message, 'invalid_token', refused.detail);
      this.logger.warn({ err: error, issuer: oauth.issuer }, 'cannot verify a token: the authorization server\'s keys are unavailable');
      throw new GatewayError('auth_unavailable', 'Cannot verify the token now: the authorization server\'s keys are unavailable');
    }
    const scopes = scopesOf(payload);
    const missing = oauth.requiredScopes.filter((scope) => !scopes.includes(scope));
    if (missing.length > 0) throw new AuthError(403, `Insufficient scope: the token lacks ${missing.join(', ')}`, 'insufficient_scope');
    return { caller: oauthCaller(oauth.issuer, payload.sub as string, scopes, Object.freeze({ ...payload }), token), expiresAt: (payload.exp as number) * 1000 };
  }

  /**
   * The front door's key set (`auth.oauth`), for what else its issuer signs that the gateway checks: the ID token of a
   * browser sign-in (issue 41) is verified with the keys access tokens are, as configured or discovered.
   */
  issuerKeys(): Promise<ReturnType<typeof createRemoteJWKSet>> {
    const oauth = this.auth.oauth;
    if (oauth === undefined) return Promise.reject(new Error('auth.oauth is not configured: there is no issuer to verify with'));
    return this.jwks(oauth);
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

/**
 * A quoted-string for a challenge parameter (RFC 9110 §5.6.4) that is also a valid header value: printable ASCII
 * only, quotes and backslashes replaced. The values are the gateway's own; this keeps it so whatever they hold.
 */
function quoted(value: string): string {
  return `"${value.replace(/[^\x20-\x7e]|["\\]/g, '?')}"`;
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
