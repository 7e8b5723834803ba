import { randomUUID } from 'node:crypto';
import type { SseConfig } from '../config/types.js';
import { GatewayError } from '../errors.js';
import { MethodNotFound, type JsonObject, type JsonRpcNotification, type Outcome, type RequestId } from '../jsonrpc.js';
import { EventStream } from '../http/event-stream.js';
import type { LogLevel } from '../protocol.js';
import type { UpstreamCall } from '../upstream/connection.js';
import type { SessionIdentity } from '../upstream/upstream.js';

/** Client capability each server→client request needs. */
const REQUIRED_CAPABILITY: Record<string, string> = {
  'elicitation/create': 'elicitation',
  'sampling/createMessage': 'sampling',
  'roots/list': 'roots',
};

/** A client request the gateway forwarded and has not answered yet (for notifications/cancelled). */
export interface InflightCall {
  call: UpstreamCall;
  /** The client sent notifications/cancelled: no response is owed any more. */
  cancelled: boolean;
}

interface OutgoingRequest {
  settle(outcome: Outcome): void;
}

const MAX_FINISHED_STREAMS = 64;

/** One legacy-era client session (`Mcp-Session-Id`): its streams, in-flight calls and per-client state. */
export class ClientSession implements SessionIdentity {
  readonly sessionId = randomUUID();
  lastSeen = Date.now();
  /** Set by logging/setLevel; used to filter logs that come over connections shared with other sessions. */
  logLevel: LogLevel | undefined;
  readonly subscriptions = new Set<string>();
  readonly inflight = new Map<RequestId, InflightCall>();
  /** Tasks whose upstream calls run over this session's upstream connections. */
  activeTasks = 0;

  private readonly streams = new Map<string, EventStream>();
  private standalone: EventStream | undefined;
  private nextStreamId = 1;
  private nextOutgoingId = 1;
  private readonly outgoing = new Map<RequestId, OutgoingRequest>();

  constructor(
    readonly protocolVersion: string,
    readonly capabilities: JsonObject,
    readonly clientInfo: JsonObject | undefined,
    private readonly sse: SseConfig,
  ) {}

  touch(): void {
    this.lastSeen = Date.now();
  }

  /** A new stream for one POST's responses. */
  openStream(): EventStream {
    this.pruneStreams();
    const stream = new EventStream(String(this.nextStreamId++), this.sse.replayBufferSize, this.sse.keepAliveMs);
    this.streams.set(stream.id, stream);
    return stream;
  }

  /** The GET stream; one per session at a time (a second live one is a conflict). */
  openStandaloneStream(): EventStream {
    if (this.standalone?.attached) throw new GatewayError('conflict', 'Conflict: only one GET stream per session is allowed');
    this.standalone ??= new EventStream('g', this.sse.replayBufferSize, this.sse.keepAliveMs);
    this.streams.set('g', this.standalone);
    return this.standalone;
  }

  /** The stream a Last-Event-ID belongs to, if it is still known. */
  streamForEvent(eventId: string): EventStream | undefined {
    const stream = this.streams.get(eventId.split('.')[0] ?? '');
    return stream?.has(eventId) ? stream : undefined;
  }

  /**
   * Delivers a message that belongs to no particular call: on the GET stream when there is one, else on a POST
   * stream still open. Returns false when the client has no stream to receive it.
   */
  deliver(message: JsonRpcNotification | JsonObject, preferred?: EventStream): boolean {
    const stream = this.pickStream(preferred);
    stream?.send(message);
    return stream !== undefined;
  }

  /** Sends a server→client request and waits for the client's answer, which arrives as a POSTed response. */
  ask(request: { method: string; params?: JsonObject }, signal: AbortSignal, preferred?: EventStream): Promise<Outcome> {
    const capability = REQUIRED_CAPABILITY[request.method];
    if (capability !== undefined && this.capabilities[capability] === undefined) {
      return Promise.resolve({ error: { code: MethodNotFound, message: `Client does not support ${request.method} (no '${capability}' capability)` } });
    }
    const stream = this.pickStream(preferred);
    if (stream === undefined) {
      return Promise.resolve({ error: { code: -32603, message: `The client has no open stream to receive ${request.method}` } });
    }
    const id = `taskgate-${this.nextOutgoingId++}`;
    return new Promise<Outcome>((resolve) => {
      const onAbort = (): void => {
        this.outgoing.delete(id);
        stream.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: String(signal.reason ?? 'cancelled') } });
        resolve({ error: { code: -32800, message: 'Request cancelled' } });
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.outgoing.set(id, {
        settle: (outcome) => {
          signal.removeEventListener('abort', onAbort);
          this.outgoing.delete(id);
          resolve(outcome);
        },
      });
      const message: JsonObject = { jsonrpc: '2.0', id, method: request.method };
      if (request.params !== undefined) message.params = request.params;
      stream.send(message);
    });
  }

  /** Routes a client's response to a request the gateway sent; false when the id is unknown. */
  answer(id: RequestId, outcome: Outcome): boolean {
    const outgoing = this.outgoing.get(id);
    if (outgoing === undefined) return false;
    outgoing.settle(outcome);
    return true;
  }

  close(): void {
    for (const stream of this.streams.values()) stream.close();
    this.streams.clear();
    this.standalone = undefined;
    for (const outgoing of this.outgoing.values()) outgoing.settle({ error: { code: -32603, message: 'The client session ended' } });
    for (const inflight of this.inflight.values()) {
      inflight.cancelled = true;
      inflight.call.cancel('the client session ended');
    }
    this.inflight.clear();
  }

  private pickStream(preferred: EventStream | undefined): EventStream | undefined {
    if (preferred !== undefined && !preferred.finished) return preferred;
    if (this.standalone !== undefined && !this.standalone.finished) return this.standalone;
    let latest: EventStream | undefined;
    for (const stream of this.streams.values()) if (!stream.finished && stream.attached) latest = stream;
    return latest;
  }

  /** Forgets finished streams that were fully delivered, and the oldest undelivered ones past a bound. */
  private pruneStreams(): void {
    let finishedCount = 0;
    for (const [id, stream] of this.streams) {
      if (!stream.finished || id === 'g') continue;
      if (stream.delivered) this.streams.delete(id);
      else finishedCount++;
    }
    if (finishedCount <= MAX_FINISHED_STREAMS) return;
    for (const [id, stream] of this.streams) {
      if (finishedCount <= MAX_FINISHED_STREAMS) break;
      if (stream.finished && id !== 'g') {
        this.streams.delete(id);
        finishedCount--;
      }
    }
  }
}
