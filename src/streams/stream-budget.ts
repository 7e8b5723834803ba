// What the replica's SSE streams hold for clients, against two bounds: `sse.maxBufferedBytesPerStream` for each
// stream and `sse.maxBufferedBytes` for all of them together (2025 sessions' streams and 2026-07-28 responses alike).
// Every stream joins it, so it is also where a shutdown finds them all to tell their clients when to reconnect.
import type { Logger } from '../log.js';

/** A stream as the budget sees it. */
export interface BudgetMember {
  /** Gives back events kept only for replay (oldest first) until `bytes` are freed or none can go; what was freed. */
  reclaim(bytes: number): number;
  /** The total is back under its bound: a stream that waited for that looks again. */
  roomAgain(): void;
  /** Shutdown: the client is told to reconnect (elsewhere) after `retryMs`. */
  hintRetry?(retryMs: number): void;
}

export class StreamBudget {
  private held = 0;
  private readonly members = new Set<BudgetMember>();
  private readonly waiting = new Set<BudgetMember>();

  constructor(
    /** `sse.maxBufferedBytesPerStream`. */
    readonly perStream: number,
    /** `sse.maxBufferedBytes`; 0: no total bound. */
    readonly total: number,
    readonly logger: Logger,
  ) {}

  /** Bytes held by every stream together. */
  get bytes(): number {
    return this.held;
  }

  /** All streams together hold more than `sse.maxBufferedBytes`. */
  get over(): boolean {
    return this.total > 0 && this.held > this.total;
  }

  join(member: BudgetMember): void {
    this.members.add(member);
  }

  leave(member: BudgetMember): void {
    this.members.delete(member);
    this.waiting.delete(member);
  }

  /** Shutdown: every open stream tells its client to reconnect after `retryMs`, before the streams close. */
  hintRetry(retryMs: number): void {
    for (const member of this.members) member.hintRetry?.(retryMs);
  }

  /** `bytes` more (or, negative, fewer) are held. Past the total, replay buffers give back first, oldest stream first. */
  charge(bytes: number): void {
    if (bytes === 0) return;
    const wasOver = this.over;
    this.held += bytes;
    if (bytes > 0 && this.over) {
      for (const member of this.members) {
        if (!this.over) break;
        member.reclaim(this.held - this.total);
      }
    }
    if (wasOver && !this.over) {
      for (const member of [...this.waiting]) member.roomAgain();
    }
  }

  /** `member` waits for the total to come back under its bound (roomAgain), until `stopWaiting`. */
  waitForRoom(member: BudgetMember): void {
    this.waiting.add(member);
  }

  stopWaiting(member: BudgetMember): void {
    this.waiting.delete(member);
  }

  /** The bound a stream holding `untaken` bytes reaches, as the configuration names it. */
  describe(untaken: number): string {
    return untaken > this.perStream || !this.over
      ? `sse.maxBufferedBytesPerStream (${this.perStream} bytes)`
      : `sse.maxBufferedBytes (${this.total} bytes for all streams together)`;
  }
}
