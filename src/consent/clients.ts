// The gateway's client at an upstream's authorization server (issue 41): the configured `clientId` (with its secret,
// a confidential client); else a Client ID Metadata Document where the server advertises
// `client_id_metadata_document_supported` and the public origin is https (the client id is the document's URL);
// else RFC 7591 dynamic registration at its `registration_endpoint`, once per (issuer, redirect URI) across every
// replica: one replica registers under a store lock, the store keeps the first registration (its secret sealed), the
// others wait for it and use it.
import * as oauth from 'oauth4webapi';
import type { Logger } from '../log.js';
import { UpstreamCredentialError } from '../identity/credential-error.js';
import { credentialFailure } from '../identity/oauth-failure.js';
import type { ClientRegistration, Connections } from '../store/connections.js';
import type { AuthorizationServers } from './authorization-servers.js';
import { clientMetadataUrl, consentRedirectUri, type ConsentUpstream } from './settings.js';
import { underStoreLock } from './store-lock.js';
import type { ConsentVault } from './vault.js';

const CLIENT_NAME = 'taskgate';

/** The client as oauth4webapi takes it, and how it authenticates at the token endpoint. */
export interface ResolvedClient {
  client: oauth.Client;
  auth: oauth.ClientAuth;
}

/** The Client ID Metadata Document the gateway serves at `<public origin>/oauth/client-metadata.json`. */
export function clientMetadataDocument(origin: string): Record<string, string | string[]> {
  return {
    client_id: clientMetadataUrl(origin),
    client_name: CLIENT_NAME,
    client_uri: origin,
    redirect_uris: [consentRedirectUri(origin)],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
}

/** Whether the gateway uses its Client ID Metadata Document at `as` (the server says it may; the origin is https). */
export function usesClientMetadataDocument(as: oauth.AuthorizationServer, origin: string): boolean {
  return as['client_id_metadata_document_supported'] === true && new URL(origin).protocol === 'https:';
}

/** What every part of the consent service is built on: the store's connections, the vault, the servers, a clock. */
export interface ConsentPartsDeps {
  connections: Connections;
  vault: ConsentVault;
  servers: AuthorizationServers;
  logger: Logger;
  now: () => number;
}

export interface ConsentClientsDeps extends ConsentPartsDeps {
  origin: string;
  replicaId: string;
}

export class ConsentClients {
  /** Registrations this replica is making, so that concurrent flows on it ask the store (and the lock) once. */
  private readonly registering = new Map<string, Promise<ClientRegistration>>();

  constructor(private readonly deps: ConsentClientsDeps) {}

  async resolve(upstream: ConsentUpstream, as: oauth.AuthorizationServer, signal: AbortSignal): Promise<ResolvedClient> {
    const { clientId, clientSecret } = upstream.code;
    if (clientId !== undefined) {
      return { client: { client_id: clientId }, auth: clientSecret === undefined ? oauth.None() : secretAuth(as.token_endpoint_auth_methods_supported, clientSecret) };
    }
    if (usesClientMetadataDocument(as, this.deps.origin)) return { client: { client_id: clientMetadataUrl(this.deps.origin) }, auth: oauth.None() };
    if (as.registration_endpoint === undefined) {
      throw new UpstreamCredentialError({
        upstream: upstream.name, step: 'registration', reason: 'invalid_response',
        detail: `authorization server ${as.issuer} offers no dynamic client registration (no registration_endpoint): set upstreams.${upstream.name}.auth.authorizationCode.clientId`,
      });
    }
    const registration = await this.registration(upstream, as, signal);
    const redirectUri = consentRedirectUri(this.deps.origin);
    const secret = registration.sealedSecret === undefined ? undefined : this.deps.vault.openClientSecret(registration.sealedSecret, registration.issuer, redirectUri);
    return {
      client: { client_id: registration.clientId },
      auth: secret === undefined || registration.tokenEndpointAuthMethod === 'none' ? oauth.None() : secretAuth([registration.tokenEndpointAuthMethod], secret),
    };
  }

  private async registration(upstream: ConsentUpstream, as: oauth.AuthorizationServer, signal: AbortSignal): Promise<ClientRegistration> {
    const redirectUri = consentRedirectUri(this.deps.origin);
    const stored = await this.deps.connections.registration(as.issuer, redirectUri);
    if (stored !== undefined) return stored;
    const key = `${as.issuer}\0${redirectUri}`;
    let running = this.registering.get(key);
    if (running === undefined) {
      running = underStoreLock({
        connections: this.deps.connections,
        name: `register\0${key}`,
        replicaId: this.deps.replicaId,
        ttlMs: upstream.timeoutMs * 2,
        signal,
        work: async () => (await this.deps.connections.registration(as.issuer, redirectUri)) ?? this.register(upstream, as, redirectUri, signal),
        settled: () => this.deps.connections.registration(as.issuer, redirectUri),
        timedOut: () => new UpstreamCredentialError({ upstream: upstream.name, step: 'registration', reason: 'timeout', detail: `no registration at ${as.issuer} within ${upstream.timeoutMs} ms` }),
      }).finally(() => this.registering.delete(key));
      this.registering.set(key, running);
    }
    return running;
  }

  /** RFC 7591 at the server's registration endpoint; the store keeps whichever registration came first. */
  private async register(upstream: ConsentUpstream, as: oauth.AuthorizationServer, redirectUri: string, signal: AbortSignal): Promise<ClientRegistration> {
    const method = registeredAuthMethod(as.token_endpoint_auth_methods_supported);
    let answer: oauth.OmitSymbolProperties<oauth.Client>;
    try {
      const response = await oauth.dynamicClientRegistrationRequest(
        as,
        { client_name: CLIENT_NAME, redirect_uris: [redirectUri], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: method },
        this.deps.servers.requestOptions(upstream, as.registration_endpoint, signal),
      );
      answer = await oauth.processDynamicClientRegistrationResponse(response);
    } catch (err) {
      throw await credentialFailure(err, { upstream: upstream.name, step: 'registration', timeoutMs: upstream.timeoutMs, signal, what: `dynamic client registration at ${as.issuer}` });
    }
    const secret = typeof answer.client_secret === 'string' ? answer.client_secret : undefined;
    const granted = typeof answer.token_endpoint_auth_method === 'string' ? answer.token_endpoint_auth_method : secret === undefined ? 'none' : method;
    const kept = await this.deps.connections.register({
      issuer: as.issuer,
      redirectUri,
      clientId: answer.client_id,
      ...(secret !== undefined && { sealedSecret: this.deps.vault.sealClientSecret(secret, as.issuer, redirectUri) }),
      tokenEndpointAuthMethod: granted,
      registeredAtMs: this.deps.now(),
    });
    this.deps.logger.info({ upstream: upstream.name, issuer: as.issuer, clientId: kept.clientId, tokenEndpointAuthMethod: kept.tokenEndpointAuthMethod }, 'registered the gateway as a client of the authorization server (RFC 7591)');
    return kept;
  }
}

/** A confidential client's authentication, as the server supports it (RFC 8414's default: client_secret_basic). */
function secretAuth(supported: readonly string[] | undefined, secret: string): oauth.ClientAuth {
  if (supported !== undefined && !supported.includes('client_secret_basic') && supported.includes('client_secret_post')) return oauth.ClientSecretPost(secret);
  return oauth.ClientSecretBasic(secret);
}

/** What to register as: a confidential client where the server supports one, else a public one (PKCE protects it). */
function registeredAuthMethod(supported: readonly string[] | undefined): string {
  if (supported === undefined || supported.includes('client_secret_basic')) return 'client_secret_basic';
  if (supported.includes('client_secret_post')) return 'client_secret_post';
  return 'none';
}
