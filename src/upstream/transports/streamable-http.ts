import { setMaxListeners } from 'node:events';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { Logger } from '../../log.js';
import { encodeMessage, isRequest, isResponse, type JsonRpcMessage, type RequestId } from '../../jsonrpc.js';
import { readBodyStart, type BodyStream } from './body-reader.js';
import { MessageTooLargeError, oversized, RESYNC_FACTOR } from './oversized.js';
import { dispatchPost } from './post-response.js';
import { decodePayload, describeUnanswered, readHttpPayload, type HttpPayload } from './payload.js';
import { readSse } from './sse-reader.js';
import { refusalMessage } from './http-refusal.js';
import type { Outbound, OutboundDispatchOptions } from './outbound.js';
import { holdReadable, receiveDecoded, type HttpTransportOptions, type UpstreamTransport } from './transport.js';

const MAX_RESUME_ATTEMPTS = 5;
const DEFAULT_RETRY_MS = 1000;
const MAX_GET_STREAM_BACKOFF_MS = 30_000;
/** In every POST's headers (the interceptor puts the configured headers before them, so that those cannot replace them). */
const POST_CONTENT_HEADERS: Readonly<Record<string, string>> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/**
 * Streamable HTTP client (2025-03-26 .. 2025-11-25) over undici. Unlike a generic client it reports which POST
 * each incoming message arrived on, and when a POST stream ends for good without its response.
 */
export class StreamableHttpTransport implements UpstreamTransport {
  readonly relatesMessages = true;
  onmessage?: UpstreamTransport['onmessage'];
  onrequestlost?: UpstreamTransport['onrequestlost'];
  onclose?: UpstreamTransport['onclose'];
  onoversized?: UpstreamTransport['onoversized'];

  private sessionId: string | undefined;
  private protocolVersion: string | undefined;
  private closed = false;
  /**
   * Aborts the GET requests in flight when the connection closes. One for the connection, not one per request: they
   * are only ever aborted all together, and a controller per call was a measurable share of a proxied call's CPU.
   */
  private readonly abort = new AbortController();
  /** The POSTs in flight (post-response.ts), aborted with the rest when the connection closes. */
  private readonly posts = new Set<(reason: Error) => void>();
  /** Where requests go, split once: undici's request(url) parses the URL again on every call. */
  private readonly origin: string;
  private readonly path: string;
  /**
   * The headers every POST carries, remade only when the session or the protocol version they name changes (one
   * object, so that the interceptor can keep the headers it made from it: outbound.ts).
   */
  private postHeaders: Record<string, string> | undefined;
  /** The response streams being read: each POST's, by its request id, and the standalone GET stream. */
  private readonly postStreams = new Map<RequestId, BodyStream>();
  private getStream: Readable | undefined;

  private readonly dispatcher: Dispatcher;
  private readonly logger: Logger;
  /** Largest message taken from the upstream: a JSON body, or one SSE event. */
  private readonly maxMessageBytes: number;

  constructor(options: HttpTransportOptions) {
    ({ dispatcher: this.dispatcher, logger: this.logger, maxMessageBytes: this.maxMessageBytes } = options);
    const parsed = new URL(options.url);
    this.origin = parsed.origin;
    this.path = `${parsed.pathname}${parsed.search}`;
    // Each GET in flight (the standalone stream, a resumed POST stream) listens on the one signal until it ends.
    setMaxListeners(0, this.abort.signal);
  }

  private request(options: Omit<Dispatcher.RequestOptions, 'origin' | 'path'>): Promise<Dispatcher.ResponseData> {
    return this.dispatcher.request({ ...options, origin: this.origin, path: this.path });
  }

  async start(): Promise<void> {}

  setProtocolVersion(version: string): void {
    this.protocolVersion = version;
    this.postHeaders = undefined;
  }

  async send(message: JsonRpcMessage, outbound?: Outbound): Promise<void> {
    if (this.closed) throw new Error('connection is closed');
    const options: OutboundDispatchOptions = { origin: this.origin, path: this.path, method: 'POST', headers: this.headersForPost(), body: encodeMessage(message), outbound };
    const response = await dispatchPost(this.dispatcher, options, this.posts);
    const sessionId = response.sessionId;
    if (sessionId !== undefined && this.sessionId === undefined) {
      this.sessionId = sessionId;
      this.postHeaders = undefined;
    }
    const status = response.statusCode;
    if (status === 202) {
      await response.body.dump();
      if ('method' in message && message.method === 'notifications/initialized') this.openGetStream(0);
      return;
    }
    if (status === 404 && this.sessionId !== undefined) {
      await response.body.dump();
      this.fail('the upstream session expired (HTTP 404)');
      throw new Error('the upstream session expired (HTTP 404)');
    }
    if (status >= 300) {
      throw new Error(refusalMessage(status, response.wwwAuthenticate, await readBodyStart(response.body, 300)));
    }
    const requestId = isRequest(message) ? message.id : undefined;
    const contentType = response.contentType;
    if (contentType.includes('text/event-stream')) {
      // The response arrives later on this stream; send() only covers delivery of the request.
      void this.consumePostStream(response.body, requestId);
      return;
    }
    const payload = await this.readPayload(response.body, contentType, response.contentLength, requestId);
    if (payload === undefined) return;
    const answered = this.dispatchItems(payload.items, requestId);
    if (requestId !== undefined && !answered) {
      this.onrequestlost?.(requestId, `the upstream answered without a response (${describeUnanswered(status, contentType, payload.start)})`);
    }
  }

  hold(relatedTo: RequestId | undefined, until: Promise<void>): void {
    holdReadable(relatedTo === undefined ? this.getStream : this.postStreams.get(relatedTo), until);
  }

  /** The upstream session this connection opened (its `Mcp-Session-Id`), once the upstream gave one. */
  get session(): { sessionId: string; protocolVersion?: string } | undefined {
    if (this.sessionId === undefined) return undefined;
    return this.protocolVersion === undefined ? { sessionId: this.sessionId } : { sessionId: this.sessionId, protocolVersion: this.protocolVersion };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.abortAll();
    // Ending the upstream session frees its state there; failure only costs the upstream a timeout.
    if (this.sessionId !== undefined) await endUpstreamSession({ dispatcher: this.dispatcher, url: `${this.origin}${this.path}` }, this.sessionId, this.protocolVersion);
  }

  /**
   * A response body that is not an SSE stream, at most maxMessageBytes: a larger one is cut off as it arrives (its request aborted) and the call
   * it answers fails; the upstream's other traffic goes on. Undefined when it was too large.
   */
  private async readPayload(body: BodyStream, contentType: string, contentLength: string | string[] | undefined, requestId: RequestId | undefined): Promise<HttpPayload | undefined> {
    try {
      return await readHttpPayload(body, contentType, contentLength, this.maxMessageBytes, this.logger);
    } catch (error) {
      if (!(error instanceof MessageTooLargeError)) throw error;
      this.onoversized?.(oversized(this.maxMessageBytes, error.head, requestId));
      return undefined;
    }
  }

  private requestHeaders(): Record<string, string> {
    const headers: Record<string, string> = {};
    if (this.sessionId !== undefined) headers['mcp-session-id'] = this.sessionId;
    if (this.protocolVersion !== undefined) headers['mcp-protocol-version'] = this.protocolVersion;
    return headers;
  }

  private abortAll(): void {
    this.abort.abort();
    const reason = new Error('the connection to the upstream closed');
    for (const abort of [...this.posts]) abort(reason);
    this.posts.clear();
  }

  private headersForPost(): Record<string, string> {
    return (this.postHeaders ??= { ...this.requestHeaders(), ...POST_CONTENT_HEADERS });
  }

  private fail(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.abortAll();
    this.onclose?.(reason);
  }

  /** Dispatches decoded items (of a JSON body or SSE data field); returns whether one was the response to `requestId`. */
  private dispatchItems(items: unknown[], requestId: RequestId | undefined): boolean {
    let answered = false;
    for (const item of items) {
      const message = receiveDecoded(item, this, this.logger, requestId);
      if (message !== undefined && requestId !== undefined && isResponse(message) && message.id === requestId) answered = true;
    }
    return answered;
  }

  private dispatchPayload(text: string, requestId: RequestId | undefined): boolean {
    return this.dispatchItems(decodePayload(text, this.logger), requestId);
  }

  private async consumePostStream(body: BodyStream, requestId: RequestId | undefined): Promise<void> {
    let answered = false;
    let stream: BodyStream = body;
    for (let attempt = 0; ; attempt++) {
      if (requestId !== undefined) this.postStreams.set(requestId, stream);
      const outcome = await readSse(
        stream,
        (event) => {
          if (this.dispatchPayload(event.data, requestId)) answered = true;
        },
        { maxEventBytes: this.maxMessageBytes },
      );
      if (requestId !== undefined) this.postStreams.delete(requestId);
      if (outcome.oversized !== undefined) {
        // The stream is this request's own, so only the request is lost (and only if it was still unanswered).
        this.onoversized?.(oversized(this.maxMessageBytes, outcome.oversized.head, answered ? undefined : requestId));
        return;
      }
      if (answered || requestId === undefined || this.closed) return;
      // The upstream closed the stream before answering (SEP-1699 polling, or a dropped connection):
      // resume it with Last-Event-ID when it gave us one, else the call is lost.
      if (outcome.lastEventId === undefined || attempt >= MAX_RESUME_ATTEMPTS) {
        const why = outcome.error ? `the connection dropped (${outcome.error.message})` : 'the upstream closed the stream';
        this.onrequestlost?.(requestId, `${why} before answering`);
        return;
      }
      await sleep(outcome.retryMs ?? DEFAULT_RETRY_MS);
      const resumed = await this.resume(outcome.lastEventId);
      if (resumed === undefined) {
        this.onrequestlost?.(requestId, 'the upstream did not accept the stream resumption');
        return;
      }
      stream = resumed;
    }
  }

  private async resume(lastEventId: string): Promise<Readable | undefined> {
    if (this.closed) return undefined;
    try {
      const response = await this.request({
        method: 'GET',
        signal: this.abort.signal,
        headers: { ...this.requestHeaders(), accept: 'text/event-stream', 'last-event-id': lastEventId },
      });
      if (response.statusCode !== 200) {
        await response.body.dump();
        return undefined;
      }
      return response.body;
    } catch {
      return undefined;
    }
  }

  /** The standalone GET stream carries messages unrelated to any request (list changes, resource updates). */
  private openGetStream(failures: number): void {
    if (this.closed) return;
    let lastEventId: string | undefined;
    const run = async (): Promise<void> => {
      const headers: Record<string, string> = { ...this.requestHeaders(), accept: 'text/event-stream' };
      if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
      const response = await this.request({ method: 'GET', signal: this.abort.signal, headers });
      if (response.statusCode === 405) {
        await response.body.dump();
        return; // The upstream offers no GET stream; nothing unsolicited will come.
      }
      if (response.statusCode === 404 && this.sessionId !== undefined) {
        await response.body.dump();
        this.fail('the upstream session expired (HTTP 404)');
        return;
      }
      if (response.statusCode !== 200) {
        await response.body.dump();
        throw new Error(`HTTP ${response.statusCode}`);
      }
      failures = 0;
      this.getStream = response.body;
      // This stream carries everything unrelated to a request: an over-long event is skipped, not the stream.
      const outcome = await readSse(response.body, (event) => this.dispatchPayload(event.data, undefined), {
        maxEventBytes: this.maxMessageBytes,
        skipOversized: (head) => this.onoversized?.(oversized(this.maxMessageBytes, head)),
      });
      lastEventId = outcome.lastEventId ?? lastEventId;
      if (outcome.oversized !== undefined) throw new Error(`an event on the GET stream went past ${RESYNC_FACTOR} × maxMessageBytes without ending`);
      throw outcome.error ?? new Error('stream ended');
    };
    const loop = async (): Promise<void> => {
      for (;;) {
        try {
          await run();
          return;
        } catch (error) {
          if (this.closed) return;
          failures++;
          const delay = Math.min(MAX_GET_STREAM_BACKOFF_MS, DEFAULT_RETRY_MS * 2 ** Math.min(failures, 5));
          this.logger.debug({ err: error, delay }, 'upstream GET stream ended; reconnecting');
          await sleep(delay);
        }
      }
    };
    void loop();
  }
}

/** How long the DELETE that ends an upstream session may take: past it the upstream keeps the session to its own expiry. */
export const END_SESSION_TIMEOUT_MS = 2_000;

/**
 * Ends an upstream session (HTTP DELETE with its `Mcp-Session-Id`): when its connection closes, and for the
 * sessions a dead replica left open. Resolves whether the upstream answered (any status: 404 means it had already
 * ended it); never rejects.
 */
export async function endUpstreamSession(
  to: Pick<HttpTransportOptions, 'dispatcher' | 'url'>,
  sessionId: string,
  protocolVersion: string | undefined,
): Promise<boolean> {
  const url = new URL(to.url);
  try {
    const headers: Record<string, string> = { 'mcp-session-id': sessionId };
    if (protocolVersion !== undefined) headers['mcp-protocol-version'] = protocolVersion;
    const response = await to.dispatcher.request({ origin: url.origin, path: `${url.pathname}${url.search}`, method: 'DELETE', headers, signal: AbortSignal.timeout(END_SESSION_TIMEOUT_MS) });
    await response.body.dump();
    return true;
  } catch {
    return false;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref?.());
}
