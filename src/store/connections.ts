// Per-user connections to upstreams that need each user's own authorization (issue 41, `auth.authorizationCode`),
// shared by every replica (store.connections): the sealed tokens per (principal, upstream), the links a user opens to
// connect, the single-use states of authorization flows in progress, the gateway's client registrations per
// authorization server, and the lock under which one replica refreshes a user's token. Nothing here is ever
// plaintext of a token or secret: whatever is secret is sealed by the caller (src/consent/vault.ts) before it is
// written. Links and flows expire by themselves (a TTL the caller gives); connections live until deleted.

/** A user's connection to one upstream: the sealed tokens and what may be shown of them. */
export interface StoredConnection {
  /** The qualified principal the tokens act for (`oauth:<issuer>#<sub>`). */
  principal: string;
  /** The upstream's configured name. */
  upstream: string;
  /** The authorization server that issued the tokens (its issuer identifier). */
  issuer: string;
  /** The tokens, sealed (access token, refresh token, token type), bound to principal, upstream and issuer. */
  sealed: string;
  /** The scopes granted (as the authorization server said, else as asked). */
  scopes: string[];
  /** When the access token expires (epoch ms); absent when the server did not say. */
  expiresAtMs?: number;
  /** When the access token was issued or last refreshed (epoch ms): half its lifetime is when refresh may start. */
  issuedAtMs: number;
  /** When the user connected (epoch ms). */
  connectedAtMs: number;
  /** 1 on the first write, one more on each: a write names the version it replaces (compare and set). */
  version: number;
}

/** A link a user opens to connect (`GET /connect/{id}`): single use, short-lived. */
export interface ConsentLink {
  /** Opaque and unguessable (the path segment). */
  id: string;
  /** Who must be signed in at the browser to use it. */
  principal: string;
  upstream: string;
  /** The id of the URL elicitation the link was sent in (`notifications/elicitation/complete` names it). */
  elicitationId: string;
  createdAtMs: number;
  expiresAtMs: number;
}

/** An authorization flow in progress, found again by its `state` at the callback: single use, short-lived. */
export interface ConsentFlow {
  /** The `state` parameter sent to the authorization server (opaque, unguessable). */
  state: string;
  /** What the flow is for: a user's consent to an upstream, or signing a browser in at the front door. */
  kind: 'consent' | 'login';
  /** SHA-256 (base64url) of the value of the HttpOnly cookie set on the browser that started the flow. */
  browserBinding: string;
  /** The PKCE code verifier, sealed. */
  sealedVerifier: string;
  /** The exact redirect_uri sent (the token request repeats it). */
  redirectUri: string;
  /** The issuer the code is expected from (RFC 9207 `iss`). */
  issuer: string;
  /** The OIDC nonce sent with a login, if any. */
  nonce?: string;
  /** consent: the principal and upstream, and the link's elicitation. login: where the browser goes afterwards. */
  principal?: string;
  upstream?: string;
  elicitationId?: string;
  linkId?: string;
  returnTo?: string;
  expiresAtMs: number;
}

/** The gateway's client at one authorization server (registered dynamically, RFC 7591), shared by every replica. */
export interface ClientRegistration {
  /** The authorization server's issuer identifier (with the redirect URI: a registration names its redirect URIs). */
  issuer: string;
  redirectUri: string;
  clientId: string;
  /** The client secret, sealed; absent for a public client. */
  sealedSecret?: string;
  /** How the client authenticates at the token endpoint, as registered. */
  tokenEndpointAuthMethod: string;
  registeredAtMs: number;
}

export interface Connections {
  /** The principal's connection to `upstream`, if any. */
  get(principal: string, upstream: string): Promise<StoredConnection | undefined>;
  /** Every connection of `principal` (a handful: one per upstream at most). */
  list(principal: string): Promise<StoredConnection[]>;
  /**
   * Writes `connection` if the stored one is still at `expectedVersion` (0: none stored); the stored record then has
   * version `expectedVersion + 1` whatever `connection.version` said. False when another write came first.
   */
  put(connection: StoredConnection, expectedVersion: number): Promise<boolean>;
  /** Deletes the principal's connection to `upstream`; the record that was there, if any. */
  delete(principal: string, upstream: string): Promise<StoredConnection | undefined>;
  /** Some principal connected to `upstream` (the gateway's own requests, e.g. its catalog, use their credential). */
  anyConnected(upstream: string): Promise<string | undefined>;

  /** Stores a link until its `expiresAtMs`. */
  putLink(link: ConsentLink): Promise<void>;
  /** The link, if it exists and has not expired (reading does not use it up). */
  getLink(id: string): Promise<ConsentLink | undefined>;
  /** Uses the link up: returns it once, then never again (undefined when absent, expired or already taken). */
  takeLink(id: string): Promise<ConsentLink | undefined>;

  /** Stores a flow until its `expiresAtMs`. */
  putFlow(flow: ConsentFlow): Promise<void>;
  /** Uses the flow up: returns it once, then never again (undefined when absent, expired or already taken). */
  takeFlow(state: string): Promise<ConsentFlow | undefined>;

  /** The gateway's registration at `issuer` for `redirectUri`, if one was stored. */
  registration(issuer: string, redirectUri: string): Promise<ClientRegistration | undefined>;
  /** Stores `registration` unless one exists for its issuer and redirect URI; answers the one that is stored after. */
  register(registration: ClientRegistration): Promise<ClientRegistration>;

  /**
   * Takes the lock `name` for `owner` for `ttlMs` (it is released after that however its owner fared); false when
   * it is held, by another owner or by `owner` itself (taking is not re-entrant, nor does it extend a held lock).
   * One refresh per token expiry across replicas is taken under this lock.
   */
  lock(name: string, owner: string, ttlMs: number): Promise<boolean>;
  /** Releases the lock if `owner` still holds it (not one that expired and another owner took since). */
  unlock(name: string, owner: string): Promise<void>;
}
