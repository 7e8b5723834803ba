// What an HTTP upstream's refusal says, in the words the call fails with. A 401 or 403 from an OAuth-protected
// upstream carries its reason in `WWW-Authenticate` (RFC 6750 §3): the error names it, and for a 403
// `insufficient_scope` the scope the upstream wants, so the client learns what its principal lacks there. The one
// retry after a 401, with a new credential, is the interceptor's (outbound.ts).

/** The parameters of a Bearer challenge that say why (quoted-string or token values). */
function challengeParams(header: string | undefined): Record<string, string> {
  const params: Record<string, string> = {};
  if (header === undefined) return params;
  for (const match of header.matchAll(/([A-Za-z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))/g)) {
    const name = (match[1] as string).toLowerCase();
    params[name] ??= (match[2] ?? match[3] ?? '').replace(/\\(.)/g, '$1');
  }
  return params;
}

/** The message a request refused with `status` fails with (`bodyStart`: the first bytes of its body). */
export function refusalMessage(status: number, wwwAuthenticate: string | readonly string[] | undefined, bodyStart: string): string {
  const body = bodyStart === '' ? '' : `: ${bodyStart.slice(0, 300)}`;
  if (status !== 401 && status !== 403) return `HTTP ${status}${body}`;
  const { error, scope, error_description: description } = challengeParams(typeof wwwAuthenticate === 'string' || wwwAuthenticate === undefined ? wwwAuthenticate : wwwAuthenticate.join(', '));
  if (status === 403 && error === 'insufficient_scope') {
    return `HTTP 403: the upstream refused for insufficient scope${scope === undefined ? '' : ` (it requires scope "${scope.slice(0, 200)}")`}`;
  }
  const why = [error, description?.slice(0, 200)].filter((part) => part !== undefined && part !== '').join(': ');
  return `HTTP ${status}: the upstream refused the gateway's credential${why === '' ? '' : ` (${why})`}${body}`;
}
