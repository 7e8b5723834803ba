// Which upstreams that need each user's own account a caller may use, for `GET /connections` and its DELETE: with
// no `auth.access` rules, all of them; with rules, those where the caller may use at least one tool. The tools of
// such an upstream are known only once someone connected (its catalog is read with a user's token), so where the
// catalog knows none yet, an upstream counts when a rule that applies to the caller names a tool glob that can
// match a name under the upstream's prefix (or one of its renamed tools).
import { mayUse, principalMatches, type AccessSubject } from '../../config/access.js';
import { globMatches } from '../../config/policy.js';
import type { AccessRule, GatewayConfig } from '../../config/types.js';

export interface UsableUpstreamsInput {
  config: Pick<GatewayConfig, 'auth' | 'upstreams'>;
  /** Who asks; undefined (no authentication) sees every upstream. */
  subject: AccessSubject | undefined;
  /** The upstreams whose callers connect their own account (UserConnections.upstreams()). */
  upstreams: readonly string[];
  /** The exposed tool names the catalog lists for an upstream now; undefined or empty when it knows none yet. */
  toolsOf?: (upstream: string) => readonly string[] | undefined;
}

export function usableUpstreams(input: UsableUpstreamsInput): string[] {
  const rules = input.config.auth?.access;
  const { subject } = input;
  if (rules === undefined || subject === undefined) return [...input.upstreams];
  return input.upstreams.filter((name) => {
    const tools = input.toolsOf?.(name);
    if (tools !== undefined && tools.length > 0) return tools.some((tool) => mayUse(rules, subject, 'tools', tool));
    const upstream = input.config.upstreams.find((u) => u.name === name);
    return upstream !== undefined && mayUseUnder(rules, subject, upstream.prefix, Object.values(upstream.tools?.overrides ?? {}).flatMap((o) => (o.name === undefined ? [] : [o.name])));
  });
}

/** Whether a rule that applies to `subject` grants a tool glob that can match some name `<prefix>…` or a renamed tool. */
function mayUseUnder(rules: readonly AccessRule[], subject: AccessSubject, prefix: string, renamed: readonly string[]): boolean {
  const applies = (rule: AccessRule): boolean => rule.principals.some((glob) => principalMatches(glob, subject)) || rule.scopes.some((scope) => subject.scopes.includes(scope));
  return rules.some((rule) => applies(rule) && rule.tools.some((glob) => renamed.some((name) => globMatches(glob, `${prefix}${name}`)) || couldMatchUnder(glob, prefix)));
}

/**
 * Whether `glob` can match some name that starts with `prefix`: its literal head (up to the first wildcard) and the
 * prefix agree as far as both go, and where the head is the shorter a wildcard follows it.
 */
export function couldMatchUnder(glob: string, prefix: string): boolean {
  const wildcard = glob.search(/[*?]/);
  const head = wildcard < 0 ? glob : glob.slice(0, wildcard);
  if (head.length >= prefix.length) return head.startsWith(prefix) && (wildcard >= 0 || glob.length > prefix.length || prefix === '');
  return wildcard >= 0 && prefix.startsWith(head);
}
