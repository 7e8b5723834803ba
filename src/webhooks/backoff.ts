// When a failed webhook delivery is tried again: exponential backoff with jitter (the wait is random between half and
// the whole of a bound that doubles with each try), so that deliveries that failed together, against an endpoint that
// went down, do not come back together when it is up again.

export interface BackoffSettings {
  initialBackoffMs: number;
  maxBackoffMs: number;
}

/** The wait after try `attempt` (1 for the first) failed. `random` is Math.random unless a test gives its own. */
export function retryDelayMs(attempt: number, settings: BackoffSettings, random: () => number = Math.random): number {
  const bound = Math.min(settings.maxBackoffMs, settings.initialBackoffMs * 2 ** Math.min(Math.max(0, attempt - 1), 40));
  // At least half the bound: jitter down to zero could retry at once, again and again, against an endpoint that is down.
  return Math.round(bound / 2 + (random() * bound) / 2);
}
