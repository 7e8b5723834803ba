import type { ServerResponse } from 'node:http';
import type { JsonObject } from '../../jsonrpc.js';

/** Where the notifications of a request's call go, and whether its client is still there. */
export interface ResponseSink {
  notify(message: JsonObject): void;
  readonly gone: AbortSignal;
}

/**
 * The HTTP response of one modern request. It stays undecided until there is something to stream: a request
 * answered with nothing before it gets plain JSON with the status its outcome calls for (a -32021 must still be
 * able to become HTTP 400), and the first notification turns it into an SSE stream. No event ids: the revision
 * has no resumption.
 */
export class ModernResponder implements ResponseSink {
  private streaming = false;
  private keepAlive: NodeJS.Timeout | undefined;
  /** Aborted when the client goes away before the answer: the request is then cancelled. */
  readonly gone: AbortSignal;

  constructor(
    private readonly raw: ServerResponse,
    private readonly canStream: boolean,
    private readonly keepAliveMs: number,
  ) {
    const gone = new AbortController();
    this.gone = gone.signal;
    raw.on('close', () => {
      clearInterval(this.keepAlive);
      if (!raw.writableFinished) gone.abort(new Error('the client closed the connection'));
    });
  }

  /** Opens the SSE stream now (a listen stream must flush its headers at once). */
  startStream(): void {
    if (this.streaming || this.raw.destroyed) return;
    this.streaming = true;
    this.raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
    this.raw.flushHeaders();
    if (this.keepAliveMs > 0) {
      this.keepAlive = setInterval(() => this.raw.write(': keep-alive\n\n'), this.keepAliveMs);
      this.keepAlive.unref();
    }
  }

  /** Sends a notification ahead of the answer; dropped when the client accepts JSON only. */
  notify(message: JsonObject): void {
    if (!this.canStream || this.raw.destroyed) return;
    this.startStream();
    this.raw.write(`data: ${JSON.stringify(message)}\n\n`);
  }

  /** Sends the answer and ends the response (`headers` only when it is not streaming yet). */
  finish(message: JsonObject, status: number, headers: Record<string, string> = {}): void {
    clearInterval(this.keepAlive);
    if (this.raw.destroyed) return;
    if (this.streaming) {
      this.raw.end(`data: ${JSON.stringify(message)}\n\n`);
      return;
    }
    const body = JSON.stringify(message);
    this.raw.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
  }

  /** Ends a stream without an answer (listen streams on shutdown end with their result through finish). */
  end(): void {
    clearInterval(this.keepAlive);
    if (!this.raw.destroyed) this.raw.end();
  }
}
