// Keep-alive progress for plain tool calls. Many hosts give up on a request after a fixed time (often 60 s) unless
// progress arrives, and reset that timeout on every progress notification; an upstream that works silently would
// lose its result. When the caller sent a progressToken, the gateway sends progress itself whenever the upstream
// has been silent for `intervalMs`, and rewrites the upstream's own progress where needed so that the values the
// client sees always increase, as the spec requires.
import type { JsonRpcNotification } from '../jsonrpc.js';

/** Keep-alives advance by one until the upstream shows its own scale, then by this much, so as not to distort it. */
const NUDGE = 0.001;

export class ProgressKeepAlive {
  /** The last progress value sent; undefined before the first. */
  private last: number | undefined;
  private upstreamScale = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly progressToken: string | number,
    private readonly intervalMs: number,
    private readonly send: (notification: JsonRpcNotification) => void,
  ) {
    this.arm();
  }

  /**
   * The upstream's progress for this call, on its way to the client: sent with a value above every earlier one.
   * A value that had to be raised loses its `total`, which described the upstream's own value (kept, it could
   * show more than 100%).
   */
  forward(notification: JsonRpcNotification): void {
    const params = notification.params ?? {};
    const given = typeof params.progress === 'number' ? params.progress : undefined;
    const value = given !== undefined && (this.last === undefined || given > this.last) ? given : (this.last ?? 0) + NUDGE;
    this.upstreamScale = true;
    this.last = value;
    const { total: _total, ...rest } = params;
    this.send({ ...notification, params: value === given ? { ...params, progress: value } : { ...rest, progress: value } });
    this.arm();
  }

  /** The call was answered: no more progress for it. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private arm(): void {
    clearTimeout(this.timer);
    if (this.stopped || this.intervalMs <= 0) return;
    this.timer = setTimeout(() => {
      this.last = (this.last ?? 0) + (this.upstreamScale ? NUDGE : 1);
      this.send({
        jsonrpc: '2.0',
        method: 'notifications/progress',
        params: { progressToken: this.progressToken, progress: this.last, message: 'The tool is still running' },
      });
      this.arm();
    }, this.intervalMs);
    this.timer.unref();
  }
}

/** A keep-alive for a plain call whose request asked for progress (`_meta.progressToken`); undefined otherwise. */
export function keepAliveFor(
  meta: unknown,
  intervalMs: number,
  send: (notification: JsonRpcNotification) => void,
): ProgressKeepAlive | undefined {
  const token = typeof meta === 'object' && meta !== null ? (meta as { progressToken?: unknown }).progressToken : undefined;
  if (intervalMs <= 0 || (typeof token !== 'string' && typeof token !== 'number')) return undefined;
  return new ProgressKeepAlive(token, intervalMs, send);
}
