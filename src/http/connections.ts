// Client connections: at most `listen.maxConnections` in all and `listen.maxConnectionsPerAddress` from one
// address. Idle keep-alive connections are what a flood of cheap clients holds, so near the cap they are closed
// to make room rather than refusing whoever comes next: first those that never presented valid credentials,
// then the ones idle longest. Only when nothing can be reclaimed is a newcomer closed.
import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import { RateLimitedWarning } from './warnings.js';

/** Reclaiming starts once this share of `maxConnections` is open, so a burst of arrivals still finds room. */
const RECLAIM_SHARE = 0.9;

export interface ConnectionLimits {
  /** 0 = unlimited. */
  maxConnections: number;
  /** 0 = unlimited. */
  maxConnectionsPerAddress: number;
}

interface Connection {
  socket: Socket;
  address: string;
  /** Requests in progress (headers received, response not finished). */
  active: number;
  /** Order of the last activity (arrival, request start, response end): the lowest has been idle longest. */
  lastActive: number;
  /** A request on it presented valid credentials (with `auth`); without `auth` every connection counts as such. */
  proven: boolean;
}

export class ConnectionGuard {
  private readonly open = new Map<Socket, Connection>();
  private readonly perAddress = new Map<string, number>();
  private tick = 0;
  private readonly reclaimAbove: number;
  private readonly warnings = {
    reclaimed: new RateLimitedWarning(),
    refused: new RateLimitedWarning(),
    refusedAddress: new RateLimitedWarning(),
  };

  constructor(
    private readonly limits: ConnectionLimits,
    /** With `auth`: connections that never presented valid credentials are reclaimed first, even mid-request. */
    private readonly authRequired: boolean,
    private readonly logger: Logger,
    /** Where refused connections are announced (rate.limited; no principal: nothing was read yet). */
    private readonly events: GatewayEvents,
  ) {
    this.reclaimAbove = Math.floor(limits.maxConnections * RECLAIM_SHARE);
  }

  attach(server: Server): void {
    server.on('connection', (socket: Socket) => this.arrived(socket));
    server.on('request', (request: { socket: Socket }, response: ServerResponse) => this.requestStarted(request.socket, response));
  }

  /** A request on `socket` presented valid credentials: the connection is no longer among the first to go. */
  proven(socket: Socket): void {
    const connection = this.open.get(socket);
    if (connection !== undefined) connection.proven = true;
  }

  /** Connections open now, in all. */
  get size(): number {
    return this.open.size;
  }

  private arrived(socket: Socket): void {
    const address = addressOf(socket);
    const fromAddress = this.perAddress.get(address) ?? 0;
    const { maxConnections, maxConnectionsPerAddress } = this.limits;
    if (maxConnectionsPerAddress > 0 && fromAddress >= maxConnectionsPerAddress) {
      socket.destroy();
      this.warnings.refusedAddress.warn(this.logger, { maxConnectionsPerAddress, address }, 'connections refused: listen.maxConnectionsPerAddress are open from one address');
      this.events.emit('rate.limited', { limit: 'maxConnectionsPerAddress' });
      return;
    }
    const connection: Connection = { socket, address, active: 0, lastActive: this.tick++, proven: !this.authRequired };
    this.open.set(socket, connection);
    this.perAddress.set(address, fromAddress + 1);
    socket.once('close', () => this.forget(connection));
    if (maxConnections <= 0) return;
    while (this.open.size > this.reclaimAbove) {
      const idle = this.mostIdle(connection);
      if (idle === undefined) break;
      this.close(idle);
      this.warnings.reclaimed.warn(this.logger, { maxConnections }, 'idle connections closed to make room: near listen.maxConnections');
    }
    if (this.open.size > maxConnections) {
      this.close(connection);
      this.warnings.refused.warn(this.logger, { maxConnections }, 'connections refused: listen.maxConnections are open and none is idle');
      this.events.emit('rate.limited', { limit: 'maxConnections' });
    }
  }

  private requestStarted(socket: Socket, response: ServerResponse): void {
    const connection = this.open.get(socket);
    if (connection === undefined) return;
    connection.active++;
    connection.lastActive = this.tick++;
    response.once('close', () => {
      connection.active--;
      connection.lastActive = this.tick++;
    });
  }

  /**
   * The connection to close first, other than `spare`: one that never proved itself (idle before busy), then a
   * proven idle one; idle longest first. Proven connections with a request in progress are never closed.
   */
  private mostIdle(spare: Connection): Connection | undefined {
    let best: Connection | undefined;
    let bestRank = Number.POSITIVE_INFINITY;
    for (const connection of this.open.values()) {
      if (connection === spare) continue;
      const rank = !connection.proven ? (connection.active === 0 ? 0 : 1) : connection.active === 0 ? 2 : undefined;
      if (rank === undefined) continue;
      if (rank < bestRank || (rank === bestRank && best !== undefined && connection.lastActive < best.lastActive)) {
        best = connection;
        bestRank = rank;
      }
    }
    return best;
  }

  private close(connection: Connection): void {
    this.forget(connection);
    connection.socket.destroy();
  }

  private forget(connection: Connection): void {
    if (!this.open.delete(connection.socket)) return;
    const left = (this.perAddress.get(connection.address) ?? 1) - 1;
    if (left > 0) this.perAddress.set(connection.address, left);
    else this.perAddress.delete(connection.address);
  }
}

/** The peer's address, IPv4-mapped IPv6 written as IPv4 (one client, one address, whichever way it connected). */
function addressOf(socket: Socket): string {
  const address = socket.remoteAddress ?? 'unknown';
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice('::ffff:'.length) : address;
}
