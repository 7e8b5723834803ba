// The client sessions' own connections to one upstream (every transport but shared stdio): one per session key,
// opened on the session's first call, kept within maxSessions by closing the least recently used idle one.
import { GatewayError, isClientFacing, upstreamSessionsFull, upstreamUnavailable } from '../errors.js';
import type { Logger } from '../log.js';
import type { UpstreamConnection } from './connection.js';

/** A client session's own connection: while it opens, and once it is open. */
interface SessionConnection {
  connection: Promise<UpstreamConnection>;
  open?: UpstreamConnection;
}

export interface SessionConnectionsOptions {
  upstreamName: string;
  /** 0: no bound. */
  maxSessions: number;
  logger: Logger;
  /** Connections being closed (their upstream sessions ended): the upstream's close() waits for them. */
  closing: Set<Promise<void>>;
}

export class SessionConnections {
  /** Least recently used first (each use moves one to the end). */
  private readonly entries = new Map<string, SessionConnection>();

  constructor(private readonly options: SessionConnectionsOptions) {}

  get size(): number {
    return this.entries.size;
  }

  keys(): string[] {
    return [...this.entries.keys()];
  }

  /** The session's connection, opened now (`open`: its handshake done) if it has none. */
  async get(key: string, open: () => Promise<UpstreamConnection>): Promise<UpstreamConnection> {
    let entry = this.entries.get(key);
    if (entry === undefined) {
      this.makeRoom();
      const opening: SessionConnection = { connection: open() };
      entry = opening;
      opening.connection.then(
        (connection) => (opening.open = connection),
        () => {
          if (this.entries.get(key) === opening) this.entries.delete(key);
        },
      );
    } else this.entries.delete(key);
    this.entries.set(key, entry);
    try {
      return await entry.connection;
    } catch (error) {
      // What already says what the client is told (a credential the gateway could not get) is not wrapped again.
      if (error instanceof GatewayError) throw error;
      if (isClientFacing(error)) throw error.toGatewayError();
      throw upstreamUnavailable(this.options.upstreamName, (error as Error).message);
    }
  }

  /** The connection closed by itself: the session gets a new one on its next call. */
  closed(key: string, connection: UpstreamConnection): void {
    void this.entries.get(key)?.connection.then(
      (current) => {
        if (current === connection) this.entries.delete(key);
      },
      () => undefined, // failed while opening: get() already dropped it
    );
  }

  /** Ends the session's own connection (and with it the upstream session or child process). */
  async release(key: string): Promise<void> {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    const closing = entry.connection.then((c) => c.close()).catch(() => undefined);
    this.options.closing.add(closing);
    await closing.finally(() => this.options.closing.delete(closing));
  }

  /**
   * Keeps the connections within maxSessions: at the bound, the least recently used one with no call running is
   * closed (its client gets a new one on its next request); when every one is busy, the new session's request is
   * refused.
   */
  private makeRoom(): void {
    const max = this.options.maxSessions;
    if (max <= 0 || this.entries.size < max) return;
    for (const [key, entry] of this.entries) {
      if (entry.open === undefined || !entry.open.isIdle) continue;
      this.options.logger.info({ session: key, maxSessions: max }, 'closing the least recently used idle upstream session: maxSessions reached');
      void this.release(key);
      return;
    }
    throw upstreamSessionsFull(this.options.upstreamName, max);
  }
}
