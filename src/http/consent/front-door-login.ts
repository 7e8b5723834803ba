// The gateway signs a browser in at the front door's own issuer (`auth.oauth.login`, issue 41) to learn who is at
// it: the authorization code flow with PKCE S256, a nonce, and a single-use `state` kept in the store (any replica
// may take the callback) and bound to an HttpOnly cookie of the browser that started it, the verifier sealed. The
// callback's answer names the user by its ID token (signature by the issuer's keys, `aud` = the login client,
// the nonce sent), or, from an issuer that sends none, by its access token checked exactly as the MCP endpoint
// checks one. Either way the principal is the one the front door gives that user: `oauth:<issuer>#<sub>`.
//
// Nothing of the code, the state, the verifier, a token or the cookie is logged or put in an error: a refusal
// says what went wrong in fixed words (LoginRefused), the log adds only the library's fixed message.
import { randomBytes } from 'node:crypto';
import { jwtVerify } from 'jose';
import * as oauth from 'oauth4webapi';
import type { GatewayConfig } from '../../config/types.js';
import { LINK_TTL_MS } from '../../consent/ports.js';
import type { Sealer } from '../../identity/sealing.js';
import type { Logger } from '../../log.js';
import { oauthCaller } from '../../principals.js';
import type { ConsentFlow, Connections } from '../../store/connections.js';
import type { Authenticator } from '../credentials.js';
import { browserBinding, matchesBinding } from './cookies.js';
import { insecureAllowed, IssuerMetadata } from './issuer-metadata.js';
import { LOGIN_CALLBACK_PATH, publicOrigin } from '../../consent/settings.js';

/** Signatures an ID token may carry (asymmetric only: the gateway holds no secret of the issuer's). */
const ID_TOKEN_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];
const TOKEN_TIMEOUT_MS = 10_000;

/** Why a sign-in did not go through: an HTTP status and fixed words for the page. */
export class LoginRefused extends Error {
  constructor(
    readonly status: number,
    readonly heading: string,
    message: string,
  ) {
    super(message);
    this.name = 'LoginRefused';
  }
}

export interface FrontDoorLoginDeps {
  connections: Pick<Connections, 'putFlow' | 'takeFlow'>;
  sealer: Pick<Sealer, 'seal' | 'open'>;
  /** The MCP endpoint's: an access token is checked exactly as a caller's. */
  authenticator: Pick<Authenticator, 'authenticate' | 'issuerKeys'>;
  /** The config as it is now (a reload may change it). */
  config: () => Pick<GatewayConfig, 'listen' | 'auth'>;
  logger: Logger;
  metadata?: IssuerMetadata;
  now?: () => number;
}

interface LoginSettings {
  issuer: string;
  clientId: string;
  clientSecret: string | undefined;
  redirectUri: string;
  /** The front door's resource: an access token from this login is for it, as a client's would be. */
  resource: string;
  clockToleranceS: number;
}

/** What the sealed verifier of a login flow is bound to: it opens for this flow's state only. */
const verifierAad = (state: string): string => `taskgate:login-flow:${state}`;

export class FrontDoorLogin {
  private readonly metadata: IssuerMetadata;
  private readonly now: () => number;

  constructor(private readonly deps: FrontDoorLoginDeps) {
    this.metadata = deps.metadata ?? new IssuerMetadata();
    this.now = deps.now ?? Date.now;
  }

  /** Whether browser sign-in is configured (`auth.oauth.login`). */
  configured(): boolean {
    return this.settingsOrUndefined() !== undefined;
  }

  /**
   * Starts a sign-in that returns to `returnTo` (a same-origin path, checked by the caller): the flow is stored,
   * and the answer is where to send the browser and the value of the cookie that binds the flow to it.
   */
  async start(returnTo: string | undefined): Promise<{ location: string; cookie: string }> {
    const settings = this.settings();
    const as = await this.issuerMetadata(settings);
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const nonce = oauth.generateRandomNonce();
    const cookie = randomBytes(32).toString('base64url');
    const flow: ConsentFlow = {
      state,
      kind: 'login',
      browserBinding: browserBinding(cookie),
      sealedVerifier: this.deps.sealer.seal(verifier, verifierAad(state)),
      redirectUri: settings.redirectUri,
      issuer: settings.issuer,
      nonce,
      ...(returnTo !== undefined && { returnTo }),
      expiresAtMs: this.now() + LINK_TTL_MS,
    };
    await this.deps.connections.putFlow(flow);
    const url = new URL(as.authorization_endpoint as string);
    const params = {
      response_type: 'code',
      client_id: settings.clientId,
      redirect_uri: settings.redirectUri,
      scope: 'openid',
      state,
      nonce,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      resource: settings.resource,
    };
    for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
    return { location: url.href, cookie };
  }

  /** The callback: the principal signed in, and where the browser goes next; LoginRefused otherwise. */
  async finish(query: URLSearchParams, cookie: string | undefined): Promise<{ principal: string; returnTo?: string }> {
    const settings = this.settings();
    const state = query.get('state');
    const flow = state === null || state === '' ? undefined : await this.deps.connections.takeFlow(state);
    if (flow === undefined || flow.kind !== 'login') {
      throw new LoginRefused(400, 'Unknown or used sign-in', 'This sign-in is unknown, expired or was already used. Start again.');
    }
    if (!matchesBinding(cookie, flow.browserBinding)) {
      throw new LoginRefused(403, 'Another browser', 'This sign-in was started in another browser. Start again in this one.');
    }
    if (flow.issuer !== settings.issuer || flow.redirectUri !== settings.redirectUri) {
      throw new LoginRefused(400, 'Sign-in changed', 'The sign-in settings changed since this sign-in started. Start again.');
    }
    if (query.has('error')) throw new LoginRefused(403, 'Sign-in refused', 'The sign-in server did not sign you in. Nothing was changed.');
    const as = await this.issuerMetadata(settings);
    const tokens = await this.exchange(settings, as, flow, query);
    const principal = typeof tokens.id_token === 'string' ? await this.idTokenPrincipal(settings, as, tokens.id_token, flow.nonce) : await this.accessTokenPrincipal(tokens.access_token);
    return { principal, ...(flow.returnTo !== undefined && { returnTo: flow.returnTo }) };
  }

  /** The code exchanged with the flow's verifier, the answer checked (iss, state, and the ID token's claims and nonce). */
  private async exchange(settings: LoginSettings, as: oauth.AuthorizationServer, flow: ConsentFlow, query: URLSearchParams): Promise<oauth.TokenEndpointResponse> {
    const client: oauth.Client = { client_id: settings.clientId, [oauth.clockTolerance]: settings.clockToleranceS };
    const clientAuth = settings.clientSecret === undefined ? oauth.None() : oauth.ClientSecretBasic(settings.clientSecret);
    let params: URLSearchParams;
    try {
      params = oauth.validateAuthResponse(as, client, query, flow.state);
    } catch (error) {
      this.refusedBecause('answer', error);
      throw new LoginRefused(400, 'Unexpected sign-in answer', 'The answer did not come from the sign-in server it was sent to. Start again.');
    }
    try {
      const verifier = this.deps.sealer.open(flow.sealedVerifier, verifierAad(flow.state));
      const response = await oauth.authorizationCodeGrantRequest(as, client, clientAuth, params, flow.redirectUri, verifier, {
        additionalParameters: { resource: settings.resource },
        signal: AbortSignal.timeout(TOKEN_TIMEOUT_MS),
        [oauth.allowInsecureRequests]: insecureAllowed(settings.issuer),
      });
      // An ID token is checked with the nonce sent; an answer without one goes the plain OAuth way.
      const answer = (await response.clone().json().catch(() => undefined)) as { id_token?: unknown } | undefined;
      const options = typeof answer?.id_token === 'string' && flow.nonce !== undefined ? { expectedNonce: flow.nonce } : undefined;
      return await oauth.processAuthorizationCodeResponse(as, client, response, options);
    } catch (error) {
      this.refusedBecause('code exchange', error);
      throw new LoginRefused(502, 'Sign-in failed', 'The sign-in server did not accept the sign-in. Start again.');
    }
  }

  private async idTokenPrincipal(settings: LoginSettings, as: oauth.AuthorizationServer, idToken: string, nonce: string | undefined): Promise<string> {
    try {
      const { payload } = await jwtVerify(idToken, await this.deps.authenticator.issuerKeys(), {
        issuer: settings.issuer,
        audience: settings.clientId,
        algorithms: ID_TOKEN_ALGORITHMS,
        clockTolerance: settings.clockToleranceS,
        requiredClaims: ['sub', 'exp'],
      });
      if (nonce === undefined || payload.nonce !== nonce) throw new Error('the ID token does not carry the nonce sent');
      if (typeof payload.sub !== 'string' || payload.sub === '') throw new Error('the ID token names no subject');
      return oauthCaller(settings.issuer, payload.sub, []).principal;
    } catch (error) {
      this.refusedBecause('ID token', error);
      throw new LoginRefused(403, 'Sign-in not verified', 'The sign-in server\'s answer could not be verified. Start again.');
    }
  }

  private async accessTokenPrincipal(accessToken: string): Promise<string> {
    try {
      const caller = await this.deps.authenticator.authenticate(`Bearer ${accessToken}`);
      if (caller.credential !== 'oauth') throw new Error('the token is not an OAuth access token');
      return caller.principal;
    } catch (error) {
      this.refusedBecause('access token', error);
      throw new LoginRefused(403, 'Sign-in not verified', 'The sign-in server\'s answer does not name a user of this gateway. Start again.');
    }
  }

  /** Logs why, in the library's fixed words only (its error objects may hold the parameters or the answer). */
  private refusedBecause(step: string, error: unknown): void {
    const { message, code } = error as { message?: unknown; code?: unknown };
    this.deps.logger.warn({ step, reason: typeof message === 'string' ? message : 'unknown', ...(typeof code === 'string' && { code }) }, 'browser sign-in refused');
  }

  private async issuerMetadata(settings: LoginSettings): Promise<oauth.AuthorizationServer> {
    try {
      return await this.metadata.metadata(settings.issuer);
    } catch (error) {
      this.refusedBecause('discovery', error);
      throw new LoginRefused(503, 'Sign-in unavailable', 'The sign-in server cannot be reached now. Try again in a moment.');
    }
  }

  private settings(): LoginSettings {
    const settings = this.settingsOrUndefined();
    if (settings === undefined) throw new LoginRefused(404, 'Sign-in not configured', 'This gateway does not sign browsers in (auth.oauth.login).');
    return settings;
  }

  private settingsOrUndefined(): LoginSettings | undefined {
    const config = this.deps.config();
    const oauthConfig = config.auth?.oauth;
    const login = oauthConfig?.login;
    const origin = publicOrigin(config);
    if (oauthConfig === undefined || login === undefined || origin === undefined || config.auth === undefined) return undefined;
    return {
      issuer: oauthConfig.issuer,
      clientId: login.clientId,
      clientSecret: login.clientSecret,
      redirectUri: `${origin}${LOGIN_CALLBACK_PATH}`,
      resource: config.auth.resource,
      clockToleranceS: oauthConfig.clockToleranceSeconds,
    };
  }
}
