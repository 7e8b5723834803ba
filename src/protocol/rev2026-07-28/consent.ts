// What a 2026-07-28 caller without a connection at an upstream that acts as each user (issue 41) is answered, on
// this revision's wire: the input-required answer carrying the URL elicitation (no requestState: the retry is a
// new request, which runs once the user is connected), the link in a tool error for a client that takes no URL
// elicitation, a clear error for nobody who can connect. The plan itself is the task core's (call-plan.ts).
import { GatewayError, InvalidRequest } from '../../errors.js';
import { asObject, type JsonObject, type Outcome } from '../../jsonrpc.js';
import type { CallPlan, CallPlans, ConsentAsk, ConsentPlan } from '../../tasks/call-plan.js';
import { acceptsUrlElicitation } from '../../mcp.js';
import type { StatelessClient } from './envelope.js';
import { consentLinkResult, lostConsent, noUserError, urlElicitation } from '../../tasks/consent-wait.js';
import { inputRequiredResult } from './codec.js';

/** The input key of the consent elicitation in an input-required answer (and of its answer in the retry). */
export const CONSENT_INPUT_KEY = 'elicitation-consent';

/**
 * The answer for `consent`, or undefined when the call goes on (or waits as a task). `answers`: the retry's
 * inputResponses, where a user who declined the last link says so (then the call fails saying so).
 */
export function consentAnswer(consent: ConsentPlan, answers: JsonObject | undefined): Outcome | undefined {
  switch (consent.kind) {
    case 'none':
    case 'in_task':
      return undefined;
    case 'no_user':
      throw noUserError(consent.upstream);
    case 'link':
      return { result: consentLinkResult(consent.request) };
    case 'elicit':
    case 'input_required': {
      const action = asObject(answers?.[CONSENT_INPUT_KEY])?.action;
      if (action === 'decline' || action === 'cancel') {
        const message = `The user declined to connect their account at upstream '${consent.upstream}' (${action}), which the call needs`;
        return { error: { code: InvalidRequest, message, data: { upstream: consent.upstream, reason: 'declined' } } };
      }
      return { result: inputRequiredResult({ [CONSENT_INPUT_KEY]: urlElicitation(consent.request) }, undefined) };
    }
  }
}

/**
 * A call's outcome, or, when its credential failed for want of the caller's connection before the request left
 * (`lostConsent`), the consent answer `again` plans for it (the outcome itself where none applies any more).
 */
async function consentLostAnswer(outcome: Outcome | undefined, upstream: string, again: () => Promise<ConsentPlan>): Promise<Outcome | undefined> {
  if (outcome === undefined || !lostConsent(outcome, upstream)) return outcome;
  return consentAnswer(await again(), undefined) ?? outcome;
}

/** A call's consent step, as calls.ts takes it. */
export interface ConsentStep {
  /** What the client is answered instead of calling the upstream. */
  answer?: Outcome;
  /** The call is a task at once whose run waits for the connection (consent-wait.ts). */
  waits: boolean;
  /** The call's outcome, or the consent answer when its credential failed for want of the connection. */
  lost(outcome: Outcome | undefined): Promise<Outcome | undefined>;
}

/**
 * The consent step of a tool call (`plan`: none for prompts and resources, which have none) to `upstream`: planned on
 * a first request (`first`; a retry with requestState resumes a call past it), with `answers` its inputResponses.
 */
export async function consentStep(
  plans: Pick<CallPlans, 'consent' | 'consentLost'>,
  client: StatelessClient,
  call: { upstream: string; plan: CallPlan | undefined; answers: JsonObject | undefined; first: boolean },
): Promise<ConsentStep> {
  const { upstream, plan } = call;
  const principal = client.caller?.principal;
  const ask = consentAskOf(client);
  if (plan === undefined) return { waits: false, lost: (outcome) => Promise.resolve(outcome) };
  const lost = (outcome: Outcome | undefined): Promise<Outcome | undefined> => consentLostAnswer(outcome, upstream, () => plans.consentLost(upstream, principal, ask));
  if (!call.first) return { waits: false, lost };
  const consent = await plans.consent(upstream, principal, plan, ask);
  const answer = consentAnswer(consent, call.answers);
  return answer === undefined ? { waits: consent.kind === 'in_task', lost } : { answer, waits: false, lost };
}

/** What a 2026-07-28 client can take of a consent request. */
function consentAskOf(client: StatelessClient): ConsentAsk {
  return { urlElicitation: acceptsUrlElicitation(client.capabilities), inputRequired: true };
}

/**
 * The consent answer for a call that threw for want of the caller's connection (its upstream session could not be
 * opened: they disconnected, the grant was refused); any other failure is thrown again.
 */
export async function consentAfterFailure(error: unknown, plans: Pick<CallPlans, 'consentLost'>, client: StatelessClient): Promise<Outcome> {
  const upstream = consentFailureUpstream(error);
  const answer = upstream === undefined ? undefined : consentAnswer(await plans.consentLost(upstream, client.caller?.principal, consentAskOf(client)), undefined);
  if (answer === undefined) throw error;
  return answer;
}

/** The upstream a thrown consent failure names (the caller's connection went before the request left); else undefined. */
function consentFailureUpstream(error: unknown): string | undefined {
  if (!(error instanceof GatewayError) || error.code !== 'consent_required') return undefined;
  const upstream = asObject(error.data)?.upstream;
  return typeof upstream === 'string' && lostConsent(error, upstream) ? upstream : undefined;
}
