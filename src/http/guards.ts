// DNS-rebinding and cross-origin protection, applied to every route. Names are compared only after parsing:
// prefix or substring tests let `127.evil.com`, `127.0.0.1.evil.com` or `[::1]x` through.
import { isIP } from 'node:net';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { originMatcher } from '../config/origins.js';
import type { ListenConfig } from '../config/types.js';
import { GatewayError } from '../errors.js';

/** A Host header's parts: a bracketed IPv6 literal or a DNS name / IPv4 address, and an optional port. */
const HOST_HEADER = /^(\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::(\d{1,5}))?$/;

interface Authority {
  /** Lowercase; IPv6 literals without brackets, in canonical form. */
  hostname: string;
  port: string | undefined;
}

/** Parses a Host header value; undefined when it is not exactly `host[:port]`. */
export function parseHostHeader(value: string): Authority | undefined {
  const match = HOST_HEADER.exec(value.toLowerCase());
  if (match === null) return undefined;
  const [, host = '', port] = match;
  if (port !== undefined && Number(port) > 65535) return undefined;
  if (host.startsWith('[')) {
    const literal = canonicalIpv6(host.slice(1, -1));
    return literal === undefined ? undefined : { hostname: literal, port };
  }
  return { hostname: host, port };
}

function canonicalIpv6(literal: string): string | undefined {
  if (isIP(literal) !== 6) return undefined;
  // The URL parser writes IPv6 in its canonical (compressed, lowercase) form: 0:0:0:0:0:0:0:1 is ::1.
  return new URL(`http://[${literal}]/`).hostname.slice(1, -1);
}

/**
 * Whether a parsed hostname (or a configured bind address) names this machine's loopback interface:
 * `localhost`, an IPv4 address in 127.0.0.0/8, or `::1`.
 */
export function isLoopbackHostname(hostname: string): boolean {
  const name = hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (name === 'localhost') return true;
  if (isIP(name) === 4) return name.startsWith('127.');
  if (isIP(name) === 6) return canonicalIpv6(name) === '::1';
  return false;
}

/** A configured `allowedHosts` entry matches the parsed header: by hostname alone, or by hostname and port. */
function hostAllowed(allowed: readonly string[], authority: Authority): boolean {
  return allowed.some((entry) => {
    const parsed = parseHostHeader(entry);
    return parsed !== undefined && parsed.hostname === authority.hostname && (parsed.port === undefined || parsed.port === authority.port);
  });
}

/** An Origin header as a URL origin; undefined when it is not one (`null`, a path, userinfo, garbage). */
export function parseOrigin(value: string): URL | undefined {
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === value.toLowerCase() ? url : undefined;
  } catch {
    return undefined;
  }
}

// Compiled once per config (the guard runs on every request).
const corsMatchers = new WeakMap<readonly string[], (origin: string) => boolean>();
/** Whether `listen.cors.origins` lists the origin: a page the operator opened CORS to must get past this guard too. */
export function corsAllows(listen: ListenConfig, origin: string): boolean {
  const origins = listen.cors?.origins;
  if (origins === undefined) return false;
  let matches = corsMatchers.get(origins);
  if (matches === undefined) corsMatchers.set(origins, (matches = originMatcher(origins)));
  return matches(origin);
}

/**
 * Host: when bound to loopback or when `allowedHosts` is set, only loopback names and the configured hosts.
 * Origin: browsers send it; non-browser clients usually don't, and are accepted. With `allowedOrigins` set only
 * those; otherwise, when bound to loopback, only loopback origins. Origins `listen.cors.origins` lists are
 * accepted in every case. The Host check applies to them all the same: it is what stops DNS rebinding.
 */
export function checkRequestOrigin(listen: ListenConfig, host: string | undefined, origin: string | undefined): void {
  requestOriginCheck(listen)(host, origin);
}

/** How many Host values a guard remembers as allowed: a handful in practice (the names clients use for it). */
const REMEMBERED_HOSTS = 64;

/**
 * checkRequestOrigin for one listen config, with what does not change between requests worked out once: whether
 * the bind address is loopback, and the Host values already allowed (a bounded few; a refused one is never kept).
 */
function requestOriginCheck(listen: ListenConfig): (host: string | undefined, origin: string | undefined) => void {
  const loopback = isLoopbackHostname(listen.host);
  const checksHost = listen.allowedHosts.length > 0 || loopback;
  const allowedHosts = new Set<string>();
  return (host, origin) => {
    if (checksHost && (host === undefined || !allowedHosts.has(host))) {
      const authority = host === undefined ? undefined : parseHostHeader(host);
      const allowed = authority !== undefined && (isLoopbackHostname(authority.hostname) || hostAllowed(listen.allowedHosts, authority));
      if (!allowed) throw new GatewayError('host_forbidden', `Forbidden: Host '${host ?? ''}' is not allowed`);
      if (allowedHosts.size < REMEMBERED_HOSTS) allowedHosts.add(host as string);
    }
    if (origin === undefined || listen.allowedOrigins.includes('*') || corsAllows(listen, origin)) return;
    const parsed = parseOrigin(origin);
    if (listen.allowedOrigins.length > 0) {
      if (parsed === undefined || !listen.allowedOrigins.some((entry) => parseOrigin(entry)?.origin === parsed.origin)) {
        throw new GatewayError('origin_forbidden', `Forbidden: Origin '${origin}' is not allowed`);
      }
      return;
    }
    if (!loopback) return;
    if (parsed === undefined) throw new GatewayError('origin_forbidden', `Forbidden: Origin '${origin}' is not a valid origin`);
    if (!isLoopbackHostname(parsed.hostname)) throw new GatewayError('origin_forbidden', `Forbidden: Origin '${origin}' is not allowed`);
  };
}

/** The guard on every route, health and unknown paths included: a page that rebinds a name to this address learns nothing. */
export const originGuardPlugin = fp(
  async (app: FastifyInstance, { listen }: { listen: ListenConfig }) => {
    const check = requestOriginCheck(listen);
    // A callback hook, not an async one: no promise and no extra turn per request for a check that never waits.
    app.addHook('onRequest', (request, _reply, done) => {
      try {
        check(request.headers.host, request.headers.origin);
      } catch (error) {
        done(error as GatewayError);
        return;
      }
      done();
    });
  },
  { name: 'taskgate-origin-guard', fastify: '5.x' },
);
