// GET <metrics.path>: the Prometheus text of this replica. With `auth`, the route is guarded by the admin check
// (`onRequest`: auth.admin principals or scopes, the same credentials as the MCP endpoint), so a scraper uses an
// API key or token rather than a second listener with its own TLS and firewall rules.
import type { FastifyPluginAsync, onRequestAsyncHookHandler, onRequestHookHandler } from 'fastify';

export interface MetricsEndpointOptions {
  path: string;
  source: { contentType: string; render(): Promise<string> };
  /** Who may read the metrics (src/http/admin-access.ts); absent: everyone who reaches the port. */
  onRequest?: onRequestHookHandler | onRequestAsyncHookHandler;
}

export const metricsEndpoint: FastifyPluginAsync<MetricsEndpointOptions> = async (app, options) => {
  const { path, source, onRequest } = options;
  app.get(path, onRequest === undefined ? {} : { onRequest }, async (_request, reply) => {
    const text = await source.render();
    return reply.header('cache-control', 'no-store').type(source.contentType).send(text);
  });
};
