// Rate windows of the embedded store: the same contract as count-hit.lua (redis/rates.ts) in one process.
import type { RateWindows } from '../rates.js';

/** Windows kept before the ones that ended are all dropped at once (they are dropped as they are met, too). */
const WINDOWS_BEFORE_SWEEP = 10_000;

export class MemoryRates implements RateWindows {
  /** Rate-limit windows by name and principal: hits so far and when the window ends. */
  private readonly windows = new Map<string, { hits: number; endsAt: number }>();

  constructor(private readonly now: () => number) {}

  async count(name: string, principal: string, windowMs: number, hits = 1): Promise<{ hits: number; resetInMs: number }> {
    const key = `${name}\u0000${principal}`;
    const now = this.now();
    let window = this.windows.get(key);
    if (window === undefined || window.endsAt <= now) {
      // Windows that ended are dropped as they are met again, and all of them now and then: memory stays bounded.
      if (this.windows.size > WINDOWS_BEFORE_SWEEP) for (const [k, w] of this.windows) if (w.endsAt <= now) this.windows.delete(k);
      window = { hits: 0, endsAt: now + windowMs };
      this.windows.set(key, window);
    }
    window.hits += hits;
    return { hits: window.hits, resetInMs: window.endsAt - now };
  }
}
