// The floor for the task scenario: the least an HTTP server built on the gateway's own framework (fastify) can do
// per request. One POST route that parses the JSON body and answers a tiny JSON-RPC result, shaped so the bench's
// unchanged load driver accepts it (a session id on every answer, 202 for notifications, an "echo" result).
// Whatever the gateway spends per request above this is routing, sessions, the store and the upstream.
//   node --import tsx bench/floor-server.ts --port N   (prints LISTENING <url>)
import Fastify from 'fastify';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { port: { type: 'string', default: '0' }, host: { type: 'string', default: '127.0.0.1' } } });

const app = Fastify({ logger: false });
app.post('/mcp', async (request, reply) => {
  const id = (request.body as { id?: unknown } | null)?.id;
  if (id === undefined) return reply.code(202).send();
  void reply.header('mcp-session-id', 'floor');
  return { jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: 'hi' }] } };
});
app.delete('/mcp', async () => ({}));

const address = await app.listen({ host: values.host, port: Number(values.port) });
process.stdout.write(`LISTENING ${address}/mcp\n`);
const stop = (): void => void app.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
