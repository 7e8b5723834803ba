// What a stdio upstream may know of its caller (issue 33): only a child of its own per principal
// (`isolation: per-principal`) may have caller placeholders in its `env` or an `auth` whose token
// `{{upstreamToken}}` names. A shared or per-session child serves several principals, so naming one of them
// there would hand one caller's identity to another's calls: refused at load, at the line that asks for it.
import type { z } from 'zod';
import { hasPlaceholder, namesUpstreamToken, parseEnvValue, PLACEHOLDER_FORMS } from './caller-placeholders.js';

/** The parts of a parsed stdio upstream these rules read. */
interface StdioCallerSettings {
  isolation: string;
  env: Record<string, string>;
  auth?: { clientCredentials?: { resource?: string | undefined } | undefined; tokenExchange?: { resource?: string | undefined } | undefined; signedIdentity?: { audience?: string | undefined } | undefined; claimHeaders?: unknown } | undefined;
}

export function checkStdioCaller(upstream: StdioCallerSettings, ctx: z.RefinementCtx): void {
  const perPrincipal = upstream.isolation === 'per-principal';
  for (const [name, value] of Object.entries(upstream.env)) {
    const parsed = hasPlaceholder(value) ? parseEnvValue(value) : { parts: [] };
    if (!perPrincipal) {
      // Text that is no placeholder of ours stays literal here, as it always was.
      if ('parts' in parsed && parsed.parts.some((part) => typeof part !== 'string')) {
        ctx.addIssue({ code: 'custom', path: ['env', name], input: value, message: `names the caller (${PLACEHOLDER_FORMS}), which only a child of its own per principal can: set isolation: per-principal (a ${upstream.isolation} child serves several principals)` });
      }
      continue;
    }
    if ('problem' in parsed) ctx.addIssue({ code: 'custom', path: ['env', name], input: value, message: parsed.problem });
    else if (namesUpstreamToken(parsed.parts) && upstream.auth === undefined) {
      ctx.addIssue({ code: 'custom', path: ['env', name], input: value, message: '{{upstreamToken}} needs auth on this upstream (clientCredentials, tokenExchange or signedIdentity): it is the token that auth obtains for the caller' });
    }
  }
  const auth = upstream.auth;
  if (auth === undefined) return;
  if (!perPrincipal) {
    ctx.addIssue({ code: 'custom', path: ['auth'], input: undefined, message: `auth on a stdio upstream needs isolation: per-principal (its token reaches the child through {{upstreamToken}} in env, and a ${upstream.isolation} child serves several principals)` });
    return;
  }
  if (auth.claimHeaders !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['auth', 'claimHeaders'], input: undefined, message: 'a stdio upstream has no headers: put claims in env with {{claims.<claim>}}' });
  }
  // No upstream URL to default to: the token is for whatever API the child calls.
  for (const mode of ['clientCredentials', 'tokenExchange'] as const) {
    if (auth[mode] !== undefined && auth[mode].resource === undefined) {
      ctx.addIssue({ code: 'custom', path: ['auth', mode, 'resource'], input: undefined, message: 'required on a stdio upstream: the URL of the API the child calls with the token (there is no upstream URL to default to)' });
    }
  }
  if (auth.signedIdentity !== undefined && auth.signedIdentity.audience === undefined) {
    ctx.addIssue({ code: 'custom', path: ['auth', 'signedIdentity', 'audience'], input: undefined, message: 'required on a stdio upstream: the audience the child presents the token to (there is no upstream URL to default to)' });
  }
}
