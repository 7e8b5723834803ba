import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { createParser, type EventSourceMessage } from 'eventsource-parser';

export interface SseReadResult {
  lastEventId: string | undefined;
  retryMs: number | undefined;
  error?: Error;
}

/**
 * Reads a text/event-stream body to its end, calling onEvent per event. Resolves when the body ends (or fails);
 * never rejects, because a dropped stream is an expected event the callers handle. Plain 'data' events rather
 * than async iteration: this runs once per forwarded call and sits on the latency path.
 */
export function readSse(body: Readable, onEvent: (event: EventSourceMessage) => void): Promise<SseReadResult> {
  const state: SseReadResult = { lastEventId: undefined, retryMs: undefined };
  const parser = createParser({
    onEvent(event) {
      if (event.id !== undefined) state.lastEventId = event.id;
      onEvent(event);
    },
    onRetry(ms) {
      state.retryMs = ms;
    },
  });
  return new Promise((resolve) => {
    // undici's body ignores setEncoding; a StringDecoder keeps characters split across chunks whole.
    const decoder = new StringDecoder('utf8');
    body.on('data', (chunk: Buffer) => parser.feed(decoder.write(chunk)));
    body.once('end', () => resolve(state));
    body.once('error', (error: Error) => resolve({ ...state, error }));
    body.once('close', () => resolve(state));
  });
}
