// Splits a byte stream into lines as it arrives, holding at most one bounded line. Shared by the stdio framing
// (JSON per line, stderr lines) and the SSE reader. Works on Buffers: each chunk is scanned once with the native
// indexOf, and a line is decoded only when it is complete and kept, never re-scanned from its start.
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
  /** How many of an overflowing line's first bytes its handler gets. */
  headBytes?: number;
}

export interface LineHandler {
  /** A complete line, without its terminator, within maxLineBytes. */
  line(line: Buffer): void;
  /** The line in progress passed maxLineBytes: `head` is its first bytes. The rest of it is dropped as it arrives. */
  overflow(head: Buffer): void;
  /** The line that overflowed ended after `bytes` bytes in all. */
  overflowEnded(bytes: number): void;
}

export class LineSplitter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
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
      this.pending.push(chunk.subarray(from, to));
      this.pendingBytes += bytes;
      return;
    }
    const head = this.head(chunk.subarray(from, to));
    this.skipped = this.pendingBytes + bytes;
    this.pending = [];
    this.pendingBytes = 0;
    this.handler.overflow(head);
  }

  private head(last: Buffer): Buffer {
    const size = this.options.headBytes ?? HEAD_BYTES;
    const parts: Buffer[] = [];
    let bytes = 0;
    for (const part of [...this.pending, last]) {
      if (bytes >= size) break;
      parts.push(part.subarray(0, size - bytes));
      bytes += parts.at(-1)?.length ?? 0;
    }
    // A copy: a view would keep the chunk it came from alive for as long as the head is.
    return Buffer.concat(parts, bytes);
  }

  private finishLine(): void {
    if (this.skipped >= 0) {
      const bytes = this.skipped;
      this.skipped = -1;
      this.handler.overflowEnded(bytes);
      return;
    }
    const parts = this.pending;
    const line = parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    this.handler.line(line);
  }
}
