// Client sessions (store.sessions): the state of a 2025-11-25 client's session that every replica needs, so that
// any replica serves its requests. Redis keeps each as a hash that expires (redis/sessions.ts); the embedded store
// in a map (memory/sessions.ts).

export interface ClientSessions {
  /**
   * Saves string fields (what `initialize` fixed, and what changes later), the session expiring `expireAfterMs`
   * after the last save. With `create` the record is made when missing; otherwise a missing (ended or expired)
   * session is not revived and this resolves false. A `null` value removes the field.
   */
  save(sessionId: string, fields: Record<string, string | null>, expireAfterMs: number, options?: { create?: boolean }): Promise<boolean>;
  get(sessionId: string): Promise<Record<string, string> | undefined>;
  /** Ends the session for every replica; resolves whether it existed. */
  delete(sessionId: string): Promise<boolean>;
}
