// A text/event-stream reader with a bound: no event (its data, name and id together), and so no line, may hold
// more than `maxEventBytes`. Our own rather than eventsource-parser's, whose bound counts UTF-16 units rather
// than bytes, ends the stream where a shared stream could skip to the next event, and keeps nothing of the
// event it dropped to tell which call it answered.
import type { BodyStream } from './body-reader.js';
import { LineSplitter, type LineHandler } from './line-splitter.js';
import { HEAD_BYTES, RESYNC_FACTOR } from './oversized.js';

export interface SseEvent {
  id: string | undefined;
  /** The `event` field; undefined means `message`. */
  event: string | undefined;
  data: string;
}

export interface SseReadOptions {
  /** The most bytes one event may hold. */
  maxEventBytes: number;
  /**
   * Set on a stream that carries every message of an upstream: an over-long event is dropped (given here: the
   * start of its data) and reading goes on at the next event, unless the dropped event runs past RESYNC_FACTOR
   * times the limit. Unset (a stream of one request's own): an over-long event ends the reading.
   */
  skipOversized?: (head: string) => void;
}

export interface SseReadResult {
  lastEventId: string | undefined;
  retryMs: number | undefined;
  error?: Error;
  /** The reading stopped at an over-long event (the body was destroyed); `endless` when it was being skipped. */
  oversized?: { head: string; endless: boolean };
}

/**
 * Reads a text/event-stream body to its end, calling onEvent per event. Resolves when the body ends (or fails,
 * or the reading stopped at an over-long event); never rejects, because a dropped stream is an expected event the
 * callers handle. Plain 'data' events rather than async iteration: this runs once per forwarded call and sits on
 * the latency path.
 */
export function readSse(body: BodyStream, onEvent: (event: SseEvent) => void, options: SseReadOptions): Promise<SseReadResult> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: SseReadResult): void => {
      if (settled) return;
      settled = true;
      resolve(result);
    };
    const reader = new SseEventReader(onEvent, options, () => {
      body.destroy();
      finish(reader.result);
    });
    body.on('data', (chunk: Buffer) => reader.push(chunk));
    // A last event without its blank line is incomplete and, per the spec, not dispatched.
    body.once('end', () => finish(reader.result));
    body.once('error', (error: Error) => finish({ ...reader.result, error }));
    body.once('close', () => finish(reader.result));
  });
}

/** The event being read: its fields so far, and the bytes it holds (its data with the line breaks that will join it, name and id). */
interface EventSoFar {
  data: string[];
  event: string | undefined;
  id: string | undefined;
  bytes: number;
}

const noEvent = (): EventSoFar => ({ data: [], event: undefined, id: undefined, bytes: 0 });

/**
 * The reader's states, line by line: reading an event (fields add to it; a blank line dispatches it), or, on a
 * shared stream, dropping an over-long one (its lines are not kept; a blank line ends it and reading goes on).
 */
class SseEventReader implements LineHandler {
  readonly result: SseReadResult = { lastEventId: undefined, retryMs: undefined };
  private readonly splitter: LineSplitter;
  private event = noEvent();
  /** The over-long event being dropped: its bytes seen so far and its head; undefined while reading. */
  private dropping: { bytes: number; head: string } | undefined;
  /** The stream's first line may start with a byte order mark. */
  private first = true;

  constructor(
    private readonly onEvent: (event: SseEvent) => void,
    private readonly options: SseReadOptions,
    /** The reading stopped at an over-long event (`result.oversized` says which): the body must go. */
    private readonly stopped: () => void,
  ) {
    const limit = options.maxEventBytes;
    // While an event is dropped, no line of it is kept: every non-empty one overflows at once.
    const maxLineBytes = (): number => (this.dropping !== undefined ? 0 : Math.max(0, limit - this.event.bytes));
    this.splitter = new LineSplitter({ maxLineBytes, crEndsLine: true, headChars: HEAD_BYTES + 6 }, this);
  }

  push(chunk: Buffer): void {
    this.splitter.push(chunk);
    // Skipping costs time, not memory, but not forever: an event still going this far past the limit never ends.
    const { dropping } = this;
    if (dropping !== undefined && dropping.bytes + this.splitter.overflowBytes > RESYNC_FACTOR * this.options.maxEventBytes) this.stop(dropping.head, true);
  }

  line(line: string, bytes: number): void {
    if (this.first) {
      this.first = false;
      if (line.startsWith('\uFEFF')) return this.line(line.slice(1), bytes - 3);
    }
    if (line.length > 0) this.field(line, bytes);
    else if (this.dropping !== undefined) this.endDropped();
    else this.dispatch();
  }

  overflow(head: string): void {
    this.first = false;
    if (this.dropping !== undefined) return;
    const text = this.headOf(head);
    const { skipOversized } = this.options;
    if (skipOversized === undefined) return this.stop(text, false);
    this.dropping = { bytes: this.event.bytes, head: text };
    this.event = noEvent();
    skipOversized(text);
  }

  overflowEnded(bytes: number): void {
    if (this.dropping !== undefined) this.dropping.bytes += bytes + 1;
  }

  /** One field line; `bytes` is its length in bytes (field names and the separator are ASCII). */
  private field(line: string, bytes: number): void {
    if (line.startsWith(':')) return; // a comment
    const colon = line.indexOf(':');
    const name = colon === -1 ? line : line.slice(0, colon);
    let from = colon === -1 ? line.length : colon + 1;
    if (line.charAt(from) === ' ') from++;
    const value = line.slice(from);
    const valueBytes = bytes - from;
    const { event } = this;
    if (name === 'data') {
      event.data.push(value);
      event.bytes += valueBytes + 1;
    } else if (name === 'event') {
      event.event = value;
      event.bytes += valueBytes;
    } else if (name === 'id') {
      if (!value.includes('\0')) event.id = value;
      event.bytes += valueBytes;
    } else if (name === 'retry' && /^\d+$/.test(value)) this.result.retryMs = Number(value);
  }

  private dispatch(): void {
    const { id, event, data } = this.event;
    if (id !== undefined) this.result.lastEventId = id;
    // Per the SSE spec, an event without data lines is not dispatched.
    if (data.length > 0) this.onEvent({ id, event: event === '' ? undefined : event, data: data.length === 1 ? (data[0] as string) : data.join('\n') });
    this.event = noEvent();
  }

  /** The dropped event ended: the next one is read. */
  private endDropped(): void {
    this.dropping = undefined;
    this.event = noEvent();
  }

  /** The start of the event's data as far as it goes, for telling what the message was. */
  private headOf(overflowing: string): string {
    const { data } = this.event;
    let head = data.join('\n').slice(0, HEAD_BYTES);
    if (overflowing.startsWith('data:') && head.length < HEAD_BYTES) {
      const value = overflowing.slice(overflowing.charAt(5) === ' ' ? 6 : 5);
      head = data.length > 0 ? `${head}\n${value}` : value;
    }
    return head.slice(0, HEAD_BYTES);
  }

  private stop(head: string, endless: boolean): void {
    this.splitter.stop();
    this.result.oversized = { head, endless };
    this.stopped();
  }
}
