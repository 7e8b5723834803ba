// Resource URIs as rules see them. An upstream resolves a URI as a URI: `file:///%65tc/passwd` and
// `file:///public/../etc/passwd` are /etc/passwd to a file server. So rules on URIs (`resources.include|exclude`,
// `auth.access[].resources`) are matched on the RFC 3986 §6.2.2 normal form of both the URI and the glob, and a URI
// whose spelling is not already normal (see spellingProblem) is never matched against a template: such a request
// is refused, never rewritten, so what reaches an upstream is what the client sent and the rules judged.
import { globMatches } from './policy.js';

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
// scheme ":" ["//" authority] path ["?" query] ["#" fragment]
const URI_PARTS = /^([A-Za-z][A-Za-z0-9+.-]*):(?:\/\/([^/?#]*))?([^?#]*)([\s\S]*)$/;

/**
 * The RFC 3986 §6.2.2 normal form of a URI (or of a glob or template written like one): percent-encodings in
 * upper case and those of unreserved characters decoded, scheme and host in lower case, dot segments removed
 * from a hierarchical path. Text that has no scheme gets only the percent-encoding rules.
 */
export function normalizeUri(uri: string): string {
  const text = uri.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => {
    const char = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(char) ? char : `%${hex.toUpperCase()}`;
  });
  const parts = URI_PARTS.exec(text);
  if (parts === null) return text;
  const [, scheme = '', authority, path = '', rest = ''] = parts;
  return `${scheme.toLowerCase()}:${authority === undefined ? '' : `//${lowerHost(authority)}`}${path.startsWith('/') ? removeDotSegments(path) : path}${rest}`;
}

/**
 * Why a URI is not spelled in normal form where it matters to an upstream, or undefined when it is: a
 * percent-encoded unreserved character (`%65` for `e`, `%2e` for `.`), a percent-encoding in lower case (`%2f`),
 * or a `.` or `..` path segment. Scheme and host case are left to the rules (matched case-insensitively) and to
 * templates (matched byte for byte).
 */
export function spellingProblem(uri: string): string | undefined {
  for (const [, hex = ''] of uri.matchAll(/%([0-9A-Fa-f]{2})/g)) {
    if (UNRESERVED.test(String.fromCharCode(Number.parseInt(hex, 16)))) return `it percent-encodes the unreserved character '${String.fromCharCode(Number.parseInt(hex, 16))}'`;
    if (hex !== hex.toUpperCase()) return `its percent-encoding %${hex} is not in upper case`;
  }
  if (hasDotSegment(uri)) return 'it has a dot segment (. or ..)';
  return undefined;
}

/** Whether a path segment of the URI (before its query and fragment) is `.` or `..`. */
export function hasDotSegment(uri: string): boolean {
  const parts = URI_PARTS.exec(uri);
  const path = parts === null ? uri.replace(/[?#][\s\S]*$/, '') : (parts[3] ?? '');
  return path.split('/').some((segment) => segment === '.' || segment === '..');
}

// Rules are few and stable: their normal forms are kept.
const normalGlobs = new Map<string, string>();

/** Whether a URI glob of a rule matches a resource URI (or a template's text), both in normal form. */
export function uriGlobMatches(glob: string, uri: string): boolean {
  let normal = normalGlobs.get(glob);
  if (normal === undefined) {
    normal = normalizeUri(glob);
    if (normalGlobs.size < 10_000) normalGlobs.set(glob, normal);
  }
  return globMatches(normal, normalizeUri(uri));
}

/** The authority with its host in lower case (user information and port kept as written). */
function lowerHost(authority: string): string {
  const at = authority.lastIndexOf('@');
  const host = authority.slice(at + 1).toLowerCase().replace(/%[0-9a-f]{2}/g, (encoded) => encoded.toUpperCase());
  return `${authority.slice(0, at + 1)}${host}`;
}

/** RFC 3986 §5.2.4, for a path that begins with `/`. */
function removeDotSegments(path: string): string {
  const output: string[] = [];
  const segments = path.split('/').slice(1);
  for (const [i, segment] of segments.entries()) {
    const last = i === segments.length - 1;
    if (segment === '.' || segment === '..') {
      if (segment === '..') output.pop();
      if (last) output.push(''); // `/a/..` is `/`, `/a/.` is `/a/`
      continue;
    }
    output.push(segment);
  }
  return `/${output.join('/')}`;
}
