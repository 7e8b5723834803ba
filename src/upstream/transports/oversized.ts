// What the gateway knows about an upstream message it refused for its size (`maxMessageBytes`): only its first
// bytes, which usually say which call it answers, since serializers write `jsonrpc` and `id` before the payload.
import type { RequestId } from '../../jsonrpc.js';

/** How much of an over-long message is kept to tell what it was. */
export const HEAD_BYTES = 4096;

/**
 * On a channel that carries every message of an upstream (a stdio child's stdout, an HTTP+SSE stream, the
 * Streamable HTTP GET stream), an over-long message is skipped to its end, where the next message starts: a JSON
 * text never contains a raw line break, so the line (or SSE event) framing survives. Skipping costs time, not
 * memory; a message still going after this many times the limit is taken for one that never ends, and the
 * channel is reset (the child restarted, the stream reopened) instead.
 */
export const RESYNC_FACTOR = 16;

/** What the first bytes of a message say it is: the answer to `id`, a request of the upstream's own, or unknown. */
export type MessageHead = { kind: 'response' | 'request'; id: RequestId } | { kind: 'unknown' };

/** An over-long message the gateway dropped. */
export interface OversizedMessage {
  /** The limit it passed (the upstream's `maxMessageBytes`). */
  limit: number;
  /** The request on whose own stream it came (Streamable HTTP): that stream was aborted, so the request fails. */
  relatedTo?: RequestId;
  head: MessageHead;
  /** The first characters, for the log. */
  excerpt: string;
}

/** Thrown by the bounded readers when a message passes the limit; the body it came from is destroyed. */
export class MessageTooLargeError extends Error {
  constructor(
    readonly limit: number,
    readonly head: string,
  ) {
    super(`a message larger than maxMessageBytes (${limit} bytes)`);
    this.name = 'MessageTooLargeError';
  }
}

/** Describes a dropped message from its head. */
export function oversized(limit: number, head: string, relatedTo?: RequestId): OversizedMessage {
  const message: OversizedMessage = { limit, head: readHead(head), excerpt: head.slice(0, 200) };
  if (relatedTo !== undefined) message.relatedTo = relatedTo;
  return message;
}

const WHITESPACE = /\s/;

/**
 * Reads the top-level keys of a JSON object from the first part of its text, as far as that goes: `id` with a
 * complete value and `result` or `error` make a response, `id` and `method` a request. Values other than `id`'s
 * are skipped, nested or not; a head that ends first (or is not an object) says nothing.
 */
export function readHead(text: string): MessageHead {
  let i = 0;
  const skipSpace = (): void => {
    while (i < text.length && (WHITESPACE.test(text.charAt(i)) || text.charCodeAt(i) === 0xfeff)) i++;
  };
  /** Reads the string starting at i (a quote) and returns it (when `keep`) or ''; undefined when the text ends inside it. */
  const readString = (keep: boolean): string | undefined => {
    const start = i;
    for (i++; i < text.length; i++) {
      const c = text.charAt(i);
      if (c === '\\') i++;
      else if (c === '"') {
        i++;
        if (!keep) return '';
        try {
          return JSON.parse(text.slice(start, i)) as string;
        } catch {
          return undefined;
        }
      }
    }
    return undefined;
  };
  /** Skips one value of any kind, up to the comma or brace after it; false when the text ends first. */
  const skipValue = (): boolean => {
    let depth = 0;
    while (i < text.length) {
      const c = text.charAt(i);
      if (c === '"') {
        if (readString(false) === undefined) return false;
      } else if (c === '{' || c === '[') {
        depth++;
        i++;
      } else if (c === '}' || c === ']') {
        if (depth === 0) return true;
        depth--;
        i++;
      } else if (c === ',' && depth === 0) return true;
      else i++;
    }
    return false;
  };
  const unknown: MessageHead = { kind: 'unknown' };
  skipSpace();
  if (text.charAt(i) !== '{') return unknown;
  i++;
  let id: RequestId | undefined;
  let kind: 'response' | 'request' | undefined;
  for (;;) {
    skipSpace();
    if (text.charAt(i) !== '"') return unknown;
    const key = readString(true);
    if (key === undefined) return unknown;
    skipSpace();
    if (text.charAt(i) !== ':') return unknown;
    i++;
    skipSpace();
    if (key === 'result' || key === 'error') kind ??= 'response';
    else if (key === 'method') kind = 'request';
    if (id !== undefined && kind !== undefined) return { kind, id };
    if (key === 'id') {
      const value = readId();
      if (value === undefined) return unknown;
      id = value;
      if (kind !== undefined) return { kind, id };
    } else if (!skipValue()) return unknown;
    skipSpace();
    if (text.charAt(i) !== ',') return unknown;
    i++;
  }

  /** The id's value, if it is a string or a number that ends inside the head. */
  function readId(): RequestId | undefined {
    if (text.charAt(i) === '"') return readString(true);
    const match = /^-?\d+(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 32));
    if (match === null) return undefined;
    i += match[0].length;
    // A number cut by the end of the head could be the start of a longer one.
    if (i >= text.length) return undefined;
    return Number(match[0]);
  }
}
