import type { ServerResponse } from 'node:http';

interface BufferedEvent {
  id: string;
  data: string;
}

/**
 * Where a stream's events are written: the client's HTTP response, or a pipe to the replica that holds the
 * client's connection (a resume that reached another replica).
 */
export interface SseConnection {
  /** Sends the status and headers of an event stream. */
  open(): void;
  write(chunk: string): void;
  end(): void;
  /** Called once when the client's side of the connection goes away. */
  onClose(listener: () => void): void;
}

export function httpConnection(response: ServerResponse): SseConnection {
  return {
    open: () => {
      response.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      response.flushHeaders();
    },
    write: (chunk) => void response.write(chunk),
    end: () => void response.end(),
    onClose: (listener) => void response.on('close', listener),
  };
}

/**
 * One logical SSE stream of a session (a POST's response stream or the standalone GET stream). Events are
 * numbered and kept in a bounded buffer, so a client that lost the connection can resume with Last-Event-ID on
 * a new GET request and receive what it missed; the stream outlives any single HTTP response.
 */
export class EventStream {
  private seq = 0;
  private readonly buffer: BufferedEvent[] = [];
  private response: SseConnection | undefined;
  private keepAlive: NodeJS.Timeout | undefined;
  /** No more events will come (the POST's responses were all sent). */
  finished = false;
  /** Every event reached a live connection; nothing is left to resume. */
  delivered = true;
  /** Called once, before the first event, when the HTTP response is still held back (see openDeferred). */
  private attachOnFirstEvent: (() => void) | undefined;

  constructor(
    readonly id: string,
    private readonly replayLimit: number,
    private readonly keepAliveMs: number,
  ) {}

  get attached(): boolean {
    return this.response !== undefined;
  }

  /** Takes over a connection: opens the event stream, replays events after `lastEventId`, then goes live. */
  attach(response: SseConnection, options: { lastEventId?: string; primeRetryMs?: number } = {}): void {
    this.detach();
    this.response = response;
    response.open();
    response.onClose(() => {
      if (this.response === response) this.detach();
    });
    if (options.primeRetryMs !== undefined) {
      // SEP-1699 priming event: an id with empty data, so the client can resume even before the first message.
      const id = this.nextId();
      this.remember({ id, data: '' });
      response.write(`id: ${id}\nretry: ${options.primeRetryMs}\ndata: \n\n`);
    }
    if (options.lastEventId !== undefined) {
      const after = this.buffer.findIndex((event) => event.id === options.lastEventId);
      for (const event of this.buffer.slice(after + 1)) if (event.data !== '') response.write(format(event));
    }
    this.delivered = true;
    if (this.finished) {
      this.end();
      return;
    }
    if (this.keepAliveMs > 0) {
      // Comments keep idle-timeout proxies from cutting long calls; clients ignore them.
      this.keepAlive = setInterval(() => response.write(': keep-alive\n\n'), this.keepAliveMs);
      this.keepAlive.unref();
    }
  }

  /** Defers attaching until the first event needs to go out; `attach` is expected to call `this.attach`. */
  attachOnDemand(attach: () => void): void {
    this.attachOnFirstEvent = attach;
  }

  /** Whether the response is still held back and may yet be answered as plain JSON instead. */
  get deferred(): boolean {
    return this.attachOnFirstEvent !== undefined;
  }

  /** Gives up the deferred attach: the caller answered the HTTP request itself. */
  cancelDeferred(): void {
    this.attachOnFirstEvent = undefined;
  }

  /** Whether this stream knows the event id (so a resume can start from it). */
  has(eventId: string): boolean {
    return this.buffer.some((event) => event.id === eventId);
  }

  send(message: unknown): void {
    if (this.finished) return;
    if (this.attachOnFirstEvent !== undefined) {
      const attach = this.attachOnFirstEvent;
      this.attachOnFirstEvent = undefined;
      attach();
    }
    const event = { id: this.nextId(), data: JSON.stringify(message) };
    this.remember(event);
    if (this.response !== undefined) this.response.write(format(event));
    else this.delivered = false;
  }

  /** No more events: ends the HTTP response if one is attached. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.response !== undefined) this.end();
  }

  /** Drops the connection without finishing the stream (session end, shutdown). */
  close(): void {
    this.finished = true;
    this.end();
  }

  private end(): void {
    const response = this.response;
    this.detach();
    response?.end();
  }

  private detach(): void {
    clearInterval(this.keepAlive);
    this.keepAlive = undefined;
    this.response = undefined;
  }

  private nextId(): string {
    return `${this.id}.${++this.seq}`;
  }

  private remember(event: BufferedEvent): void {
    this.buffer.push(event);
    if (this.buffer.length > this.replayLimit) this.buffer.shift();
  }
}

function format(event: BufferedEvent): string {
  return `id: ${event.id}\nevent: message\ndata: ${event.data}\n\n`;
}
