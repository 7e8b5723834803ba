// A 2025-11-25 POST whose calls may stream. The upstream may send progress, logs or requests before its result,
// and a long call should be resumable with Last-Event-ID, so the answer becomes an SSE stream as soon as there is
// something to stream or the call outlasts `sse.jsonWindowMs`; a call answered sooner gets plain JSON, which
// costs a fraction of the writes.
import type { FastifyReply } from 'fastify';
import { toResponse, type JsonRpcRequest, type JsonRpcResponse } from '../../../jsonrpc.js';
import type { ClientSession } from '../../../gateway/session.js';
import { httpConnection } from '../../../streams/sse-connection.js';
import { supportsPrimingEvents } from '../../../mcp.js';
import { exchangeAnswer, type SessionOutcome } from '../errors.js';
import type { SessionRouter } from '../router.js';
import type { PostContext } from '../../post-context.js';
import type { JsonWindow, JsonWindows } from './json-window.js';

/** Reconnect delay the priming event suggests to clients whose stream drops. */
const PRIME_RETRY_MS = 1000;

export interface StreamedAnswer {
  router: SessionRouter;
  /** The sse.jsonWindowMs deadlines: how long the answer may still become plain JSON (undefined, 0: a stream at once). */
  windows: JsonWindows | undefined;
  session: ClientSession;
  requests: JsonRpcRequest[];
  /** Answers to the batch's invalid messages, sent with the others. */
  invalid: JsonRpcResponse[];
  batch: boolean;
  reply: FastifyReply;
  /** What the front read of the POST: its caller, the body's bytes, its Idempotency-Key header. */
  post: PostContext;
}

export async function answerStreamed({ router, windows, session, requests, invalid, batch, reply, post }: StreamedAnswer): Promise<FastifyReply> {
  const stream = session.openStream();
  reply.hijack();
  const raw = reply.raw;
  const held: JsonRpcResponse[] = [...invalid];
  const startStream = (): void => {
    stream.cancelDeferred();
    stream.attach(httpConnection(raw), supportsPrimingEvents(session.protocolVersion) ? { primeRetryMs: PRIME_RETRY_MS } : {});
    for (const response of held.splice(0)) stream.send(response);
  };
  let window: JsonWindow | undefined;
  if (windows !== undefined) {
    stream.attachOnDemand(startStream);
    window = windows.start(() => stream.deferred && startStream());
  } else startStream();

  let only: SessionOutcome | undefined;
  await Promise.all(
    requests.map(async (r) => {
      const outcome = await router.handle(session, r, stream, post);
      if (outcome === undefined) return;
      only = outcome;
      const response = toResponse(r.id, outcome);
      if (stream.deferred) held.push(response);
      else stream.send(response);
    }),
  );
  window?.close();
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
