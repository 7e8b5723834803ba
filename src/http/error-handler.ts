// What the front answers when a request fails outside any revision's own answer: fastify's refusals (too large,
// wrong media type) and GatewayErrors thrown by the guards and the session front, as JSON-RPC errors in the error
// edge it is given (the revision registry's last: the one that takes what no other claims).
import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import type { ListenConfig } from '../config/types.js';
import { GatewayError, retryAfterHeaders } from '../errors.js';
import type { Refusal } from './replies.js';

/** Fastify's own error codes that have a gateway error of their own. */
function mapped(error: Error & { code?: string }, listen: ListenConfig): GatewayError | undefined {
  if (error instanceof GatewayError) return error;
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new GatewayError('body_too_large', `Request body exceeds ${listen.maxBodyBytes} bytes`);
  if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return new GatewayError('unsupported_media_type', 'Unsupported Media Type: Content-Type must be application/json');
  return undefined;
}

const errorHandler: FastifyPluginAsync<{ listen: ListenConfig; refusal: Refusal }> = async (app, { listen, refusal }) => {
  app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, request, reply) => {
    if (request.raw.socket.destroyed) {
      // The client went away mid-request (an aborted upload): nothing to answer, and nothing wrong here.
      request.log.debug({ err: error }, 'client closed the connection before the request was complete');
      return;
    }
    const known = mapped(error, listen);
    if (known === undefined) request.log.error({ err: error }, 'unhandled front-end error');
    // The request reached no revision's router, or the session front refused it: that revision's edge answers.
    const { status, body } = refusal(null, known ?? error);
    void reply.code(status).headers(retryAfterHeaders(body.error.data)).type('application/json').send(body);
  });
};

/** Set on the root (fastify-plugin): every route of every plugin answers its errors this way. */
export const errorHandlerPlugin = fp(errorHandler, { name: 'taskgate-error-handler', fastify: '5.x' });
