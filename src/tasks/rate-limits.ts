// Per-principal rate limits (`auth.rateLimits`): requests per second at the front door, task creations per
// minute in the task core. Counted in the store, so every replica sees the same windows (fixed windows that start
// with a principal's first hit: a burst at a window's edge may reach twice the rate for a moment).
import { principalMatches } from '../config/access.js';
import type { AuthConfig, RateLimits } from '../config/types.js';
import { GatewayError, storeUnavailable } from '../errors.js';
import { NO_EVENTS, type GatewayEvents } from '../events.js';
import type { TaskStore } from '../store/task-store.js';
import { nameOf } from '../principals.js';

const SECOND_MS = 1_000;
const MINUTE_MS = 60_000;

/** Over a limit: says when the principal may try again (the HTTP front sends it as Retry-After too). */
export class RateLimited extends GatewayError {
  constructor(message: string, retryAfterMs: number) {
    super('rate_limited', message, { retryAfterMs });
  }
}

export class RateLimiter {
  constructor(
    private limits: AuthConfig['rateLimits'],
    private readonly store: Pick<TaskStore, 'rates'>,
    /** Told of every refusal (the first of each window says so: the audit log records that one). */
    private readonly events: GatewayEvents = NO_EVENTS,
  ) {}

  /** A config reload's limits: counted against from the next request on (the windows already counted stay). */
  reconfigure(limits: AuthConfig['rateLimits']): void {
    this.limits = limits;
  }

  /** Whether any rate is limited at all: without, requests cost nothing here. */
  get limitsRequests(): boolean {
    return this.limits.requestsPerSecond > 0 || this.limits.rules.some((rule) => (rule.requestsPerSecond ?? 0) > 0);
  }

  /**
   * Counts `requests` requests of `principal` (a JSON-RPC batch is one per message); throws RateLimited when the
   * window then holds more than `requestsPerSecond`.
   */
  request(principal: string, requests = 1): Promise<void> {
    return this.count('requests', principal, this.limitsFor(principal).requestsPerSecond, SECOND_MS, 'requests per second', requests);
  }

  /** Counts one task creation of `principal`; throws RateLimited past `taskCreationsPerMinute`. */
  taskCreation(principal: string): Promise<void> {
    return this.count('task-creations', principal, this.limitsFor(principal).taskCreationsPerMinute, MINUTE_MS, 'task creations per minute');
  }

  /** The first matching rule's rates over the defaults (rules name principals bare or qualified, as access rules do). */
  private limitsFor(principal: string): RateLimits {
    const { rules, ...defaults } = this.limits;
    const who = nameOf(principal);
    const rule = who === undefined ? undefined : rules.find((r) => r.principals.some((glob) => principalMatches(glob, who)));
    return { ...defaults, ...rule };
  }

  private async count(name: string, principal: string, limit: number, windowMs: number, what: string, hitsNow = 1): Promise<void> {
    if (limit <= 0) return;
    const { hits, resetInMs } = await this.store.rates.count(name, principal, windowMs, hitsNow).catch((error: unknown) => {
      throw storeUnavailable(error);
    });
    if (hits <= limit) return;
    const retryAfterMs = Math.max(1, resetInMs);
    this.events.emit('rate.limited', { principal, limit: what, retryAfterMs, firstInWindow: hits - hitsNow <= limit });
    throw new RateLimited(`Rate limit exceeded: ${limit} ${what} for '${principal}' (auth.rateLimits); retry in ${(retryAfterMs / 1000).toFixed(1)} s`, retryAfterMs);
  }
}
