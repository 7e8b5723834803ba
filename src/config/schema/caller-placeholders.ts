// The syntax of caller placeholders in a stdio upstream's `env` (issue 33, `isolation: per-principal`): `{{principal}}`,
// `{{claims.<claim>}}` and `{{upstreamToken}}`, filled in when a principal's child is spawned. Distinct from `${ENV}`
// on purpose: that one is the operator's environment, read once at load; these are the caller's, read per child.
// Parsed here, below the upstream layer, so the loader can refuse a bad one at its line; filled in by
// src/upstream/life/child-env.ts.

export type CallerPlaceholder = { kind: 'principal' } | { kind: 'claim'; claim: string } | { kind: 'upstreamToken' };

/** One part of an env value: literal text, or a placeholder to fill in. */
export type EnvPart = string | CallerPlaceholder;

// matchAll copies the global one, lastIndex and all: only matchAll uses it.
const PLACEHOLDER = /\{\{([^{}]*)\}\}/g;
const ANY_PLACEHOLDER = /\{\{[^{}]*\}\}/;
const CLAIM = /^claims\.([A-Za-z0-9_:./-]{1,128})$/;
export const PLACEHOLDER_FORMS = '{{principal}}, {{claims.<claim>}} or {{upstreamToken}}';

/** Whether the value has anything that looks like a placeholder (`{{…}}`). */
export function hasPlaceholder(value: string): boolean {
  return ANY_PLACEHOLDER.test(value);
}

/** The value's parts, or the problem with its first bad placeholder. */
export function parseEnvValue(value: string): { parts: EnvPart[] } | { problem: string } {
  const parts: EnvPart[] = [];
  let at = 0;
  for (const match of value.matchAll(PLACEHOLDER)) {
    const placeholder = placeholderOf((match[1] ?? '').trim());
    if (placeholder === undefined) return { problem: `unknown placeholder "${match[0]}": expected ${PLACEHOLDER_FORMS}` };
    if (match.index > at) parts.push(value.slice(at, match.index));
    parts.push(placeholder);
    at = match.index + match[0].length;
  }
  if (at < value.length) parts.push(value.slice(at));
  return { parts };
}

/** Whether a parsed value names the upstream token. */
export function namesUpstreamToken(parts: readonly EnvPart[]): boolean {
  return parts.some((part) => typeof part !== 'string' && part.kind === 'upstreamToken');
}

function placeholderOf(body: string): CallerPlaceholder | undefined {
  if (body === 'principal') return { kind: 'principal' };
  if (body === 'upstreamToken') return { kind: 'upstreamToken' };
  const claim = CLAIM.exec(body)?.[1];
  return claim === undefined ? undefined : { kind: 'claim', claim };
}
