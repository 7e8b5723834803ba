import type { ServerResponse } from 'node:http';
import type { JsonObject } from '../../jsonrpc.js';
import type { ClientFlow, NotifiedTaskId } from '../../upstream/peer/client-flow.js';
import { EventStream } from '../../streams/event-stream.js';
import { httpConnection } from '../../streams/sse-connection.js';
import type { StreamBudget } from '../../streams/stream-budget.js';

/** Where the notifications of a request's call go, and whether its client is still there. */
export interface ResponseSink {
  notify(message: JsonObject): void;
  readonly gone: AbortSignal;
  /** The room on the response's stream, once it streams (see ClientFlow). */
  readonly flow?: ClientFlow | undefined;
}

const STREAM_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' };

/**
 * The HTTP response of one 2026-07-28 request. It stays undecided until there is something to stream: a request
 * answered with nothing before it gets plain JSON with the status its outcome calls for (a -32021 must still be
 * able to become HTTP 400), and the first notification turns it into an SSE stream. The stream holds what the
 * client has not read within the same bounds as a session's (progress coalesced, logs dropped with a count), but
 * has no event ids and keeps nothing once written: the revision has no resumption.
 */
export class StatelessResponder implements ResponseSink {
  private stream: EventStream | undefined;
  /** Aborted when the client goes away before the answer: the request is then cancelled. */
  readonly gone: AbortSignal;

  constructor(
    private readonly raw: ServerResponse,
    private readonly canStream: boolean,
    private readonly keepAliveMs: number,
    private readonly budget: StreamBudget,
    private readonly notifiedTaskId: NotifiedTaskId,
  ) {
    const gone = new AbortController();
    this.gone = gone.signal;
    raw.on('close', () => {
      this.stream?.close(); // nothing is resumed: what it still holds goes
      if (!raw.writableFinished) gone.abort(new Error('the client closed the connection'));
    });
  }

  get flow(): ClientFlow | undefined {
    return this.stream;
  }

  /** Opens the SSE stream now (a listen stream must flush its headers at once). */
  startStream(): void {
    if (this.stream !== undefined || this.raw.destroyed) return;
    this.stream = new EventStream('', { replayLimit: 0, keepAliveMs: this.keepAliveMs, budget: this.budget, ids: false, notifiedTaskId: this.notifiedTaskId });
    this.stream.attach(httpConnection(this.raw, STREAM_HEADERS));
  }

  /** Sends a notification ahead of the answer; dropped when the client accepts JSON only. */
  notify(message: JsonObject): void {
    if (!this.canStream || this.raw.destroyed) return;
    this.startStream();
    this.stream?.send(message);
  }

  /** Sends the answer and ends the response once the client has taken it (`headers` only when not streaming yet). */
  finish(message: JsonObject, status: number, headers: Record<string, string> = {}): void {
    if (this.raw.destroyed) return;
    if (this.stream !== undefined) {
      this.stream.send(message);
      this.stream.finish();
      return;
    }
    const body = JSON.stringify(message);
    this.raw.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
  }

  /** Ends a stream without an answer (listen streams on shutdown end with their result through finish). */
  end(): void {
    if (this.stream !== undefined) this.stream.close();
    else if (!this.raw.destroyed) this.raw.end();
  }
}
