// The front door's issuer as the browser login needs it: its RFC 8414 metadata (OpenID Connect discovery as the
// fallback), checked to be the issuer's own and to name the endpoints a sign-in uses. The issuer is the one
// `auth.oauth.issuer` names, so plain http is allowed for it as configured. Found once an hour, or again after a
// failure. Its keys are the Authenticator's (`issuerKeys`): one key set per issuer.
import * as oauth from 'oauth4webapi';

const METADATA_TTL_MS = 3_600_000;
const DISCOVERY_TIMEOUT_MS = 10_000;

export class IssuerMetadata {
  private found: { issuer: string; as: Promise<oauth.AuthorizationServer>; until: number } | undefined;

  constructor(private readonly now: () => number = Date.now) {}

  /** The issuer's metadata (it must name an authorization endpoint and a token endpoint). */
  metadata(issuer: string): Promise<oauth.AuthorizationServer> {
    const found = this.found;
    if (found !== undefined && found.issuer === issuer && this.now() < found.until) return found.as;
    const as = discover(issuer);
    const entry = { issuer, as, until: this.now() + METADATA_TTL_MS };
    this.found = entry;
    as.catch(() => {
      if (this.found === entry) this.found = undefined;
    });
    return as;
  }
}

/** Whether oauth4webapi may speak plain http to `url` (the configured issuer, as written). */
export function insecureAllowed(url: string): boolean {
  return new URL(url).protocol === 'http:';
}

async function discover(issuer: string): Promise<oauth.AuthorizationServer> {
  const url = new URL(issuer);
  let lastError: unknown;
  for (const algorithm of ['oauth2', 'oidc'] as const) {
    try {
      const response = await oauth.discoveryRequest(url, { algorithm, signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS), [oauth.allowInsecureRequests]: insecureAllowed(issuer) });
      const as = await oauth.processDiscoveryResponse(url, response);
      if (as.authorization_endpoint === undefined || as.token_endpoint === undefined) throw new Error(`the issuer ${issuer} names no authorization_endpoint or token_endpoint`);
      return as;
    } catch (error) {
      lastError = error;
    }
  }
  throw new Error(`cannot read the metadata of the issuer ${issuer}: ${(lastError as Error).message}`);
}
