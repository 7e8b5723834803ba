// The sealed parts of per-user consent (issue 41), through the gateway's Sealer (identity.sealingKeys): a user's
// tokens bound to (principal, upstream, issuer), so that a record copied onto another user, upstream or server does
// not open; the PKCE verifier of a flow bound to its state; a registered client secret bound to its server and
// redirect URI. The store only ever holds what comes out of here.
import type { Sealer } from '../identity/sealing.js';

/** What a connection keeps of the authorization server's token response. */
export interface TokenSet {
  access_token: string;
  refresh_token?: string;
  token_type: string;
}

export interface TokenBinding {
  principal: string;
  upstream: string;
  issuer: string;
}

/** The additional authenticated data of a connection's tokens (a JSON array: no part can spill into the next). */
export function tokenAad({ principal, upstream, issuer }: TokenBinding): string {
  return JSON.stringify(['consent-tokens', principal, upstream, issuer]);
}

export class ConsentVault {
  constructor(private readonly sealer: Sealer) {}

  sealTokens(tokens: TokenSet, binding: TokenBinding): string {
    const kept: TokenSet = { access_token: tokens.access_token, token_type: tokens.token_type, ...(tokens.refresh_token !== undefined && { refresh_token: tokens.refresh_token }) };
    return this.sealer.seal(JSON.stringify(kept), tokenAad(binding));
  }

  /** The tokens, or an UnsealError (altered, sealed for another binding, or with a key no longer configured). */
  openTokens(sealed: string, binding: TokenBinding): TokenSet {
    const parsed = JSON.parse(this.sealer.open(sealed, tokenAad(binding))) as Partial<TokenSet>;
    if (typeof parsed.access_token !== 'string' || typeof parsed.token_type !== 'string') throw new Error('sealed tokens without an access token');
    return { access_token: parsed.access_token, token_type: parsed.token_type, ...(typeof parsed.refresh_token === 'string' && { refresh_token: parsed.refresh_token }) };
  }

  sealVerifier(verifier: string, state: string): string {
    return this.sealer.seal(verifier, JSON.stringify(['consent-verifier', state]));
  }

  openVerifier(sealed: string, state: string): string {
    return this.sealer.open(sealed, JSON.stringify(['consent-verifier', state]));
  }

  sealClientSecret(secret: string, issuer: string, redirectUri: string): string {
    return this.sealer.seal(secret, JSON.stringify(['consent-client', issuer, redirectUri]));
  }

  openClientSecret(sealed: string, issuer: string, redirectUri: string): string {
    return this.sealer.open(sealed, JSON.stringify(['consent-client', issuer, redirectUri]));
  }
}
