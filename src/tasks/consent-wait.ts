// A call at an upstream that acts as each user at their own account (issue 41, `auth.authorizationCode`), for a
// caller who has not connected it: what the call plan answers instead (call-plan.ts `planConsent`: a URL elicitation,
// a link in a tool error, a task that waits), the pieces of those answers every revision sends alike, and the wait of
// a task's run for the connection (task-runs.ts): the question put as a URL elicitation through the run's relay while
// the connection is awaited, withdrawn once it lands (on any replica), the task failed when the user declines.
import type { ConsentRequest, UserConnections } from '../consent/ports.js';
import { GatewayError, InvalidRequest } from '../errors.js';
import { asObject, type JsonObject, type Outcome } from '../jsonrpc.js';
import { nameOf } from '../principals.js';
import type { InputRequest } from './pending-inputs.js';

/** Where a caller stands at an upstream: one that needs no consent, connected, not connected, or nobody who can connect. */
export type ConsentState = 'not_required' | 'connected' | 'not_connected' | 'no_user';

/** Whether `principal` is someone a browser can sign in as (an OAuth subject): API keys and no authentication are not. */
export function isUserPrincipal(principal: string | undefined): principal is string {
  return principal !== undefined && nameOf(principal)?.credential === 'oauth';
}

/** Where `principal` (undefined: no authentication) stands at `upstream` now (a store read when it may connect). */
export async function consentState(consent: Pick<UserConnections, 'requires' | 'isConnected'> | undefined, principal: string | undefined, upstream: string): Promise<ConsentState> {
  if (consent === undefined || !consent.requires(upstream)) return 'not_required';
  if (!isUserPrincipal(principal)) return 'no_user';
  return (await consent.isConnected(principal, upstream)) ? 'connected' : 'not_connected';
}

/** The consent request as the URL-mode elicitation a client is asked (SEP-1036). */
export function urlElicitation(request: ConsentRequest): InputRequest {
  return { method: 'elicitation/create', params: { mode: 'url', url: request.url, elicitationId: request.elicitationId, message: request.message } };
}

/** -32042 URLElicitationRequiredError, carrying the one elicitation that lets the call through once completed. */
export function urlElicitationRequired(request: ConsentRequest): GatewayError {
  const elicitation = { mode: 'url', elicitationId: request.elicitationId, url: request.url, message: request.message };
  return new GatewayError('url_elicitation_required', request.message, { elicitations: [elicitation] });
}

/** For a client that takes no URL elicitation: a tool error whose text holds the absolute link. */
export function consentLinkResult(request: ConsentRequest): JsonObject {
  return {
    isError: true,
    content: [{ type: 'text', text: `${request.message}\nOpen this link to connect your account, then call the tool again: ${request.url}` }],
  };
}

/** A caller nobody can connect for (an API key, no authentication): a clear error, no link. */
export function noUserError(upstream: string): GatewayError {
  return new GatewayError(
    'consent_required',
    `upstream '${upstream}' acts as each user at their own account: sign in with OAuth to use it (an API key, or a request without authentication, has no user to connect)`,
    { upstream, reason: 'no_user' },
  );
}

/**
 * Whether an upstream call failed because the caller's connection could not serve it (disconnected, or the grant
 * refused) before the request left: the credential source's `consent_required` error naming this upstream
 * (identity/credential-sources.ts ConsentUnavailable), as an outcome's error or as a thrown GatewayError.
 */
export function lostConsent(failure: Outcome | unknown, upstream: string): boolean {
  const error = failure instanceof GatewayError ? failure.toJsonRpc() : asObject(asObject(failure)?.error);
  if (error?.code !== InvalidRequest) return false;
  const data = asObject(error.data);
  return data?.upstream === upstream && (data.reason === 'not_connected' || data.reason === 'grant_refused');
}

/** What a task's run offers its wait for a connection (task-runs.ts makes it from the run). */
export interface ConsentWaitRun {
  principal: string;
  upstream: string;
  /** Aborted when the run ends. */
  signal: AbortSignal;
  /** Puts the question to the client as one of the task's input requests (RunRelay.ask): the task is `input_required`. */
  ask(request: InputRequest, signal: AbortSignal): Promise<Outcome>;
  /** The answer of a client that cannot take the question at all (it declared no URL elicitation). */
  refuse(request: InputRequest): Outcome | undefined;
  /** The user accepted (went to the page): the task, no longer asking, says again that it waits for the connection. */
  accepted?(): Promise<void>;
}

/** How the wait ended: connected (run the call), or the task's end (`outcome`), or the run ended first (neither). */
export type ConsentWaitEnd = { connected: true } | { connected: false; outcome?: Outcome };

/**
 * Waits until the run's principal is connected to its upstream: at once when it is; else a fresh link, asked as a
 * URL elicitation (the task is `input_required`), while the connection is awaited. Connected first: the question is
 * withdrawn. Declined or cancelled: the task fails saying so. Accepted: the wait goes on for the connection (the
 * user is on the page). A client that takes no URL elicitation: the task ends with the link in a tool error.
 */
export async function untilConnected(consent: Pick<UserConnections, 'isConnected' | 'request' | 'whenConnected'>, run: ConsentWaitRun): Promise<ConsentWaitEnd> {
  const { principal, upstream } = run;
  if (await consent.isConnected(principal, upstream)) return { connected: true };
  if (run.signal.aborted) return { connected: false };
  const request = await consent.request(principal, upstream, 'task');
  const question = urlElicitation(request);
  if (run.refuse(question) !== undefined) return { connected: false, outcome: { result: consentLinkResult(request) } };
  const stop = new AbortController();
  const signal = AbortSignal.any([stop.signal, run.signal]);
  try {
    const connected = consent.whenConnected(principal, upstream, signal).then((yes) => ({ connected: yes }));
    const answered = run.ask(question, signal).then((outcome) => ({ answered: outcome }));
    const first = await Promise.race([connected, answered]);
    if ('connected' in first) return first.connected ? { connected: true } : { connected: false };
    const action = 'result' in first.answered ? first.answered.result.action : undefined;
    if (action === 'decline' || action === 'cancel') {
      const message = `The user declined to connect their account at upstream '${upstream}' (${action}), which the call needs`;
      return { connected: false, outcome: { error: { code: InvalidRequest, message, data: { upstream, reason: 'declined' } } } };
    }
    // Accepted (the user went to the page), or the question could not be put: the connection is what is awaited.
    if (action === 'accept' && !signal.aborted) await run.accepted?.();
    return (await connected).connected ? { connected: true } : { connected: false };
  } finally {
    stop.abort(new Error('the wait for a connection is over'));
  }
}
