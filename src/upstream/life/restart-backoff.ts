// When to try an upstream again after it went down: exponential backoff, started afresh once a connection stayed
// up a while (one that keeps dying backs off; one that ran for a while earned a quick return).
const STABLE_AFTER_MS = 10_000;

export class RestartBackoff {
  private delayMs: number;
  private connectedAt = 0;
  /** Reconnection attempts since the upstream last stayed up (what `upstream.restarted` counts). */
  attempts = 0;

  constructor(
    private readonly initialMs: number,
    private readonly maxMs: number,
  ) {
    this.delayMs = initialMs;
  }

  /** The upstream is up now. */
  up(): void {
    this.connectedAt = Date.now();
  }

  /** It went down (or did not come up): the delay before the next attempt. */
  next(): number {
    if (this.connectedAt > 0 && Date.now() - this.connectedAt > STABLE_AFTER_MS) {
      this.delayMs = this.initialMs;
      this.attempts = 0;
    }
    this.attempts++;
    const delay = this.delayMs;
    this.delayMs = Math.min(this.maxMs, this.delayMs * 2);
    this.connectedAt = 0;
    return delay;
  }
}
