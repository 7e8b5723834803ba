// What an entry of `listen.cors.origins` means: "*" (any origin), an exact origin, or an origin whose leftmost
// labels (`https://*.example.com`) or port (`http://localhost:*`) are a wildcard. Patterns are compared with the
// parsed Origin header part by part, never as text: a glob that could span a dot or a colon would let
// `https://evil.com:1.example.com` or `https://example.com.evil.com` through.
import { isIP } from 'node:net';

interface OriginPattern {
  protocol: 'http:' | 'https:';
  /** Lowercase; for a subdomain wildcard, the part after `*.`. IPv6 literals keep their brackets (URL.hostname's form). */
  hostname: string;
  /** `*.` was written: any name ending in `.hostname` (at least one more label), not `hostname` itself. */
  subdomains: boolean;
  /** '' = the scheme's default port (the Origin header omits it), '*' = any port. */
  port: string;
}

const PATTERN = /^(https?):\/\/(\*\.)?([^/:?#@\s*[\]]+|\[[0-9a-f:.]+\])(?::(\*|\d{1,5}))?$/;

export const ORIGIN_PATTERN_HINT =
  'expected "*", an origin (scheme://host[:port], no path, e.g. "https://app.example.com") or a glob with "*." as its leftmost labels or "*" as its port ("https://*.example.com", "http://localhost:*")';

/** The pattern an entry stands for; undefined when it is none (config load reports it), 'any' for "*". */
function parseOriginPattern(entry: string): OriginPattern | 'any' | undefined {
  if (entry === '*') return 'any';
  const match = PATTERN.exec(entry.toLowerCase());
  if (match === null) return undefined;
  const [, scheme = '', wildcard, host = '', port] = match;
  // Exact parts go through the URL parser, which is what made the browser's Origin header: same normal form.
  const url = safeUrl(`${scheme}://${host}${port === undefined || port === '*' ? '' : `:${port}`}`);
  if (url === undefined || url.hostname === '') return undefined;
  const subdomains = wildcard !== undefined;
  // A wildcard label in front of an IP address names nothing.
  if (subdomains && isIP(url.hostname.replace(/^\[(.*)\]$/, '$1')) !== 0) return undefined;
  return { protocol: url.protocol as OriginPattern['protocol'], hostname: url.hostname, subdomains, port: port === '*' ? '*' : url.port };
}

function safeUrl(value: string): URL | undefined {
  try {
    return new URL(value);
  } catch {
    return undefined;
  }
}

export function isOriginPattern(entry: string): boolean {
  return parseOriginPattern(entry) !== undefined;
}

/** An Origin header value as a URL; undefined when it is not an http(s) origin in its serialized form (`null`, a path, ...). */
function parseOriginHeader(value: string): URL | undefined {
  const url = safeUrl(value);
  return url !== undefined && (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === value.toLowerCase() ? url : undefined;
}

function patternMatches(pattern: OriginPattern | 'any', origin: URL): boolean {
  if (pattern === 'any') return true;
  if (origin.protocol !== pattern.protocol) return false;
  if (pattern.port !== '*' && origin.port !== pattern.port) return false;
  return pattern.subdomains ? origin.hostname.endsWith(`.${pattern.hostname}`) : origin.hostname === pattern.hostname;
}

/**
 * Whether an Origin header value is one the patterns allow. Patterns are parsed once, here; entries that are no
 * pattern (config load refuses them) match nothing.
 */
export function originMatcher(entries: readonly string[]): (origin: string) => boolean {
  const patterns = entries.map(parseOriginPattern).filter((p) => p !== undefined);
  return (origin) => {
    const parsed = parseOriginHeader(origin);
    return parsed !== undefined && patterns.some((pattern) => patternMatches(pattern, parsed));
  };
}
