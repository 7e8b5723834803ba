// Who is at the browser, once it signed in at the front door: an HttpOnly cookie holding the principal and an
// expiry, signed (HMAC-SHA-256) with a key derived from the store's shared secret, so that every replica recognises
// a session any other made and none needs to store it. The key is derived for this one use: nothing else the
// gateway signs with that secret (list cursors, retry state) can pass for a session. A session is not revocable
// before it expires (SESSION_TTL_MS); it only ever names who signed in, never a token.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { clearCookie, cookieNames, cookieOf, setCookie } from './cookies.js';

/** How long a browser stays signed in. */
export const SESSION_TTL_MS = 8 * 3_600_000;
const VERSION = 'v1';
const KEY_LABEL = 'taskgate browser session v1';

export interface BrowserSessionOptions {
  /** The store's shared secret (TaskStore.signingSecret): the same on every replica. */
  secret: () => Promise<Buffer>;
  /** Whether the public origin is https (the cookie is then `__Host-` and Secure). */
  secure: () => boolean;
  now?: () => number;
}

export class BrowserSessions {
  private key: Promise<Buffer> | undefined;
  private readonly now: () => number;

  constructor(private readonly options: BrowserSessionOptions) {
    this.now = options.now ?? Date.now;
  }

  /** The Set-Cookie value that signs this browser in as `principal` for SESSION_TTL_MS. */
  async issue(principal: string): Promise<string> {
    const value = await this.sign(principal, this.now() + SESSION_TTL_MS);
    const secure = this.options.secure();
    return setCookie(cookieNames(secure).session, value, { path: '/', maxAgeS: Math.floor(SESSION_TTL_MS / 1000), secure });
  }

  /** The Set-Cookie value that signs the browser out. */
  clear(): string {
    const secure = this.options.secure();
    return clearCookie(cookieNames(secure).session, '/', secure);
  }

  /** The principal signed in at the request's browser, if its session cookie is genuine and unexpired. */
  async browserPrincipal(request: FastifyRequest): Promise<string | undefined> {
    const value = cookieOf(request, cookieNames(this.options.secure()).session);
    return value === undefined ? undefined : this.verify(value);
  }

  /** `v1.<principal, base64url>.<expiry ms>.<signature>`. */
  async sign(principal: string, expiresAtMs: number): Promise<string> {
    const payload = `${VERSION}.${Buffer.from(principal, 'utf8').toString('base64url')}.${expiresAtMs}`;
    return `${payload}.${createHmac('sha256', await this.signingKey()).update(payload).digest('base64url')}`;
  }

  /** The principal a session value names, when its signature holds and it has not expired. */
  async verify(value: string): Promise<string | undefined> {
    const parts = value.split('.');
    if (parts.length !== 4 || parts[0] !== VERSION) return undefined;
    const [, principal = '', expiry = '', signature = ''] = parts;
    const expected = createHmac('sha256', await this.signingKey()).update(`${VERSION}.${principal}.${expiry}`).digest();
    const presented = Buffer.from(signature, 'base64url');
    if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return undefined;
    if (!/^\d{1,16}$/.test(expiry) || Number(expiry) <= this.now()) return undefined;
    const name = Buffer.from(principal, 'base64url').toString('utf8');
    return name === '' ? undefined : name;
  }

  private signingKey(): Promise<Buffer> {
    this.key ??= this.options.secret().then((secret) => createHmac('sha256', secret).update(KEY_LABEL).digest());
    // A store that could not answer is asked again next time.
    this.key.catch(() => (this.key = undefined));
    return this.key;
  }
}
