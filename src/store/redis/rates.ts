// Rate windows on Redis: one counter per window and principal that count-hit.lua starts with its window's expiry
// and counts up. The embedded store's twin is memory/rates.ts.
import type { RateWindows } from '../rates.js';
import type { RedisKeys } from '../redis-keys.js';
import type { RunScript } from './scripts.js';

export class RedisRates implements RateWindows {
  constructor(
    private readonly run: RunScript,
    private readonly keys: RedisKeys,
  ) {}

  async count(name: string, principal: string, windowMs: number, hits = 1): Promise<{ hits: number; resetInMs: number }> {
    const [total, left] = (await this.run('count-hit', this.keys.rateWindow(name, principal), String(Math.max(1, Math.ceil(windowMs))), String(hits))) as [number, number];
    return { hits: Number(total), resetInMs: Number(left) };
  }
}
