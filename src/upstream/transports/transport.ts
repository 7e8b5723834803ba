import type { Dispatcher } from 'undici';
import type { BodyStream } from './body-reader.js';
import { responseIdOf, validateMessage, type JsonRpcMessage, type RequestId } from '../../jsonrpc.js';
import type { Logger } from '../../log.js';
import type { OversizedMessage } from './oversized.js';
import type { Outbound } from './outbound.js';
import { warnViolation } from './violations.js';

/** What a transport over HTTP (Streamable HTTP, HTTP+SSE) is made with. */
export interface HttpTransportOptions {
  url: string;
  /**
   * The connection's dispatcher (http-agent.ts: upstreamDispatcher): the upstream's pool, which gives every request
   * the credential of the connection's identity (a client's own token never reaches an upstream) unless the request
   * carries its own, and its trace context. A transport adds neither.
   */
  dispatcher: Dispatcher;
  logger: Logger;
  /** Largest message taken from the upstream: a JSON body, or one SSE event. */
  maxMessageBytes: number;
}

/**
 * A message channel to one upstream MCP server. Kept deliberately smaller than the SDK's Transport: the gateway
 * needs to know which request an incoming message relates to (the POST stream it arrived on) and when a
 * request's stream died without an answer, which the SDK's interface cannot say.
 */
export interface UpstreamTransport {
  start(): Promise<void>;
  /**
   * Sends one message. Rejects when the upstream refused or could not be reached. `outbound`: what the request that
   * carries it goes out with (its caller's credential, its trace context), handed to the dispatcher unread, whose
   * interceptor applies it (outbound.ts); transports without requests of their own (stdio) ignore it.
   */
  send(message: JsonRpcMessage, outbound?: Outbound): Promise<void>;
  close(): Promise<void>;
  /** The revision negotiated by initialize; HTTP transports send it as `MCP-Protocol-Version`. */
  setProtocolVersion?(version: string): void;
  /**
   * Messages about a request arrive on that request's own stream (Streamable HTTP), so one that arrives
   * elsewhere belongs to no call. Stdio and HTTP+SSE have one stream for everything and cannot say.
   */
  readonly relatesMessages?: boolean;
  /**
   * Stops reading the stream that carries `relatedTo`'s messages (undefined: the stream that carries the rest)
   * until `until` settles, so that the upstream waits while a client takes what it was already sent: TCP or the
   * pipe pushes back. What the stream had already delivered in the same chunk still arrives. Transports without
   * it are never held back.
   */
  hold?(relatedTo: RequestId | undefined, until: Promise<void>): void;

  /** `relatedTo` is the id of the request on whose response stream the message arrived, when known. */
  onmessage?: (message: JsonRpcMessage, relatedTo?: RequestId) => void;
  /** A request's response stream ended for good without its response. */
  onrequestlost?: (id: RequestId, reason: string) => void;
  /** A message larger than the upstream's maxMessageBytes was dropped (the call it answers, if known, must fail). */
  onoversized?: (message: OversizedMessage) => void;
  /** The connection is gone for good (process exit, stream closed, session expired). */
  onclose?: (reason: string) => void;
}

/**
 * Hands one decoded upstream message to the connection (`relatedTo` as for onmessage) and returns it. An invalid
 * one is logged and dropped; if it was meant as a response, its request fails at once instead of waiting for an
 * answer that will not come.
 */
export function receiveDecoded(
  decoded: unknown,
  transport: Pick<UpstreamTransport, 'onmessage' | 'onrequestlost'>,
  logger: Logger,
  relatedTo?: RequestId,
): JsonRpcMessage | undefined {
  const message = validateMessage(decoded);
  if (typeof message !== 'string') {
    transport.onmessage?.(message, relatedTo);
    return message;
  }
  warnViolation(logger, 'an invalid JSON-RPC message', { problem: message });
  const id = responseIdOf(decoded);
  if (id !== undefined) transport.onrequestlost?.(id, `the upstream answered with an invalid response (${message})`);
  return undefined;
}

const holds = new WeakMap<BodyStream, number>();

/** Pauses `stream` until every hold on it has settled (see UpstreamTransport.hold). */
export function holdReadable(stream: BodyStream | undefined, until: Promise<void>): void {
  if (stream === undefined || stream.destroyed) return;
  const count = holds.get(stream) ?? 0;
  holds.set(stream, count + 1);
  if (count === 0) stream.pause();
  const release = (): void => {
    const left = (holds.get(stream) ?? 1) - 1;
    if (left > 0) {
      holds.set(stream, left);
      return;
    }
    holds.delete(stream);
    stream.resume();
  };
  until.then(release, release);
}
