// SSE streams to clients, for both revisions: event ids and replay for resumable (2025-11-25) streams, keep-alive
// comments, coalescing and dropping of what a client that does not read cannot take, within the stream budget.
//
// One class because one stream's state (what is written, what waits, what is kept for replay, what its budget
// holds, whether the connection waits for drain) is acted on by every method. The budget itself is
// stream-budget.ts; what may be coalesced is upstream/peer/client-flow.ts; where events are written is sse-connection.ts.
import { coalescingKey, isLogNotification, notificationMethod, type ClientFlow, type NotifiedTaskId } from '../upstream/peer/client-flow.js';
import type { SseConnection } from './sse-connection.js';
import type { BudgetMember, StreamBudget } from './stream-budget.js';

/** One event of a stream: written and kept for replay, or waiting to be written. */
interface StreamEvent {
  /** Undefined on streams without resumption (2026-07-28). */
  id: string | undefined;
  /** The message's JSON text; '' for a priming event. A drop report's text is made when it is written. */
  data: string;
  /** What the event costs while it is held (its text and framing). */
  bytes: number;
  /** Set on notifications a later one replaces while they wait (see coalescingKey). */
  key: string | undefined;
  /** A priming event: sent once, when the stream starts; a replay skips it (the client has its id already). */
  retryMs?: number;
  /** A drop report: how many notifications were dropped since it was queued. */
  dropped?: { logs: number; others: number; bound: string };
}

export interface EventStreamOptions {
  /** Written events kept for Last-Event-ID resumption (`sse.replayBufferSize`), also bounded by bytes. */
  replayLimit: number;
  keepAliveMs: number;
  /** What every stream of the replica may hold (`sse.maxBufferedBytesPerStream`, `sse.maxBufferedBytes`). */
  budget: StreamBudget;
  /** Events carry ids (2025 sessions); 2026-07-28 responses have no resumption, and then keep nothing written. */
  ids?: boolean;
  /** The task a task-status notification names, in whichever revision (the registry's adapters): a coalescing key. */
  notifiedTaskId: NotifiedTaskId;
}

/** What an event costs beyond its text: id, framing. */
const FRAMING_BYTES = 64;

/**
 * One logical SSE stream: a 2025 session's POST response stream or standalone GET stream, which outlives any single
 * HTTP response (a client that lost the connection resumes with Last-Event-ID), or a 2026-07-28 response.
 *
 * It holds what the client has not taken, within bounds. Events are written only while the connection takes them
 * (`write` returning false means: wait for 'drain'); the rest waits here, where a waiting progress notification
 * (or task status, list change, resource update) is replaced by a newer one with the same key, and a log
 * notification is dropped once the stream holds more than `sse.maxBufferedBytesPerStream` (or all streams more
 * than `sse.maxBufferedBytes`). So are other notifications, unless their producer is held back instead
 * (`flowControlled`: the call's upstream stops being read while the stream is `full`, see ClientFlow). Drops are
 * counted and told to the client, in one warning, when the stream flows again. Results and requests are never
 * dropped: a stream may hold one message beyond its bound, however large, so a client that reads gets it.
 * Written events are kept for replay up to `replayLimit` events and within the same byte bounds (oldest go first,
 * the newest stays).
 */
export class EventStream implements ClientFlow, BudgetMember {
  private seq = 0;
  /** Written events kept for replay, then the events waiting to be written, in order. */
  private readonly events: StreamEvent[] = [];
  /** Index of the first event not yet written. */
  private cursor = 0;
  private writtenBytes = 0;
  private waitingBytes = 0;
  /** The connection's queued bytes, as last charged to the budget. */
  private chargedQueued = 0;
  /** Waiting events by coalescing key. */
  private readonly waitingByKey = new Map<string, StreamEvent>();
  /** The drop report waiting to be written, which counts drops until it is. */
  private report: StreamEvent | undefined;
  private connection: SseConnection | undefined;
  /** The connection's last write returned false: nothing more until it drains. */
  private blocked = false;
  private keepAlive: NodeJS.Timeout | undefined;
  private drainWaiters: (() => void)[] = [];
  private closed = false;
  /** No more events will come (the POST's responses were all sent). */
  finished = false;
  /** Called once, before the first event, when the HTTP response is still held back (see openDeferred). */
  private attachOnFirstEvent: (() => void) | undefined;

  constructor(
    readonly id: string,
    private readonly options: EventStreamOptions,
  ) {
    options.budget.join(this);
  }

  private get budget(): StreamBudget {
    return this.options.budget;
  }

  get attached(): boolean {
    return this.connection !== undefined;
  }

  /** Every event was written to a connection: nothing waits to be resumed. */
  get delivered(): boolean {
    return this.cursor === this.events.length;
  }

  /** Bytes the client has not taken: events waiting here, and what the connection has not sent yet. */
  private get untaken(): number {
    return this.waitingBytes + (this.connection?.queuedBytes ?? 0);
  }

  get full(): boolean {
    if (this.closed) return false;
    return this.untaken > this.budget.perStream || (this.budget.over && this.waitingBytes > 0);
  }

  get bound(): string {
    return this.budget.describe(this.untaken);
  }

  drained(): Promise<void> {
    if (!this.full) return Promise.resolve();
    return new Promise((resolve) => {
      this.drainWaiters.push(resolve);
      this.budget.waitForRoom(this);
    });
  }

  /** Takes over a connection: opens the event stream, replays events after `lastEventId`, then goes live. */
  attach(connection: SseConnection, options: { lastEventId?: string; primeRetryMs?: number } = {}): void {
    this.detach();
    this.connection = connection;
    connection.open();
    connection.onClose(() => {
      if (this.connection === connection) this.detach();
    });
    connection.onDrain(() => {
      if (this.connection !== connection) return;
      this.blocked = false;
      this.pump();
    });
    if (options.lastEventId !== undefined) {
      const at = this.events.findIndex((event) => event.id === options.lastEventId);
      this.moveCursor(at + 1);
    } else {
      // A new connection without Last-Event-ID starts from now: what waited for one is only for a resume.
      this.moveCursor(this.events.length);
    }
    if (options.primeRetryMs !== undefined) {
      // SEP-1699 priming event: an id with empty data, so the client can resume even before the first message.
      this.append({ id: this.nextId(), data: '', bytes: FRAMING_BYTES, key: undefined, retryMs: options.primeRetryMs });
    }
    if (!this.finished && this.options.keepAliveMs > 0) {
      // Comments keep idle-timeout proxies from cutting long calls; clients ignore them. A stream with events
      // waiting needs none.
      this.keepAlive = setInterval(() => {
        if (!this.blocked && this.delivered) connection.write(': keep-alive\n\n');
      }, this.options.keepAliveMs);
      this.keepAlive.unref();
    }
    this.pump();
  }

  /** Defers attaching until the first event needs to go out; `attach` is expected to call `this.attach`. */
  attachOnDemand(attach: () => void): void {
    this.attachOnFirstEvent = attach;
  }

  /** Whether the response is still held back and may yet be answered as plain JSON instead. */
  get deferred(): boolean {
    return this.attachOnFirstEvent !== undefined;
  }

  /** Gives up the deferred attach: the caller answered the HTTP request itself. */
  cancelDeferred(): void {
    this.attachOnFirstEvent = undefined;
  }

  /** Whether this stream knows the event id (so a resume can start from it). */
  has(eventId: string): boolean {
    return this.events.some((event) => event.id === eventId);
  }

  /**
   * Queues a message for the client. `flowControlled`: the message is a call's, whose upstream is held back while
   * the stream is full, so it is not dropped for the bound (logs still are).
   */
  send(message: unknown, options: { flowControlled?: boolean } = {}): void {
    if (this.finished) return;
    if (this.attachOnFirstEvent !== undefined) {
      const attach = this.attachOnFirstEvent;
      this.attachOnFirstEvent = undefined;
      attach();
    }
    const data = JSON.stringify(message);
    const bytes = Buffer.byteLength(data) + FRAMING_BYTES;
    const method = notificationMethod(message);
    const key = coalescingKey(message, this.options.notifiedTaskId);
    if (key !== undefined) {
      const waiting = this.waitingByKey.get(key);
      if (waiting !== undefined) {
        // The latest wins: the client has not seen the earlier one, and it says nothing the newer one does not.
        this.waitingBytes += bytes - waiting.bytes;
        this.budget.charge(bytes - waiting.bytes);
        waiting.data = data;
        waiting.bytes = bytes;
        return;
      }
    } else if (method !== undefined && (isLogNotification(method) || options.flowControlled !== true) && this.overflows(bytes)) {
      this.drop(isLogNotification(method), bytes);
      return;
    }
    this.append({ id: this.nextId(), data, bytes, key });
  }

  /** No more events: ends the HTTP response once what waits is written. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.pump();
  }

  /**
   * Shutdown: tells the client on the connection it holds now to reconnect after `retryMs` (an SSE `retry:` field
   * and no event, so the id to resume from stays the last event's). Written between whole events; the stream closes
   * the usual way after it.
   */
  hintRetry(retryMs: number): void {
    this.connection?.write(`retry: ${retryMs}\n\n`);
  }

  /** Drops the connection and everything held (session end, shutdown, a response whose client left). */
  close(): void {
    this.finished = true;
    this.attachOnFirstEvent = undefined;
    this.end();
    if (this.closed) return;
    this.closed = true;
    if (this.report !== undefined) this.logDrops(this.report, 'the stream closed before they could be reported');
    this.budget.charge(-(this.writtenBytes + this.waitingBytes));
    this.events.length = 0;
    this.cursor = 0;
    this.writtenBytes = 0;
    this.waitingBytes = 0;
    this.waitingByKey.clear();
    this.report = undefined;
    this.budget.leave(this);
    this.wake();
  }

  reclaim(bytes: number): number {
    return this.trim(bytes);
  }

  roomAgain(): void {
    this.wake();
  }

  private append(event: StreamEvent): void {
    this.events.push(event);
    this.waitingBytes += event.bytes;
    if (event.key !== undefined) this.waitingByKey.set(event.key, event);
    this.budget.charge(event.bytes);
    this.pump();
  }

  /** Whether one more droppable event of `bytes` would go past a bound. */
  private overflows(bytes: number): boolean {
    return this.untaken + bytes > this.budget.perStream || (this.budget.over && this.waitingBytes > 0);
  }

  /** Counts a dropped notification on the drop report waiting in line, queuing one if none waits. */
  private drop(log: boolean, bytes: number): void {
    const waiting = this.report?.dropped;
    if (waiting !== undefined) {
      if (log) waiting.logs++;
      else waiting.others++;
      return;
    }
    const dropped = { logs: log ? 1 : 0, others: log ? 0 : 1, bound: this.budget.describe(this.untaken + bytes) };
    this.report = { id: this.nextId(), data: '', bytes: FRAMING_BYTES * 4, key: undefined, dropped };
    this.append(this.report);
  }

  /** Writes what waits while the connection takes it; ends a finished stream once all is written. */
  private pump(): void {
    const connection = this.connection;
    while (connection !== undefined && !this.blocked && this.cursor < this.events.length) {
      const event = this.events[this.cursor++] as StreamEvent;
      this.waitingBytes -= event.bytes;
      this.writtenBytes += event.bytes;
      if (event.key !== undefined && this.waitingByKey.get(event.key) === event) this.waitingByKey.delete(event.key);
      if (event.dropped !== undefined && event.data === '') this.renderReport(event);
      const chunk = this.format(event);
      event.retryMs = undefined; // a priming event goes out once: a replay skips it (the client has its id)
      if (chunk === undefined) continue;
      if (!connection.write(chunk)) this.blocked = true;
      if (this.connection !== connection) return; // the write closed it
    }
    if (connection !== undefined && this.finished && this.delivered) this.end();
    this.trim(0);
    this.chargeQueued();
    this.wake();
  }

  /** The drop report's text, now that the stream flows again; later drops start a new report. */
  private renderReport(event: StreamEvent): void {
    if (this.report === event) this.report = undefined;
    const { logs, others, bound } = event.dropped as NonNullable<StreamEvent['dropped']>;
    const counts = [logs > 0 ? `${logs} log message${logs === 1 ? '' : 's'}` : '', others > 0 ? `${others} other notification${others === 1 ? '' : 's'}` : '']
      .filter((part) => part !== '')
      .join(' and ');
    event.data = JSON.stringify({
      jsonrpc: '2.0',
      method: 'notifications/message',
      params: {
        level: 'warning',
        logger: 'taskgate',
        data: `taskgate dropped ${counts} on this stream: the client did not take what was sent to it (more than ${bound} waiting)`,
      },
    });
    this.logDrops(event, 'reported to the client');
  }

  private logDrops(event: StreamEvent, outcome: string): void {
    const { logs, others, bound } = event.dropped as NonNullable<StreamEvent['dropped']>;
    this.budget.logger.debug({ stream: this.id, droppedLogs: logs, droppedNotifications: others, bound }, `notifications dropped for a client that did not read its stream; ${outcome}`);
  }

  /**
   * Gives back written events kept for replay, oldest first: past `replayLimit`, past the bytes bounds, and at
   * least `bytes` (the budget asks). The newest event stays even past the bytes bounds, so a client whose
   * connection dropped in the middle of a large answer can still resume it. Returns the bytes freed.
   */
  private trim(bytes: number): number {
    const keep = this.cursor === this.events.length ? 1 : 0;
    let dropped = 0;
    let freed = 0;
    while (dropped < this.cursor) {
      const overCount = this.cursor - dropped > this.options.replayLimit;
      const held = this.writtenBytes - freed + this.waitingBytes + this.chargedQueued;
      const overBytes = freed < bytes || held > this.budget.perStream || this.budget.over;
      if (!overCount && !(overBytes && dropped < this.cursor - keep)) break;
      freed += (this.events[dropped] as StreamEvent).bytes;
      dropped++;
    }
    if (dropped === 0) return 0;
    this.events.splice(0, dropped);
    this.cursor -= dropped;
    this.writtenBytes -= freed;
    this.budget.charge(-freed);
    return freed;
  }

  /** Replays from `index` (a resume) or skips to it: what lies after it waits to be written. */
  private moveCursor(index: number): void {
    this.cursor = Math.max(0, Math.min(index, this.events.length));
    this.writtenBytes = 0;
    this.waitingBytes = 0;
    this.waitingByKey.clear();
    this.events.forEach((event, at) => {
      if (at < this.cursor) this.writtenBytes += event.bytes;
      else {
        this.waitingBytes += event.bytes;
        if (event.key !== undefined) this.waitingByKey.set(event.key, event);
      }
    });
    if (this.report !== undefined && this.events.indexOf(this.report) < this.cursor) {
      this.logDrops(this.report, 'not reported: the client reconnected without Last-Event-ID');
      this.report = undefined;
    }
  }

  /** Keeps the budget's count of the connection's queued bytes current. */
  private chargeQueued(): void {
    const queued = this.connection?.queuedBytes ?? 0;
    this.budget.charge(queued - this.chargedQueued);
    this.chargedQueued = queued;
  }

  /** Tells whoever waits on `drained()` once the stream is below its bounds again (or gone). */
  private wake(): void {
    if (this.drainWaiters.length === 0 || this.full) return;
    const waiters = this.drainWaiters.splice(0);
    this.budget.stopWaiting(this);
    for (const resolve of waiters) resolve();
  }

  private end(): void {
    const connection = this.connection;
    this.detach();
    connection?.end();
  }

  private detach(): void {
    clearInterval(this.keepAlive);
    this.keepAlive = undefined;
    this.connection = undefined;
    this.blocked = false;
    this.chargeQueued();
    this.wake();
  }

  private nextId(): string | undefined {
    return this.options.ids === false ? undefined : `${this.id}.${++this.seq}`;
  }

  /** The event as written; undefined for a priming event already sent. */
  private format(event: StreamEvent): string | undefined {
    if (event.data === '') return event.retryMs === undefined ? undefined : `id: ${event.id}\nretry: ${event.retryMs}\ndata: \n\n`;
    if (event.id === undefined) return `data: ${event.data}\n\n`;
    return `id: ${event.id}\nevent: message\ndata: ${event.data}\n\n`;
  }
}
