// One start and one stop for the whole process, as fastify's onClose hooks are for a server: each part is started
// in dependency order and registers its stop as it does; close() stops them in reverse order, whatever failed in
// between. A failed start, a failed listen and a shutdown therefore take the same way down, and a part only stops
// what it started.

/**
 * What a replica that shuts down tells clients: try again after this long (HTTP 503 + Retry-After and
 * `data.retryAfterMs` on refused requests, an SSE `retry:` field on open streams). Short: the other replicas serve
 * at once, and a load balancer has taken this one out of rotation by then (its /readyz says 503 from the start).
 */
export const RETRY_ELSEWHERE_MS = 1_000;

/** Where a stop that threw is reported (the gateway's logger). */
export interface LifecycleLog {
  error(fields: object, message: string): void;
}

export interface Part<T> {
  /** Names the part in the log when its stop fails. */
  name: string;
  /** Builds or starts the part; what it returns is handed to `stop`. A start that throws must leave nothing behind. */
  start(): T | Promise<T>;
  /** Undoes `start`. Runs once, and only if `start` returned. */
  stop?(started: T): unknown;
}

/** Thrown by start() once close() has begun: nothing starts on the way down. */
export class LifecycleClosedError extends Error {}

export class Lifecycle {
  private readonly stops: { name: string; stop(): unknown }[] = [];
  /** The last start asked for: the next waits for it, and close() lets it finish so that it stops that part too. */
  private starting: Promise<unknown> = Promise.resolve();
  private closed: Promise<void> | undefined;

  constructor(private readonly log: LifecycleLog) {}

  /** True from the moment close() is first called. */
  get closing(): boolean {
    return this.closed !== undefined;
  }

  /**
   * Starts `part` once the parts started before it have (starts run one at a time, in the order asked), and
   * registers its stop. Refused once close() has begun.
   */
  start<T>(part: Part<T>): Promise<T> {
    const started = this.starting.then(() => {
      if (this.closing) throw new LifecycleClosedError(`'${part.name}' not started: the lifecycle is closing`);
      return part.start();
    }).then((value) => {
      const { stop } = part;
      if (stop !== undefined) this.stops.push({ name: part.name, stop: () => stop(value) });
      return value;
    });
    this.starting = started.catch(() => undefined);
    return started;
  }

  /**
   * Stops every started part, the last started first, each after the previous one's stop settled. A stop that
   * throws is logged and the others still run. Every call returns the same promise: a second close waits for the first.
   */
  close(): Promise<void> {
    return (this.closed ??= this.stopAll());
  }

  private async stopAll(): Promise<void> {
    await this.starting;
    for (const { name, stop } of this.stops.splice(0).reverse()) {
      try {
        await stop();
      } catch (error) {
        this.log.error({ err: error, part: name }, `stopping ${name} failed; stopping the others`);
      }
    }
  }
}
