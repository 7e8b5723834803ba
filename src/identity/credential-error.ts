// Why a credential for an upstream could not be had (issue 33 item 4): which upstream, which step, the cause, and
// whether trying again later may help (the authorization server down or slow: HTTP 503 + Retry-After where the
// revision answers in HTTP) or not (a client refused, a caller with nothing to exchange). Never a token or secret.
import { GatewayError } from '../errors.js';

/**
 * `registration`, `refresh`, `revocation`: a user's connection to an upstream (src/consent/, issue 41); `connection`:
 * the gateway's own requests to such an upstream, which borrow a connected user's token and have none before anyone connected.
 */
export type CredentialStep = 'discovery' | 'token' | 'exchange' | 'signing' | 'subject' | 'registration' | 'refresh' | 'revocation' | 'connection';

export type CredentialCause =
  /** The authorization server (or the upstream, for discovery) did not answer within auth.timeoutMs. */
  | 'timeout'
  /** No connection (refused, reset, DNS). */
  | 'unreachable'
  /** An HTTP status without an OAuth error body (a 5xx page, a 404 metadata document). */
  | 'http_status'
  /** An OAuth error response (`invalid_client`, `invalid_grant`, ...): `oauthError` has its code. */
  | 'oauth_error'
  /** A response that breaks the specs (metadata for another issuer, no token_endpoint, not JSON). */
  | 'invalid_response'
  /** tokenExchange for a caller without a token to exchange (an API-key principal). */
  | 'no_subject_token'
  /** Discovery found an authorization server the configuration does not trust: nothing was sent to it. */
  | 'untrusted_server'
  /** An upstream read with a user's own token (authorizationCode), and no user has connected it yet. */
  | 'no_connection';

/** What the client is told; Retry-After when the cause is temporary. */
const RETRY_AFTER_MS = 5_000;

export class UpstreamCredentialError extends Error {
  readonly upstream: string;
  readonly step: CredentialStep;
  readonly reason: CredentialCause;
  readonly status: number | undefined;
  readonly oauthError: string | undefined;
  /** Trying again later may succeed: the server was down, slow or overloaded. */
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;

  constructor(fields: {
    upstream: string;
    step: CredentialStep;
    reason: CredentialCause;
    detail: string;
    status?: number;
    oauthError?: string;
    retryAfterMs?: number;
    cause?: unknown;
  }) {
    super(`upstream '${fields.upstream}': cannot get a credential (${fields.step}): ${fields.detail}`, { cause: fields.cause });
    this.name = 'UpstreamCredentialError';
    this.upstream = fields.upstream;
    this.step = fields.step;
    this.reason = fields.reason;
    this.status = fields.status;
    this.oauthError = fields.oauthError;
    const temporary = fields.reason === 'timeout' || fields.reason === 'unreachable' || (fields.status !== undefined && (fields.status >= 500 || fields.status === 429));
    this.retryable = temporary;
    this.retryAfterMs = temporary ? (fields.retryAfterMs ?? RETRY_AFTER_MS) : undefined;
  }

  /**
   * The error the client gets: temporary causes as `auth_unavailable` (HTTP 503 + Retry-After where the revision
   * answers with a status), the rest as `upstream_unavailable`; data names the upstream, step and cause.
   */
  toGatewayError(): GatewayError {
    const data = {
      upstream: this.upstream,
      step: this.step,
      cause: this.reason,
      ...(this.oauthError !== undefined && { oauthError: this.oauthError }),
      ...(this.status !== undefined && { status: this.status }),
      ...(this.retryAfterMs !== undefined && { retryAfterMs: this.retryAfterMs }),
    };
    return new GatewayError(this.retryable ? 'auth_unavailable' : 'upstream_unavailable', this.message, data);
  }
}

/** Retry-After (seconds or an HTTP date) as milliseconds from now, when given and sane. */
export function retryAfterMsOf(header: string | null, now: number = Date.now()): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  const seconds = Number(header.trim());
  if (Number.isFinite(seconds)) return seconds >= 0 && seconds <= 3600 ? seconds * 1000 : undefined;
  const date = Date.parse(header);
  if (Number.isNaN(date)) return undefined;
  const ms = date - now;
  return ms >= 0 && ms <= 3_600_000 ? ms : undefined;
}
