// A keyed pool of connections to one upstream, the life every connection of a client session's or a principal's
// own shares (session-connections.ts, principal-children.ts): opened on its key's first use, kept least recently
// used first, bounded by closing the least recently used idle one (a busy one never: a new key is refused then),
// and, for the keys opened to be swept, closed once it has had no call for idleTimeoutMs.

/** What the pool needs of a connection: whether a call is running on it, and how to end it. */
export interface PooledConnection {
  readonly isIdle: boolean;
  close(): Promise<void>;
}

/** Why the pool closed a connection by itself (the owner logs it in its own words). */
export type PoolCloseReason = 'bound' | 'idle';

export interface ConnectionPoolOptions {
  /** At most this many connections; 0: no bound. */
  max: number;
  /** A swept connection with no call for this long is closed; 0: never. */
  idleTimeoutMs: number;
  /** Connections being closed: the upstream's close() waits for them. */
  closing: Set<Promise<void>>;
  /** The refusal of a new key when `max` connections are open and every one has a call running. */
  full(): Error;
  /** Told before the pool closes a connection by itself. */
  closingBy?(key: string, reason: PoolCloseReason): void;
}

interface Entry<C extends PooledConnection> {
  connection: Promise<C>;
  /** Set once open: until then it is neither idle nor closed by the pool. */
  open?: C;
  /** Whether the idle sweep may close it. */
  swept: boolean;
  /** When the sweep first saw it with no call running (undefined: in use since). */
  idleSince: number | undefined;
}

/** How often idle connections are looked for: one is closed between idleTimeoutMs and 1.5 × that after its last call. */
export function sweepEveryMs(idleTimeoutMs: number): number {
  return Math.min(Math.max(Math.floor(idleTimeoutMs / 4), 10), 15_000);
}

export class ConnectionPool<C extends PooledConnection> {
  /** Least recently used first (each use moves one to the end). */
  private readonly entries = new Map<string, Entry<C>>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly options: ConnectionPoolOptions) {}

  get size(): number {
    return this.entries.size;
  }

  keys(): string[] {
    return [...this.entries.keys()];
  }

  /**
   * The key's connection, opened now with `open` if it has none (`sweep`: the idle sweep may close it). Rejects as
   * `open` did; the key then has none again.
   */
  get(key: string, open: () => Promise<C>, options: { sweep?: boolean } = {}): Promise<C> {
    let entry = this.entries.get(key);
    if (entry === undefined) {
      this.makeRoom();
      const opening: Entry<C> = { connection: open(), swept: options.sweep === true, idleSince: undefined };
      entry = opening;
      opening.connection.then(
        (connection) => (opening.open = connection),
        () => {
          if (this.entries.get(key) === opening) this.entries.delete(key);
        },
      );
    } else this.entries.delete(key);
    entry.idleSince = undefined;
    this.entries.set(key, entry);
    if (entry.swept) this.scheduleSweep();
    return entry.connection;
  }

  /** The connection closed by itself: its key gets a new one on its next use. */
  closed(key: string, connection: C): void {
    const entry = this.entries.get(key);
    void entry?.connection.then(
      (current) => {
        if (current === connection && this.entries.get(key) === entry) this.entries.delete(key);
      },
      () => undefined, // failed while opening: get() already dropped it
    );
  }

  /** Closes the key's connection (one still opening once it is open); the key gets a new one on its next use. */
  async release(key: string): Promise<void> {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    const closing = entry.connection.then((c) => c.close()).catch(() => undefined);
    this.options.closing.add(closing);
    await closing.finally(() => this.options.closing.delete(closing));
  }

  /** Closes every connection and stops the sweep (the upstream is closing). */
  async close(): Promise<void> {
    clearTimeout(this.sweeper);
    this.sweeper = undefined;
    await Promise.all(this.keys().map((key) => this.release(key)));
  }

  /**
   * Keeps the connections within `max`: at the bound, the least recently used one with no call running is closed;
   * when every one is busy (or still opening), the new key is refused.
   */
  private makeRoom(): void {
    const max = this.options.max;
    if (max <= 0 || this.entries.size < max) return;
    for (const [key, entry] of this.entries) {
      if (entry.open === undefined || !entry.open.isIdle) continue;
      this.options.closingBy?.(key, 'bound');
      void this.release(key);
      return;
    }
    throw this.options.full();
  }

  /**
   * Closes the swept connections idle for idleTimeoutMs. Runs while there are some, on a timer that keeps no
   * process up. Idle is seen, not assumed from the last use: a long call keeps its connection however long it runs.
   */
  private scheduleSweep(): void {
    const timeoutMs = this.options.idleTimeoutMs;
    if (timeoutMs <= 0 || this.sweeper !== undefined) return;
    this.sweeper = setTimeout(() => {
      this.sweeper = undefined;
      const now = Date.now();
      for (const [key, entry] of this.entries) {
        if (!entry.swept || entry.open === undefined) continue;
        if (!entry.open.isIdle) entry.idleSince = undefined;
        else if (entry.idleSince === undefined) entry.idleSince = now;
        else if (now - entry.idleSince >= timeoutMs) {
          this.options.closingBy?.(key, 'idle');
          void this.release(key);
        }
      }
      if ([...this.entries.values()].some((entry) => entry.swept)) this.scheduleSweep();
    }, sweepEveryMs(timeoutMs));
    this.sweeper.unref();
  }
}
