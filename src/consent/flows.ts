// The browser's part of per-user consent (issue 41): a link opened by the user it was made for starts an
// authorization code flow (PKCE S256, a fresh single-use `state`, a cookie bound to the browser that started it), and
// the callback completes it: the state taken once, the cookie matched, RFC 9207 `iss` checked, the code exchanged with
// the verifier, the tokens sealed and stored, and whoever waits for the connection told. A link opened by anyone else
// is refused before anything is used up or sent to the authorization server.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import type { ConnectionFacts, GatewayEvents } from '../events.js';
import { UpstreamCredentialError } from '../identity/credential-error.js';
import { credentialFailure } from '../identity/oauth-failure.js';
import type { ConsentFlow, StoredConnection } from '../store/connections.js';
import type { ConsentClients, ConsentPartsDeps } from './clients.js';
import { ConsentRefused, LINK_TTL_MS, type CallbackParams, type ConsentPage } from './ports.js';
import { consentRedirectUri, type ConsentUpstream } from './settings.js';

export interface AuthorizationRequest {
  authorizationEndpoint: string;
  clientId: string;
  redirectUri: string;
  codeChallenge: string;
  state: string;
  scopes: readonly string[];
  /** RFC 8707. */
  resource: string;
  /** The upstream's `extraAuthorizeParams` (the config refuses those the flow sets; the flow's win anyway). */
  extra: Readonly<Record<string, string>>;
}

/** The URL the browser is sent to: an authorization code request with PKCE S256. */
export function authorizationRequestUrl(request: AuthorizationRequest): string {
  const url = new URL(request.authorizationEndpoint);
  for (const [name, value] of Object.entries(request.extra)) url.searchParams.set(name, value);
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('client_id', request.clientId);
  url.searchParams.set('redirect_uri', request.redirectUri);
  url.searchParams.set('code_challenge', request.codeChallenge);
  url.searchParams.set('code_challenge_method', 'S256');
  url.searchParams.set('state', request.state);
  if (request.scopes.length > 0) url.searchParams.set('scope', request.scopes.join(' '));
  else url.searchParams.delete('scope');
  url.searchParams.set('resource', request.resource);
  return url.href;
}

/** What the flow stores of the browser's cookie: its SHA-256 (base64url). */
export function browserBinding(cookie: string): string {
  return createHash('sha256').update(cookie).digest('base64url');
}

function bindingMatches(cookie: string | undefined, binding: string): boolean {
  if (cookie === undefined || cookie === '') return false;
  const given = Buffer.from(browserBinding(cookie));
  const stored = Buffer.from(binding);
  return given.length === stored.length && timingSafeEqual(given, stored);
}

export interface ConsentFlowsDeps extends ConsentPartsDeps {
  clients: ConsentClients;
  events: GatewayEvents;
  origin: string;
  upstream: (name: string) => ConsentUpstream | undefined;
  /** The connection is stored: wake whatever waits for it, on every replica. */
  connected: (connected: { principal: string; upstream: string; elicitationId?: string }) => void;
}

export class ConsentFlows {
  constructor(private readonly deps: ConsentFlowsDeps) {}

  async begin(id: string, browserPrincipal: string): Promise<ConsentPage> {
    const { connections, events, logger } = this.deps;
    const link = await connections.getLink(id);
    const upstream = link === undefined ? undefined : this.deps.upstream(link.upstream);
    if (link === undefined || upstream === undefined) throw new ConsentRefused('link_unknown', 'This link is unknown, already used or expired: ask for a new one.');
    const facts: ConnectionFacts = { principal: link.principal, upstream: link.upstream };
    if (browserPrincipal !== link.principal) {
      events.emit('consent.refused', { ...facts, reason: 'wrong_user' });
      logger.warn({ ...facts, browserPrincipal }, 'a consent link was opened by a browser signed in as someone else: refused; the link stays unused');
      throw new ConsentRefused('wrong_user', 'This link was made for another user: sign in as the user who asked for it.');
    }
    const signal = AbortSignal.timeout(upstream.timeoutMs);
    let as: oauth.AuthorizationServer;
    let scopesSupported: string[] | undefined;
    let clientId: string;
    try {
      ({ as, scopesSupported } = await this.deps.servers.forUpstream(upstream, signal));
      clientId = (await this.deps.clients.resolve(upstream, as, signal)).client.client_id;
    } catch (err) {
      throw this.setupFailed(err, facts);
    }
    // Only now is the link used up: a server that cannot be reached leaves it for another try.
    if ((await connections.takeLink(id)) === undefined) throw new ConsentRefused('link_unknown', 'This link was used already: ask for a new one.');
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const cookie = randomBytes(32).toString('base64url');
    const scopes = upstream.code.scopes.length > 0 ? [...upstream.code.scopes] : (scopesSupported ?? []);
    const redirectUri = consentRedirectUri(this.deps.origin);
    const flow: ConsentFlow = {
      state, kind: 'consent', browserBinding: browserBinding(cookie), sealedVerifier: this.deps.vault.sealVerifier(verifier, state),
      redirectUri, issuer: as.issuer, principal: link.principal, upstream: link.upstream, elicitationId: link.elicitationId, linkId: link.id,
      expiresAtMs: this.deps.now() + LINK_TTL_MS,
    };
    await connections.putFlow(flow);
    const authorizeUrl = authorizationRequestUrl({
      authorizationEndpoint: as.authorization_endpoint as string, clientId, redirectUri, codeChallenge: await oauth.calculatePKCECodeChallenge(verifier),
      state, scopes, resource: upstream.code.resource, extra: upstream.code.extraAuthorizeParams,
    });
    events.emit('consent.started', { ...facts, issuer: as.issuer });
    return { upstream: upstream.name, issuer: as.issuer, serverHost: new URL(as.issuer).host, scopes, authorizeUrl, browserCookie: cookie };
  }

  async complete(params: CallbackParams): Promise<{ principal: string; upstream: string }> {
    const { events } = this.deps;
    const flow = params.state === undefined || params.state === '' ? undefined : await this.deps.connections.takeFlow(params.state);
    const upstream = flow?.upstream === undefined ? undefined : this.deps.upstream(flow.upstream);
    if (flow === undefined || flow.kind !== 'consent' || flow.principal === undefined || upstream === undefined) {
      throw new ConsentRefused('state_unknown', 'This sign-in is unknown, already completed or expired: start again from a new link.');
    }
    const facts = { principal: flow.principal, upstream: upstream.name, issuer: flow.issuer };
    const refuse = (reason: 'state_mismatch' | 'denied' | 'issuer_mismatch', message: string): ConsentRefused => {
      events.emit('consent.refused', { ...facts, reason });
      return new ConsentRefused(reason, message);
    };
    // The flow is used up whatever follows: a state is tried once.
    if (!bindingMatches(params.cookie, flow.browserBinding)) throw refuse('state_mismatch', 'This sign-in was not started in this browser: start again from a new link.');
    if (params.error !== undefined) throw refuse('denied', `The authorization server answered "${printable(params.error)}": nothing was connected.`);
    const signal = AbortSignal.timeout(upstream.timeoutMs);
    const exchangeFailed = (err: unknown): ConsentRefused => {
      const failure = err instanceof UpstreamCredentialError ? err : undefined;
      events.emit('connection.failed', { ...facts, reason: failure?.oauthError ?? failure?.reason ?? 'invalid_response', step: failure?.step === 'registration' ? 'registration' : failure?.step === 'discovery' ? 'discovery' : 'exchange' });
      return new ConsentRefused('exchange_failed', `The connection could not be completed: ${failure?.message ?? 'the authorization server answered something unexpected'}`);
    };
    let as: oauth.AuthorizationServer;
    let client: Awaited<ReturnType<ConsentClients['resolve']>>;
    try {
      as = await this.deps.servers.ofIssuer(upstream, flow.issuer, signal);
      client = await this.deps.clients.resolve(upstream, as, signal);
    } catch (err) {
      throw exchangeFailed(err);
    }
    let callback: URLSearchParams;
    try {
      const given = new URLSearchParams({ state: flow.state, ...(params.code !== undefined && { code: params.code }), ...(params.iss !== undefined && { iss: params.iss }) });
      callback = oauth.validateAuthResponse(as, client.client, given, flow.state);
    } catch {
      throw refuse('issuer_mismatch', `The answer did not come from ${as.issuer} (RFC 9207 "iss"): nothing was connected.`);
    }
    let answer: oauth.TokenEndpointResponse;
    try {
      const verifier = this.deps.vault.openVerifier(flow.sealedVerifier, flow.state);
      const response = await oauth.authorizationCodeGrantRequest(as, client.client, client.auth, callback, flow.redirectUri, verifier, {
        ...this.deps.servers.requestOptions(upstream, as.token_endpoint, signal),
        additionalParameters: { resource: upstream.code.resource },
      });
      answer = await oauth.processAuthorizationCodeResponse(as, client.client, response);
    } catch (err) {
      throw exchangeFailed(await credentialFailure(err, { upstream: upstream.name, step: 'exchange', timeoutMs: upstream.timeoutMs, signal, what: `code exchange at ${as.issuer}` }));
    }
    const record = this.connection(flow.principal, upstream, as.issuer, answer);
    await this.store(record);
    events.emit('connection.created', { ...facts, scopes: record.scopes });
    this.deps.connected({ principal: flow.principal, upstream: upstream.name, ...(flow.elicitationId !== undefined && { elicitationId: flow.elicitationId }) });
    return { principal: flow.principal, upstream: upstream.name };
  }

  private connection(principal: string, upstream: ConsentUpstream, issuer: string, answer: oauth.TokenEndpointResponse): StoredConnection {
    const now = this.deps.now();
    const binding = { principal, upstream: upstream.name, issuer };
    const tokens = { access_token: answer.access_token, token_type: answer.token_type, ...(answer.refresh_token !== undefined && { refresh_token: answer.refresh_token }) };
    return {
      ...binding,
      sealed: this.deps.vault.sealTokens(tokens, binding),
      scopes: typeof answer.scope === 'string' ? answer.scope.split(' ').filter((s) => s !== '') : [...upstream.code.scopes],
      ...(answer.expires_in !== undefined && { expiresAtMs: now + answer.expires_in * 1000 }),
      issuedAtMs: now,
      connectedAtMs: now,
      version: 1,
    };
  }

  /** Stores the connection, replacing an older one (compare and set: a concurrent refresh of the old one loses). */
  private async store(record: StoredConnection): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const existing = await this.deps.connections.get(record.principal, record.upstream);
      if (await this.deps.connections.put(record, existing?.version ?? 0)) return;
    }
    throw new ConsentRefused('exchange_failed', 'The connection could not be stored (it kept changing meanwhile): try again.');
  }

  /** Discovery or registration failed before the flow began: nothing of the user's was sent anywhere. */
  private setupFailed(err: unknown, facts: ConnectionFacts): Error {
    if (!(err instanceof UpstreamCredentialError)) return err as Error;
    if (err.reason === 'untrusted_server') {
      this.deps.events.emit('consent.refused', { ...facts, reason: 'untrusted_server' });
      this.deps.events.emit('connection.failed', { ...facts, reason: 'untrusted_server', step: 'discovery' });
      return new ConsentRefused('untrusted_server', err.message);
    }
    this.deps.events.emit('connection.failed', { ...facts, reason: err.oauthError ?? err.reason, step: err.step === 'registration' ? 'registration' : 'discovery' });
    return err;
  }
}

/** An error code from a redirect, safe to show (RFC 6749 limits it to printable ASCII; anything else is cut). */
function printable(code: string): string {
  return code.replace(/[^\x20-\x7e]/g, '').replace(/"/g, '').slice(0, 64);
}
