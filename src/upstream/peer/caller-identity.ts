// Who the gateway is to one upstream, per request (issue 33). The gateway's own requests (handshake, lists,
// subscriptions) carry its own identity; a caller's carry the caller's, as the upstream's `auth` makes it (a token
// exchanged for them, an identity the gateway signs, claim headers). An upstream session is bound to the identity
// that opened it, so where the identity differs per caller, callers that would share one upstream session (the
// 2026-07-28 clients) get one each per principal (so too for an upstream each user connects with their own account:
// authorizationCode). Without `auth` every request carries the configured `headers`.
import { resourceNamedIn } from '../../config/identity.js';
import type { UpstreamConfig } from '../../config/types.js';
import { UpstreamCredentials, type IdentityParts } from '../../identity/credential-sources.js';
import { staticCredentials, type ActingFor, type CredentialSource, type SessionIdentity, type UpstreamCaller } from './adapter.js';

/** Which upstream session serves a caller, and whether it is a principal's own rather than a client session's. */
export interface UpstreamSessionKey {
  key: string;
  perPrincipal: boolean;
}

/** Principals whose latest caller is remembered per upstream (the least recently seen is forgotten first). */
const MAX_REMEMBERED_CALLERS = 10_000;

export class CallerIdentity {
  /** What the gateway's own requests authenticate with. */
  readonly gateway: CredentialSource;
  private readonly credentials: UpstreamCredentials | undefined;
  /** The upstream tells callers apart (not only by the claim headers of a shared token): sessions are per principal. */
  readonly perCaller: boolean;

  /**
   * Each principal's latest caller: an upstream session outlives the request that opened it, so what the session
   * sends on its own (its event stream, its end, answers and notifications) reads the principal's newest token, not
   * the one that first opened it (which may have expired since). A call never does: it carries its own.
   */
  private readonly latest = new Map<string, ActingFor>();
  /** One wrapper per caller object, so that the credential source made for it is one per caller too. */
  private readonly wrapped = new WeakMap<ActingFor, ActingFor>();
  /** A stdio upstream with a child per principal: the child is the principal's session. */
  private readonly childPerPrincipal: boolean;

  constructor(config: UpstreamConfig, parts: IdentityParts | undefined) {
    const auth = config.auth;
    const stdio = config.transport === 'stdio';
    this.childPerPrincipal = stdio && config.isolation === 'per-principal';
    // A stdio child's `auth` token goes into its env ({{upstreamToken}}): for the caller only, as its resource says.
    const url = stdio ? (auth === undefined ? '' : resourceNamedIn(auth)) : config.url;
    this.credentials = auth === undefined || parts === undefined ? undefined : new UpstreamCredentials({ name: config.name, url, headers: stdio ? {} : config.headers, auth }, parts);
    this.gateway = stdio ? staticCredentials({}) : (this.credentials?.forGateway() ?? staticCredentials(config.headers));
    // Each caller's own account (authorizationCode) is told apart by the upstream as surely as an exchanged token.
    const tellsCallersApart = auth !== undefined && (auth.tokenExchange !== undefined || auth.signedIdentity !== undefined || auth.authorizationCode !== undefined || Object.keys(auth.claimHeaders).length > 0);
    this.perCaller = tellsCallersApart || this.childPerPrincipal;
  }

  /**
   * A request for `identity`'s session, made for `actingFor` (none: the gateway's own): its credentials are those
   * of `actingFor`'s own token, whatever other tokens its principal has used.
   */
  callerOf(identity: SessionIdentity, actingFor: ActingFor | undefined): UpstreamCaller {
    if (actingFor === undefined) return { identity, principal: undefined, credentials: this.gateway };
    this.remember(actingFor);
    const credentials = this.credentials === undefined ? this.gateway : this.credentials.forCaller(actingFor);
    return { identity, principal: actingFor.principal, credentials, actingFor };
  }

  /**
   * What an upstream session opened for `caller` sends on its own behalf (not a call: those carry their own): the
   * credential of its principal's newest token.
   */
  sessionCredentialsOf(caller: UpstreamCaller): CredentialSource {
    const { actingFor } = caller;
    if (actingFor === undefined || this.credentials === undefined) return caller.credentials;
    return this.credentials.forCaller(this.newest(actingFor));
  }

  /** `actingFor` remembered as its principal's latest. */
  private remember(actingFor: ActingFor): void {
    if (actingFor.subjectToken === undefined) return;
    this.latest.delete(actingFor.principal);
    this.latest.set(actingFor.principal, actingFor);
    if (this.latest.size > MAX_REMEMBERED_CALLERS) this.latest.delete(this.latest.keys().next().value as string);
  }

  /** A caller whose token is, each time it is read, its principal's latest one. */
  private newest(actingFor: ActingFor): ActingFor {
    const { principal } = actingFor;
    if (actingFor.subjectToken === undefined) return actingFor;
    let wrapper = this.wrapped.get(actingFor);
    if (wrapper === undefined) {
      wrapper = { ...actingFor, subjectToken: () => (this.latest.get(principal) ?? actingFor).subjectToken?.() };
      this.wrapped.set(actingFor, wrapper);
    }
    return wrapper;
  }

  /**
   * Which upstream session serves `caller` (its key): its client session's own, and where many clients share one
   * session and the upstream tells callers apart, one per principal (`perPrincipal`: no client session ends it).
   */
  upstreamSessionOf(caller: UpstreamCaller): UpstreamSessionKey {
    // Without authentication every caller is the anonymous principal, with one child of its own.
    if (this.childPerPrincipal) return { key: `principal:${caller.principal ?? ''}`, perPrincipal: true };
    const shared = caller.identity.manyClients === true;
    if (shared && this.perCaller && caller.principal !== undefined) return { key: `${caller.identity.sessionId}\u0000${caller.principal}`, perPrincipal: true };
    return { key: caller.identity.sessionId, perPrincipal: false };
  }

  /** Forgets the upstream's cached tokens (it is going: removed, or replaced by a reload). */
  forget(): void {
    this.credentials?.forget();
  }
}
