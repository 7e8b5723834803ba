// GET /.well-known/jwks.json: the public keys of the identities the gateway signs for upstreams (`identity.keys`,
// `auth.signedIdentity`), where an upstream verifies them. Public: no credentials, any origin may read it (CORS),
// briefly cacheable (a verifier refetches on an unknown kid anyway, and a rotation publishes the new key before it
// signs). 404 while no signing key is configured, as if there were no such document.
import type { FastifyPluginAsync } from 'fastify';
import type { JWK } from 'jose';

export const JWKS_PATH = '/.well-known/jwks.json';

/** How long verifiers may keep the key set: short, so that a key removed from the config stops verifying soon. */
const MAX_AGE_SECONDS = 300;

export interface JwksEndpointOptions {
  /** The key set as configured now (a reload may change it); undefined: no signing keys. */
  jwks: () => { keys: readonly JWK[] } | undefined;
}

export const jwksEndpointPlugin: FastifyPluginAsync<JwksEndpointOptions> = async (app, { jwks }) => {
  app.get(JWKS_PATH, async (_request, reply) => {
    const published = jwks();
    if (published === undefined || published.keys.length === 0) return reply.callNotFound();
    return reply
      .header('cache-control', `public, max-age=${MAX_AGE_SECONDS}`)
      .header('access-control-allow-origin', '*')
      .type('application/json')
      .send(published);
  });
};
