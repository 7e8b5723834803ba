import { createParser, type EventSourceMessage } from 'eventsource-parser';

export interface SseReadResult {
  lastEventId: string | undefined;
  retryMs: number | undefined;
}

/**
 * Reads a text/event-stream body to its end, calling onEvent per event. Resolves when the body ends (or fails);
 * never rejects, because a dropped stream is an expected event the callers handle.
 */
export async function readSse(
  body: AsyncIterable<Uint8Array>,
  onEvent: (event: EventSourceMessage) => void,
): Promise<SseReadResult & { error?: Error }> {
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
  const decoder = new TextDecoder();
  try {
    for await (const chunk of body) parser.feed(decoder.decode(chunk, { stream: true }));
    return state;
  } catch (error) {
    return { ...state, error: error as Error };
  }
}
