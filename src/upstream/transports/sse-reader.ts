// A text/event-stream reader with a bound: no event (its data, name and id together), and so no line, may hold
// more than `maxEventBytes`. Our own rather than eventsource-parser's, whose bound counts UTF-16 units rather
// than bytes, ends the stream where a shared stream could skip to the next event, and keeps nothing of the
// event it dropped to tell which call it answered.
import type { BodyStream } from './body-reader.js';
import { LineSplitter } from './line-splitter.js';
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
  const state: SseReadResult = { lastEventId: undefined, retryMs: undefined };
  const limit = options.maxEventBytes;
  let data: string[] = [];
  let eventType: string | undefined;
  let id: string | undefined;
  /** Bytes the event holds: its data (with the line breaks that will join it), name and id. */
  let eventBytes = 0;
  /** Bytes of a dropped event seen so far, while the rest of it is skipped; -1 when none is. */
  let dropped = -1;
  let dropHead = '';
  let first = true;
  let finish: (result: SseReadResult) => void = () => undefined;

  const reset = (): void => {
    data = [];
    eventType = undefined;
    id = undefined;
    eventBytes = 0;
  };
  const stop = (head: string, endless: boolean): void => {
    splitter.stop();
    state.oversized = { head, endless };
    body.destroy();
    finish(state);
  };
  /** One field line; `bytes` is its length in bytes (field names and the separator are ASCII). */
  const field = (line: string, bytes: number): void => {
    if (line.startsWith(':')) return; // a comment
    const colon = line.indexOf(':');
    const name = colon === -1 ? line : line.slice(0, colon);
    let from = colon === -1 ? line.length : colon + 1;
    if (line.charAt(from) === ' ') from++;
    const value = line.slice(from);
    const valueBytes = bytes - from;
    if (name === 'data') {
      data.push(value);
      eventBytes += valueBytes + 1;
    } else if (name === 'event') {
      eventType = value;
      eventBytes += valueBytes;
    } else if (name === 'id') {
      if (!value.includes('\0')) id = value;
      eventBytes += valueBytes;
    } else if (name === 'retry' && /^\d+$/.test(value)) state.retryMs = Number(value);
  };
  const dispatch = (): void => {
    if (id !== undefined) state.lastEventId = id;
    // Per the SSE spec, an event without data lines is not dispatched.
    if (data.length > 0) onEvent({ id, event: eventType === '' ? undefined : eventType, data: data.length === 1 ? (data[0] as string) : data.join('\n') });
    reset();
  };
  /** The start of the event's data as far as it goes, for telling what the message was. */
  const headOf = (overflowing: string): string => {
    let head = data.join('\n').slice(0, HEAD_BYTES);
    if (overflowing.startsWith('data:') && head.length < HEAD_BYTES) {
      const value = overflowing.slice(overflowing.charAt(5) === ' ' ? 6 : 5);
      head = data.length > 0 ? `${head}\n${value}` : value;
    }
    return head.slice(0, HEAD_BYTES);
  };

  const splitter = new LineSplitter(
    // While an event is dropped, no line of it is kept: every non-empty one overflows at once.
    { maxLineBytes: () => (dropped >= 0 ? 0 : Math.max(0, limit - eventBytes)), crEndsLine: true, headChars: HEAD_BYTES + 6 },
    {
      line(line, bytes) {
        if (first) {
          first = false;
          if (line.startsWith('\uFEFF')) {
            line = line.slice(1);
            bytes -= 3;
          }
        }
        if (line.length > 0) {
          field(line, bytes);
          return;
        }
        if (dropped >= 0) {
          dropped = -1;
          reset();
        } else dispatch();
      },
      overflow(head) {
        first = false;
        if (dropped >= 0) return;
        const text = headOf(head);
        if (options.skipOversized === undefined) {
          stop(text, false);
          return;
        }
        dropped = eventBytes;
        dropHead = text;
        reset();
        options.skipOversized(text);
      },
      overflowEnded(bytes) {
        if (dropped >= 0) dropped += bytes + 1;
      },
    },
  );

  return new Promise((resolve) => {
    let settled = false;
    finish = (result) => {
      if (settled) return;
      settled = true;
      resolve(result);
    };
    body.on('data', (chunk: Buffer) => {
      splitter.push(chunk);
      if (dropped >= 0 && dropped + splitter.overflowBytes > RESYNC_FACTOR * limit) stop(dropHead, true);
    });
    // A last event without its blank line is incomplete and, per the spec, not dispatched.
    body.once('end', () => finish(state));
    body.once('error', (error: Error) => finish({ ...state, error }));
    body.once('close', () => finish(state));
  });
}
