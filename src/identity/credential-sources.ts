// What the lead wires into an upstream (issue 33): for one HTTP upstream's config, the headers each request
// carries — the gateway's own (handshake, lists) or a caller's — built from the static `headers`, the `auth` mode
// (a cached client-credentials token, a token exchanged for the caller, an identity the gateway signs) and
// `claimHeaders`. The Authorization that `auth` sets wins over one in `headers`. After the upstream's 401
// invalid_token, `refreshAfterUnauthorized` drops the token that was refused so the one retry gets a new one.
// An `authorizationCode` upstream (issue 41) carries each caller's own token, asked of UserTokens per request; the
// gateway's own requests (its catalog) carry the token of some user who connected it.
import { createHash } from 'node:crypto';
import { GatewayError, type ClientFacing } from '../errors.js';
import type { UpstreamAuthConfig } from '../config/identity.js';
import { NO_EVENTS, type GatewayEvents, type TokenGrant } from '../events.js';
import { claimHeaders } from './claim-headers.js';
import type { CredentialSource } from './credential-source.js';
import { UpstreamCredentialError } from './credential-error.js';
import { UpstreamOAuthClient } from './oauth-client.js';
import type { DiscoveryCache } from './oauth-discovery.js';
import type { IdentitySigner } from './signer.js';
import { tokenKey, upstreamKeyPrefix, type ObtainedToken, type TokenCache } from './token-cache.js';
import { reportedObtain } from './token-events.js';
import { ConsentRequiredError, type UserTokens } from './user-tokens.js';

/** A CredentialSource that can always recover from the upstream refusing its token once. */
export type RefreshableCredentialSource = Required<CredentialSource>;

/** A caller as the upstream should see it. */
export interface CredentialCaller {
  /** The qualified principal (`oauth:<issuer>#<sub>`, `key:<name>`). */
  principal: string;
  /** The caller's verified token claims (empty for API-key principals). */
  claims: Readonly<Record<string, unknown>>;
  /** The caller's own access token, for tokenExchange only: read when a token must be obtained, never stored. */
  subjectToken?: () => string | undefined;
}

/** The parts shared by every upstream: one cache per kind of token, one discovery cache, the signer if configured. */
export interface IdentityParts {
  /** Tokens from authorization servers (bounded in concurrent requests). */
  tokens: TokenCache;
  /** Identities the gateway signed (kept apart so signing never queues behind a slow authorization server). */
  signed: TokenCache;
  discovery: DiscoveryCache;
  signer: IdentitySigner | undefined;
  /** Where each credential asked for is announced (`upstream.token`); absent: nowhere. */
  events?: GatewayEvents | undefined;
  /** Each user's own tokens, for `authorizationCode` upstreams (src/consent/ serves them); absent: none can be had. */
  userTokens?: UserTokens | undefined;
}

/** What credential-sources reads of an upstream's config. */
export interface CredentialUpstream {
  name: string;
  url: string;
  headers: Readonly<Record<string, string>>;
  auth?: UpstreamAuthConfig | undefined;
}

const AUTHORIZATION = 'authorization';

export class UpstreamCredentials {
  private readonly auth: UpstreamAuthConfig | undefined;
  /** The client for the gateway's own token: clientCredentials, or tokenExchange's client with the same grant. */
  private readonly gatewayClient: UpstreamOAuthClient | undefined;
  private readonly exchangeClient: UpstreamOAuthClient | undefined;
  /** Weak: a caller the front no longer remembers takes its source with it. */
  private readonly callerSources = new WeakMap<CredentialCaller, RefreshableCredentialSource>();

  constructor(
    private readonly upstream: CredentialUpstream,
    private readonly parts: IdentityParts,
  ) {
    this.auth = upstream.auth;
    const oauthClient = (client: NonNullable<UpstreamAuthConfig['clientCredentials']>, mode: 'clientCredentials' | 'tokenExchange') =>
      new UpstreamOAuthClient({ upstream: upstream.name, mode, upstreamUrl: upstream.url, client, timeoutMs: upstream.auth?.timeoutMs ?? 10_000, discovery: parts.discovery });
    const { clientCredentials, tokenExchange } = this.auth ?? {};
    this.gatewayClient = clientCredentials !== undefined ? oauthClient(clientCredentials, 'clientCredentials') : tokenExchange !== undefined ? oauthClient(tokenExchange, 'tokenExchange') : undefined;
    this.exchangeClient = tokenExchange === undefined ? undefined : oauthClient(tokenExchange, 'tokenExchange');
    if (this.auth?.signedIdentity !== undefined && parts.signer === undefined) {
      throw new Error(`upstream '${upstream.name}': signedIdentity needs identity.keys (the config loader refuses this)`);
    }
  }

  /**
   * The gateway's own requests: its client-credentials token, or an identity it signs for itself; for an
   * authorizationCode upstream, the token of a user who connected it (none yet: the requests fail saying so).
   */
  forGateway(): RefreshableCredentialSource {
    const { signedIdentity, authorizationCode } = this.auth ?? {};
    if (authorizationCode !== undefined) return this.userSource(undefined);
    const signer = this.parts.signer;
    if (this.gatewayClient !== undefined) {
      const client = this.gatewayClient;
      return this.bearerSource(this.parts.tokens, fixedSlot(tokenKey(this.upstream.name), () => client.clientCredentials()), {}, { grant: 'client_credentials' });
    }
    if (signedIdentity !== undefined && signer !== undefined) {
      const subject = signer.gatewaySubject;
      const mint = async () => ({ token: await signer.mint({ subject, audience: signedIdentity.audience, ttlSeconds: signedIdentity.ttlSeconds }), expiresInSeconds: signedIdentity.ttlSeconds });
      return this.bearerSource(this.parts.signed, fixedSlot(tokenKey(this.upstream.name), mint), {}, { grant: 'signed' });
    }
    return this.staticSource({});
  }

  /**
   * A caller's requests: as that caller, in every mode (clientCredentials: the gateway's token plus claim headers).
   * One source per caller object (the front hands the same one to every request of a token it remembers): the claim
   * headers are made once, and while the token stays the same so do the headers, which the transport then keeps.
   */
  forCaller(caller: CredentialCaller): RefreshableCredentialSource {
    let source = this.callerSources.get(caller);
    if (source === undefined) {
      source = this.sourceFor(caller);
      this.callerSources.set(caller, source);
    }
    return source;
  }

  private sourceFor(caller: CredentialCaller): RefreshableCredentialSource {
    const extra = claimHeaders(this.auth?.claimHeaders ?? {}, caller);
    const { tokenExchange, signedIdentity, clientCredentials, authorizationCode } = this.auth ?? {};
    const signer = this.parts.signer;
    if (authorizationCode !== undefined) return this.userSource(caller.principal);
    if (tokenExchange !== undefined && this.exchangeClient !== undefined) {
      const client = this.exchangeClient;
      const principalKey = tokenKey(this.upstream.name, caller.principal);
      // The token of the request in hand is the one exchanged, and its exchanged token is cached under a hash of it:
      // a down-scoped token of a principal is never served with what another of its tokens was exchanged for.
      const slot = (): TokenSlot => {
        const subject = caller.subjectToken?.();
        if (subject === undefined || subject === '') {
          return {
            key: principalKey,
            obtain: () => Promise.reject(new UpstreamCredentialError({
              upstream: this.upstream.name, step: 'subject', reason: 'no_subject_token',
              detail: `caller ${caller.principal} has no access token to exchange (tokenExchange needs an OAuth caller; API-key principals cannot use this upstream)`,
            })),
          };
        }
        return { key: `${principalKey}\u0000${digest(subject)}`, obtain: () => client.exchange(subject, tokenExchange.audience) };
      };
      return this.bearerSource(this.parts.tokens, slot, extra, { grant: 'token_exchange', principal: caller.principal });
    }
    if (signedIdentity !== undefined && signer !== undefined) {
      const claims = Object.fromEntries(signedIdentity.claims.filter((c) => caller.claims[c] !== undefined).map((c) => [c, caller.claims[c]]));
      // Keyed by the claims too: a caller whose groups changed gets a token saying so, not the cached one.
      const key = `${tokenKey(this.upstream.name, caller.principal)}\u0000${digest(claims)}`;
      const mint = async () => ({
        token: await signer.mint({ subject: caller.principal, audience: signedIdentity.audience, claims, ttlSeconds: signedIdentity.ttlSeconds }),
        expiresInSeconds: signedIdentity.ttlSeconds,
      });
      return this.bearerSource(this.parts.signed, fixedSlot(key, mint), extra, { grant: 'signed', principal: caller.principal });
    }
    if (clientCredentials !== undefined) return this.forGatewayWith(extra);
    return this.staticSource(extra);
  }

  /** Drops a refused token of the gateway's own (principal undefined) or a caller's signed identity. */
  invalidate(principal: string | undefined, token: string): boolean {
    const key = tokenKey(this.upstream.name, principal);
    return this.parts.tokens.invalidate(key, token) || this.parts.signed.invalidate(key, token);
  }

  /** Forgets every token of this upstream (it was removed, or its `auth` changed on reload). */
  forget(): void {
    const prefix = upstreamKeyPrefix(this.upstream.name);
    this.parts.tokens.forget(prefix);
    this.parts.signed.forget(prefix);
  }

  private forGatewayWith(extra: Record<string, string>): RefreshableCredentialSource {
    const client = this.gatewayClient;
    if (client === undefined) return this.staticSource(extra);
    return this.bearerSource(this.parts.tokens, fixedSlot(tokenKey(this.upstream.name), () => client.clientCredentials()), extra, { grant: 'client_credentials' });
  }

  /**
   * `slot`: where in `cache` the token is and how to obtain it, asked at each request (a caller's token may be
   * another by then). `who`: what the credential is (its grant) and for whom (no principal: the gateway), as it is
   * announced.
   */
  private bearerSource(cache: TokenCache, slot: () => TokenSlot, extra: Record<string, string>, who: { grant: TokenGrant; principal?: string }): RefreshableCredentialSource {
    const base = merged(this.upstream.headers, extra);
    const events = this.parts.events ?? NO_EVENTS;
    const announced = { upstream: this.upstream.name, ...who };
    // The same object while the token is the same: a transport keeps the headers it built from it.
    let last: { token: string; key: string; headers: Readonly<Record<string, string>> } | undefined;
    return {
      headers: async () => {
        const { key, obtain } = slot();
        const token = await cache.get(key, reportedObtain(events, announced, obtain));
        if (last?.token !== token) last = { token, key, headers: Object.freeze({ ...base, Authorization: `Bearer ${token}` }) };
        return last.headers;
      },
      refreshAfterUnauthorized: (sent) => {
        const token = bearerOf(sent);
        if (token !== undefined && last?.token === token) cache.invalidate(last.key, token);
        else if (token !== undefined) cache.invalidate(slot().key, token);
        return true;
      },
    };
  }

  /**
   * The token `principal` connected for this upstream, asked of UserTokens at every request (it refreshes, shares
   * across replicas, and forgets a disconnected user: nothing is cached here); no principal: the gateway's own
   * requests, with the token of whoever connected first. A 401 tells UserTokens the token was refused.
   */
  private userSource(principal: string | undefined): RefreshableCredentialSource {
    const upstream = this.upstream.name;
    const base = merged(this.upstream.headers, {});
    const userTokens = this.parts.userTokens;
    let last: { token: string; principal: string; headers: Readonly<Record<string, string>> } | undefined;
    return {
      headers: async () => {
        if (userTokens === undefined) throw new ConsentUnavailable(upstream, principal, 'not_connected', 'per-user consent is not set up in this gateway');
        const user = principal ?? (await userTokens.anyConnected(upstream));
        if (user === undefined) {
          throw new UpstreamCredentialError({
            upstream, step: 'connection', reason: 'no_connection',
            detail: 'it acts as each user at their own account and no user has connected it yet: it is waiting for a first connection',
          });
        }
        const token = await userTokens.accessToken(user, upstream).catch((error: unknown) => {
          throw error instanceof ConsentRequiredError ? ConsentUnavailable.of(error) : error;
        });
        if (last?.token !== token || last.principal !== user) last = { token, principal: user, headers: Object.freeze({ ...base, Authorization: `Bearer ${token}` }) };
        return last.headers;
      },
      refreshAfterUnauthorized: (sent) => {
        const token = bearerOf(sent);
        const user = principal ?? last?.principal;
        if (token === undefined || user === undefined || userTokens === undefined) return false;
        return userTokens.refused(user, upstream, token);
      },
    };
  }

  private staticSource(extra: Record<string, string>): RefreshableCredentialSource {
    const headers = Promise.resolve(Object.freeze(merged(this.upstream.headers, extra, false)));
    return { headers: () => headers, refreshAfterUnauthorized: () => false };
  }
}

/**
 * A caller without a usable connection, as the request to the upstream fails with it: the call plan (src/tasks)
 * answers it with a consent request; where nothing does, the client is told this error (`consent_required`, with
 * the upstream and the reason; never a link, which only the consent service makes).
 */
export class ConsentUnavailable extends ConsentRequiredError implements ClientFacing {
  constructor(upstream: string, principal: string | undefined, reason: ConsentRequiredError['reason'], detail?: string) {
    super(upstream, principal, reason);
    if (detail !== undefined) this.message = `upstream '${upstream}': ${detail}`;
  }

  static of(error: ConsentRequiredError): ConsentUnavailable {
    return error instanceof ConsentUnavailable ? error : new ConsentUnavailable(error.upstream, error.principal, error.reason);
  }

  toGatewayError(): GatewayError {
    return new GatewayError('consent_required', this.message, { upstream: this.upstream, reason: this.reason });
  }
}

/** Where a token is cached, and how to obtain it when it is not. */
interface TokenSlot {
  key: string;
  obtain: () => Promise<ObtainedToken>;
}

function fixedSlot(key: string, obtain: () => Promise<ObtainedToken>): () => TokenSlot {
  const slot = { key, obtain };
  return () => slot;
}

/**
 * Static headers with the claim headers over them (names compared case-insensitively); without `keepAuthorization`
 * a static Authorization is dropped because the auth mode sets its own.
 */
function merged(statics: Readonly<Record<string, string>>, extra: Record<string, string>, dropAuthorization = true): Record<string, string> {
  const replaced = new Set(Object.keys(extra).map((k) => k.toLowerCase()));
  if (dropAuthorization) replaced.add(AUTHORIZATION);
  const kept = Object.entries(statics).filter(([name]) => !replaced.has(name.toLowerCase()));
  const claims = Object.entries(extra).filter(([name]) => !dropAuthorization || name.toLowerCase() !== AUTHORIZATION);
  return Object.fromEntries([...kept, ...claims]);
}

/** The bearer token an Authorization header among `headers` carries (names compared case-insensitively). */
export function bearerOf(headers: Readonly<Record<string, string>>): string | undefined {
  const value = Object.entries(headers).find(([name]) => name.toLowerCase() === AUTHORIZATION)?.[1];
  const match = value === undefined ? null : /^Bearer\s+(\S+)$/i.exec(value.trim());
  return match?.[1];
}

function digest(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('base64url').slice(0, 22);
}
