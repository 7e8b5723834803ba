// The gateway as an OAuth client of an upstream's authorization server (issue 33), through oauth4webapi: the token
// endpoint from config or discovered as an MCP client finds it (the upstream's 401 `WWW-Authenticate: Bearer
// resource_metadata=…` or its RFC 9728 well-known document → the authorization server's RFC 8414 metadata, OpenID
// Connect discovery as a fallback → `token_endpoint`), the client credentials grant and RFC 8693 token exchange,
// client_secret_basic or client_secret_post, every step under one deadline. Errors name the upstream, the step and
// the cause (UpstreamCredentialError). Plain http is allowed only for URLs the config names and loopback hosts.
//
// What an upstream advertises is never trusted on its word (design invariant 13): the client's secret, and for token
// exchange the caller's own token, go only to a token endpoint the config names (`tokenUrl`), the one of an issuer it
// names (`issuer`), or one found by discovery whose issuer is trusted (`trustedIssuers`, `auth.oauth.issuer`). A
// discovered server that is not is refused before anything is sent to it, not even a metadata request.
import * as oauth from 'oauth4webapi';
import type { OAuthClientConfig } from '../config/identity.js';
import { UpstreamCredentialError, type CredentialStep } from './credential-error.js';
import { DiscoveryCache, isLoopback, issuerIdentifier, resourceMetadata, serverMetadata } from './oauth-discovery.js';
import { credentialFailure } from './oauth-failure.js';
import type { ObtainedToken } from './token-cache.js';

export { DiscoveryCache, resourceMetadataOf } from './oauth-discovery.js';

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

export interface OAuthClientOptions {
  /** The upstream's name, for errors. */
  upstream: string;
  /** Which of the upstream's `auth` modes this client is, for errors that name its settings. */
  mode?: 'clientCredentials' | 'tokenExchange';
  /** The upstream's MCP endpoint (probed for its 401 challenge when the token endpoint is not configured). */
  upstreamUrl: string;
  client: OAuthClientConfig;
  /** The deadline of one token request, discovery included. */
  timeoutMs: number;
  /** Shared by every upstream's client: one discovery per upstream and resource. */
  discovery: DiscoveryCache;
}

export class UpstreamOAuthClient {
  private readonly client: oauth.Client;
  private readonly auth: oauth.ClientAuth;
  private readonly configured: ReadonlySet<string>;

  constructor(private readonly options: OAuthClientOptions) {
    const { client } = options;
    this.client = { client_id: client.clientId };
    this.auth = client.tokenEndpointAuthMethod === 'client_secret_post' ? oauth.ClientSecretPost(client.clientSecret) : oauth.ClientSecretBasic(client.clientSecret);
    const named = [client.tokenUrl, client.issuer, ...(client.trustedIssuers ?? [])].filter((url): url is string => url !== undefined);
    this.configured = new Set([options.upstreamUrl, client.resource, ...named].map(originOf));
    this.trusted = new Set((client.trustedIssuers ?? []).map(issuerIdentifier));
  }

  /** Issuers a discovered authorization server may have (compared as RFC 8414 identifiers, after URL parsing). */
  private readonly trusted: ReadonlySet<string>;

  /** RFC 6749 §4.4: a token for the gateway itself. */
  async clientCredentials(): Promise<ObtainedToken> {
    const { resource, scope } = this.options.client;
    return this.grant('token', async (as, signal) => {
      const params: Record<string, string> = { resource, ...(scope !== undefined && { scope }) };
      const response = await oauth.clientCredentialsGrantRequest(as, this.client, this.auth, params, this.requestOptions(as.token_endpoint, signal));
      return oauth.processClientCredentialsResponse(as, this.client, response);
    });
  }

  /** RFC 8693: the caller's access token exchanged for one whose resource is the upstream. */
  async exchange(subjectToken: string, audience?: string): Promise<ObtainedToken> {
    const { resource, scope } = this.options.client;
    return this.grant('exchange', async (as, signal) => {
      const params: Record<string, string> = {
        subject_token: subjectToken,
        subject_token_type: ACCESS_TOKEN_TYPE,
        requested_token_type: ACCESS_TOKEN_TYPE,
        resource,
        ...(audience !== undefined && { audience }),
        ...(scope !== undefined && { scope }),
      };
      const response = await oauth.genericTokenEndpointRequest(as, this.client, this.auth, TOKEN_EXCHANGE_GRANT, params, this.requestOptions(as.token_endpoint, signal));
      return oauth.processGenericTokenEndpointResponse(as, this.client, response);
    });
  }

  /**
   * The token endpoint: configured, or discovered. `challenge` is a `WWW-Authenticate` the upstream already sent
   * (a 401 on a call), which saves the probe.
   */
  async tokenEndpoint(signal: AbortSignal, challenge?: string): Promise<oauth.AuthorizationServer> {
    const { tokenUrl, issuer, resource } = this.options.client;
    if (tokenUrl !== undefined) return { issuer: originOf(tokenUrl), token_endpoint: tokenUrl };
    if (issuer !== undefined) {
      const found = await this.options.discovery.lookup(`issuer\u0000${issuer}`, () => this.endpointOf(new URL(issuer), signal));
      return { issuer: found.issuer, token_endpoint: found.tokenEndpoint };
    }
    // Keyed by what is trusted too: two upstreams at one URL may trust different servers.
    const key = `${this.options.upstreamUrl}\u0000${resource}\u0000${[...this.trusted].sort().join(' ')}`;
    const found = await this.options.discovery.lookup(key, () => this.discover(signal, challenge));
    return { issuer: found.issuer, token_endpoint: found.tokenEndpoint };
  }

  private async grant(step: CredentialStep, request: (as: oauth.AuthorizationServer, signal: AbortSignal) => Promise<oauth.TokenEndpointResponse>): Promise<ObtainedToken> {
    const signal = AbortSignal.timeout(this.options.timeoutMs);
    const as = await this.tokenEndpoint(signal);
    try {
      const answer = await request(as, signal);
      return { token: answer.access_token, expiresInSeconds: answer.expires_in };
    } catch (err) {
      throw await this.failure(step, err, signal);
    }
  }

  private async discover(signal: AbortSignal, challenge?: string): Promise<{ tokenEndpoint: string; issuer: string }> {
    const resource = new URL(this.options.client.resource);
    let metadata: oauth.ResourceServer;
    try {
      metadata = await resourceMetadata({
        resource, upstreamUrl: this.options.upstreamUrl, challenge, signal,
        requestOptions: (url) => this.requestOptions(url, signal),
        checked: (url) => this.checked(url),
      });
    } catch (err) {
      throw await this.failure('discovery', err, signal, 'protected resource metadata (RFC 9728)');
    }
    const named = (metadata.authorization_servers ?? []).filter((server) => typeof server === 'string');
    if (named.length === 0) {
      throw new UpstreamCredentialError({ upstream: this.options.upstream, step: 'discovery', reason: 'invalid_response', detail: 'its protected resource metadata names no authorization_servers' });
    }
    const issuer = named.find((server) => URL.canParse(server) && this.trusted.has(issuerIdentifier(server)));
    if (issuer === undefined) throw this.untrusted(named);
    return this.endpointOf(new URL(issuer), signal);
  }

  /** The token endpoint an authorization server's own metadata gives. */
  private async endpointOf(issuer: URL, signal: AbortSignal): Promise<{ tokenEndpoint: string; issuer: string }> {
    const server = await this.authorizationServer(issuer, signal);
    if (server.token_endpoint === undefined) {
      throw new UpstreamCredentialError({ upstream: this.options.upstream, step: 'discovery', reason: 'invalid_response', detail: `authorization server ${issuer.href} has no token_endpoint` });
    }
    return { tokenEndpoint: this.checked(server.token_endpoint), issuer: server.issuer };
  }

  /** The upstream named only servers the config does not trust: the call fails, and nothing went to them. */
  private untrusted(named: readonly string[]): UpstreamCredentialError {
    const shown = named.slice(0, 3).map((server) => JSON.stringify(server.slice(0, 200))).join(', ') + (named.length > 3 ? `, and ${named.length - 3} more` : '');
    const setting = `upstreams.${this.options.upstream}.auth.${this.options.mode ?? '<mode>'}`;
    const trusted = this.trusted.size === 0 ? 'it trusts none' : `it trusts ${[...this.trusted].join(', ')}`;
    return new UpstreamCredentialError({
      upstream: this.options.upstream, step: 'discovery', reason: 'untrusted_server',
      detail: `the upstream names authorization server ${shown}, which the configuration does not trust (${trusted}); nothing was sent to it. ` +
        `Name the server in ${setting}.tokenUrl or .issuer, or list it in .trustedIssuers`,
    });
  }

  /** RFC 8414 first; OpenID Connect discovery when the server has no RFC 8414 document. */
  private async authorizationServer(issuer: URL, signal: AbortSignal): Promise<oauth.AuthorizationServer> {
    try {
      return await serverMetadata(issuer, this.requestOptions(issuer.href, signal));
    } catch (err) {
      throw await this.failure('discovery', err, signal, `authorization server metadata of ${issuer.href}`);
    }
  }

  private requestOptions(url: string | undefined, signal: AbortSignal): { signal: AbortSignal; [oauth.allowInsecureRequests]?: boolean } {
    return { signal, ...(this.insecureAllowed(url) && { [oauth.allowInsecureRequests]: true }) };
  }

  private insecureAllowed(url: string | undefined): boolean {
    if (url === undefined || !URL.canParse(url)) return false;
    const parsed = new URL(url);
    return parsed.protocol === 'http:' && (this.configured.has(parsed.origin) || isLoopback(parsed.hostname));
  }

  /** A discovered URL the gateway will fetch: https, or http where the config or loopback allows it. */
  private checked(url: string): string {
    const parsed = new URL(url);
    if (parsed.protocol === 'https:' || this.insecureAllowed(url)) return url;
    throw new UpstreamCredentialError({ upstream: this.options.upstream, step: 'discovery', reason: 'invalid_response', detail: `refusing to use ${parsed.origin} over plain http (not named in the config, not loopback)` });
  }

  private failure(step: CredentialStep, err: unknown, signal: AbortSignal, what?: string): Promise<UpstreamCredentialError> {
    return credentialFailure(err, { upstream: this.options.upstream, step, timeoutMs: this.options.timeoutMs, signal, ...(what !== undefined && { what }) });
  }
}

function originOf(url: string): string {
  return new URL(url).origin;
}
