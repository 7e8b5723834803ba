// Liveness and readiness for orchestrators: /healthz answers while the process serves; /readyz says whether this
// replica should get traffic (the store, leases, shutdown), with the details in its body.
import type { FastifyPluginAsync } from 'fastify';
import type { JsonObject } from '../jsonrpc.js';

export interface HealthOptions {
  readiness(): Promise<{ ready: boolean; body: JsonObject }>;
}

export const healthPlugin: FastifyPluginAsync<HealthOptions> = async (app, { readiness }) => {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const { ready, body } = await readiness();
    return reply.code(ready ? 200 : 503).send(body);
  });
};
