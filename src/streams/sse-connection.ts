// Where an SSE stream's events are written: the client's HTTP response (or, through session-relay.ts, a pipe to
// the replica holding the client's connection), and who is told when a response becomes an event stream.
import type { ServerResponse } from 'node:http';

/**
 * Where a stream's events are written: the client's HTTP response, or a pipe to the replica that holds the
 * client's connection (a resume that reached another replica).
 */
export interface SseConnection {
  /** Sends the status and headers of an event stream. */
  open(): void;
  /** Writes a chunk; false when the connection holds more than it wants to (wait for onDrain before writing on). */
  write(chunk: string): boolean;
  end(): void;
  /** Called once when the client's side of the connection goes away. */
  onClose(listener: () => void): void;
  /** Called each time the connection has handed what it held to the network, after a write returned false. */
  onDrain(listener: () => void): void;
  /** Bytes written that the connection has not handed to the network yet. */
  readonly queuedBytes: number;
}

const SESSION_STREAM_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

/** Who is told when a response becomes an event stream (see onStreamOpen); each is told once. */
const openListeners = new WeakMap<ServerResponse, () => void>();

/**
 * Calls `listener` once, when `response` becomes an event stream (its SSE headers go out), whichever part opens
 * it: the HTTP front counts the streams it hands out without following the response into every part that may
 * open one (a session's stream, a resume through another replica, a 2026-07-28 answer that starts streaming).
 */
export function onStreamOpen(response: ServerResponse, listener: () => void): void {
  openListeners.set(response, listener);
}

export function httpConnection(response: ServerResponse, headers: Record<string, string> = SESSION_STREAM_HEADERS): SseConnection {
  return {
    open: () => {
      // The headers and what the stream writes at once (the priming event, events that waited) leave in one
      // write: a write per piece cost a system call each, a tenth of a proxied call's CPU.
      const socket = response.socket;
      if (socket !== null && !socket.writableCorked) {
        socket.cork();
        process.nextTick(() => socket.uncork());
      }
      response.writeHead(200, headers);
      response.flushHeaders();
      const opened = openListeners.get(response);
      if (opened === undefined) return;
      openListeners.delete(response);
      opened();
    },
    write: (chunk) => response.write(chunk),
    end: () => void response.end(),
    onClose: (listener) => void response.on('close', listener),
    onDrain: (listener) => void response.on('drain', listener),
    get queuedBytes() {
      return response.writableLength;
    },
  };
}
