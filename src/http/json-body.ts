// The body parser: JSON only (anything else is 415). Malformed JSON is a JSON-RPC parse error, not fastify's 400,
// and JSON nested deeper than any MCP message needs is refused before anything walks it. The refusal is the POST
// handler's to send (refusalIn): a DELETE or GET with a stray body is not refused for it.
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { ListenConfig } from '../config/types.js';
import { GatewayError } from '../errors.js';
import { jsonNestingExceeds } from '../jsonrpc.js';
import type { Admission } from './admission.js';

const REFUSED_BODY = Symbol('refused body');
interface RefusedBody {
  [REFUSED_BODY]: GatewayError;
}

function refusedBody(code: 'parse_error' | 'invalid_request', message: string): RefusedBody {
  return { [REFUSED_BODY]: new GatewayError(code, message) };
}

/** The error a parsed body stands for, when the parser refused it. */
export function refusalIn(body: unknown): GatewayError | undefined {
  return typeof body === 'object' && body !== null && REFUSED_BODY in body ? (body as RefusedBody)[REFUSED_BODY] : undefined;
}

export interface JsonBodyOptions {
  listen: ListenConfig;
  /** Told the size of each body read (a chunked body was charged the largest one accepted). */
  admission: Admission;
}

/** On the root (fastify-plugin): the only content-type parser of every route. */
export const jsonBodyPlugin = fp(
  async (app: FastifyInstance, { listen, admission }: JsonBodyOptions) => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
      const text = body as string;
      admission.bodyRead(request, text);
      if (jsonNestingExceeds(text, listen.maxJsonDepth)) {
        done(null, refusedBody('invalid_request', `Invalid Request: JSON nested deeper than ${listen.maxJsonDepth} levels (listen.maxJsonDepth)`));
        return;
      }
      try {
        done(null, JSON.parse(text));
      } catch (error) {
        done(null, refusedBody('parse_error', `Parse error: ${(error as Error).message}`));
      }
    });
  },
  { name: 'taskgate-json-body', fastify: '5.x' },
);
