// Upstream access tokens, cached per (upstream, principal) — or per upstream for the gateway's own (issue 33):
// one request however many callers wait (single flight), refreshed ahead of expiry while the current one still
// serves, dropped on the upstream's 401 only if it is still the token that was refused, failures remembered briefly
// (a down authorization server is not hammered), requests bounded across all keys (a semaphore), entries bounded
// (least recently used first out). Pure logic over an injected `obtain`: no network, no timers, a clock to inject.
import { Semaphore } from './semaphore.js';

export interface ObtainedToken {
  token: string;
  /** The token endpoint's `expires_in`; absent: `unknownLifetimeMs` is assumed. */
  expiresInSeconds?: number | undefined;
}

export type TokenCacheEvent =
  | { type: 'hit'; key: string }
  | { type: 'refresh_ahead'; key: string }
  | { type: 'miss'; key: string }
  | { type: 'obtained'; key: string; expiresInMs: number }
  | { type: 'failed'; key: string; error: unknown }
  | { type: 'failure_cached'; key: string }
  | { type: 'invalidated'; key: string }
  | { type: 'evicted'; key: string };

export interface TokenCacheOptions {
  /** Milliseconds since the epoch; tests pass a clock they move. */
  now?: () => number;
  /** Refresh this long before expiry (at most half the token's lifetime). Default 60 s. */
  refreshAheadMs?: number;
  /** Stop using a token this long before it expires (a request takes time to arrive; at most a quarter of its lifetime). Default 5 s. */
  expirySkewMs?: number;
  /** A failed request is answered from memory this long. Default 5 s. */
  failureTtlMs?: number;
  /** Lifetime assumed when the server gives no `expires_in`. Default 5 min. */
  unknownLifetimeMs?: number;
  /** Token requests running at once across all keys; more wait in order. Default 8. */
  maxConcurrentRequests?: number;
  /** Keys kept; past it the least recently used without a request running goes. Default 10 000. */
  maxEntries?: number;
  onEvent?: (event: TokenCacheEvent) => void;
}

interface Entry {
  token?: { value: string; refreshAt: number; expiresAt: number };
  failure?: { error: unknown; until: number };
  inflight?: Promise<string>;
}

export const TOKEN_CACHE_DEFAULTS = Object.freeze({
  refreshAheadMs: 60_000,
  expirySkewMs: 5_000,
  failureTtlMs: 5_000,
  unknownLifetimeMs: 300_000,
  maxConcurrentRequests: 8,
  maxEntries: 10_000,
});

/** What follows the upstream's name in the key of the gateway's own token. */
const GATEWAY_KEY = 'gateway';

/** The cache key of an upstream's token for a principal, or for the gateway itself (no principal). */
export function tokenKey(upstream: string, principal?: string): string {
  return principal === undefined ? `${upstreamKeyPrefix(upstream)}${GATEWAY_KEY}` : `${upstreamKeyPrefix(upstream)}principal\u0000${principal}`;
}

/** Whose token a key (of tokenKey) holds: the upstream's name, and whether it is the gateway's own. */
export function keyOwner(key: string): { upstream: string; gateway: boolean } {
  const end = key.indexOf('\u0000');
  if (end < 0) return { upstream: key, gateway: false };
  return { upstream: key.slice(0, end), gateway: key.slice(end + 1) === GATEWAY_KEY };
}

/** What every key of an upstream starts with (for `forget`). */
export function upstreamKeyPrefix(upstream: string): string {
  return `${upstream}\u0000`;
}

export class TokenCache {
  private readonly entries = new Map<string, Entry>();
  private readonly semaphore: Semaphore;
  private readonly now: () => number;
  private readonly settings: typeof TOKEN_CACHE_DEFAULTS;
  private readonly emit: (event: TokenCacheEvent) => void;

  constructor(options: TokenCacheOptions = {}) {
    const { now, onEvent, ...rest } = options;
    this.settings = { ...TOKEN_CACHE_DEFAULTS, ...Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)) };
    this.now = now ?? Date.now;
    this.emit = onEvent ?? (() => {});
    this.semaphore = new Semaphore(this.settings.maxConcurrentRequests);
  }

  /** A usable token for `key`, asking `obtain` only when there is none (and none on its way). */
  get(key: string, obtain: () => Promise<ObtainedToken>): Promise<string> {
    const now = this.now();
    const entry = this.touch(key);
    const { token, failure } = entry;
    if (token !== undefined && now < token.refreshAt) {
      this.emit({ type: 'hit', key });
      return Promise.resolve(token.value);
    }
    if (token !== undefined && now < token.expiresAt) {
      // Still good: serve it, and fetch its successor once (unless fetching just failed).
      this.emit({ type: 'refresh_ahead', key });
      if (entry.inflight === undefined && !(failure !== undefined && now < failure.until)) this.request(key, entry, obtain);
      return Promise.resolve(token.value);
    }
    if (entry.inflight !== undefined) return entry.inflight;
    if (failure !== undefined && now < failure.until) {
      this.emit({ type: 'failure_cached', key });
      return Promise.reject(failure.error as Error);
    }
    this.emit({ type: 'miss', key });
    return this.request(key, entry, obtain);
  }

  /**
   * Drops `token` after the upstream refused it (401 invalid_token); the next get asks for a new one. A token
   * already replaced (another caller saw the 401 first) stays: returns whether anything was dropped.
   */
  invalidate(key: string, token: string): boolean {
    const entry = this.entries.get(key);
    if (entry?.token?.value !== token) return false;
    delete entry.token;
    this.emit({ type: 'invalidated', key });
    return true;
  }

  /** Forgets every key starting with `prefix` (an upstream removed or reconfigured). */
  forget(prefix: string): void {
    for (const key of [...this.entries.keys()]) if (key.startsWith(prefix)) this.entries.delete(key);
  }

  get size(): number {
    return this.entries.size;
  }

  get requestsRunning(): number {
    return this.semaphore.active;
  }

  get requestsQueued(): number {
    return this.semaphore.queued;
  }

  private request(key: string, entry: Entry, obtain: () => Promise<ObtainedToken>): Promise<string> {
    const inflight = this.semaphore
      .run(obtain)
      .then(
        ({ token, expiresInSeconds }) => {
          const obtainedAt = this.now();
          const lifetime = expiresInSeconds !== undefined && expiresInSeconds > 0 ? expiresInSeconds * 1000 : this.settings.unknownLifetimeMs;
          const expiresAt = obtainedAt + lifetime - Math.min(this.settings.expirySkewMs, lifetime / 4);
          const refreshAt = obtainedAt + lifetime - Math.min(this.settings.refreshAheadMs, lifetime / 2);
          entry.token = { value: token, refreshAt: Math.min(refreshAt, expiresAt), expiresAt };
          delete entry.failure;
          this.emit({ type: 'obtained', key, expiresInMs: lifetime });
          return token;
        },
        (error: unknown) => {
          entry.failure = { error, until: this.now() + this.settings.failureTtlMs };
          this.emit({ type: 'failed', key, error });
          throw error;
        },
      )
      .finally(() => {
        if (entry.inflight === inflight) delete entry.inflight;
      });
    entry.inflight = inflight;
    // A refresh ahead has no caller waiting on it; its failure is remembered in the entry, never unhandled.
    inflight.catch(() => {});
    return inflight;
  }

  /** The entry for `key`, now the most recently used; making room for it if it is new. */
  private touch(key: string): Entry {
    let entry = this.entries.get(key);
    if (entry !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, entry);
      return entry;
    }
    entry = {};
    this.entries.set(key, entry);
    this.evict();
    return entry;
  }

  private evict(): void {
    if (this.entries.size <= this.settings.maxEntries) return;
    for (const [key, entry] of this.entries) {
      if (this.entries.size <= this.settings.maxEntries) return;
      if (entry.inflight !== undefined) continue; // its waiters still need it to land somewhere
      this.entries.delete(key);
      this.emit({ type: 'evicted', key });
    }
  }
}
