// The gateway's Client ID Metadata Document (GET /oauth/client-metadata.json): where an authorization server that
// supports client ID metadata documents learns the gateway as a client without registering it, its `client_id` is
// this document's own URL on the public origin. A public client (PKCE, no secret) whose one redirect URI is the
// consent callback.
import type { FastifyInstance } from 'fastify';
import type { GatewayConfig } from '../../config/types.js';
import { CLIENT_METADATA_PATH, CONSENT_CALLBACK_PATH, publicOrigin } from './public-origin.js';

/** The document for `origin` (the public origin). */
export function clientMetadataDocument(origin: string): Record<string, unknown> {
  return {
    client_id: `${origin}${CLIENT_METADATA_PATH}`,
    client_name: 'taskgate',
    client_uri: origin,
    redirect_uris: [`${origin}${CONSENT_CALLBACK_PATH}`],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
}

export interface ClientMetadataRouteOptions {
  config: () => Pick<GatewayConfig, 'listen' | 'auth'>;
  /** The consent core's builder, when it has one; else clientMetadataDocument of the public origin. */
  document?: () => Record<string, unknown>;
}

export function registerClientMetadataRoute(app: FastifyInstance, options: ClientMetadataRouteOptions): void {
  app.get(CLIENT_METADATA_PATH, async (_request, reply) => {
    const origin = publicOrigin(options.config());
    if (origin === undefined) return reply.code(404).type('application/json').send({ error: 'No public origin: set listen.publicUrl or auth.resource' });
    const document = options.document?.() ?? clientMetadataDocument(origin);
    // Servers fetch it when a client first appears and may keep it a while; it changes only with the config.
    return reply.headers({ 'cache-control': 'public, max-age=300', 'access-control-allow-origin': '*' }).type('application/json').send(JSON.stringify(document));
  });
}
