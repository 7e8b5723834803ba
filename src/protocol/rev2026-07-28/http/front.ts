// POSTs of the 2026-07-28 era: one JSON-RPC message per request, validated (envelope, headers) before dispatch,
// answered as JSON or, once there is something to stream first, as SSE.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { GatewayError } from '../../../errors.js';
import type { GatewayEvents } from '../../../events.js';
import { isRequest, toResponse, validateMessage, type JsonObject, type RequestId } from '../../../jsonrpc.js';
import type { Logger } from '../../../log.js';
import type { InflightCharge } from '../../../tasks/inflight-bytes.js';
import type { Caller } from '../../../principals.js';
import { checkRoutingHeaders, readEnvelope } from '../envelope.js';
import { statelessRefusal, retryAfterHeader } from '../errors.js';
import { StatelessResponder } from '../responder.js';
import { idempotencyHeaderOf } from '../../idempotency-key.js';
import type { StatelessRouter } from '../router.js';
import { admissionPrincipal, type Admission } from '../../../http/admission.js';
import type { StreamBudget } from '../../../streams/stream-budget.js';
import type { NotifiedTaskId } from '../../../upstream/peer/client-flow.js';
import { callerOf } from '../../../http/credentials-guard.js';
import { announceStream } from '../../../http/stream-events.js';
import type { RevisionFront } from '../../../http/mcp-endpoint.js';

export interface StatelessFrontDeps {
  router: StatelessRouter;
  logger: Logger;
  keepAliveMs: number;
  /** Listen streams count against the caller's open streams. */
  admission: Admission;
  streamBudget: StreamBudget;
  /** The task a task-status notification names, in whichever revision (a stream coalesces by it). */
  notifiedTaskId: NotifiedTaskId;
  /** Every version the gateway speaks, newest first (the registry's): what an unsupported version is told. */
  supportedVersions: readonly string[];
  events: GatewayEvents;
}

/** Sends what this revision's error edge says a refused request gets. */
function refuse(reply: FastifyReply, id: RequestId | null, error: unknown): FastifyReply {
  const { status, body } = statelessRefusal(id, error);
  return reply.code(status).headers(retryAfterHeader(body)).type('application/json').send(JSON.stringify(body));
}

export async function handleStatelessPost(
  deps: StatelessFrontDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  body: unknown,
  caller: Caller | undefined,
  /** The request body's bytes, held by the call it starts until that ends. */
  charge: InflightCharge | undefined,
): Promise<FastifyReply> {
  if (Array.isArray(body)) return refuse(reply, null, new GatewayError('invalid_request', 'Invalid Request: batches are not part of protocol 2026-07-28; send one message per POST'));
  const message = validateMessage(body);
  if (typeof message === 'string') {
    const id = (body as { id?: unknown }).id;
    return refuse(reply, typeof id === 'string' || typeof id === 'number' ? id : null, new GatewayError('invalid_request', `Invalid Request: ${message}`));
  }
  // Notifications need no answer (the revision defines none a client sends over HTTP); responses have no request.
  if (!isRequest(message)) return reply.code(202).send();

  const headers = request.headers;
  let client;
  let leniency;
  try {
    client = { ...readEnvelope(message, headers, deps.supportedVersions), caller };
    leniency = checkRoutingHeaders(message, headers);
  } catch (error) {
    return refuse(reply, message.id, error);
  }
  if (leniency !== undefined) {
    const name = client.clientInfo?.name;
    deps.events.emit('request.lenient', { kind: leniency, method: message.method, ...(typeof name === 'string' ? { client: name } : {}) });
  }

  const canStream = (request.headers.accept ?? '').includes('text/event-stream');
  if (message.method === 'subscriptions/listen') {
    if (!canStream) return refuse(reply, message.id, new GatewayError('not_acceptable', 'Not Acceptable: subscriptions/listen answers with text/event-stream'));
    try {
      deps.admission.openStream(admissionPrincipal(caller), reply.raw);
    } catch (error) {
      return refuse(reply, message.id, error);
    }
  }
  // Announced only if the answer becomes a stream (a listen stream at once, a call once it has something to stream).
  announceStream(deps.events, message.method === 'subscriptions/listen' ? 'listen' : 'post', reply.raw);
  reply.hijack();
  const responder = new StatelessResponder(reply.raw, canStream, deps.keepAliveMs, deps.streamBudget, deps.notifiedTaskId);
  if (message.method === 'subscriptions/listen') {
    try {
      await deps.router.listen(client, message, responder);
    } catch (error) {
      const { status, body } = statelessRefusal(message.id, error);
      responder.finish(body as unknown as JsonObject, status);
    }
    return reply;
  }
  const answer = await deps.router.handle(client, message, headers, responder, { charge, idempotencyHeader: idempotencyHeaderOf(headers) });
  if (answer === undefined) responder.end();
  else responder.finish(toResponse(message.id, answer.outcome) as unknown as JsonObject, answer.status, retryAfterHeader(answer.outcome));
  return reply;
}

/** 2026-07-28's answers on the MCP endpoint: POSTs only (the revision has no sessions, so no GET or DELETE). */
export function statelessFront(deps: StatelessFrontDeps): RevisionFront {
  return { post: (request, reply, body, charge) => handleStatelessPost(deps, request, reply, body, callerOf(request), charge) };
}
