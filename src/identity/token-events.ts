// What the identity layer tells operators (issue 33 item 5), through the event seam: each credential the gateway
// asked for (a token request or a JWT it signed), with its grant, outcome and latency, and each token cache lookup.
// The payloads are built from facts the gateway chose (upstream names, grants, enums); never from a token, a secret
// or free text an authorization server wrote, so no subscriber can leak one.
import type { GatewayEvents, TokenCacheResult, TokenGrant, TokenOutcome } from '../events.js';
import { UpstreamCredentialError } from './credential-error.js';
import { keyOwner, type ObtainedToken, type TokenCacheEvent } from './token-cache.js';

/** Who a credential is for: the caller's principal, absent for the gateway's own. */
export interface TokenFacts {
  upstream: string;
  grant: TokenGrant;
  principal?: string | undefined;
}

/** An RFC 6749 error code (`invalid_grant`, `invalid_target`, …): anything else from a server is not repeated. */
const OAUTH_ERROR_CODE = /^[a-z_]{1,64}$/;

/** Why a credential request failed, as the event says it. */
export function failureOf(error: unknown): { outcome: Exclude<TokenOutcome, 'ok'>; cause?: string; oauthError?: string; status?: number } {
  if (!(error instanceof UpstreamCredentialError)) return { outcome: 'error' };
  const { reason, status, oauthError } = error;
  const details = {
    cause: reason,
    ...(oauthError !== undefined && OAUTH_ERROR_CODE.test(oauthError) && { oauthError }),
    ...(status !== undefined && { status }),
  };
  if (reason === 'timeout') return { outcome: 'timeout', ...details };
  // The server (or, with nothing to exchange, the gateway) said no: trying again will not help. A 5xx or 429 with
  // an OAuth error body is the server failing, not refusing (retryable).
  const refused = !error.retryable && (reason === 'oauth_error' || reason === 'no_subject_token' || (reason === 'http_status' && (status === 400 || status === 401 || status === 403)));
  return { outcome: refused ? 'refused' : 'error', ...details };
}

/**
 * `obtain`, announcing each time it runs (a cache miss or a refresh: the cache calls it once however many wait) as
 * an `upstream.token` event. Times only the request itself: the cache runs `obtain` once a request slot is free.
 */
export function reportedObtain(events: GatewayEvents, facts: TokenFacts, obtain: () => Promise<ObtainedToken>): () => Promise<ObtainedToken> {
  const who = facts.principal === undefined ? {} : { principal: facts.principal };
  return async () => {
    if (!events.listened('upstream.token')) return obtain();
    const started = performance.now();
    try {
      const obtained = await obtain();
      events.emit('upstream.token', { upstream: facts.upstream, grant: facts.grant, outcome: 'ok', durationMs: performance.now() - started, ...who });
      return obtained;
    } catch (error) {
      events.emit('upstream.token', { upstream: facts.upstream, grant: facts.grant, durationMs: performance.now() - started, ...who, ...failureOf(error) });
      throw error;
    }
  };
}

/** The cache results worth counting; `obtained` and `failed` are the `upstream.token` event's. */
const COUNTED: Readonly<Partial<Record<TokenCacheEvent['type'], TokenCacheResult>>> = {
  hit: 'hit',
  refresh_ahead: 'refresh_ahead',
  miss: 'miss',
  failure_cached: 'failure_cached',
  invalidated: 'invalidated',
  evicted: 'evicted',
};

/**
 * A TokenCache's `onEvent` that announces its lookups as `upstream.token.cache` events. `signed`: the cache of
 * identities the gateway signs; otherwise the one of tokens from authorization servers, where the gateway's own key
 * holds a client-credentials token and a caller's an exchanged one.
 */
export function cacheEventsTo(events: GatewayEvents, kind: 'tokens' | 'signed'): (event: TokenCacheEvent) => void {
  return (event) => {
    const result = COUNTED[event.type];
    if (result === undefined || !events.listened('upstream.token.cache')) return;
    const owner = keyOwner(event.key);
    const grant: TokenGrant = kind === 'signed' ? 'signed' : owner.gateway ? 'client_credentials' : 'token_exchange';
    events.emit('upstream.token.cache', { upstream: owner.upstream, grant, result });
  };
}
