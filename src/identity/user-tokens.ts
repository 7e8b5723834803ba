// The port through which an `authorizationCode` upstream's requests get the caller's own token (issue 41). The
// tokens live in the store, sealed, and are refreshed under a lock shared by every replica: src/consent/ does that
// and implements this interface; identity/ (below the store) only declares it, so that the credential sources can
// ask for a user's token without knowing where it is kept.

/** Why a caller cannot be served at an upstream that needs their own authorization. */
export type ConsentReason =
  /** The caller never connected (or disconnected). */
  | 'not_connected'
  /** The authorization server refused the stored grant (`invalid_grant`): the connection was deleted. */
  | 'grant_refused'
  /** The caller is not someone a browser can sign in as (an API-key principal, or no authentication). */
  | 'no_user';

/**
 * The caller has no usable connection to the upstream: the call is answered with a consent request (a URL elicitation
 * or a link), made where the call is answered (the revision or the task core), never here.
 */
export class ConsentRequiredError extends Error {
  constructor(
    readonly upstream: string,
    readonly principal: string | undefined,
    readonly reason: ConsentReason,
  ) {
    super(
      reason === 'no_user'
        ? `upstream '${upstream}' acts as each user at their own account: sign in with OAuth (an API key has no user to connect)`
        : `upstream '${upstream}' needs you to connect your account first`,
    );
    this.name = 'ConsentRequiredError';
  }
}

export interface UserTokens {
  /**
   * The access token `principal` connected for `upstream`, refreshed first when it is past half its lifetime (one
   * refresh per expiry across replicas). Rejects with ConsentRequiredError when there is no usable connection, and
   * with UpstreamCredentialError when the authorization server cannot be reached.
   */
  accessToken(principal: string, upstream: string): Promise<string>;
  /**
   * The upstream refused `token` (401): the next accessToken() refreshes rather than serving it again. True when a
   * retry may carry another token.
   */
  refused(principal: string, upstream: string, token: string): boolean;
  /** Some principal connected to `upstream`, whose token the gateway's own requests (its catalog) may use. */
  anyConnected(upstream: string): Promise<string | undefined>;
}
