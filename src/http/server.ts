import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { GatewayConfig } from '../config/types.js';
import { GatewayError, retryAfterHeaders } from '../errors.js';
import {
  isNotification,
  isRequest,
  jsonNestingExceeds,
  toResponse,
  validateMessage,
  type JsonObject,
  type JsonRpcMessage,
  type JsonRpcRequest,
  type JsonRpcResponse,
} from '../jsonrpc.js';
import type { Logger } from '../log.js';
import { isSupportedLegacyVersion, LEGACY_VERSIONS, supportsBatches, supportsPrimingEvents } from '../protocol/mcp.js';
import { exchangeAnswer, legacyErrorResponse, legacyRefusal, type LegacyOutcome } from '../protocol/rev2025-11-25/errors.js';
import { InflightBudgetFull, type InflightBytes, type InflightCharge } from '../tasks/inflight-bytes.js';
import type { Caller } from '../tasks/principals.js';
import { RateLimited, type RateLimiter } from '../tasks/rate-limits.js';
import { AuthError, type Authenticator } from './credentials.js';
import type { Router } from '../protocol/rev2025-11-25/router.js';
import type { ClientSession } from '../gateway/session.js';
import type { SessionRegistry } from '../gateway/sessions.js';
import type { SessionRelay } from '../gateway/session-relay.js';
import { httpConnection } from '../protocol/event-stream.js';
import type { StreamBudget } from '../protocol/stream-budget.js';
import { checkRequestOrigin } from './guards.js';
import { corsPlugin } from './cors.js';
import { Admission, admissionPrincipal } from './admission.js';
import { ConnectionGuard } from './connections.js';
import { headersNameModernRevision, isModernMessage } from '../protocol/rev2026-07-28/envelope.js';
import { modernRefusal } from '../protocol/rev2026-07-28/errors.js';
import type { ModernRouter } from '../protocol/rev2026-07-28/router.js';
import { handleModernPost } from './modern-front.js';
import { dashboardPlugin, type DashboardOptions } from './dashboard.js';

/** What the front end needs from the rest of the gateway. */
export interface FrontEndDeps {
  config: GatewayConfig;
  logger: Logger;
  router: Router;
  modern: ModernRouter;
  sessions: SessionRegistry;
  relay: SessionRelay;
  readiness(): Promise<{ ready: boolean; body: JsonObject }>;
  isShuttingDown(): boolean;
  /** Undefined without an `auth` section: every request is served, as the only principal there is. */
  authenticator: Authenticator | undefined;
  /** Per-principal request rate (with `auth`). */
  rateLimiter: RateLimiter | undefined;
  /** The budgets of request bytes in flight (shared with the task core, whose runs hold what requests carried). */
  inflight: InflightBytes;
  /** What SSE streams may hold for clients that do not read; 2026-07-28 responses draw on it too. */
  streamBudget: StreamBudget;
  /** The task dashboard's parts; absent when dashboard.enabled is false (no routes). */
  dashboard?: DashboardOptions;
}

/** The front end's own parts, next to what the gateway gives it. */
interface FrontEnd extends FrontEndDeps {
  admission: Admission;
}

/** Who sent each MCP request, once its credentials were checked (requests of an authenticated gateway only). */
const callers = new WeakMap<FastifyRequest, Caller>();
function callerOf(request: FastifyRequest): Caller | undefined {
  return callers.get(request);
}

const REFUSED_BODY = Symbol('refused body');
interface RefusedBody {
  [REFUSED_BODY]: GatewayError;
}
function refusedBody(code: 'parse_error' | 'invalid_request', message: string): RefusedBody {
  return { [REFUSED_BODY]: new GatewayError(code, message) };
}

/** Reconnect delay the priming event suggests to clients whose stream drops. */
const PRIME_RETRY_MS = 1000;

export function createFrontEnd(deps: FrontEndDeps): FastifyInstance {
  const { config, logger } = deps;
  const listen = config.listen;
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    // Per-request access logs would double the log volume of a busy gateway; errors are still logged.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: listen.maxBodyBytes,
    forceCloseConnections: true,
    // fastify's own default (72 s) lets idle keep-alive connections hold slots long after their last request.
    keepAliveTimeout: listen.keepAliveTimeoutMs,
    // A request that never finishes arriving (slow headers, an unfinished body) holds a connection and a parser
    // forever unless something ends it: Node answers 408 and closes. Only the arrival of the request is timed;
    // a long answer (a tool call, an SSE stream) is not. Node checks at this interval, so it must be short.
    requestTimeout: listen.requestTimeoutMs,
    http: {
      headersTimeout: listen.headersTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, Math.max(50, Math.floor(listen.headersTimeoutMs / 4))),
    },
  });
  // Not server.maxConnections: Node refuses at the cap before anything could make room by closing idle ones.
  const connections = new ConnectionGuard(listen, deps.authenticator !== undefined, logger);
  connections.attach(app.server);
  const front: FrontEnd = { ...deps, admission: new Admission(deps.inflight, listen.maxBodyBytes, config.sessions.maxStreamsPerPrincipal, logger) };

  // JSON only (anything else is 415); malformed JSON is a JSON-RPC parse error, not fastify's 400, and JSON
  // nested deeper than any MCP message needs is refused before anything walks it. The refusal is the POST
  // handler's to send: a DELETE or GET with a stray body is not refused for it.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string;
    front.admission.bodyRead(request, text);
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

  app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, request, reply) => {
    if (request.raw.socket.destroyed) {
      // The client went away mid-request (an aborted upload): nothing to answer, and nothing wrong here.
      request.log.debug({ err: error }, 'client closed the connection before the request was complete');
      return;
    }
    const mapped =
      error instanceof GatewayError
        ? error
        : error.code === 'FST_ERR_CTP_BODY_TOO_LARGE'
          ? new GatewayError('body_too_large', `Request body exceeds ${listen.maxBodyBytes} bytes`)
          : error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
            ? new GatewayError('unsupported_media_type', 'Unsupported Media Type: Content-Type must be application/json')
            : undefined;
    if (mapped === undefined) request.log.error({ err: error }, 'unhandled front-end error');
    // The request reached no revision's router, or 2025-11-25's refused it: that revision's edge answers.
    const { status, body } = legacyRefusal(null, mapped ?? error);
    void reply.code(status).headers(retryAfterHeaders(body.error.data)).type('application/json').send(body);
  });

  // Every route, health and unknown paths included: a page that rebinds a name to this address learns nothing.
  app.addHook('onRequest', async (request) => checkRequestOrigin(listen, request.headers.host, request.headers.origin));
  // After the guard: its hook was added first, so it runs first.
  void app.register(corsPlugin, { listen });
  app.get('/healthz', async () => ({ status: 'ok' }));
  if (deps.dashboard !== undefined) void app.register(dashboardPlugin, deps.dashboard);
  app.get('/readyz', async (_request, reply) => {
    const { ready, body } = await deps.readiness();
    return reply.code(ready ? 200 : 503).send(body);
  });

  const path = listen.path;
  const authenticator = deps.authenticator;
  const requestsLimited = deps.rateLimiter?.limitsRequests === true;
  if (authenticator !== undefined) {
    // RFC 9728: where clients learn which authorization server issues tokens for this resource. Public, and read
    // by browser-based clients from other origins.
    for (const metadataPath of authenticator.metadataPaths(path)) {
      app.get(metadataPath, async (_request, reply) => reply.header('access-control-allow-origin', '*').send(authenticator.metadata()));
    }
  }
  // The body's bytes are charged before it is read: a full budget refuses the request unread.
  const admit = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    try {
      front.admission.chargeBody(request, reply.raw, admissionPrincipal(callerOf(request)));
      return undefined;
    } catch (error) {
      if (!(error instanceof InflightBudgetFull)) throw error;
      await discardBody(request);
      // No message has been read: the revision the headers name answers, without a request id.
      const { status, body } = headersNameModernRevision(request.headers) ? modernRefusal(null, error) : legacyRefusal(null, error);
      return reply.code(status).headers(retryAfterHeaders(body.error.data)).type('application/json').send(JSON.stringify(body));
    }
  };
  const guard = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    if (deps.isShuttingDown()) throw new GatewayError('shutting_down', 'The gateway is shutting down');
    if (authenticator === undefined) return admit(request, reply);
    try {
      const caller = await authenticator.authenticate(header(request, 'authorization'));
      callers.set(request, caller);
      connections.proven(request.raw.socket);
      if (requestsLimited) await deps.rateLimiter?.request(caller.principal);
      return admit(request, reply);
    } catch (error) {
      if (!(error instanceof RateLimited) && !(error instanceof AuthError)) throw error;
      await discardBody(request);
      if (error instanceof RateLimited) return sendRateLimited(reply, error);
      logger.info({ audit: 'access.denied', reason: error.message, status: error.status }, 'request refused: credentials');
      if (error.detail !== undefined) logger.debug({ reason: error.detail, status: error.status }, 'refused token, in detail');
      return reply
        .code(error.status)
        .header('www-authenticate', authenticator.challenge(error))
        .type('application/json')
        .send(JSON.stringify(legacyRefusal(null, new GatewayError('invalid_request', error.message)).body));
    }
  };
  app.post(path, { onRequest: guard }, (request, reply) => front.admission.handling(request, (charge) => handlePost(front, request, reply, charge)));
  app.get(path, { onRequest: guard }, (request, reply) => front.admission.handling(request, () => handleGet(front, request, reply)));
  app.delete(path, { onRequest: guard }, (request, reply) => front.admission.handling(request, () => handleDelete(front, request, reply)));
  return app;
}

/**
 * Reads and drops what is left of a request's body before the request is refused unread: a client still sending
 * it would otherwise see its connection reset instead of the answer (what nginx's lingering close is for). Nothing
 * is kept, the body is at most listen.maxBodyBytes, and listen.requestTimeoutMs bounds a slow sender.
 */
function discardBody(request: FastifyRequest): Promise<void> {
  const raw = request.raw;
  if (raw.complete || raw.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    raw.once('end', resolve).once('close', resolve).once('error', () => resolve());
    raw.resume();
  });
}

function sendRateLimited(reply: FastifyReply, error: RateLimited): FastifyReply {
  return reply.code(error.httpStatus).headers(retryAfterHeaders(error.data)).type('application/json').send(JSON.stringify(legacyErrorResponse(null, error)));
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function accepts(request: FastifyRequest, type: string): boolean {
  const accept = header(request, 'accept');
  return accept === undefined || accept.includes(type) || accept.includes('*/*');
}

/**
 * The session a request names. Its `MCP-Protocol-Version` header, when present, must name a session-era revision
 * the gateway speaks. It need not be the one the session negotiated: the spec's rule is "invalid or unsupported →
 * 400", the SDK's reference server accepts any version it supports, and so does the released conformance suite's
 * client (it sends 2025-03-26 on a 2025-11-25 session). The session's own revision still decides what it is served.
 */
async function sessionOf(deps: FrontEndDeps, request: FastifyRequest): Promise<ClientSession> {
  const version = header(request, 'mcp-protocol-version');
  if (version !== undefined && !isSupportedLegacyVersion(version)) {
    throw new GatewayError('unsupported_protocol_version', `Bad Request: Unsupported protocol version '${version}' (supported: ${LEGACY_VERSIONS.join(', ')})`);
  }
  const id = header(request, 'mcp-session-id');
  if (id === undefined) throw new GatewayError('session_required', 'Bad Request: Mcp-Session-Id header is required');
  // Another principal's session does not exist for this caller.
  const session = await deps.sessions.getFor(id, callerOf(request)?.principal);
  if (session === undefined) throw new GatewayError('session_not_found', 'Session not found');
  return session;
}

function sendJson(reply: FastifyReply, status: number, body: unknown, headers: Record<string, string> = {}): FastifyReply {
  return reply.code(status).headers(headers).type('application/json').send(JSON.stringify(body));
}

async function handlePost(deps: FrontEnd, request: FastifyRequest, reply: FastifyReply, charge: InflightCharge | undefined): Promise<FastifyReply> {
  if (!accepts(request, 'application/json') && !accepts(request, 'text/event-stream')) {
    throw new GatewayError('not_acceptable', 'Not Acceptable: Accept must include application/json or text/event-stream');
  }
  const body = request.body as unknown;
  if (typeof body === 'object' && body !== null && REFUSED_BODY in body) throw (body as RefusedBody)[REFUSED_BODY];
  if (isModernMessage(body, request.headers, (id) => deps.sessions.peek(id) !== undefined)) {
    return handleModernPost({ modern: deps.modern, logger: deps.logger, keepAliveMs: deps.config.sse.keepAliveMs, admission: deps.admission, streamBudget: deps.streamBudget }, request, reply, body, callerOf(request), charge);
  }
  const batch = Array.isArray(body);
  const items = batch ? (body as unknown[]) : [body];
  if (items.length === 0) throw new GatewayError('invalid_request', 'Invalid Request: empty batch');
  // Checked before anything is done for the messages: a batch fans out upstream, one call per message.
  const maxBatch = deps.config.listen.maxBatchSize;
  if (items.length > maxBatch) {
    throw new GatewayError('invalid_request', `Invalid Request: a batch may hold at most ${maxBatch} messages (listen.maxBatchSize); this one has ${items.length}`);
  }
  // Each message of a batch is a request against requestsPerSecond (the guard counted the POST as one). Past the
  // limit the whole batch is refused: it is one HTTP exchange, so its one 429 and Retry-After speak for all of it,
  // and a client retries the batch whole rather than working out which half was served.
  const caller = callerOf(request);
  if (batch && items.length > 1 && caller !== undefined && deps.rateLimiter?.limitsRequests === true) {
    try {
      await deps.rateLimiter.request(caller.principal, items.length - 1);
    } catch (error) {
      if (error instanceof RateLimited) return sendRateLimited(reply, error);
      throw error;
    }
  }

  const messages: JsonRpcMessage[] = [];
  const invalid: JsonRpcResponse[] = [];
  for (const item of items) {
    const message = validateMessage(item);
    if (typeof message === 'string') {
      const id = typeof item === 'object' && item !== null && 'id' in item ? ((item as { id: unknown }).id as string | number) : null;
      invalid.push(legacyErrorResponse(typeof id === 'string' || typeof id === 'number' ? id : null, new GatewayError('invalid_request', `Invalid Request: ${message}`)));
    } else messages.push(message);
  }
  if (messages.length === 0) return sendJson(reply, 400, batch ? invalid : invalid[0]);

  const initialize = messages.find((m) => isRequest(m) && m.method === 'initialize') as JsonRpcRequest | undefined;
  if (initialize !== undefined) {
    if (batch) throw new GatewayError('invalid_request', 'Invalid Request: initialize must be sent alone, not in a batch');
    if (header(request, 'mcp-session-id') !== undefined) {
      throw new GatewayError('invalid_request', 'Invalid Request: the session is already initialized');
    }
    const { response, sessionId } = await deps.router.initialize(initialize, callerOf(request));
    return sendJson(reply, 200, response, sessionId === undefined ? {} : { 'mcp-session-id': sessionId });
  }

  const session = await sessionOf(deps, request);
  if (batch && !supportsBatches(session.protocolVersion)) {
    throw new GatewayError('invalid_request', `Invalid Request: batches are not part of protocol ${session.protocolVersion} (only 2025-03-26 has them); send one message per POST`);
  }
  if (deps.logger.isLevelEnabled('debug')) {
    request.log.debug({ session: session.sessionId, methods: messages.map((m) => ('method' in m ? m.method : 'response')) }, 'mcp post');
  }
  const requests: JsonRpcRequest[] = [];
  for (const message of messages) {
    if (isRequest(message)) requests.push(message);
    else if (isNotification(message)) deps.router.handleNotification(session, message);
    else if (!session.answer(message.id as string | number, 'result' in message ? { result: message.result } : { error: message.error })) {
      request.log.debug({ id: message.id }, 'response to an unknown or settled request; ignored');
    }
  }
  if (requests.length === 0) {
    if (invalid.length > 0) return sendJson(reply, 400, batch ? invalid : invalid[0]);
    return reply.code(202).send();
  }

  const streamed = (header(request, 'accept') ?? '').includes('text/event-stream') && requests.some((r) => deps.router.mayStream(session, r));
  if (!streamed) {
    const responses: JsonRpcResponse[] = [...invalid];
    let only: LegacyOutcome | undefined;
    await Promise.all(
      requests.map(async (r) => {
        const outcome = await deps.router.handle(session, r, undefined, callerOf(request), charge);
        if (outcome !== undefined) responses.push(toResponse(r.id, outcome));
        only = outcome;
      }),
    );
    if (responses.length === 0) return reply.code(202).send();
    // A request alone in its POST may be refused with a status of its own (a task creation past its rate: 429).
    const answer = !batch && only !== undefined ? exchangeAnswer(only) : { status: 200, headers: {} };
    return sendJson(reply, answer.status, batch ? responses : responses[0], answer.headers);
  }

  // A POST that may stream holds an event stream (and its replay buffer) while it runs: one of the caller's streams.
  deps.admission.openStream(admissionPrincipal(callerOf(request)), reply.raw);
  return answerStreamed(deps, session, requests, invalid, batch, reply, callerOf(request), charge);
}

/**
 * Answers forwarded calls. The upstream may send progress, logs or requests before its result, and a long call
 * should be resumable with Last-Event-ID, so the answer becomes an SSE stream as soon as there is something to
 * stream or the call outlasts `sse.jsonWindowMs`; a call answered sooner gets plain JSON, which costs a
 * fraction of the writes.
 */
async function answerStreamed(
  deps: FrontEndDeps,
  session: ClientSession,
  requests: JsonRpcRequest[],
  invalid: JsonRpcResponse[],
  batch: boolean,
  reply: FastifyReply,
  caller: Caller | undefined,
  charge: InflightCharge | undefined,
): Promise<FastifyReply> {
  const stream = session.openStream();
  reply.hijack();
  const raw = reply.raw;
  const held: JsonRpcResponse[] = [...invalid];
  const startStream = (): void => {
    stream.cancelDeferred();
    stream.attach(httpConnection(raw), supportsPrimingEvents(session.protocolVersion) ? { primeRetryMs: PRIME_RETRY_MS } : {});
    for (const response of held.splice(0)) stream.send(response);
  };
  const windowMs = deps.config.sse.jsonWindowMs;
  let timer: NodeJS.Timeout | undefined;
  if (windowMs > 0) {
    stream.attachOnDemand(startStream);
    timer = setTimeout(() => stream.deferred && startStream(), windowMs);
  } else startStream();

  let only: LegacyOutcome | undefined;
  await Promise.all(
    requests.map(async (r) => {
      const outcome = await deps.router.handle(session, r, stream, caller, charge);
      if (outcome === undefined) return;
      only = outcome;
      const response = toResponse(r.id, outcome);
      if (stream.deferred) held.push(response);
      else stream.send(response);
    }),
  );
  clearTimeout(timer);
  if (stream.deferred) {
    stream.cancelDeferred();
    stream.finish();
    if (raw.destroyed) return reply;
    if (held.length === 0) raw.writeHead(202).end();
    else {
      const body = JSON.stringify(batch ? held : held[0]);
      // Nothing streamed yet: a lone request's refusal keeps its own status (a background task past its rate: 429).
      const answer = !batch && held.length === 1 && only !== undefined ? exchangeAnswer(only) : { status: 200, headers: {} };
      raw.writeHead(answer.status, { ...answer.headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
    }
    return reply;
  }
  stream.finish();
  return reply;
}

async function handleGet(deps: FrontEnd, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  if (!(header(request, 'accept') ?? '').includes('text/event-stream')) {
    throw new GatewayError('not_acceptable', 'Not Acceptable: Accept must include text/event-stream');
  }
  const session = await sessionOf(deps, request);
  deps.admission.openStream(admissionPrincipal(callerOf(request)), reply.raw);
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
      const { status, body } = legacyRefusal(null, error instanceof GatewayError ? error : new GatewayError('internal', (error as Error).message));
      reply.raw.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    }
    return reply;
  }
  const stream = session.openStandaloneStream();
  reply.hijack();
  stream.attach(httpConnection(reply.raw));
  return reply;
}

async function handleDelete(deps: FrontEnd, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const session = await sessionOf(deps, request);
  await deps.sessions.end(session);
  deps.logger.info({ session: session.sessionId }, 'session ended by the client');
  return reply.code(200).send();
}

