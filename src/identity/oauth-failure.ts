// What went wrong in a request to an authorization server, as an UpstreamCredentialError (issue 33 item 4): a
// timeout, a refused connection, an OAuth error body or challenge, a bare HTTP status, or a document that breaks the
// specs. Shared by the gateway's own OAuth client (oauth-client.ts) and per-user consent (src/consent/). The detail
// names the step and the server's error code, never what was sent (no secret, token or code is in it).
import * as oauth from 'oauth4webapi';
import { retryAfterMsOf, UpstreamCredentialError, type CredentialStep } from './credential-error.js';
import { isAbort } from './oauth-discovery.js';

export interface FailureContext {
  upstream: string;
  step: CredentialStep;
  /** The deadline the request ran under (for the timeout's message). */
  timeoutMs: number;
  signal: AbortSignal;
  /** What was asked for, for the message (`authorization server metadata of …`). */
  what?: string;
}

export async function credentialFailure(err: unknown, context: FailureContext): Promise<UpstreamCredentialError> {
  if (err instanceof UpstreamCredentialError) return err;
  const { upstream, step, signal } = context;
  const where = context.what !== undefined ? `${context.what}: ` : '';
  if (signal.aborted || isAbort(err)) {
    return new UpstreamCredentialError({ upstream, step, reason: 'timeout', detail: `${where}no answer within ${context.timeoutMs} ms`, cause: err });
  }
  if (err instanceof oauth.ResponseBodyError) {
    const description = err.error_description !== undefined ? ` (${err.error_description})` : '';
    return new UpstreamCredentialError({
      upstream, step, reason: 'oauth_error', status: err.status, oauthError: err.error,
      retryAfterMs: retryAfterMsOf(err.response.headers.get('retry-after')),
      detail: `${where}HTTP ${err.status} ${err.error}${description}`,
    });
  }
  if (err instanceof oauth.WWWAuthenticateChallengeError) {
    // A 401 with a challenge (a refused client): the OAuth error is in the body, or else in the challenge.
    const body = (await err.response.json().catch(() => ({}))) as { error?: unknown; error_description?: unknown };
    const code = typeof body.error === 'string' ? body.error : err.cause[0]?.parameters.error;
    const description = typeof body.error_description === 'string' ? ` (${body.error_description})` : '';
    return new UpstreamCredentialError({
      upstream, step, reason: code !== undefined ? 'oauth_error' : 'http_status', status: err.status, ...(code !== undefined && { oauthError: code }),
      detail: `${where}HTTP ${err.status}${code !== undefined ? ` ${code}` : ''}${description}`,
    });
  }
  const response = (err as { cause?: unknown }).cause;
  if (err instanceof oauth.OperationProcessingError && response instanceof Response && !response.ok) {
    return new UpstreamCredentialError({
      upstream, step, reason: 'http_status', status: response.status,
      retryAfterMs: retryAfterMsOf(response.headers.get('retry-after')),
      detail: `${where}HTTP ${response.status}`,
    });
  }
  if (err instanceof TypeError && !(err instanceof oauth.OperationProcessingError)) {
    const code = (err.cause as { code?: unknown } | undefined)?.code;
    return new UpstreamCredentialError({ upstream, step, reason: 'unreachable', detail: `${where}${typeof code === 'string' ? code : err.message}`, cause: err });
  }
  return new UpstreamCredentialError({ upstream, step, reason: 'invalid_response', detail: `${where}${(err as Error).message ?? String(err)}`, cause: err });
}
