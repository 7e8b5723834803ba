import type { SseConfig } from '../config/types.js';
import { GatewayError, InternalError, RequestCancelled } from '../errors.js';
import type { JsonObject, JsonRpcNotification, Outcome, RequestId } from '../jsonrpc.js';
import type { ClientFlow, NotifiedTaskId } from '../upstream/peer/client-flow.js';
import { EventStream, type EventStreamOptions } from '../streams/event-stream.js';
import type { StreamBudget } from '../streams/stream-budget.js';
import { refusedInput, type LogLevel } from '../mcp.js';
import type { Delivery, InflightCall, Session } from '../protocol/revision-ports.js';

interface OutgoingRequest {
  settle(outcome: Outcome): void;
}

/**
 * How a session reaches the streams other replicas hold for it (any replica may serve any request of a session,
 * so the client's GET stream or a tasks/result stream may be elsewhere): see session-relay.ts.
 */
export interface SessionPeers {
  readonly replicaId: string;
  /** Replicas holding the session's GET stream and the tasks/result stream of `taskId`, as last recorded. */
  holders(sessionId: string, taskId: string | undefined): Promise<{ standalone?: string; result?: string }>;
  /** Delivers on a stream of the session that `replicaId` holds; false when it took none. */
  send(replicaId: string, sessionId: string, message: JsonObject, taskId: string | undefined): Promise<boolean>;
  /** Hands the client's answer to the replica whose request it answers. */
  answer(replicaId: string, sessionId: string, id: RequestId, outcome: Outcome): void;
  /**
   * Records that this replica holds the session's GET stream, or a tasks/result stream of `taskId` (or no longer).
   * Resolves once the record is where other replicas look (never rejects: a failure is logged).
   */
  hold(sessionId: string, what: { standalone: true } | { taskId: string; held: boolean }): Promise<void>;
}

const MAX_FINISHED_STREAMS = 64;

/** What a session's view is made of: who the client is, and what the replica gives its streams. */
export interface ClientSessionInit {
  sessionId: string;
  protocolVersion: string;
  capabilities: JsonObject;
  clientInfo: JsonObject | undefined;
  /** The authenticated principal that created the session; undefined without authentication. */
  principal: string | undefined;
  sse: SseConfig;
  /** The other replicas; undefined when there are none to tell (stream ids then name no replica). */
  peers: SessionPeers | undefined;
  /** What the replica's streams may hold for clients that do not read (sse.maxBufferedBytes*). */
  budget: StreamBudget;
  /** The task a task-status notification names (EventStreamOptions). */
  notifiedTaskId: NotifiedTaskId;
}

/**
 * One client session (`Mcp-Session-Id`) as this replica sees it: the streams and in-flight calls it
 * holds, and the per-client state every replica shares (kept in the store by the registry).
 */
export class ClientSession implements Session {
  lastSeen = Date.now();
  /** When the store's copy was last kept alive from here (registry). */
  storeTouchedAt = Date.now();
  /** Set by logging/setLevel; used to filter logs that come over connections shared with other sessions. */
  logLevel: LogLevel | undefined;
  readonly subscriptions = new Set<string>();
  readonly inflight = new Map<RequestId, InflightCall>();
  /** Tasks whose upstream calls run over this session's upstream connections. */
  activeTasks = 0;

  private readonly streams = new Map<string, EventStream>();
  private standalone: EventStream | undefined;
  /** Open tasks/result streams here, by task, for tasks whose calls may run on other replicas. */
  private readonly resultStreams = new Map<string, EventStream>();
  /** Messages relayed to other replicas go out one after another, in the order they were produced. */
  private relayed: Promise<unknown> = Promise.resolve();
  private nextStreamId = 1;
  private nextOutgoingId = 1;
  private readonly outgoing = new Map<RequestId, OutgoingRequest>();

  readonly sessionId: string;
  readonly protocolVersion: string;
  readonly capabilities: JsonObject;
  readonly clientInfo: JsonObject | undefined;
  /** The authenticated principal that created the session; undefined without authentication. */
  readonly principal: string | undefined;
  private readonly sse: SseConfig;
  private readonly peers: SessionPeers | undefined;
  private readonly budget: StreamBudget;
  private readonly notifiedTaskId: NotifiedTaskId;

  constructor(init: ClientSessionInit) {
    ({ sessionId: this.sessionId, protocolVersion: this.protocolVersion, capabilities: this.capabilities, clientInfo: this.clientInfo } = init);
    ({ principal: this.principal, sse: this.sse, peers: this.peers, budget: this.budget, notifiedTaskId: this.notifiedTaskId } = init);
  }

  private get streamOptions(): EventStreamOptions {
    return { replayLimit: this.sse.replayBufferSize, keepAliveMs: this.sse.keepAliveMs, budget: this.budget, notifiedTaskId: this.notifiedTaskId };
  }

  /** Stream ids name this replica, so a Last-Event-ID that reaches another replica says where the stream lives. */
  private get streamPrefix(): string {
    return this.peers === undefined ? '' : `${this.peers.replicaId}_`;
  }

  touch(): void {
    this.lastSeen = Date.now();
  }

  /** A new stream for one POST's responses. */
  openStream(): EventStream {
    this.pruneStreams();
    const stream = new EventStream(`${this.streamPrefix}${this.nextStreamId++}`, this.streamOptions);
    this.streams.set(stream.id, stream);
    return stream;
  }

  /** The GET stream; one per session at a time (a second live one is a conflict). */
  openStandaloneStream(): EventStream {
    if (this.standalone?.attached) throw new GatewayError('conflict', 'Conflict: only one GET stream per session is allowed');
    const id = `${this.streamPrefix}g`;
    if (this.standalone === undefined) {
      this.standalone = new EventStream(id, this.streamOptions);
      this.streams.set(id, this.standalone);
    }
    void this.peers?.hold(this.sessionId, { standalone: true });
    return this.standalone;
  }

  /** Ends the GET stream held here: the client opened a new one on another replica. */
  dropStandalone(): void {
    const standalone = this.standalone;
    if (standalone === undefined) return;
    this.standalone = undefined;
    this.streams.delete(standalone.id);
    standalone.close();
  }

  /** The stream a Last-Event-ID belongs to, if this replica still knows it. */
  streamForEvent(eventId: string): EventStream | undefined {
    const stream = this.streams.get(streamIdOf(eventId));
    return stream?.has(eventId) ? stream : undefined;
  }

  /**
   * Marks `stream` as the tasks/result stream of `taskId`, where the task's requests go, until `release` is called.
   * Resolves once other replicas would find it: a question the task asks from then on comes to this stream.
   */
  async holdResultStream(taskId: string, stream: EventStream): Promise<() => void> {
    this.resultStreams.set(taskId, stream);
    await this.peers?.hold(this.sessionId, { taskId, held: true });
    return () => {
      if (this.resultStreams.get(taskId) !== stream) return;
      this.resultStreams.delete(taskId);
      void this.peers?.hold(this.sessionId, { taskId, held: false });
    };
  }

  /**
   * Delivers a message that belongs to no particular call: on the request's own stream, else the GET stream,
   * else a POST stream still open here; failing those, on the stream another replica holds for the session.
   */
  deliver(message: JsonRpcNotification | JsonObject, delivery: Delivery = {}): void {
    const stream = this.pickStream(delivery.stream ?? this.resultStream(delivery.taskId));
    if (stream !== undefined) stream.send(message, { flowControlled: delivery.flowControlled === true });
    else if (!delivery.localOnly) this.relay(message as JsonObject, delivery.taskId);
  }

  /**
   * The room on the stream a call's messages go to: the request's own stream, or (a request answered as JSON) the
   * stream `deliver` picks at the time.
   */
  flow(stream: EventStream | undefined): ClientFlow {
    if (stream !== undefined) return stream;
    const picked = (): EventStream | undefined => this.pickStream(undefined);
    return {
      get full() {
        return picked()?.full === true;
      },
      drained: () => picked()?.drained() ?? Promise.resolve(),
      get bound() {
        return picked()?.bound ?? '';
      },
    };
  }

  /** Delivers on a stream held here, for another replica (false when none is open). */
  deliverHere(message: JsonObject, taskId: string | undefined): boolean {
    const stream = this.pickStream(this.resultStream(taskId));
    stream?.send(message);
    return stream !== undefined;
  }

  /**
   * Sends a server→client request and waits for the client's answer, which arrives as a POSTed response (on any
   * replica: the id names this one). A task's request goes on its tasks/result stream first, wherever it is open.
   */
  async ask(request: { method: string; params?: JsonObject }, signal: AbortSignal, delivery: Delivery = {}): Promise<Outcome> {
    return (await this.tryAsk(request, signal, delivery)) ?? { error: { code: InternalError, message: `The client has no open stream that can take ${request.method} (none is open, or the client is not reading it)` } };
  }

  /** As `ask`, but resolves undefined, with nothing sent, when the client has no stream open to receive it. */
  async tryAsk(request: { method: string; params?: JsonObject }, signal: AbortSignal, delivery: Delivery = {}): Promise<Outcome | undefined> {
    const refused = refusedInput(request.method, this.capabilities);
    if (refused !== undefined) return refused;
    const id = `taskgate-${this.nextOutgoingId++}${this.peers === undefined ? '' : `@${this.peers.replicaId}`}`;
    const message: JsonObject = { jsonrpc: '2.0', id, method: request.method };
    if (request.params !== undefined) message.params = request.params;
    let resolve!: (outcome: Outcome) => void;
    const answered = new Promise<Outcome>((r) => (resolve = r));
    // Waiting before the request goes out: through another replica, the client may answer before sending returns.
    this.outgoing.set(id, {
      settle: (outcome) => {
        this.outgoing.delete(id);
        resolve(outcome);
      },
    });
    const send = await this.sendRequest(message, delivery);
    if (send === undefined) {
      this.outgoing.delete(id);
      return undefined;
    }
    const onAbort = (): void => {
      if (!this.outgoing.delete(id)) return; // answered meanwhile
      send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: String(signal.reason ?? 'cancelled') } });
      resolve({ error: { code: RequestCancelled, message: 'Request cancelled' } });
    };
    signal.addEventListener('abort', onAbort, { once: true });
    return answered.finally(() => signal.removeEventListener('abort', onAbort));
  }

  /**
   * Sends a request once where it goes: the request's own stream, the task's tasks/result stream here or on
   * another replica, the GET stream here or elsewhere, a POST stream open here. Returns how to send what follows
   * it there (its cancellation); undefined, with nothing sent, when the client has no stream at all.
   */
  private async sendRequest(message: JsonObject, delivery: Delivery): Promise<((message: JsonObject) => void) | undefined> {
    const own = delivery.stream ?? this.resultStream(delivery.taskId);
    if (own !== undefined && !own.finished) {
      own.send(message);
      return (m) => own.send(m);
    }
    const standalone = this.standalone !== undefined && !this.standalone.finished ? this.standalone : undefined;
    const peers = this.peers;
    if (peers !== undefined && !delivery.localOnly) {
      const holders = await peers.holders(this.sessionId, delivery.taskId).catch(() => ({}) as { standalone?: string; result?: string });
      // Sent by this already when it returns a replica.
      const remote = await this.sendElsewhere(message, delivery.taskId, [holders.result, standalone === undefined ? holders.standalone : undefined]);
      if (remote !== undefined) return (m) => void peers.send(remote, this.sessionId, m, delivery.taskId).catch(() => false);
    }
    const local = this.pickStream(undefined);
    // A request that belongs to no call of the client's has no upstream to hold back: a full stream cannot take it.
    if (local === undefined || local.full) return undefined;
    local.send(message);
    return (m) => local.send(m);
  }

  /** Routes a client's response to a request the gateway sent (here or on the replica the id names); false when unknown. */
  answer(id: RequestId, outcome: Outcome): boolean {
    const outgoing = this.outgoing.get(id);
    if (outgoing !== undefined) {
      outgoing.settle(outcome);
      return true;
    }
    const at = typeof id === 'string' && id.startsWith('taskgate-') ? id.lastIndexOf('@') : -1;
    const replica = at < 0 ? undefined : (id as string).slice(at + 1);
    if (this.peers === undefined || replica === undefined || replica === this.peers.replicaId) return false;
    this.peers.answer(replica, this.sessionId, id, outcome);
    return true;
  }

  private resultStream(taskId: string | undefined): EventStream | undefined {
    return taskId === undefined ? undefined : this.resultStreams.get(taskId);
  }

  /** Hands a message to the replica holding the session's tasks/result stream for `taskId`, or its GET stream. */
  private relay(message: JsonObject, taskId: string | undefined): void {
    const peers = this.peers;
    if (peers === undefined) return;
    this.relayed = this.relayed.then(async () => {
      const holders = await peers.holders(this.sessionId, taskId);
      await this.sendElsewhere(message, taskId, [holders.result, holders.standalone]);
    }).catch(() => undefined);
  }

  /** Delivers on the first of `replicas` (other than this one) that takes the message; which one did. */
  private async sendElsewhere(message: JsonObject, taskId: string | undefined, replicas: (string | undefined)[]): Promise<string | undefined> {
    const peers = this.peers;
    if (peers === undefined) return undefined;
    for (const replica of replicas) {
      if (replica === undefined || replica === peers.replicaId) continue;
      if (await peers.send(replica, this.sessionId, message, taskId).catch(() => false)) return replica;
    }
    return undefined;
  }

  close(): void {
    for (const stream of this.streams.values()) stream.close();
    this.streams.clear();
    this.standalone = undefined;
    this.resultStreams.clear();
    for (const outgoing of this.outgoing.values()) outgoing.settle({ error: { code: InternalError, message: 'The client session ended' } });
    for (const inflight of this.inflight.values()) {
      inflight.cancelled = true;
      inflight.call.cancel('the client session ended');
    }
    this.inflight.clear();
  }

  /** The preferred stream if open, else the GET stream, else the newest POST stream still attached here. */
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
      if (!stream.finished || stream === this.standalone) continue;
      if (stream.delivered) {
        this.streams.delete(id);
        stream.close(); // gives back what it kept for replay
      } else finishedCount++;
    }
    if (finishedCount <= MAX_FINISHED_STREAMS) return;
    for (const [id, stream] of this.streams) {
      if (finishedCount <= MAX_FINISHED_STREAMS) break;
      if (stream.finished && stream !== this.standalone) {
        this.streams.delete(id);
        stream.close();
        finishedCount--;
      }
    }
  }
}

/** The stream an event id belongs to: event ids are `<stream id>.<sequence>`. */
export function streamIdOf(eventId: string): string {
  return eventId.split('.')[0] ?? '';
}
