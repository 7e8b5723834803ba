// Warnings about refusals a flood repeats many times a second: logged at most once a minute each, saying how many
// there were.
import type { Logger } from '../log.js';

const WARNING_INTERVAL_MS = 60_000;

/** A warning logged at most once per minute, with how many times it happened since the last one (`times`). */
export class RateLimitedWarning {
  private last = Number.NEGATIVE_INFINITY;
  private count = 0;

  warn(logger: Logger, fields: Record<string, unknown>, message: string): void {
    this.count++;
    const now = Date.now();
    if (now - this.last < WARNING_INTERVAL_MS) return;
    this.last = now;
    logger.warn({ ...fields, times: this.count }, message);
    this.count = 0;
  }
}
