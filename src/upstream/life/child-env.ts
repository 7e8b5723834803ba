// A per-principal stdio child's `env` with its caller filled in (issue 33): `{{principal}}`, `{{claims.<claim>}}`,
// `{{upstreamToken}}` (syntax: config/schema/caller-placeholders.ts), at spawn time. What is filled in comes from a
// token or an authorization server, so it is made safe for an environment variable (CR, LF and NUL removed) and
// bounded; the values are never logged, and an error says which variable and placeholder, never the value.
import { parseEnvValue, type CallerPlaceholder } from '../../config/schema/caller-placeholders.js';
import { claimText } from '../../identity/claim-headers.js';

/** Who a child is for, as its env may name it. */
export interface ChildCaller {
  /** The qualified principal (`key:<name>`, `oauth:<issuer>#<sub>`); '' for the anonymous principal. */
  principal: string;
  /** The caller's verified token claims (none for API keys and anonymous callers). */
  claims: Readonly<Record<string, unknown>>;
  /** The upstream token of the upstream's `auth` for this caller; absent when it has none. */
  upstreamToken?: () => Promise<string | undefined>;
}

/** The longest value one placeholder may put in the env, in characters (a JWT with many claims fits). */
export const MAX_PLACEHOLDER_CHARS = 16 * 1024;

// CR and LF end a line in whatever reads the variable into a file or header; NUL ends it for execve.
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\r\n\u0000]/g;

/** Why a child cannot be started with its caller in its env: names the variable, never its value. */
export class ChildEnvError extends Error {}

/** The env as configured, its placeholders filled in for `caller`; the upstream token is asked for only if named. */
export async function renderChildEnv(env: Readonly<Record<string, string>>, caller: ChildCaller): Promise<Record<string, string>> {
  const rendered: Record<string, string> = {};
  let token: Promise<string | undefined> | undefined;
  for (const [name, value] of Object.entries(env)) {
    const parsed = parseEnvValue(value);
    // The loader refused a bad placeholder; a config built in code (tests) gets the same answer here.
    if ('problem' in parsed) throw new ChildEnvError(`env ${name}: ${parsed.problem}`);
    let text = '';
    for (const part of parsed.parts) {
      if (typeof part === 'string') text += part;
      else text += await filled(name, part, caller, () => (token ??= upstreamTokenOf(name, caller)));
    }
    rendered[name] = text;
  }
  return rendered;
}

async function filled(variable: string, placeholder: CallerPlaceholder, caller: ChildCaller, upstreamToken: () => Promise<string | undefined>): Promise<string> {
  const raw = placeholder.kind === 'principal' ? caller.principal : placeholder.kind === 'claim' ? claimText(caller.claims[placeholder.claim]) : await upstreamToken();
  const text = (raw ?? '').replace(UNSAFE, '');
  if (text.length > MAX_PLACEHOLDER_CHARS) {
    throw new ChildEnvError(`env ${variable}: ${describe(placeholder)} is longer than ${MAX_PLACEHOLDER_CHARS} characters`);
  }
  return text;
}

async function upstreamTokenOf(variable: string, caller: ChildCaller): Promise<string> {
  const token = await caller.upstreamToken?.();
  if (token === undefined || token === '') throw new ChildEnvError(`env ${variable}: no upstream token for this caller ({{upstreamToken}} needs the upstream's auth)`);
  return token;
}

function describe(placeholder: CallerPlaceholder): string {
  return placeholder.kind === 'claim' ? `{{claims.${placeholder.claim}}}` : `{{${placeholder.kind}}}`;
}
