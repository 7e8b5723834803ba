// What the dashboard says of a task's identity at its upstream (issue 33: "the dashboard shows under which identity
// a task runs"): whom the upstream sees for the task's calls, as the upstream is configured now (`auth`, a stdio
// upstream's `isolation`), and whether a run of its kept call on another replica can act for the caller again.
// Read from the config and the task record alone: never a token, a secret, or anything of a sealed caller but that
// one was kept.
import { hasPlaceholder, parseEnvValue, namesUpstreamToken } from '../config/schema/caller-placeholders.js';
import type { UpstreamAuthConfig } from '../config/identity.js';
import type { UpstreamConfig } from '../config/types.js';
import { isTerminal, type TaskRecord } from '../store/task-store.js';
import { nameOf } from '../principals.js';

/** How the gateway authenticates to the task's upstream for the task's calls. */
export type UpstreamIdentityMode =
  | 'token-exchange'
  | 'signed-identity'
  | 'client-credentials'
  | 'claim-headers'
  | 'static-headers'
  | 'stdio-per-principal'
  | 'stdio'
  /** The upstream is not in the config now (a reload removed it). */
  | 'unconfigured';

/** What a run of the task's kept call on another replica (after this one is lost, or after waiting in line) acts as. */
export interface TaskRerunIdentity {
  /**
   * `as-caller`: the kept call carries its caller sealed, and a replica holding the sealing key acts for them again.
   * `as-gateway`: the upstream does not tell callers apart; the run presents the same credential as the first.
   * `fails`: the run would fail saying why: the upstream needs the caller but no sealed caller was kept (it never
   * runs as the gateway instead), or the upstream is no longer configured. `none`: nothing is kept to run again (the task ended, runs on the upstream itself, or its
   * policy keeps no call: losing its replica fails it).
   */
  outcome: 'as-caller' | 'as-gateway' | 'fails' | 'none';
  /** One sentence for the page. */
  summary: string;
}

/** `identity` of a task's detail in the dashboard API. */
export interface TaskUpstreamIdentity {
  mode: UpstreamIdentityMode;
  /**
   * `caller`: the upstream tells the task's principal apart (a token or JWT for them, claim headers naming them, a
   * child process of their own); `gateway`: it sees the gateway's credential, the same for every caller.
   */
  actsAs: 'caller' | 'gateway';
  /** Whom the upstream sees, for the page, e.g. "alice (oauth:https://idp.example#alice) via token exchange …". */
  summary: string;
  /** The headers `claimHeaders` adds for the caller: names only (their values are the caller's claims). */
  claimHeaders?: string[];
  rerun: TaskRerunIdentity;
}

/** Whom `task`'s upstream (configured as `upstream` now; undefined: not configured) sees for the task's calls. */
export function taskUpstreamIdentity(task: TaskRecord, upstream: UpstreamConfig | undefined): TaskUpstreamIdentity {
  const seen = seenBy(task.principal, upstream);
  return { ...seen, rerun: rerunOf(task, upstream, seen) };
}

type Seen = Pick<TaskUpstreamIdentity, 'mode' | 'actsAs' | 'summary' | 'claimHeaders'>;

function seenBy(principal: string, upstream: UpstreamConfig | undefined): Seen {
  const who = described(principal);
  if (upstream === undefined) return { mode: 'unconfigured', actsAs: 'gateway', summary: 'unknown: the upstream is not configured now' };
  if (upstream.transport === 'stdio') {
    if (upstream.isolation !== 'per-principal') {
      const children = upstream.isolation === 'shared' ? 'one child process shared by every caller' : 'a child process per client session';
      return { mode: 'stdio', actsAs: 'gateway', summary: `the gateway: ${children}, with its configured env` };
    }
    const parts = Object.values(upstream.env).filter(hasPlaceholder).map(parseEnvValue);
    const token = parts.some((parsed) => 'parts' in parsed && namesUpstreamToken(parsed.parts));
    const env = token && upstream.auth !== undefined ? `, with ${credentialOf(upstream.auth)} in its env` : parts.length > 0 ? ', its env naming them' : '';
    return { mode: 'stdio-per-principal', actsAs: 'caller', summary: `${who} in a child process of their own${env}` };
  }
  const auth = upstream.auth;
  const headerNames = Object.keys(auth?.claimHeaders ?? {});
  const claimHeaders = headerNames.length > 0 ? { claimHeaders: headerNames } : {};
  const naming = headerNames.length > 0 ? `, with ${headerNames.join(', ')} naming ${who}` : '';
  if (auth?.tokenExchange !== undefined) {
    const summary = nameOf(principal)?.credential === 'oauth'
      ? `${who} via token exchange: ${credentialOf(auth)}${naming}`
      : `nobody: ${principal} has no access token to exchange (token exchange needs an OAuth caller), so its calls to this upstream fail`;
    return { mode: 'token-exchange', actsAs: 'caller', summary, ...claimHeaders };
  }
  if (auth?.signedIdentity !== undefined) return { mode: 'signed-identity', actsAs: 'caller', summary: `${who} via ${credentialOf(auth)}${naming}`, ...claimHeaders };
  if (auth?.clientCredentials !== undefined) {
    return { mode: 'client-credentials', actsAs: headerNames.length > 0 ? 'caller' : 'gateway', summary: `${credentialOf(auth)}${naming}`, ...claimHeaders };
  }
  if (headerNames.length > 0) return { mode: 'claim-headers', actsAs: 'caller', summary: `the upstream's static headers${naming}`, claimHeaders: headerNames };
  return { mode: 'static-headers', actsAs: 'gateway', summary: 'the gateway, with the upstream\'s static headers (no auth)' };
}

/** The credential an `auth` mode presents for `who`, in words. */
function credentialOf(auth: UpstreamAuthConfig): string {
  if (auth.tokenExchange !== undefined) return `a token the authorization server issues for them in exchange for theirs (RFC 8693, client ${auth.tokenExchange.clientId})`;
  if (auth.signedIdentity !== undefined) {
    const named = auth.signedIdentity.claims;
    const claims = named.length > 0 ? ` (with their ${named.join(', ')} claim${named.length > 1 ? 's' : ''})` : '';
    return `a JWT the gateway signs for them${claims}`;
  }
  if (auth.clientCredentials !== undefined) return `the gateway's own client credentials (client ${auth.clientCredentials.clientId})`;
  return 'no token';
}

function rerunOf(task: TaskRecord, upstream: UpstreamConfig | undefined, seen: Seen): TaskRerunIdentity {
  if (task.native === true) return { outcome: 'none', summary: 'the upstream runs the task itself: the gateway never runs its call again' };
  if (isTerminal(task.status)) return { outcome: 'none', summary: 'the task has ended: its call is not run again' };
  if (task.call === undefined) return { outcome: 'none', summary: 'its call is not kept (retry.onLoss is off): if its replica is lost, the task fails' };
  if (upstream === undefined) return { outcome: 'fails', summary: 'a run on another replica fails: the upstream is not configured now' };
  if (seen.actsAs === 'gateway') return { outcome: 'as-gateway', summary: 'a run on another replica presents the same credential: the upstream does not tell callers apart' };
  if (task.call.caller === undefined) {
    return { outcome: 'fails', summary: 'a run on another replica fails rather than run as the gateway: no sealed caller was kept (identity.sealingKeys is not configured)' };
  }
  const exchange = upstream.auth?.tokenExchange !== undefined ? ', while their access token is still valid' : '';
  return { outcome: 'as-caller', summary: `a run on another replica acts for ${described(task.principal)} again: the caller is kept sealed, and a replica holding its sealing key restores it${exchange}` };
}

/** `alice (oauth:https://idp.example#alice)`; a principal that names no credential (a session, anonymous) as it is. */
function described(principal: string): string {
  const name = nameOf(principal);
  return name === undefined ? principal : `${name.name} (${principal})`;
}
