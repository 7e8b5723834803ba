// Which authorization server a user connects an upstream at (issue 41): the one its config names
// (`authorizationCode.authorizationServer`, read from its RFC 8414 metadata), else the first its 401 names (RFC 9728
// → RFC 8414, through src/identity/oauth-discovery.ts as the gateway's own OAuth client finds servers). Discovery is
// not trust: a discovered server must be https (loopback excepted) and, when `identity.allowedAuthorizationServers`
// is set, one it lists; otherwise nothing is sent to it (not even a metadata request) and the failure names it.
import * as oauth from 'oauth4webapi';
import { UpstreamCredentialError, type CredentialStep } from '../identity/credential-error.js';
import { DiscoveryCache, isLoopback, issuerIdentifier, resourceMetadata, serverMetadata, type DiscoveryRequestOptions } from '../identity/oauth-discovery.js';
import { credentialFailure } from '../identity/oauth-failure.js';
import type { ConsentUpstream } from './settings.js';

export interface FoundServer {
  as: oauth.AuthorizationServer;
  /** The upstream's RFC 9728 `scopes_supported`, when it was discovered and names some. */
  scopesSupported?: string[];
}

/**
 * Why a server found by discovery may not be used, or undefined when it may: https (plain http on loopback only),
 * and in `allowed` when that is set (compared as RFC 8414 issuer identifiers).
 */
export function discoveredServerRefusal(issuer: string, allowed: readonly string[] | undefined): string | undefined {
  if (!URL.canParse(issuer)) return 'it is not a URL';
  const url = new URL(issuer);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopback(url.hostname))) return 'it is not https (plain http is allowed on loopback only)';
  if (allowed !== undefined && !allowed.some((entry) => URL.canParse(entry) && issuerIdentifier(entry) === url.href)) {
    return 'identity.allowedAuthorizationServers does not list it';
  }
  return undefined;
}

export class AuthorizationServers {
  private readonly byUpstream: DiscoveryCache<FoundServer>;
  private readonly byIssuer: DiscoveryCache<{ as: oauth.AuthorizationServer }>;

  constructor(private readonly options: { allowed?: readonly string[] | undefined; now?: () => number }) {
    this.byUpstream = new DiscoveryCache<FoundServer>(options.now);
    this.byIssuer = new DiscoveryCache<{ as: oauth.AuthorizationServer }>(options.now);
  }

  /** The upstream's server: configured, or discovered and trusted. Rejects with UpstreamCredentialError. */
  async forUpstream(upstream: ConsentUpstream, signal: AbortSignal, challenge?: string): Promise<FoundServer> {
    const configured = upstream.code.authorizationServer;
    if (configured !== undefined) return { as: await this.ofIssuer(upstream, configured, signal) };
    const found = await this.byUpstream.lookup(this.upstreamKey(upstream), () => this.discover(upstream, signal, challenge));
    return { as: found.as, ...(found.scopesSupported !== undefined && { scopesSupported: found.scopesSupported }) };
  }

  /** The issuer already known for the upstream without asking anyone (configured, or found before on this replica). */
  knownIssuer(upstream: ConsentUpstream): string | undefined {
    return upstream.code.authorizationServer ?? this.byUpstream.peek(this.upstreamKey(upstream))?.as.issuer;
  }

  /**
   * The metadata of `issuer`, which a flow or a stored connection names: the upstream's configured server, or one
   * discovery would still trust (the allowlist may have changed since the user connected).
   */
  async ofIssuer(upstream: ConsentUpstream, issuer: string, signal: AbortSignal, step: CredentialStep = 'discovery'): Promise<oauth.AuthorizationServer> {
    const configured = upstream.code.authorizationServer;
    if (configured === undefined || issuerIdentifier(configured) !== issuerIdentifier(issuer)) {
      const refusal = discoveredServerRefusal(issuer, this.options.allowed);
      if (refusal !== undefined) throw untrusted(upstream, issuer, refusal, step);
    }
    const found = await this.byIssuer.lookup(issuerIdentifier(issuer), async () => {
      try {
        return { as: this.endpointsChecked(upstream, await serverMetadata(new URL(issuer), this.requestOptions(upstream, issuer, signal))) };
      } catch (err) {
        throw await credentialFailure(err, { upstream: upstream.name, step, timeoutMs: upstream.timeoutMs, signal, what: `authorization server metadata of ${issuer}` });
      }
    });
    return found.as;
  }

  /** The options of a request to `url` at the upstream's server: plain http only where the config or loopback allows. */
  requestOptions(upstream: ConsentUpstream, url: string | undefined, signal: AbortSignal): DiscoveryRequestOptions {
    return { signal, ...(insecureAllowed(upstream, url) && { [oauth.allowInsecureRequests]: true }) };
  }

  private upstreamKey(upstream: ConsentUpstream): string {
    return `${upstream.name}\0${upstream.url}\0${upstream.code.resource}`;
  }

  private async discover(upstream: ConsentUpstream, signal: AbortSignal, challenge: string | undefined): Promise<FoundServer> {
    let metadata: oauth.ResourceServer;
    try {
      metadata = await resourceMetadata({
        resource: new URL(upstream.code.resource), upstreamUrl: upstream.url, challenge, signal,
        requestOptions: (url) => this.requestOptions(upstream, url, signal),
        checked: (url) => checkedUrl(upstream, url),
      });
    } catch (err) {
      throw await credentialFailure(err, { upstream: upstream.name, step: 'discovery', timeoutMs: upstream.timeoutMs, signal, what: 'protected resource metadata (RFC 9728)' });
    }
    const first = (metadata.authorization_servers ?? []).find((server) => typeof server === 'string');
    if (first === undefined) {
      throw new UpstreamCredentialError({ upstream: upstream.name, step: 'discovery', reason: 'invalid_response', detail: 'its protected resource metadata names no authorization_servers' });
    }
    const as = await this.ofIssuer(upstream, first, signal);
    const scopes = (metadata.scopes_supported ?? []).filter((scope) => typeof scope === 'string' && scope !== '');
    return { as, ...(scopes.length > 0 && { scopesSupported: scopes }) };
  }

  /** Every endpoint the gateway will send the browser or a request to: https, or http the config or loopback allows. */
  private endpointsChecked(upstream: ConsentUpstream, as: oauth.AuthorizationServer): oauth.AuthorizationServer {
    for (const endpoint of [as.authorization_endpoint, as.token_endpoint, as.registration_endpoint, as.revocation_endpoint]) {
      if (endpoint !== undefined) checkedUrl(upstream, endpoint);
    }
    if (as.authorization_endpoint === undefined || as.token_endpoint === undefined) {
      throw new UpstreamCredentialError({ upstream: upstream.name, step: 'discovery', reason: 'invalid_response', detail: `authorization server ${as.issuer} has no authorization_endpoint or token_endpoint` });
    }
    return as;
  }
}

function untrusted(upstream: ConsentUpstream, issuer: string, why: string, step: CredentialStep): UpstreamCredentialError {
  return new UpstreamCredentialError({
    upstream: upstream.name, step, reason: 'untrusted_server',
    detail: `the upstream names authorization server ${JSON.stringify(issuer.slice(0, 200))}, which may not be used: ${why}; nothing was sent to it. ` +
      `Name it in upstreams.${upstream.name}.auth.authorizationCode.authorizationServer, or list it in identity.allowedAuthorizationServers`,
  });
}

/** Origins the config names for this upstream: plain http to them is the operator's choice. */
function insecureAllowed(upstream: ConsentUpstream, url: string | undefined): boolean {
  if (url === undefined || !URL.canParse(url)) return false;
  const parsed = new URL(url);
  if (parsed.protocol !== 'http:') return false;
  const named = [upstream.url, upstream.code.resource, upstream.code.authorizationServer].filter((u): u is string => u !== undefined).map((u) => new URL(u).origin);
  return isLoopback(parsed.hostname) || named.includes(parsed.origin);
}

function checkedUrl(upstream: ConsentUpstream, url: string): string {
  if (!URL.canParse(url)) {
    throw new UpstreamCredentialError({ upstream: upstream.name, step: 'discovery', reason: 'invalid_response', detail: `${JSON.stringify(url.slice(0, 200))} is not a URL` });
  }
  const parsed = new URL(url);
  if (parsed.protocol === 'https:' || insecureAllowed(upstream, url)) return url;
  throw new UpstreamCredentialError({ upstream: upstream.name, step: 'discovery', reason: 'invalid_response', detail: `refusing to use ${parsed.origin} over plain http (not named in the config, not loopback)` });
}
