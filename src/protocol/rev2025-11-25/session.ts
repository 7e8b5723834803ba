// A 2025-11-25 session as this revision's router and task methods use it. Sessions themselves (their streams,
// their copies in the store, other replicas' share of them) are the gateway's (gateway/session.ts), a layer
// above: these interfaces are what it implements for them.
import type { JsonObject, JsonRpcNotification, Outcome, RequestId } from '../../jsonrpc.js';
import type { UpstreamCall } from '../../upstream/peer/connection.js';
import type { ClientFlow } from '../../upstream/peer/client-flow.js';
import type { SessionIdentity } from '../../upstream/life/upstream.js';
import type { EventStream } from '../../streams/event-stream.js';
import type { LogLevel } from '../../mcp.js';

/** A client request the gateway forwarded and has not answered yet (for notifications/cancelled). */
export interface InflightCall {
  call: UpstreamCall;
  /** The client sent notifications/cancelled: no response is owed any more. */
  cancelled: boolean;
}

/** Where a message for the session may go, besides the streams this replica holds. */
export interface Delivery {
  /** The stream of the request the message belongs to, when it is open here. */
  stream?: EventStream | undefined;
  /** The task the message is about: its tasks/result stream, wherever it is open, is preferred for requests. */
  taskId?: string | undefined;
  /** Only streams held here (messages every replica sends its own copy of, such as list changes). */
  localOnly?: boolean;
  /**
   * The message is a call's whose upstream is held back while the stream is full (CallContext.flow): the stream
   * does not drop it for its bound. Other notifications past the bound are dropped (counted).
   */
  flowControlled?: boolean;
}

export interface Session extends SessionIdentity {
  /** The authenticated principal that created the session (its tasks are that principal's); undefined without authentication. */
  readonly principal: string | undefined;
  /** Set by logging/setLevel; used to filter logs that come over connections shared with other sessions. */
  logLevel: LogLevel | undefined;
  readonly subscriptions: Set<string>;
  readonly inflight: Map<RequestId, InflightCall>;
  /** Tasks whose upstream calls run over this session's upstream connections. */
  activeTasks: number;
  /** Delivers a message that belongs to no particular call, wherever the client listens. */
  deliver(message: JsonRpcNotification | JsonObject, delivery?: Delivery): void;
  /** The room on the stream a call's messages go to (`stream`, or wherever `deliver` picks when it is undefined). */
  flow(stream: EventStream | undefined): ClientFlow;
  /** Sends a server→client request and waits for the client's answer. */
  ask(request: { method: string; params?: JsonObject }, signal: AbortSignal, delivery?: Delivery): Promise<Outcome>;
  /** As `ask`, but resolves undefined, with nothing sent, when the client has no stream open to receive it. */
  tryAsk(request: { method: string; params?: JsonObject }, signal: AbortSignal, delivery?: Delivery): Promise<Outcome | undefined>;
  /**
   * Marks `stream` as the tasks/result stream of `taskId`, where the task's requests go, until the returned function
   * is called. Resolves once the replica running the task would find it there.
   */
  holdResultStream(taskId: string, stream: EventStream): Promise<() => void>;
}

/** The sessions, as a whole. */
export interface Sessions {
  /** Records a new session (any replica then serves it); refused past the principal's cap. */
  create(protocolVersion: string, capabilities: JsonObject, clientInfo: JsonObject | undefined, principal: string | undefined): Promise<Session>;
  /** Keeps the session's log level in the store, for every replica. */
  saveLogLevel(session: Session): void;
  /** Tells every replica that the client cancelled a request of the session (whichever runs it stops it). */
  cancelledElsewhere(sessionId: string, params: JsonObject): void;
  /** Whether another session holds a subscription to `uri` (one upstream subscription serves them all). */
  subscribedElsewhere(session: Session, uri: string): boolean;
  /** The most verbose log level any session here asked for (a shared upstream connection logs at it). */
  mostVerboseLevel(): LogLevel | undefined;
}
