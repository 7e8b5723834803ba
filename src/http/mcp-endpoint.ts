// The MCP endpoint (listen.path): the checks every request to it passes, in order (shutting down, credentials,
// the body's bytes in flight), then the front of the protocol revision that answers it. The revisions are the
// registry's (protocol/revisions.ts), served and handed in by the composition root in the registry's order: this
// file knows what a revision must offer the endpoint (EndpointRevision), never which revisions there are.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { GatewayError } from '../errors.js';
import { RETRY_ELSEWHERE_MS } from '../lifecycle.js';
import type { InflightCharge } from '../tasks/inflight-bytes.js';
import type { Admission } from './admission.js';
import type { RequestGuard } from './credentials-guard.js';
import { refusalIn } from './json-body.js';
import { accepts, type Refusal, type RequestHeaders } from './replies.js';

/** What a revision's front gets from the HTTP front end it is part of. */
export interface FrontContext {
  /** Open streams count against the caller's; the body's bytes in flight were charged here. */
  admission: Admission;
}

/** One revision's answers on the endpoint. */
export interface RevisionFront {
  /** `charge`: the body's bytes, which the call it starts holds until that ends. */
  post(request: FastifyRequest, reply: FastifyReply, body: unknown, charge: InflightCharge | undefined): Promise<FastifyReply>;
  /** A session's stream (GET) and its end (DELETE): only a revision with sessions has them. */
  get?(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply>;
  delete?(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply>;
}

/** What the endpoint needs of a revision the gateway serves. */
export interface EndpointRevision {
  readonly id: string;
  /** Whether clients hold sessions in it: only such a revision answers GET (its stream) and DELETE. */
  readonly sessions: boolean;
  /**
   * Whether a POSTed message (or batch) is this revision's. Asked in the registry's order: an entry may rely on
   * the ones before it having declined.
   */
  claims(body: unknown, headers: RequestHeaders, isKnownSession: (sessionId: string) => boolean): boolean;
  /** Whether the request's headers alone name this revision (what answers a request refused before its body is read). */
  namedBy(headers: RequestHeaders): boolean;
  readonly refusal: Refusal;
  /** Its front, built once for the front end. */
  front(context: FrontContext): RevisionFront;
}

/**
 * The error edge that answers a request refused before its message is read: the revision its headers name, else
 * the last of the registry (the one that takes whatever no other claims).
 */
export function refusalFor(revisions: readonly EndpointRevision[], headers: RequestHeaders): Refusal {
  const named = revisions.find((revision) => revision.namedBy(headers)) ?? revisions.at(-1);
  if (named === undefined) throw new Error('the gateway serves no protocol revision');
  return named.refusal;
}

export interface McpEndpointOptions {
  path: string;
  /** The revisions served, in the registry's order. */
  revisions: readonly EndpointRevision[];
  admission: Admission;
  /** Undefined without `auth`: every request is served, as the only principal there is. */
  credentials: RequestGuard | undefined;
  isShuttingDown(): boolean;
  /** Whether a session id is one of this gateway's live sessions (a message on it is that session's). */
  isKnownSession(sessionId: string): boolean;
}

/** The endpoint's routes, with the revisions' fronts built once. */
export async function mcpEndpointPlugin(app: FastifyInstance, { path, revisions, admission, credentials, isShuttingDown, isKnownSession }: McpEndpointOptions): Promise<void> {
  const served = revisions.map((revision) => ({ revision, front: revision.front({ admission }) }));

  const guard: RequestGuard = async (request, reply) => {
    // Every request, an existing session's too: the store answers any task method on every replica, and sessions
    // live in the store, so another replica serves them (docs/operations.md, "Shutdown and rolling upgrades").
    if (isShuttingDown()) throw new GatewayError('shutting_down', 'The gateway is shutting down: retry on another replica', { retryAfterMs: RETRY_ELSEWHERE_MS });
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
    const front = served.find(({ revision }) => revision.claims(body, request.headers, isKnownSession))?.front;
    if (front === undefined) throw new GatewayError('invalid_request', 'Invalid Request: no protocol revision this gateway speaks takes this message');
    return front.post(request, reply, body, charge);
  };

  const sessionMethod = async (method: 'get' | 'delete', request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    for (const { revision, front } of served) {
      const handle = revision.sessions ? front[method] : undefined;
      if (handle !== undefined) return handle.call(front, request, reply);
    }
    throw new GatewayError('method_not_allowed', `Method Not Allowed: ${method.toUpperCase()} is for sessions, which no revision served here has`);
  };

  app.post(path, { onRequest: guard }, (request, reply) => admission.handling(request, (charge) => post(request, reply, charge)));
  app.get(path, { onRequest: guard }, (request, reply) => admission.handling(request, () => sessionMethod('get', request, reply)));
  app.delete(path, { onRequest: guard }, (request, reply) => admission.handling(request, () => sessionMethod('delete', request, reply)));
}
