// The MCP endpoint (listen.path): the checks every request to it passes, in order (shutting down, credentials,
// the body's bytes in flight), then the front of the protocol revision that answers it, as the revision registry
// (protocol/revisions.ts) tells it. Each revision's front is a plugin of its own that registers here for its
// revision (app.mcpEndpoint.serve): a new revision is a registry entry and a new plugin, not an edit of this one.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { GatewayError } from '../errors.js';
import { REVISIONS, revisionOf, type RevisionId } from '../protocol/revisions.js';
import type { InflightCharge } from '../tasks/inflight-bytes.js';
import type { Admission } from './admission.js';
import type { RequestGuard } from './credentials-guard.js';
import { refusalIn } from './json-body.js';
import { accepts } from './replies.js';

/** One revision's answers on the endpoint. */
export interface RevisionFront {
  /** `charge`: the body's bytes, which the call it starts holds until that ends. */
  post(request: FastifyRequest, reply: FastifyReply, body: unknown, charge: InflightCharge | undefined): Promise<FastifyReply>;
  /** A session's stream (GET) and its end (DELETE): only a revision with sessions has them. */
  get?(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply>;
  delete?(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply>;
}

export interface McpEndpoint {
  /** Adds the front of a revision of the registry. */
  serve(revision: RevisionId, front: RevisionFront): void;
}

declare module 'fastify' {
  interface FastifyInstance {
    mcpEndpoint: McpEndpoint;
  }
}

export interface McpEndpointOptions {
  path: string;
  admission: Admission;
  /** Undefined without `auth`: every request is served, as the only principal there is. */
  credentials: RequestGuard | undefined;
  isShuttingDown(): boolean;
  /** Whether a session id is one of this gateway's live sessions (a message on it is that session's). */
  isKnownSession(sessionId: string): boolean;
}

/** On the root (fastify-plugin), so that the revision fronts, registered after it, find app.mcpEndpoint. */
export const mcpEndpointPlugin = fp(
  async (app: FastifyInstance, { path, admission, credentials, isShuttingDown, isKnownSession }: McpEndpointOptions) => {
    const fronts = new Map<RevisionId, RevisionFront>();
    app.decorate('mcpEndpoint', { serve: (revision: RevisionId, front: RevisionFront) => void fronts.set(revision, front) });

    const guard: RequestGuard = async (request, reply) => {
      if (isShuttingDown()) throw new GatewayError('shutting_down', 'The gateway is shutting down');
      const refused = await credentials?.(request, reply);
      // The body's bytes are charged before it is read, for whom the credentials name: a full budget refuses it unread.
      return refused ?? admission.admit(request, reply);
    };

    const post = async (request: FastifyRequest, reply: FastifyReply, charge: InflightCharge | undefined): Promise<FastifyReply> => {
      if (!accepts(request, 'application/json') && !accepts(request, 'text/event-stream')) {
        throw new GatewayError('not_acceptable', 'Not Acceptable: Accept must include application/json or text/event-stream');
      }
      const body = request.body as unknown;
      const refusal = refusalIn(body);
      if (refusal !== undefined) throw refusal;
      const revision = revisionOf(body, request.headers, isKnownSession);
      const front = revision === undefined ? undefined : fronts.get(revision.id);
      if (front === undefined) throw new GatewayError('invalid_request', 'Invalid Request: no protocol revision this gateway speaks takes this message');
      return front.post(request, reply, body, charge);
    };

    const sessionMethod = async (method: 'get' | 'delete', request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
      for (const revision of REVISIONS) {
        const front = revision.sessions ? fronts.get(revision.id) : undefined;
        const handle = front?.[method];
        if (front !== undefined && handle !== undefined) return handle.call(front, request, reply);
      }
      throw new GatewayError('method_not_allowed', `Method Not Allowed: ${method.toUpperCase()} is for sessions, which no revision served here has`);
    };

    app.post(path, { onRequest: guard }, (request, reply) => admission.handling(request, (charge) => post(request, reply, charge)));
    app.get(path, { onRequest: guard }, (request, reply) => admission.handling(request, () => sessionMethod('get', request, reply)));
    app.delete(path, { onRequest: guard }, (request, reply) => admission.handling(request, () => sessionMethod('delete', request, reply)));
  },
  { name: 'taskgate-mcp-endpoint', fastify: '5.x' },
);
