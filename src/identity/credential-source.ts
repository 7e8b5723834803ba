// What a request to an upstream authenticates with, asked per request by the transports and the stateless client.
// The one declaration: identity/ makes sources (credential-sources.ts), upstream/ consumes them; a file of its own
// so that transports need not import what makes them.
/**
 * Where the credentials of a request to the upstream come from; consulted per request. A source answers the same
 * object while its credential is unchanged, so a transport can keep what it built from it.
 */
export interface CredentialSource {
  headers(): Promise<Readonly<Record<string, string>>>;
  /**
   * The upstream answered 401 to a request that carried `sent`: drops that credential. True when a retry will carry
   * a new one (a 401 means the request did not run, so the transport sends it once more).
   */
  refreshAfterUnauthorized?(sent: Readonly<Record<string, string>>): boolean;
}
