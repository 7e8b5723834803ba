// Splits a byte stream into lines as it arrives, holding at most one bounded line. Shared by the stdio framing
// (JSON per line, stderr lines) and the SSE reader. Each chunk is scanned once with the native indexOf, never
// re-scanned from the line's start, and the part of it a line keeps is decoded at once: the chunk can go, so a
// line near the limit is held as its text only, not as bytes and text (and a joined copy of the bytes) together.
import { StringDecoder } from 'node:string_decoder';
import { HEAD_BYTES } from './oversized.js';

const LF = 0x0a;
const CR = 0x0d;

export interface LineSplitterOptions {
  /**
   * The most bytes the line in progress may have, asked as it grows (an SSE event's allowance shrinks with every
   * line it already holds). Past it the line overflows.
   */
  maxLineBytes: () => number;
  /** Whether a lone CR ends a line (SSE, log lines). Otherwise only LF does and a CR before it stays in the line. */
  crEndsLine: boolean;
  /** How many of an overflowing line's first characters its handler gets. */
  headChars?: number;
}

export interface LineHandler {
  /** A complete line (UTF-8 decoded, without its terminator) of `bytes` bytes, within maxLineBytes. */
  line(line: string, bytes: number): void;
  /** The line in progress passed maxLineBytes: `head` is its start. The rest of it is dropped as it arrives. */
  overflow(head: string): void;
  /** The line that overflowed ended after `bytes` bytes in all. */
  overflowEnded(bytes: number): void;
}

export class LineSplitter {
  /** The line so far, decoded piece by piece (a character cut between chunks waits in the decoder). */
  private pending: string[] = [];
  private pendingBytes = 0;
  private readonly decoder = new StringDecoder('utf8');
  /** Bytes of the overflowing line so far; -1 while no line overflows. */
  private skipped = -1;
  /** The previous chunk ended with a CR that ended a line: an LF starting this one belongs to it. */
  private afterCr = false;
  private stopped = false;

  constructor(
    private readonly options: LineSplitterOptions,
    private readonly handler: LineHandler,
  ) {}

  /** Bytes of the line being dropped so far, or 0 when none is. */
  get overflowBytes(): number {
    return Math.max(this.skipped, 0);
  }

  /** Ignores everything pushed from now on (the reader gave up on the stream). */
  stop(): void {
    this.stopped = true;
    this.pending = [];
    this.pendingBytes = 0;
  }

  push(chunk: Buffer): void {
    let start = 0;
    if (this.afterCr) {
      this.afterCr = false;
      if (chunk[0] === LF) start = 1;
    }
    // Where the next LF and CR are, each found once per chunk and then only when passed: looking for a CR that a
    // chunk does not contain on every line would scan the rest of the chunk again for each of its lines.
    let lf = -2;
    let cr = this.options.crEndsLine ? -2 : -1;
    while (start < chunk.length && !this.stopped) {
      if (lf !== -1 && lf < start) lf = chunk.indexOf(LF, start);
      if (cr !== -1 && cr < start) cr = chunk.indexOf(CR, start);
      const end = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr);
      if (end === -1) {
        this.take(chunk, start, chunk.length);
        return;
      }
      this.take(chunk, start, end);
      if (this.stopped) return;
      start = end + 1;
      if (chunk[end] === CR) {
        if (start === chunk.length) this.afterCr = true;
        else if (chunk[start] === LF) start++;
      }
      this.finishLine();
    }
  }

  /** The stream ended: a last line without terminator is still a line. */
  end(): void {
    if (this.stopped) return;
    if (this.pendingBytes > 0 || this.skipped >= 0) this.finishLine();
    this.stopped = true;
  }

  private take(chunk: Buffer, from: number, to: number): void {
    const bytes = to - from;
    if (this.skipped >= 0) {
      this.skipped += bytes;
      return;
    }
    if (bytes === 0) return;
    if (this.pendingBytes + bytes <= this.options.maxLineBytes()) {
      this.pending.push(this.decoder.write(chunk.subarray(from, to)));
      this.pendingBytes += bytes;
      return;
    }
    const head = this.head(chunk.subarray(from, Math.min(to, from + (this.options.headChars ?? HEAD_BYTES) * 4)));
    this.skipped = this.pendingBytes + bytes;
    this.pending = [];
    this.pendingBytes = 0;
    this.handler.overflow(head);
  }

  private head(last: Buffer): string {
    const size = this.options.headChars ?? HEAD_BYTES;
    let head = '';
    for (const part of this.pending) {
      head += part.slice(0, size - head.length);
      if (head.length >= size) break;
    }
    if (head.length < size) head += this.decoder.write(last).slice(0, size - head.length);
    this.decoder.end(); // what the line left in the decoder is dropped with it
    return head;
  }

  private finishLine(): void {
    if (this.skipped >= 0) {
      const bytes = this.skipped;
      this.skipped = -1;
      this.handler.overflowEnded(bytes);
      return;
    }
    const bytes = this.pendingBytes;
    // Joined in a call of its own, so that nothing holds the pieces while the handler parses the line: a line near
    // the limit then costs its text and what it parses into, not a third copy.
    this.handler.line(this.takeLine(), bytes);
  }

  private takeLine(): string {
    const parts = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    const rest = this.decoder.end();
    return parts.length === 1 && rest === '' ? (parts[0] as string) : parts.join('') + rest;
  }
}
