// The sse.jsonWindowMs deadlines of streamed answers (streamed-answer.ts) on one timer. Every POST that
// may stream opens a window and almost every one closes it again within milliseconds; a Node timer each cost a
// timer list made and dropped per call when calls come one at a time. All windows have the same length, so their
// deadlines come in the order they were opened: a queue, with a timer for the earliest still open.

/** One open window: closed by its answer (close) or by its deadline (the callback runs). */
export interface JsonWindow {
  close(): void;
}

class OpenWindow implements JsonWindow {
  /** Let go once closed: a closed window waiting for its turn in the queue holds nothing of its request. */
  expire: (() => void) | undefined;

  constructor(
    private readonly windows: JsonWindows,
    readonly deadline: number,
    expire: () => void,
  ) {
    this.expire = expire;
  }

  get closed(): boolean {
    return this.expire === undefined;
  }

  close(): void {
    if (this.expire === undefined) return;
    this.expire = undefined;
    this.windows.closed();
  }
}

/** Below this many queued, closed windows are left to the timer; above it they are swept when they outnumber the open ones. */
const SWEEP_FLOOR = 256;

export class JsonWindows {
  /** Windows in the order they were opened (so by deadline), from `head` on; closed ones go at the front or in a sweep. */
  private queue: OpenWindow[] = [];
  private head = 0;
  private open = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly windowMs: number) {}

  /** Windows in the queue, open or closed and not yet gone (the bound the sweep keeps). */
  get queued(): number {
    return this.queue.length - this.head;
  }

  /** Calls `expire` once the window has been open windowMs, unless it was closed first. */
  start(expire: () => void): JsonWindow {
    const window = new OpenWindow(this, performance.now() + this.windowMs, expire);
    this.queue.push(window);
    this.open++;
    if (this.timer === undefined) this.arm(this.windowMs);
    return window;
  }

  /** A window closed before its deadline; it leaves the queue later. The queue stays within a few times the open ones. */
  closed(): void {
    this.open--;
    const queued = this.queued;
    if (queued > SWEEP_FLOOR && queued > 4 * this.open) {
      this.queue = this.queue.slice(this.head).filter((window) => !window.closed);
      this.head = 0;
    }
  }

  private arm(delayMs: number): void {
    this.timer = setTimeout(() => this.expireDue(), Math.max(1, Math.ceil(delayMs)));
  }

  private expireDue(): void {
    this.timer = undefined;
    const now = performance.now();
    while (this.head < this.queue.length) {
      const window = this.queue[this.head] as OpenWindow;
      const expire = window.expire;
      if (expire !== undefined && window.deadline > now) break;
      this.head++;
      if (expire === undefined) continue;
      window.expire = undefined;
      this.open--;
      expire();
    }
    if (this.head === this.queue.length) {
      this.queue = [];
      this.head = 0;
      return;
    }
    // What went is dropped in one go when it is most of the queue, not shifted out one by one.
    if (this.head > SWEEP_FLOOR && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    this.arm((this.queue[this.head] as OpenWindow).deadline - now);
  }
}
