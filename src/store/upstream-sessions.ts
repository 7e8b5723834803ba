// Upstream sessions replicas opened (store.upstreamSessions), kept so that another replica ends those of a replica
// that died without ending them. They share the leases' liveness: a replica's sessions die with it. Redis keeps them
// beside the `{running}` keys (redis/upstream-sessions.ts); the embedded store in its running index
// (memory/running.ts).

/**
 * An upstream session a replica opened (a Streamable HTTP `Mcp-Session-Id`), as the store keeps it so that another
 * replica can end it (HTTP DELETE) if this one dies without doing so. The upstream is named, not addressed: whoever
 * ends it reaches it with its own configuration (URL, headers). Never a credential.
 */
export interface UpstreamSessionRecord {
  /** The upstream's configured name. */
  upstream: string;
  sessionId: string;
  /** The revision negotiated with it (sent back as `MCP-Protocol-Version` on the DELETE). */
  protocolVersion?: string;
}

/** A dead replica's upstream session, as a sweep takes it. */
export type DeadUpstreamSession = UpstreamSessionRecord & { replica: string };

/** Records of upstream sessions taken per store call by a sweep (a sweep takes batch after batch). */
export const UPSTREAM_SESSIONS_PER_TAKE = 100;

export interface UpstreamSessions {
  /**
   * Records that replica `replica` opened an upstream session (and that it is alive for `leaseMs` more, as
   * leases.assign says: a replica records its upstream sessions before its first heartbeat). Recording the same
   * session again replaces the record.
   */
  record(replica: string, session: UpstreamSessionRecord, leaseMs: number): Promise<void>;
  /** Replica `replica` ended the upstream session (or the upstream did): nobody needs to end it any more. */
  forget(replica: string, session: Pick<UpstreamSessionRecord, 'upstream' | 'sessionId'>): Promise<void>;
  /**
   * Takes up to `limit` (at most UPSTREAM_SESSIONS_PER_TAKE) recorded upstream sessions of replicas whose
   * liveness ran out, each handed to exactly one caller across all replicas and forgotten by the store: the caller
   * ends them. A replica that leaves the liveness index (take-orphans drops a dead replica once its tasks are
   * taken) counts as dead.
   */
  takeDead(limit: number): Promise<DeadUpstreamSession[]>;
}
