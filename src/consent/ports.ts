// What the rest of the gateway asks of per-user consent (issue 41): the task core and the revisions (a consent request
// for a caller without a connection, the wait for it), the HTTP routes (a link opened, the flow begun and completed,
// a user's connections listed and removed). One implementation: user-connections.ts.
import type { StoredConnection } from '../store/connections.js';
import type { UserTokens } from '../identity/user-tokens.js';

/** What a caller without a connection is sent: a URL-mode elicitation, or the link in a tool error's text. */
export interface ConsentRequest {
  upstream: string;
  /** The elicitation's id: `notifications/elicitation/complete` names it once the user connected. */
  elicitationId: string;
  /** Absolute: `<public origin>/connect/<id>`, single use, valid for LINK_TTL_MS. */
  url: string;
  /** For the user: what to open and why, naming the upstream (and the authorization server's host when known). */
  message: string;
}

/** One entry of `GET /connections`. */
export interface ConnectionStatus {
  upstream: string;
  connected: boolean;
  scopes: string[];
  /** When the access token expires (ISO 8601), when connected and the server said. */
  expiresAt?: string;
  /** A fresh link to connect, when not connected. */
  connectUrl?: string;
}

/** What the consent page shows before the browser is sent on (the contract: upstream, server host with port, scopes). */
export interface ConsentPage {
  upstream: string;
  /** The authorization server's issuer, and its host with the port (`URL.host`). */
  issuer: string;
  serverHost: string;
  scopes: string[];
  /** Where the browser goes next: the authorization request (PKCE S256, a fresh single-use state). */
  authorizeUrl: string;
  /** The value of the HttpOnly SameSite=Lax cookie the browser must bring back to the callback. */
  browserCookie: string;
}

/** What the callback receives (query parameters and the cookie the consent page set). */
export interface CallbackParams {
  state: string | undefined;
  code: string | undefined;
  /** RFC 6749 error redirect (`access_denied` when the user said no). */
  error: string | undefined;
  /** RFC 9207 `iss`, when the server sends it. */
  iss: string | undefined;
  cookie: string | undefined;
}

/** Why a link, a consent or a callback is refused: each maps to a 4xx page; nothing is sent anywhere. */
export type ConsentRefusal = 'link_unknown' | 'wrong_user' | 'state_unknown' | 'state_mismatch' | 'issuer_mismatch' | 'denied' | 'untrusted_server' | 'exchange_failed';

export class ConsentRefused extends Error {
  constructor(
    readonly reason: ConsentRefusal,
    message: string,
  ) {
    super(message);
    this.name = 'ConsentRefused';
  }
}

/** Links live this long (the contract: 10 minutes); a flow begun from one lives as long again. */
export const LINK_TTL_MS = 10 * 60_000;

export interface UserConnections extends UserTokens {
  /** Whether `upstream` is one whose callers connect their own account (`auth.authorizationCode`). */
  requires(upstream: string): boolean;
  /** The upstreams whose callers connect their own account. */
  upstreams(): string[];
  /** Whether `principal` has a connection to `upstream` now (a store read). */
  isConnected(principal: string, upstream: string): Promise<boolean>;
  /** A new link for `principal` to connect `upstream` (stored, single use, on any replica). */
  request(principal: string, upstream: string, via: 'call' | 'task' | 'connections'): Promise<ConsentRequest>;
  /**
   * Resolves true once `principal` is connected to `upstream` (at once when already), whichever replica took the
   * callback; false when `signal` aborts first.
   */
  whenConnected(principal: string, upstream: string, signal: AbortSignal): Promise<boolean>;
  /** Subscribes to connections made (any replica): the principal, upstream and the elicitation id that asked, if any. */
  onConnected(listener: (connected: { principal: string; upstream: string; elicitationId?: string }) => void): () => void;

  /** A link as the browser opens it (not used up by reading). */
  link(id: string): Promise<{ principal: string; upstream: string } | undefined>;
  /**
   * The browser, signed in as `browserPrincipal`, opened link `id`: checks it is the link's principal (else
   * ConsentRefused `wrong_user`, and the link stays unused), uses the link up, and starts the flow.
   */
  begin(id: string, browserPrincipal: string): Promise<ConsentPage>;
  /** The authorization server sent the browser back: checks everything, stores the tokens, wakes the waiters. */
  complete(params: CallbackParams): Promise<{ principal: string; upstream: string }>;

  /** `principal`'s connections, one entry per upstream in `upstreams` (those they may use). */
  list(principal: string, upstreams: readonly string[]): Promise<ConnectionStatus[]>;
  /** Revokes the refresh token at the server when it can (RFC 7009), deletes the record; false when there was none. */
  disconnect(principal: string, upstream: string): Promise<boolean>;
}

/** What of a stored connection may be shown (never the sealed tokens). */
export function connectionStatus(connection: StoredConnection): ConnectionStatus {
  return {
    upstream: connection.upstream,
    connected: true,
    scopes: [...connection.scopes],
    ...(connection.expiresAtMs !== undefined && { expiresAt: new Date(connection.expiresAtMs).toISOString() }),
  };
}
