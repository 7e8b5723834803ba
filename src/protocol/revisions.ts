// The protocol revisions the gateway serves clients in, and how an incoming message finds its revision: the one
// module that knows there is more than one. Each entry names the versions it serves, whether it has sessions
// (GET streams, DELETE), and how to tell its messages; the MCP endpoint (http/mcp-endpoint.ts) asks the entries
// in this order and hands the message to the front registered for the first that claims it. A new revision is a
// folder under src/protocol/, a front in src/http/ registered for its id, and an entry here
// (docs/architecture.md, "Where to add…").
import { LEGACY_VERSIONS, MODERN_VERSIONS } from './mcp.js';
import { isModernMessage } from './rev2026-07-28/envelope.js';

export type RevisionId = 'rev2026-07-28' | 'rev2025-11-25';

/** Request headers as node gives them. */
type Headers = Record<string, string | string[] | undefined>;

export interface ProtocolRevision {
  readonly id: RevisionId;
  /** The MCP-Protocol-Version values it serves, newest first. */
  readonly versions: readonly string[];
  /** Whether clients hold sessions in it (Mcp-Session-Id, a GET stream, DELETE). */
  readonly sessions: boolean;
  /**
   * Whether a POSTed message (or batch) is this revision's. Asked in registry order: an entry may rely on the
   * ones before it having declined (the session revisions take whatever no stateless revision claimed).
   */
  claims(body: unknown, headers: Headers, isKnownSession: (sessionId: string) => boolean): boolean;
}

export const REVISIONS: readonly ProtocolRevision[] = [
  // Stateless 2026-07-28: a body with its `_meta` envelope, a version header or a method only it has; a message
  // on a known session's id is that session's, whatever else it looks like.
  { id: 'rev2026-07-28', versions: MODERN_VERSIONS, sessions: false, claims: isModernMessage },
  // 2025-11-25 and the older session revisions: initialize and session traffic, everything the above declined.
  { id: 'rev2025-11-25', versions: LEGACY_VERSIONS, sessions: true, claims: () => true },
];

/** The revision that serves a POSTed message: the first entry that claims it. */
export function revisionOf(body: unknown, headers: Headers, isKnownSession: (sessionId: string) => boolean): ProtocolRevision | undefined {
  return REVISIONS.find((revision) => revision.claims(body, headers, isKnownSession));
}
