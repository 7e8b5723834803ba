// The record of the upstream sessions a replica has open, kept where the other replicas look (the store), so that
// the replica that sweeps this one ends them (HTTP DELETE) if this one dies without doing so.
import { StreamableHttpTransport } from '../transports/streamable-http.js';
import type { UpstreamTransport } from '../transports/transport.js';

/** An upstream session the gateway opened (a Streamable HTTP `Mcp-Session-Id`), as it is recorded. */
export interface OpenedUpstreamSession {
  upstream: string;
  sessionId: string;
  protocolVersion?: string;
}

/** Where the upstream sessions a replica opens are recorded while they are open. */
export interface UpstreamSessionLedger {
  opened(session: OpenedUpstreamSession): void;
  /** Resolves once the record is gone (or could not be removed: never rejects). */
  closed(session: OpenedUpstreamSession): Promise<void>;
}

/**
 * Records the upstream session a Streamable HTTP transport opens (`opened`, once its connection is open) until the
 * connection closes (`forget`: its transport's close() sends the DELETE). Each removal joins `closing`, which the
 * upstream waits for when it closes, so that the records are gone before the store is.
 */
export function recordSession(
  ledger: UpstreamSessionLedger | undefined,
  upstream: string,
  transport: UpstreamTransport,
  closing: Set<Promise<void>>,
): { opened(): void; forget(): void } {
  if (ledger === undefined || !(transport instanceof StreamableHttpTransport)) return { opened: () => undefined, forget: () => undefined };
  let recorded: OpenedUpstreamSession | undefined;
  return {
    opened: () => {
      const session = transport.session;
      if (session === undefined) return; // a stateless upstream: nothing to end
      recorded = { upstream, ...session };
      ledger.opened(recorded);
    },
    forget: () => {
      if (recorded === undefined) return;
      const forgotten = ledger.closed(recorded);
      recorded = undefined;
      closing.add(forgotten);
      void forgotten.finally(() => closing.delete(forgotten));
    },
  };
}
