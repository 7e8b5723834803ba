// Where an unsolicited message of an upstream connection came from: which client session (and call) it is for,
// or none. The gateway side (gateway/upstream-messages.ts) delivers it by this.
import type { CallContext, UpstreamConnection } from './connection.js';

/**
 * Where an unsolicited upstream message came from. `session`: a connection owned by one client session.
 * `shared`: a connection multiplexed over sessions; `sessionId` is set only when the calls pending on it all
 * belong to one session, and `ambiguous` when they belong to several. `control`: the gateway's own connection
 * (catalog and health), whose messages concern no client.
 */
export interface MessageOrigin {
  kind: 'session' | 'shared' | 'control';
  sessionId: string | undefined;
  call: CallContext | undefined;
  ambiguous: boolean;
  /** The transport says the message belongs to no call (it came on no request's stream); no call was guessed. */
  standalone: boolean;
}

/** What the gateway itself hears (a listen stream, the control connection of an unshared upstream). */
export const CONTROL_ORIGIN: MessageOrigin = Object.freeze({ kind: 'control', sessionId: undefined, call: undefined, ambiguous: false, standalone: true });

/** Which connection a message came on: a session's own, the control connection, and whether that one is shared. */
export interface ConnectionRole {
  kind: 'control' | 'session';
  ownerSessionId: string | undefined;
  /** The control connection carries every session (stdio with `isolation: shared`). */
  shared: boolean;
  current(): UpstreamConnection | undefined;
}

/**
 * The origin of a message that came on a connection in `role`, related to `call` when the transport or a progress
 * token says so. Without a call the transport names, a message is guessed to belong to the only call running,
 * since stdio and HTTP+SSE cannot say, and servers ask mid-call without relating it. Except roots/list on a
 * transport that relates messages: roots are the session's business, and servers ask for them unprompted after
 * connecting.
 */
export function originOf(role: ConnectionRole, call: CallContext | undefined, method: string): MessageOrigin {
  const standalone = call === undefined && method === 'roots/list' && role.current()?.relatesMessages === true;
  if (role.kind === 'session') {
    const pending = call ? [call] : standalone ? [] : (role.current()?.pendingContexts() ?? []);
    return { kind: 'session', sessionId: role.ownerSessionId, call: pending.length === 1 ? pending[0] : undefined, ambiguous: false, standalone };
  }
  if (!role.shared) return CONTROL_ORIGIN;
  if (call) return { kind: 'shared', sessionId: call.sessionId, call, ambiguous: false, standalone: false };
  const pending = role.current()?.pendingContexts() ?? [];
  const sessions = new Set(pending.map((c) => c.sessionId));
  const [only] = sessions;
  return {
    kind: 'shared',
    sessionId: sessions.size === 1 ? only : undefined,
    call: pending.length === 1 ? pending[0] : undefined,
    ambiguous: sessions.size > 1,
    standalone: false,
  };
}
