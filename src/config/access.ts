// Access rules (`auth.access`): which principals, or tokens carrying which scopes, may use which tools, prompts
// and resources. Rules only grant, and with rules present what none grants is denied: lists leave it out, and a
// call answers as if it did not exist. Names are the exposed ones (prefix included), resources their URIs;
// resource templates are matched by their `uriTemplate` text.
import { globMatches } from './policy.js';
import type { AccessRule } from './types.js';

export type AccessKind = 'tools' | 'prompts' | 'resources';

/** Who asks, as far as the rules care. */
export interface AccessSubject {
  principal: string;
  scopes: readonly string[];
}

/** Whether `subject` may use the tool, prompt or resource `name`. No rules, or no authenticated subject: yes. */
export function mayUse(rules: readonly AccessRule[] | undefined, subject: AccessSubject | undefined, kind: AccessKind, name: string): boolean {
  if (rules === undefined || subject === undefined) return true;
  return rules.some((rule) => appliesTo(rule, subject) && rule[kind].some((glob) => globMatches(glob, name)));
}

function appliesTo(rule: AccessRule, subject: AccessSubject): boolean {
  return rule.principals.some((glob) => globMatches(glob, subject.principal)) || rule.scopes.some((scope) => subject.scopes.includes(scope));
}
