// The origin browsers reach the gateway at, which every link and redirect URI of per-user consent is built on
// (issue 41): `listen.publicUrl` when set, else the origin of `auth.resource`. Whatever replica makes a link or a
// redirect URI, it is the same one.
import type { GatewayConfig } from '../../config/types.js';

/** The public origin (no trailing slash); undefined without `listen.publicUrl` or `auth` (no consent then). */
export function publicOrigin(config: Pick<GatewayConfig, 'listen' | 'auth'>): string | undefined {
  const url = config.listen.publicUrl ?? config.auth?.resource;
  return url === undefined ? undefined : new URL(url).origin;
}

/** Whether cookies for this origin must be `Secure` (an https public origin). */
export function isSecureOrigin(origin: string | undefined): boolean {
  return origin !== undefined && origin.startsWith('https:');
}

/** The front door's browser login comes back here (`auth.oauth.login`'s registered redirect URI). */
export const LOGIN_CALLBACK_PATH = '/oauth/login/callback';
/** A user's consent at a third-party authorization server comes back here. */
export const CONSENT_CALLBACK_PATH = '/oauth/callback';
/** Where the gateway's Client ID Metadata Document is served: its URL is the client_id. */
export const CLIENT_METADATA_PATH = '/oauth/client-metadata.json';
