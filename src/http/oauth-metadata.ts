// RFC 9728 protected-resource metadata: where clients learn which authorization server issues tokens for this
// resource. Public, and read by browser-based clients from other origins.
import type { FastifyPluginAsync } from 'fastify';
import type { Authenticator } from './credentials.js';

export interface OAuthMetadataOptions {
  authenticator: Authenticator;
  /** The MCP endpoint's path: the metadata is published for it. */
  path: string;
}

export const oauthMetadataPlugin: FastifyPluginAsync<OAuthMetadataOptions> = async (app, { authenticator, path }) => {
  for (const metadataPath of authenticator.metadataPaths(path)) {
    app.get(metadataPath, async (_request, reply) => reply.header('access-control-allow-origin', '*').send(authenticator.metadata()));
  }
};
