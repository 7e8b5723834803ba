import type { SessionsConfig, SseConfig } from '../config/types.js';
import type { JsonObject } from '../jsonrpc.js';
import { ClientSession } from './session.js';

/** Live legacy-era sessions; a session idle past the configured time is ended and its id then gets 404. */
export class SessionRegistry {
  private readonly sessions = new Map<string, ClientSession>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly config: SessionsConfig,
    private readonly sse: SseConfig,
    private readonly onEnd: (session: ClientSession) => void,
  ) {
    this.sweeper = setInterval(() => this.sweep(), Math.max(1000, Math.min(60_000, config.idleTimeoutMs / 4)));
    this.sweeper.unref();
  }

  create(protocolVersion: string, capabilities: JsonObject, clientInfo: JsonObject | undefined): ClientSession {
    const session = new ClientSession(protocolVersion, capabilities, clientInfo, this.sse);
    this.sessions.set(session.sessionId, session);
    return session;
  }

  get(sessionId: string): ClientSession | undefined {
    const session = this.sessions.get(sessionId);
    session?.touch();
    return session;
  }

  /** Looks a session up without counting it as activity (messages from upstreams). */
  peek(sessionId: string): ClientSession | undefined {
    return this.sessions.get(sessionId);
  }

  all(): IterableIterator<ClientSession> {
    return this.sessions.values();
  }

  get size(): number {
    return this.sessions.size;
  }

  end(sessionId: string): boolean {
    const session = this.sessions.get(sessionId);
    if (session === undefined) return false;
    this.sessions.delete(sessionId);
    session.close();
    this.onEnd(session);
    return true;
  }

  endAll(): void {
    clearInterval(this.sweeper);
    for (const id of [...this.sessions.keys()]) this.end(id);
  }

  private sweep(): void {
    const cutoff = Date.now() - this.config.idleTimeoutMs;
    for (const session of [...this.sessions.values()]) {
      // A session with calls or tasks still running is not idle, whatever its last request.
      if (session.lastSeen < cutoff && session.inflight.size === 0 && session.activeTasks === 0) this.end(session.sessionId);
    }
  }
}
