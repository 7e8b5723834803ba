// The cookies of per-user consent: reading the request's Cookie header, writing Set-Cookie with the attributes
// each cookie needs (always HttpOnly and SameSite=Lax: Strict would not come back from an authorization server's
// redirect; Secure on an https public origin), and the random values that bind a flow to one browser (the flow
// keeps only their SHA-256, so the store never holds what the browser presents).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';

export interface CookieOptions {
  path: string;
  /** Seconds; 0 deletes the cookie. */
  maxAgeS: number;
  secure: boolean;
}

/** The cookie names: `__Host-` / `__Secure-` prefixes on https, where browsers hold them to their promises. */
export function cookieNames(secure: boolean): { session: string; login: string; consent: string } {
  return secure
    ? { session: '__Host-taskgate-session', login: '__Secure-taskgate-login', consent: '__Secure-taskgate-consent' }
    : { session: 'taskgate-session', login: 'taskgate-login', consent: 'taskgate-consent' };
}

/** The value of cookie `name` in the request (the first, if sent twice), undefined when absent. */
export function cookieOf(request: FastifyRequest, name: string): string | undefined {
  const header = request.headers.cookie;
  if (header === undefined) return undefined;
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=');
    if (eq < 0 || pair.slice(0, eq).trim() !== name) continue;
    const value = pair.slice(eq + 1).trim();
    return value === '' ? undefined : value;
  }
  return undefined;
}

/** A Set-Cookie value. `value` must be cookie-safe already (base64url and dots are all the gateway writes). */
export function setCookie(name: string, value: string, options: CookieOptions): string {
  if (!/^[A-Za-z0-9._-]*$/.test(value)) throw new Error('unreachable: a cookie value the gateway writes is base64url');
  const attributes = [`${name}=${value}`, `Path=${options.path}`, `Max-Age=${options.maxAgeS}`, 'HttpOnly', 'SameSite=Lax'];
  if (options.secure) attributes.push('Secure');
  return attributes.join('; ');
}

/** A Set-Cookie value that deletes the cookie (same name and path). */
export function clearCookie(name: string, path: string, secure: boolean): string {
  return setCookie(name, '', { path, maxAgeS: 0, secure });
}

/** A fresh unguessable cookie value (256 bits, base64url). */
export function randomCookieValue(): string {
  return randomBytes(32).toString('base64url');
}

/** What a flow stores of the browser's cookie: its SHA-256, base64url. */
export function browserBinding(cookie: string): string {
  return createHash('sha256').update(cookie, 'utf8').digest('base64url');
}

/** Whether `cookie` is the one whose binding the flow stored (compared in constant time). */
export function matchesBinding(cookie: string | undefined, binding: string): boolean {
  if (cookie === undefined) return false;
  const presented = Buffer.from(browserBinding(cookie));
  const stored = Buffer.from(binding);
  return presented.length === stored.length && timingSafeEqual(presented, stored);
}
