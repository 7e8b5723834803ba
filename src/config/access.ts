// Access rules (`auth.access`): which principals, or tokens carrying which scopes, may use which tools, prompts
// and resources. Rules only grant, and with rules present what none grants is denied: lists leave it out, and a
// call answers as if it did not exist. Names are the exposed ones (prefix included), resources their URIs;
// resource templates are matched by their `uriTemplate` text, both in RFC 3986 normal form.
import { globMatches } from './policy.js';
import { uriGlobMatches } from './resource-uri.js';
import type { PrincipalName } from '../principals.js';
import type { AccessRule } from './types.js';

export type AccessKind = 'tools' | 'prompts' | 'resources';

/** How a rule may qualify a principal glob: `key:alice` names only the API key, `oauth:alice` only the token subject. */
const QUALIFIERS = { 'key:': 'key', 'oauth:': 'oauth' } as const;


/** Who asks, as far as the rules care. */
export interface AccessSubject extends PrincipalName {
  scopes: readonly string[];
}

/**
 * Whether a principal glob of a rule (`auth.access[].principals`, `auth.rateLimits.rules[].principals`) names
 * `who`: a glob qualified with `key:` or `oauth:` names only that kind of credential, a bare one either kind.
 */
export function principalMatches(glob: string, who: PrincipalName): boolean {
  for (const [prefix, credential] of Object.entries(QUALIFIERS)) {
    if (glob.startsWith(prefix)) return who.credential === credential && globMatches(glob.slice(prefix.length), who.name);
  }
  return globMatches(glob, who.name);
}

/**
 * Whether `subject` may use the tool, prompt or resource `name`. No rules, or no authenticated subject: yes.
 * Resource URIs and their globs are compared in normal form (resource-uri.ts): another spelling of a URI is
 * granted exactly what its normal form is.
 */
export function mayUse(rules: readonly AccessRule[] | undefined, subject: AccessSubject | undefined, kind: AccessKind, name: string): boolean {
  if (rules === undefined || subject === undefined) return true;
  const matches = kind === 'resources' ? uriGlobMatches : globMatches;
  return rules.some((rule) => appliesTo(rule, subject) && rule[kind].some((glob) => matches(glob, name)));
}

function appliesTo(rule: AccessRule, subject: AccessSubject): boolean {
  return rule.principals.some((glob) => principalMatches(glob, subject)) || rule.scopes.some((scope) => subject.scopes.includes(scope));
}
