// The client sessions' own connections to one upstream (every transport but shared stdio): one per session key,
// opened on the session's first call, kept within maxSessions by closing the least recently used idle one
// (connection-pool.ts). A principal's own upstream session (a key with a principal in it: the 2026-07-28 clients'
// session at an upstream that tells callers apart) is also closed once idle for idleTimeoutMs; a client session's
// own ends with its client session.
import { GatewayError, isClientFacing, upstreamSessionsFull, upstreamUnavailable } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { UpstreamConnection } from '../peer/connection.js';
import { ConnectionPool } from './connection-pool.js';

export interface SessionConnectionsOptions {
  upstreamName: string;
  /** 0: no bound. */
  maxSessions: number;
  /** A principal's own upstream session with no call for this long is closed; 0: never. */
  idleTimeoutMs: number;
  logger: Logger;
  /** Connections being closed (their upstream sessions ended): the upstream's close() waits for them. */
  closing: Set<Promise<void>>;
}

export class SessionConnections {
  private readonly pool: ConnectionPool<UpstreamConnection>;

  constructor(private readonly options: SessionConnectionsOptions) {
    const { upstreamName, maxSessions, idleTimeoutMs, logger, closing } = options;
    this.pool = new ConnectionPool({
      max: maxSessions,
      idleTimeoutMs,
      closing,
      full: () => upstreamSessionsFull(upstreamName, maxSessions),
      closingBy: (session, reason) => {
        if (reason === 'bound') logger.info({ session, maxSessions }, 'closing the least recently used idle upstream session: maxSessions reached');
        else logger.info({ session, idleTimeoutMs }, "closing an idle principal's upstream session");
      },
    });
  }

  get size(): number {
    return this.pool.size;
  }

  /**
   * The session's connection, opened now (`open`: its handshake done) if it has none. `perPrincipal`: the key is a
   * principal's own session, closed once idle.
   */
  async get(key: string, open: () => Promise<UpstreamConnection>, options: { perPrincipal?: boolean } = {}): Promise<UpstreamConnection> {
    try {
      return await this.pool.get(key, open, { sweep: options.perPrincipal === true });
    } catch (error) {
      // What already says what the client is told (a credential the gateway could not get, a full pool) is not wrapped again.
      if (error instanceof GatewayError) throw error;
      if (isClientFacing(error)) throw error.toGatewayError();
      throw upstreamUnavailable(this.options.upstreamName, (error as Error).message);
    }
  }

  /** The connection closed by itself: the session gets a new one on its next call. */
  closed(key: string, connection: UpstreamConnection): void {
    this.pool.closed(key, connection);
  }

  /** Ends the session's own connection (and with it the upstream session or child process). */
  release(key: string): Promise<void> {
    return this.pool.release(key);
  }

  /** Ends every one (the upstream is closing). */
  close(): Promise<void> {
    return this.pool.close();
  }
}
