// Which upstreams the gateway cannot get its own credential for (issue 33 item 5), for /readyz: the gateway's own
// token (client credentials) or signed identity carries the handshake and the lists, so while it fails that upstream
// serves nobody. Learnt from `upstream.token` events (the last attempt per upstream decides); callers' credentials
// are per caller and do not count. Bounded by the configured upstreams: an upstream that stops is forgotten.
import type { GatewayEvents, TokenGrant, TokenOutcome } from '../events.js';
import type { JsonObject } from '../jsonrpc.js';

interface Failing {
  grant: TokenGrant;
  outcome: Exclude<TokenOutcome, 'ok'>;
  cause: string | undefined;
  oauthError: string | undefined;
  status: number | undefined;
  /** When the failures began (the first of a run of them). */
  since: number;
}

export interface CredentialStatus {
  /** One entry per upstream whose last attempt at the gateway's own credential failed; empty when none did. */
  credentialStatus(): JsonObject[];
  close(): void;
}

export function subscribeCredentialStatus(events: GatewayEvents, now: () => number = Date.now): CredentialStatus {
  const failing = new Map<string, Failing>();
  const stops = [
    events.on('upstream.token', (e) => {
      if (e.principal !== undefined) return;
      if (e.outcome === 'ok') {
        failing.delete(e.upstream);
        return;
      }
      const since = failing.get(e.upstream)?.since ?? now();
      failing.set(e.upstream, { grant: e.grant, outcome: e.outcome, cause: e.cause, oauthError: e.oauthError, status: e.status, since });
    }),
    events.on('upstream.stopped', (e) => void failing.delete(e.upstream)),
  ];
  return {
    credentialStatus: () =>
      [...failing].map(([upstream, f]) => ({
        upstream,
        grant: f.grant,
        outcome: f.outcome,
        ...(f.cause !== undefined && { cause: f.cause }),
        ...(f.oauthError !== undefined && { oauthError: f.oauthError }),
        ...(f.status !== undefined && { status: f.status }),
        since: new Date(f.since).toISOString(),
      })),
    close: () => {
      for (const stop of stops) stop();
    },
  };
}
