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
const UNKNOWN: MessageHead = { kind: 'unknown' };

/**
 * Reads the top-level keys of a JSON object from the first part of its text, as far as that goes: `id` with a
 * complete value and `result` or `error` make a response, `id` and `method` a request. Values other than `id`'s
 * are skipped, nested or not; a head that ends first (or is not an object) says nothing.
 */
export function readHead(text: string): MessageHead {
  const cursor = new HeadCursor(text);
  if (!cursor.take('{')) return UNKNOWN;
  let id: RequestId | undefined;
  let kind: 'response' | 'request' | undefined;
  for (;;) {
    const key = cursor.key();
    if (key === undefined) return UNKNOWN;
    if (key === 'result' || key === 'error') kind ??= 'response';
    else if (key === 'method') kind = 'request';
    if (id !== undefined && kind !== undefined) return { kind, id };
    if (key === 'id') {
      id = cursor.id();
      if (id === undefined) return UNKNOWN;
      if (kind !== undefined) return { kind, id };
    } else if (!cursor.skipValue()) return UNKNOWN;
    if (!cursor.take(',')) return UNKNOWN;
  }
}

/** A position in a message's head, moved forward by what it reads; every read stops at the head's end. */
class HeadCursor {
  private i = 0;

  constructor(private readonly text: string) {}

  /** Skips white space (and byte order marks), then the character `c`; false when another comes first. */
  take(c: string): boolean {
    this.skipSpace();
    if (this.text.charAt(this.i) !== c) return false;
    this.i++;
    return true;
  }

  /** An object key and its colon, with the white space around them; undefined when there is none or the head ends. */
  key(): string | undefined {
    this.skipSpace();
    if (this.text.charAt(this.i) !== '"') return undefined;
    const key = this.readString(true);
    if (key === undefined || !this.take(':')) return undefined;
    this.skipSpace();
    return key;
  }

  /** The id's value, if it is a string or a number that ends inside the head. */
  id(): RequestId | undefined {
    const { text } = this;
    if (text.charAt(this.i) === '"') return this.readString(true);
    const match = /^-?\d+(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(this.i, this.i + 32));
    if (match === null) return undefined;
    this.i += match[0].length;
    // A number cut by the end of the head could be the start of a longer one.
    if (this.i >= text.length) return undefined;
    return Number(match[0]);
  }

  /** Skips one value of any kind, up to the comma or brace after it; false when the text ends first. */
  skipValue(): boolean {
    const { text } = this;
    let depth = 0;
    while (this.i < text.length) {
      const c = text.charAt(this.i);
      if (c === '"') {
        if (this.readString(false) === undefined) return false;
      } else if (c === '{' || c === '[') {
        depth++;
        this.i++;
      } else if (c === '}' || c === ']') {
        if (depth === 0) return true;
        depth--;
        this.i++;
      } else if (c === ',' && depth === 0) return true;
      else this.i++;
    }
    return false;
  }

  private skipSpace(): void {
    const { text } = this;
    while (this.i < text.length && (WHITESPACE.test(text.charAt(this.i)) || text.charCodeAt(this.i) === 0xfeff)) this.i++;
  }

  /** Reads the string starting here (at a quote) and returns it (when `keep`) or ''; undefined when the text ends inside it. */
  private readString(keep: boolean): string | undefined {
    const { text } = this;
    const start = this.i;
    for (this.i++; this.i < text.length; this.i++) {
      const c = text.charAt(this.i);
      if (c === '\\') this.i++;
      else if (c === '"') {
        this.i++;
        if (!keep) return '';
        try {
          return JSON.parse(text.slice(start, this.i)) as string;
        } catch {
          return undefined;
        }
      }
    }
    return undefined;
  }
}
