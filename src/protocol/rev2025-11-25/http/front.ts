// The 2025-11-25 front (and the session-era revisions before it): sessions made by initialize, POSTs of one
// message or a batch (2025-03-26), answered as JSON or as a resumable SSE stream, the session's GET stream and
// its DELETE.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { GatewayError } from '../../../errors.js';
import type { GatewayEvents } from '../../../events.js';
import { isNotification, isRequest, toResponse, validateMessage, type JsonRpcMessage, type JsonRpcRequest, type JsonRpcResponse } from '../../../jsonrpc.js';
import type { Logger } from '../../../log.js';
import { httpConnection } from '../../../streams/sse-connection.js';
import { isSessionVersion, SESSION_VERSIONS, supportsBatches } from '../../../mcp.js';
import { exchangeAnswer, sessionErrorResponse, sessionRefusal, type SessionOutcome } from '../errors.js';
import type { SessionRouter } from '../router.js';
import type { ClientSession } from '../../../gateway/session.js';
import type { SessionRegistry } from '../../../gateway/sessions.js';
import type { SessionRelay } from '../../../gateway/session-relay.js';
import type { InflightCharge } from '../../../tasks/inflight-bytes.js';
import { RateLimited, type RateLimiter } from '../../../tasks/rate-limits.js';
import { admissionPrincipal, type Admission } from '../../../http/admission.js';
import { callerOf } from '../../../http/credentials-guard.js';
import { idempotencyHeaderOf } from '../../idempotency-key.js';
import type { PostContext } from '../../post-context.js';
import { JsonWindows } from './json-window.js';
import { answerStreamed, type StreamedAnswer } from './streamed-answer.js';
import { header, sendJson, sendRateLimited } from '../../../http/replies.js';
import { announceStream } from '../../../http/stream-events.js';
import type { RevisionFront } from '../../../http/mcp-endpoint.js';
import type { Caller } from '../../../principals.js';

export interface SessionFrontDeps {
  router: SessionRouter;
  sessions: SessionRegistry;
  /** Resumes streams another replica holds. */
  relay: SessionRelay;
  /** With `auth`: the messages of a batch beyond the first count against requestsPerSecond too. */
  rateLimiter: RateLimiter | undefined;
  admission: Admission;
  events: GatewayEvents;
  logger: Logger;
  /** listen.maxBatchSize. */
  maxBatchSize: number;
  /** sse.jsonWindowMs. */
  jsonWindowMs: number;
}

/**
 * The session a request names. Its `MCP-Protocol-Version` header, when present, must name a session-era revision
 * the gateway speaks. It need not be the one the session negotiated: the spec's rule is "invalid or unsupported →
 * 400", the SDK's reference server accepts any version it supports, and so does the released conformance suite's
 * client (it sends 2025-03-26 on a 2025-11-25 session). The session's own revision still decides what it is served.
 */
async function sessionOf(sessions: SessionRegistry, request: FastifyRequest): Promise<ClientSession> {
  const version = header(request, 'mcp-protocol-version');
  if (version !== undefined && !isSessionVersion(version)) {
    throw new GatewayError('unsupported_protocol_version', `Bad Request: Unsupported protocol version '${version}' (supported: ${SESSION_VERSIONS.join(', ')})`);
  }
  const id = header(request, 'mcp-session-id');
  if (id === undefined) throw new GatewayError('session_required', 'Bad Request: Mcp-Session-Id header is required');
  // Another principal's session does not exist for this caller.
  const session = await sessions.getFor(id, callerOf(request)?.principal);
  if (session === undefined) throw new GatewayError('session_not_found', 'Session not found');
  return session;
}

/** Splits a POST's messages from the invalid ones, which are answered (with their id, when they had one). */
function validated(items: unknown[]): { messages: JsonRpcMessage[]; invalid: JsonRpcResponse[] } {
  const messages: JsonRpcMessage[] = [];
  const invalid: JsonRpcResponse[] = [];
  for (const item of items) {
    const message = validateMessage(item);
    if (typeof message !== 'string') {
      messages.push(message);
      continue;
    }
    const id = typeof item === 'object' && item !== null && 'id' in item ? (item as { id: unknown }).id : null;
    invalid.push(sessionErrorResponse(typeof id === 'string' || typeof id === 'number' ? id : null, new GatewayError('invalid_request', `Invalid Request: ${message}`)));
  }
  return { messages, invalid };
}

async function post(
  deps: SessionFrontDeps,
  windows: JsonWindows | undefined,
  request: FastifyRequest,
  reply: FastifyReply,
  body: unknown,
  charge: InflightCharge | undefined,
): Promise<FastifyReply> {
  const batch = Array.isArray(body);
  const items = batch ? (body as unknown[]) : [body];
  const caller = callerOf(request);
  const limited = await admitBatch(deps, items, caller);
  if (limited !== undefined) return sendRateLimited(reply, limited);

  const { messages, invalid } = validated(items);
  if (messages.length === 0) return sendJson(reply, 400, batch ? invalid : invalid[0]);

  const initialize = messages.find((m) => isRequest(m) && m.method === 'initialize') as JsonRpcRequest | undefined;
  if (initialize !== undefined) {
    if (batch) throw new GatewayError('invalid_request', 'Invalid Request: initialize must be sent alone, not in a batch');
    if (header(request, 'mcp-session-id') !== undefined) {
      throw new GatewayError('invalid_request', 'Invalid Request: the session is already initialized');
    }
    const { response, sessionId } = await deps.router.initialize(initialize, caller);
    return sendJson(reply, 200, response, sessionId === undefined ? {} : { 'mcp-session-id': sessionId });
  }

  const session = await sessionOf(deps.sessions, request);
  if (batch && !supportsBatches(session.protocolVersion)) {
    throw new GatewayError('invalid_request', `Invalid Request: batches are not part of protocol ${session.protocolVersion} (only 2025-03-26 has them); send one message per POST`);
  }
  if (deps.logger.isLevelEnabled('debug')) {
    request.log.debug({ session: session.sessionId, methods: messages.map((m) => ('method' in m ? m.method : 'response')) }, 'mcp post');
  }
  const requests = deliverAllButRequests(deps.router, session, messages, request);
  if (requests.length === 0) {
    if (invalid.length > 0) return sendJson(reply, 400, batch ? invalid : invalid[0]);
    return reply.code(202).send();
  }

  // An Idempotency-Key names one call: a batch of several cannot say which.
  const idempotencyHeader = idempotencyHeaderOf(request.headers);
  if (idempotencyHeader !== undefined && requests.length > 1) {
    throw new GatewayError('invalid_request', 'Invalid Request: an Idempotency-Key header names one call; send a batch of several requests without it');
  }
  const post: PostContext = { caller, charge, idempotencyHeader };
  const streamed = (header(request, 'accept') ?? '').includes('text/event-stream') && requests.some((r) => deps.router.mayStream(session, r));
  if (!streamed) return answerJson({ router: deps.router, session, requests, invalid, batch, reply, post });

  // A POST that may stream holds an event stream (and its replay buffer) while it runs: one of the caller's streams.
  deps.admission.openStream(admissionPrincipal(caller), reply.raw);
  announceStream(deps.events, 'post', reply.raw);
  return answerStreamed({ router: deps.router, windows, session, requests, invalid, batch, reply, post });
}

/**
 * Checks a batch before anything is done for its messages (a batch fans out upstream, one call per message): throws
 * for an empty one or one past listen.maxBatchSize; returns the refusal of one past the caller's rate (undefined:
 * admitted). Not the reply itself: a FastifyReply is thenable, and awaiting it waits for the answer to be sent.
 */
async function admitBatch(deps: SessionFrontDeps, items: unknown[], caller: Caller | undefined): Promise<RateLimited | undefined> {
  if (items.length === 0) throw new GatewayError('invalid_request', 'Invalid Request: empty batch');
  if (items.length > deps.maxBatchSize) {
    throw new GatewayError('invalid_request', `Invalid Request: a batch may hold at most ${deps.maxBatchSize} messages (listen.maxBatchSize); this one has ${items.length}`);
  }
  // Each message of a batch is a request against requestsPerSecond (the guard counted the POST as one). Past the
  // limit the whole batch is refused: it is one HTTP exchange, so its one 429 and Retry-After speak for all of it,
  // and a client retries the batch whole rather than working out which half was served.
  if (items.length > 1 && caller !== undefined && deps.rateLimiter?.limitsRequests === true) {
    try {
      await deps.rateLimiter.request(caller.principal, items.length - 1);
    } catch (error) {
      if (error instanceof RateLimited) return error;
      throw error;
    }
  }
  return undefined;
}

/** Delivers what is not a request (notifications to the router, responses to the session's own requests); returns the requests. */
function deliverAllButRequests(router: SessionRouter, session: ClientSession, messages: JsonRpcMessage[], request: FastifyRequest): JsonRpcRequest[] {
  const requests: JsonRpcRequest[] = [];
  for (const message of messages) {
    if (isRequest(message)) requests.push(message);
    else if (isNotification(message)) router.handleNotification(session, message);
    else if (!session.answer(message.id as string | number, 'result' in message ? { result: message.result } : { error: message.error })) {
      request.log.debug({ id: message.id }, 'response to an unknown or settled request; ignored');
    }
  }
  return requests;
}

/** The requests' answers as one JSON body, once every request has been handled (202 when none has an answer). */
async function answerJson({ router, session, requests, invalid, batch, reply, post }: Omit<StreamedAnswer, 'windows'>): Promise<FastifyReply> {
  const responses: JsonRpcResponse[] = [...invalid];
  let only: SessionOutcome | undefined;
  await Promise.all(
    requests.map(async (r) => {
      const outcome = await router.handle(session, r, undefined, post);
      if (outcome !== undefined) responses.push(toResponse(r.id, outcome));
      only = outcome;
    }),
  );
  if (responses.length === 0) return reply.code(202).send();
  // A request alone in its POST may be refused with a status of its own (a task creation past its rate: 429).
  const answer = !batch && only !== undefined ? exchangeAnswer(only) : { status: 200, headers: {} };
  return sendJson(reply, answer.status, batch ? responses : responses[0], answer.headers);
}

async function get(deps: SessionFrontDeps, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  if (!(header(request, 'accept') ?? '').includes('text/event-stream')) {
    throw new GatewayError('not_acceptable', 'Not Acceptable: Accept must include text/event-stream');
  }
  const session = await sessionOf(deps.sessions, request);
  deps.admission.openStream(admissionPrincipal(callerOf(request)), reply.raw);
  announceStream(deps.events, 'get', reply.raw);
  const lastEventId = header(request, 'last-event-id');
  const resumed = lastEventId === undefined ? undefined : session.streamForEvent(lastEventId);
  if (resumed !== undefined) {
    reply.hijack();
    resumed.attach(httpConnection(reply.raw), { lastEventId });
    return reply;
  }
  if (lastEventId !== undefined) {
    // A stream another replica holds: it replays and goes on through this one.
    reply.hijack();
    if (await deps.relay.resume(session.sessionId, lastEventId, reply.raw)) return reply;
    try {
      session.openStandaloneStream().attach(httpConnection(reply.raw));
    } catch (error) {
      const { status, body } = sessionRefusal(null, error instanceof GatewayError ? error : new GatewayError('internal', (error as Error).message));
      reply.raw.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    }
    return reply;
  }
  const stream = session.openStandaloneStream();
  reply.hijack();
  stream.attach(httpConnection(reply.raw));
  return reply;
}

async function end(deps: SessionFrontDeps, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const session = await sessionOf(deps.sessions, request);
  await deps.sessions.end(session);
  deps.logger.info({ session: session.sessionId }, 'session ended by the client');
  return reply.code(200).send();
}

/** The session revisions' answers on the MCP endpoint (their registry entry builds it: ../revision.ts). */
export function sessionFront(deps: SessionFrontDeps): RevisionFront {
  const windows = deps.jsonWindowMs > 0 ? new JsonWindows(deps.jsonWindowMs) : undefined;
  return {
    post: (request, reply, body, charge) => post(deps, windows, request, reply, body, charge),
    get: (request, reply) => get(deps, request, reply),
    delete: (request, reply) => end(deps, request, reply),
  };
}
