// The calls the gateway has sent to its upstreams and not yet had answered, counted across every upstream: a
// replica that drains for shutdown waits for them (a synchronous tools/call mid-flight gets its answer), as it
// waits for its task runs.
import type { UpstreamCall } from '../peer/connection.js';

export class CallsInFlight {
  private count = 0;
  private idleWaiters: (() => void)[] = [];

  /** Calls under way now. */
  get busy(): number {
    return this.count;
  }

  /**
   * Counts the call `start` makes from now (its connection may open first) until its outcome settles. Reactions on
   * the call's promises, not an async frame: this is on every proxied call's path.
   */
  track<T extends UpstreamCall>(start: () => Promise<T>): Promise<T> {
    const ended = this.begin();
    let started: Promise<T>;
    try {
      started = start();
    } catch (error) {
      ended();
      return Promise.reject(error as Error);
    }
    return started.then(
      (call) => {
        call.outcome.then(ended, ended);
        return call;
      },
      (error: unknown) => {
        ended();
        throw error;
      },
    );
  }

  /** Resolves once no call is under way: at once when none is. */
  idle(): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private begin(): () => void {
    this.count++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      if (--this.count === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
    };
  }
}
