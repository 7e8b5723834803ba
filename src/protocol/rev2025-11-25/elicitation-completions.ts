// The URL elicitations this replica answered a session's tool call with (-32042, issue 41), kept until the user
// connects the upstream they asked for: then `notifications/elicitation/complete { elicitationId }` goes to that
// session, wherever its client listens (its GET stream, on this replica or another). The connection may land on any
// replica: the consent service tells every one (UserConnections.onConnected), and the one that noted the id sends.
import type { UserConnections } from '../../consent/ports.js';
import { LINK_TTL_MS } from '../../consent/ports.js';
import type { Logger } from '../../log.js';
import type { Session } from './session.js';

/** Elicitations remembered at most (the oldest go first); each for as long as its link and the flow begun from it live. */
const MAX_NOTED = 10_000;
const NOTED_MS = 2 * LINK_TTL_MS;
/** Sessions told one elicitation at most (a link is reused for a while: every session of its user asked with it). */
const SESSIONS_PER_ELICITATION = 16;

export class ElicitationCompletions {
  private readonly noted = new Map<string, { sessionIds: Set<string>; until: number }>();
  private readonly stop: () => void;

  constructor(
    consent: Pick<UserConnections, 'onConnected'> | undefined,
    private readonly sessionOf: (sessionId: string) => Promise<Session | undefined>,
    private readonly logger: Logger,
  ) {
    this.stop = consent?.onConnected(({ elicitationId }) => void this.completed(elicitationId)) ?? (() => undefined);
  }

  /** Session `sessionId` was sent the URL elicitation `elicitationId`. */
  note(elicitationId: string, sessionId: string): void {
    const now = Date.now();
    for (const [id, entry] of this.noted) {
      if (entry.until > now && this.noted.size < MAX_NOTED) break;
      this.noted.delete(id);
    }
    const sessionIds = this.noted.get(elicitationId)?.sessionIds ?? new Set<string>();
    if (sessionIds.size < SESSIONS_PER_ELICITATION) sessionIds.add(sessionId);
    this.noted.delete(elicitationId);
    this.noted.set(elicitationId, { sessionIds, until: now + NOTED_MS });
  }

  close(): void {
    this.stop();
    this.noted.clear();
  }

  private async completed(elicitationId: string | undefined): Promise<void> {
    const entry = elicitationId === undefined ? undefined : this.noted.get(elicitationId);
    if (entry === undefined || elicitationId === undefined) return;
    this.noted.delete(elicitationId);
    for (const sessionId of entry.sessionIds) {
      const session = await this.sessionOf(sessionId).catch(() => undefined);
      if (session === undefined) continue;
      session.deliver({ jsonrpc: '2.0', method: 'notifications/elicitation/complete', params: { elicitationId } });
      this.logger.debug({ session: sessionId, elicitationId }, 'told the session its URL elicitation completed');
    }
  }
}
