// Rate windows (store.rates): hits counted per principal across replicas, for the rate limits of tasks/rate-limits.ts.
// Redis counts them in count-hit.lua (redis/rates.ts); the embedded store in a map (memory/rates.ts).

export interface RateWindows {
  /**
   * Counts `hits` hits (default one) against the rate window `name` of `principal` (a fixed window of `windowMs`
   * starting with its first hit, across replicas) and says how many hits it holds now and how long until it ends.
   */
  count(name: string, principal: string, windowMs: number, hits?: number): Promise<{ hits: number; resetInMs: number }>;
}
