// Whether one upstream is up, as /readyz, the routers and the event seam see it: each change announced once (down
// once per outage, not at every failed retry; restarted only for a stdio child that was up before), and after each
// failure the next attempt to connect scheduled with backoff (restart-backoff.ts).
import type { UpstreamConfig } from '../../config/types.js';
import type { GatewayEvents } from '../../events.js';
import { RestartBackoff } from './restart-backoff.js';

export type UpstreamState = 'starting' | 'ready' | 'down' | 'closed';

export class UpstreamHealth {
  state: UpstreamState = 'starting';
  /** Why it is down (kept while it is not ready). */
  lastError: string | undefined;
  /** Whether it was ever up: coming up again after that is a restart, not a late start. */
  private wasUp = false;
  private readonly backoff: RestartBackoff;
  private retryTimer: NodeJS.Timeout | undefined;
  /** The attempt under way, if any: one at a time. */
  private attempting: Promise<void> | undefined;

  constructor(
    private readonly config: UpstreamConfig,
    private readonly events: GatewayEvents,
    /** Tries to connect (the control connection): first at start, then after a delay once down. */
    private readonly connect: () => Promise<void>,
  ) {
    const stdio = config.transport === 'stdio';
    this.backoff = new RestartBackoff(stdio ? config.restart.initialDelayMs : 1000, stdio ? config.restart.maxDelayMs : 30_000);
  }

  get closed(): boolean {
    return this.state === 'closed';
  }

  /** It is up: its control connection and catalog (a per-principal upstream: at once, its children start with calls). */
  up(): void {
    this.backoff.up();
    const restarted = this.wasUp && this.state === 'down' && this.config.transport === 'stdio';
    this.wasUp = true;
    this.state = 'ready';
    this.lastError = undefined;
    this.events.emit('upstream.up', { upstream: this.config.name, transport: this.config.transport });
    if (restarted) this.events.emit('upstream.restarted', { upstream: this.config.name, attempt: this.backoff.attempts });
  }

  /** It is down for `reason` (at start too: an upstream not reachable yet is down); it is tried again after the backoff. */
  down(reason: string): void {
    if (this.closed) return;
    if (this.state !== 'down') this.events.emit('upstream.down', { upstream: this.config.name, reason });
    this.state = 'down';
    this.lastError = reason;
    const delay = this.backoff.next();
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      // Scheduled by the end of the last attempt (down), whatever of it is still settling: this is a new one.
      this.attempting = undefined;
      void this.attempt();
    }, delay);
    this.retryTimer.unref();
  }

  /** Tries to connect now; the attempt under way if there is one. */
  attempt(): Promise<void> {
    if (this.attempting !== undefined) return this.attempting;
    const attempt: Promise<void> = this.connect().finally(() => {
      if (this.attempting === attempt) this.attempting = undefined;
    });
    this.attempting = attempt;
    return attempt;
  }

  /**
   * An attempt now instead of the one the backoff scheduled (what the upstream waited for happened: a consent
   * upstream's first user connected); the attempt under way if there is one; at once when it is not down.
   */
  retryNow(): Promise<void> {
    if (this.attempting !== undefined) return this.attempting;
    if (this.state !== 'down' || this.retryTimer === undefined) return Promise.resolve();
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    return this.attempt();
  }

  /** The gateway closes it: no more attempts. */
  close(): void {
    this.state = 'closed';
    clearTimeout(this.retryTimer);
  }
}
