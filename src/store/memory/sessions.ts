// Client sessions of the embedded store: the same contract as redis/sessions.ts (save-session.lua) in one process.
import type { ClientSessions } from '../sessions.js';

/** A session's shared state, and when it expires (epoch ms). */
interface StoredSession {
  fields: Record<string, string>;
  expiresAt: number;
}

export class MemorySessions implements ClientSessions {
  private readonly sessions = new Map<string, StoredSession>();

  constructor(private readonly now: () => number) {}

  async save(sessionId: string, fields: Record<string, string | null>, expireAfterMs: number, options: { create?: boolean } = {}): Promise<boolean> {
    let session = this.live(sessionId);
    if (session === undefined) {
      if (options.create !== true) return false;
      session = { fields: {}, expiresAt: 0 };
      this.sessions.set(sessionId, session);
    }
    for (const [field, value] of Object.entries(fields)) {
      if (value === null) delete session.fields[field];
      else session.fields[field] = value;
    }
    session.expiresAt = this.now() + expireAfterMs;
    return true;
  }

  async get(sessionId: string): Promise<Record<string, string> | undefined> {
    const session = this.live(sessionId);
    return session === undefined ? undefined : { ...session.fields };
  }

  async delete(sessionId: string): Promise<boolean> {
    return this.sessions.delete(sessionId);
  }

  /** Drops the sessions that expired. */
  sweep(): void {
    for (const sessionId of [...this.sessions.keys()]) this.live(sessionId);
  }

  private live(sessionId: string): StoredSession | undefined {
    const session = this.sessions.get(sessionId);
    if (session !== undefined && session.expiresAt <= this.now()) {
      this.sessions.delete(sessionId);
      return undefined;
    }
    return session;
  }
}
