// What per-user consent (issue 41) reads of the gateway's config: the upstreams whose callers connect their own
// account (`auth.authorizationCode`, HTTP upstreams only), and the public origin every link and redirect URI is built
// from, so that a link made on one replica works on any other (`listen.publicUrl`, else the origin of
// `auth.resource`).
import type { AuthorizationCodeConfig } from '../config/identity.js';
import type { GatewayConfig } from '../config/types.js';

/** The parts of the config consent reads. */
export type ConsentConfig = Pick<GatewayConfig, 'upstreams' | 'listen' | 'auth' | 'identity'>;

/** An upstream whose callers connect their own account. */
export interface ConsentUpstream {
  name: string;
  /** Its MCP endpoint (probed for its 401 challenge when the authorization server is discovered). */
  url: string;
  code: AuthorizationCodeConfig;
  /** The deadline of one request to its authorization server (its `auth.timeoutMs`). */
  timeoutMs: number;
}

export function consentUpstreams(config: ConsentConfig): Map<string, ConsentUpstream> {
  const found = new Map<string, ConsentUpstream>();
  for (const upstream of config.upstreams) {
    const auth = upstream.auth;
    const code = auth?.authorizationCode;
    if (auth === undefined || code === undefined || upstream.transport === 'stdio') continue;
    found.set(upstream.name, { name: upstream.name, url: upstream.url, code, timeoutMs: auth.timeoutMs });
  }
  return found;
}

/** A user's consent at a third-party authorization server comes back here: the exact redirect URI's path. */
export const CONSENT_CALLBACK_PATH = '/oauth/callback';
/** The front door's browser login comes back here (`auth.oauth.login`'s registered redirect URI). */
export const LOGIN_CALLBACK_PATH = '/oauth/login/callback';
/** Where the gateway's Client ID Metadata Document is served: its URL is the client_id. */
export const CLIENT_METADATA_PATH = '/oauth/client-metadata.json';

/** The origin browsers reach the gateway at: `listen.publicUrl`, else `auth.resource`'s origin. */
export function publicOrigin(config: Pick<GatewayConfig, 'listen' | 'auth'>): string {
  if (config.listen.publicUrl !== undefined) return new URL(config.listen.publicUrl).origin;
  if (config.auth?.resource !== undefined) return new URL(config.auth.resource).origin;
  throw new Error('per-user consent needs listen.publicUrl or auth.resource to build its links');
}

/** The exact redirect URI of every consent flow (`GET /oauth/callback`). */
export function consentRedirectUri(origin: string): string {
  return `${origin}${CONSENT_CALLBACK_PATH}`;
}

/** The link a user opens (`GET /connect/{id}`). */
export function connectUrl(origin: string, linkId: string): string {
  return `${origin}/connect/${linkId}`;
}

/** Where the gateway serves its Client ID Metadata Document (its client id, where a server accepts one). */
export function clientMetadataUrl(origin: string): string {
  return `${origin}${CLIENT_METADATA_PATH}`;
}

/** Whether cookies for this origin must be `Secure` (an https public origin). */
export function isSecureOrigin(origin: string): boolean {
  return origin.startsWith('https:');
}
