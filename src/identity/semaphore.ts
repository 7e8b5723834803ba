// A bound on work running at once, the rest queued in order: token requests across every upstream and principal
// (issue 33 item 4), so a burst of new principals cannot open hundreds of connections to an authorization server.

export class Semaphore {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new Error(`a semaphore needs a limit of at least 1, got ${limit}`);
  }

  /** Runs `work` once a slot is free; the slot is released however it ends. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running++;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      // The slot passes straight to the next in line, so `running` never drops below what is running.
      if (next !== undefined) next();
      else this.running--;
    }
  }

  get active(): number {
    return this.running;
  }

  get queued(): number {
    return this.waiting.length;
  }
}
