// The gateway's Client ID Metadata Document (GET /oauth/client-metadata.json): where an authorization server that
// supports client ID metadata documents learns the gateway as a client without registering it, its `client_id` is
// this document's own URL on the public origin. A public client (PKCE, no secret) whose one redirect URI is the
// consent callback.
import type { FastifyInstance } from 'fastify';
import { clientMetadataDocument } from '../../consent/clients.js';
import { CLIENT_METADATA_PATH, publicOrigin } from '../../consent/settings.js';
import type { GatewayConfig } from '../../config/types.js';

export interface ClientMetadataRouteOptions {
  config: () => Pick<GatewayConfig, 'listen' | 'auth'>;
}

export function registerClientMetadataRoute(app: FastifyInstance, options: ClientMetadataRouteOptions): void {
  app.get(CLIENT_METADATA_PATH, async (_request, reply) => {
    const document = clientMetadataDocument(publicOrigin(options.config()));
    // Servers fetch it when a client first appears and may keep it a while; it changes only with the config.
    return reply.headers({ 'cache-control': 'public, max-age=300', 'access-control-allow-origin': '*' }).type('application/json').send(JSON.stringify(document));
  });
}
