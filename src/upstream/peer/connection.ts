import { GatewayError, isClientFacing, sendFailure, upstreamMessageTooLarge, upstreamUnavailable, InternalError, InvalidRequest, RequestCancelled } from '../../errors.js';
import { asObject, errorResponse, isNotification, isRequest, isResponse, toResponse } from '../../jsonrpc.js';
import type { JsonObject, JsonRpcErrorObject, JsonRpcMessage, JsonRpcNotification, JsonRpcRequest, Outcome, RequestId } from '../../jsonrpc.js';
import { NO_EVENTS, type GatewayEvents } from '../../events.js';
import type { Logger } from '../../log.js';
import { RELATED_TASK_META } from '../../mcp.js';
import { AnswerCheck, asksForTask, type AwaitedAnswer, type CreatedTaskId } from './answers.js';
import { shedsWhenFull, type ClientFlow, type NotifiedTaskId } from './client-flow.js';
import type { OversizedMessage } from '../transports/oversized.js';
import { recordOutcome, traceFields, upstreamRequestInfo, withTraceMeta, type UpstreamRequestInfo } from './request-scope.js';
import type { UpstreamTransport } from '../transports/transport.js';
import type { Outbound } from '../transports/outbound.js';
import type { CredentialSource } from '../../identity/credential-source.js';
import { warnViolation } from '../transports/violations.js';

export type { ClientFlow } from './client-flow.js';
export type { CallContext, FollowedTask } from './call-context.js';
import type { CallContext, FollowedTask } from './call-context.js';

/** Where a connection hands messages it cannot deliver to a call by itself. */
export interface ConnectionHandler {
  /** `call` is the call the message relates to, when the transport or a progress token says so. */
  notification(message: JsonRpcNotification, call: CallContext | undefined): void;
  request(message: JsonRpcRequest, call: CallContext | undefined, signal: AbortSignal): Promise<Outcome>;
  closed(reason: string): void;
}

export interface UpstreamCall {
  readonly upstreamId: number;
  readonly outcome: Promise<Outcome>;
  /** Tells the upstream to stop (notifications/cancelled) and settles the call locally. */
  cancel(reason: string): void;
}

export interface ConnectionOptions {
  upstreamName: string;
  transport: UpstreamTransport;
  handler: ConnectionHandler;
  logger: Logger;
  /**
   * Every call on the connection is one client's (a session's own connection): its streams may wait for that
   * client. A connection several clients share may hold back only a call's own stream (see holdBack).
   */
  servesOneClient?: boolean;
  /** Where each request is announced (`upstream.request`); its subscribers' trace context goes with it. */
  events?: GatewayEvents;
  /** What a task the upstream created looks like, in the revisions it may speak (an unasked one is a violation). */
  createdTaskId: CreatedTaskId;
  /** The task a task-status notification names, in the revisions it may speak. */
  notifiedTaskId: NotifiedTaskId;
}

interface PendingCall extends AwaitedAnswer {
  context: CallContext | undefined;
  clientProgressToken: unknown;
  /** The outcome promise's own resolver: settle() clears the timer first (no closure of ours per call). */
  resolve(outcome: Outcome): void;
  timer: NodeJS.Timeout | undefined;
}

/**
 * The call's outcome, written into its scope's info first. A function of its own so that the reaction, which
 * lives as long as the call, holds only `info`, not the request's params (a closure in request() would hold its
 * whole context).
 */
function recordedOutcome(info: UpstreamRequestInfo, outcome: Promise<Outcome>): Promise<Outcome> {
  return outcome.then((answer) => {
    recordOutcome(info, answer);
    return answer;
  });
}

/** Errors of requests that never left (no credential for them): a handshake so failed throws the error itself. */
const refusedHere = new WeakMap<JsonRpcErrorObject, GatewayError>();

/** The JSON-RPC error of a request the transport could not send (a credential failure: kept for open()). */
function failureOf(upstreamName: string, error: unknown): JsonRpcErrorObject {
  const failure = sendFailure(upstreamName, error);
  const rpc = failure.toJsonRpc();
  if (isClientFacing(error)) refusedHere.set(rpc, failure);
  return rpc;
}

/** Settles a pending call (its timeout timer stops). */
function settle(pending: PendingCall, outcome: Outcome): void {
  clearTimeout(pending.timer);
  pending.resolve(outcome);
}

/**
 * A call as its caller holds it. A connection may hold thousands (tasks in flight: issue 23), so cancel() is a
 * method that goes back through the connection rather than a closure per call; call it on the call.
 */
class ConnectionCall implements UpstreamCall {
  constructor(
    private readonly connection: UpstreamConnection,
    readonly upstreamId: number,
    readonly outcome: Promise<Outcome>,
  ) {}

  cancel(reason: string): void {
    this.connection.cancelRequest(this.upstreamId, reason);
  }
}

/**
 * A JSON-RPC peer over one upstream transport. Ids and progress tokens are the connection's own, so any number of
 * clients can share it; every call settles exactly once, with the upstream's answer or a gateway error that
 * names the upstream.
 */
export class UpstreamConnection {
  private nextId = 1;
  private readonly pending = new Map<RequestId, PendingCall>();
  private readonly inbound = new Map<RequestId, AbortController>();
  private readonly answers: AnswerCheck<PendingCall>;
  /** Upstream tasks whose messages go to a call's context, by task id and by progress token. */
  private readonly followed = new Map<string, FollowedTask>();
  private readonly followedProgress = new Map<RequestId, FollowedTask>();
  private closedReason: string | undefined;
  /** Streams held back for clients that do not read (see holdBack), for the log. */
  private holding = 0;

  readonly upstreamName: string;
  private readonly transport: UpstreamTransport;
  private readonly handler: ConnectionHandler;
  private readonly logger: Logger;
  private readonly servesOneClient: boolean;
  private readonly events: GatewayEvents;
  private readonly notifiedTaskId: NotifiedTaskId;

  constructor(options: ConnectionOptions) {
    const { upstreamName, transport } = options;
    this.upstreamName = upstreamName;
    this.transport = transport;
    this.handler = options.handler;
    this.logger = options.logger;
    this.servesOneClient = options.servesOneClient ?? false;
    this.events = options.events ?? NO_EVENTS;
    this.notifiedTaskId = options.notifiedTaskId;
    this.answers = new AnswerCheck<PendingCall>({
      upstreamName,
      createdTaskId: options.createdTaskId,
      pending: this.pending,
      sent: (id) => typeof id === 'number' && Number.isInteger(id) && id >= 1 && id < this.nextId,
      settle: (id, outcome) => this.finish(id, outcome),
      violation: (kind, details) => warnViolation(this.logger, kind, details, this.events),
    });
    transport.onmessage = (message, relatedTo) => this.receive(message, relatedTo);
    transport.onrequestlost = (id, reason) => this.finish(id, { error: this.answers.lost(id, reason) });
    transport.onoversized = (message) => this.dropOversized(message);
    transport.onclose = (reason) => this.onClosed(reason);
  }

  /** Whether the transport tells which request each message relates to (see UpstreamTransport.relatesMessages). */
  get relatesMessages(): boolean {
    return this.transport.relatesMessages === true;
  }

  get isOpen(): boolean {
    return this.closedReason === undefined;
  }

  /** No call waits for an answer on it, and the upstream waits for none of the gateway's (it may be closed). */
  get isIdle(): boolean {
    return this.pending.size === 0 && this.inbound.size === 0;
  }

  /** Contexts of the calls currently waiting for an answer. */
  pendingContexts(): CallContext[] {
    const contexts: CallContext[] = [];
    for (const call of this.pending.values()) if (call.context) contexts.push(call.context);
    return contexts;
  }

  async open(initializeParams: JsonObject): Promise<JsonObject> {
    await this.transport.start();
    const outcome = await this.request('initialize', initializeParams).outcome;
    if ('error' in outcome) throw refusedHere.get(outcome.error) ?? new Error(`initialize failed: ${outcome.error.message}`);
    const version = outcome.result.protocolVersion;
    if (typeof version === 'string') this.transport.setProtocolVersion?.(version);
    await this.transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return outcome.result;
  }

  /** `credentials`: this request's own (its caller's), in place of the connection's. */
  request(method: string, params: JsonObject | undefined, context?: CallContext, timeoutMs = 0, credentials?: CredentialSource): UpstreamCall {
    // Without a subscriber (tracing off) the request goes straight out: no scope, nothing added to it.
    if (!this.events.wrapped('upstream.request')) return this.start(method, params, context, timeoutMs, credentials === undefined ? undefined : { credentials });
    const info = upstreamRequestInfo(this.upstreamName, method, params);
    let call!: ConnectionCall;
    // The subscribers run first (synchronously, by the seam's contract), so the carrier is filled when it starts.
    const outcome = this.events.scope('upstream.request', info, () => {
      const fields = traceFields(info.carrier);
      call = this.start(method, withTraceMeta(params, fields), context, timeoutMs, { credentials, traceHeaders: fields });
      return recordedOutcome(info, call.outcome);
    });
    return new ConnectionCall(this, call.upstreamId, outcome);
  }

  /** Sends one request; `outbound` (its credential, its trace context) goes with it where the transport has requests of its own (HTTP). */
  private start(method: string, params: JsonObject | undefined, context: CallContext | undefined, timeoutMs: number, outbound: Outbound | undefined): ConnectionCall {
    const upstreamId = this.nextId++;
    let resolve!: (outcome: Outcome) => void;
    const outcome = new Promise<Outcome>((r) => (resolve = r));
    const call = new ConnectionCall(this, upstreamId, outcome);
    if (this.closedReason !== undefined) {
      resolve({ error: this.unavailable(this.closedReason).toJsonRpc() });
      return call;
    }

    let forwardedParams = params;
    let clientProgressToken: unknown;
    const meta = asObject(params?._meta);
    if (meta !== undefined && meta.progressToken !== undefined) {
      // Tokens are rewritten to this connection's request id: clients sharing the connection may pick equal ones.
      clientProgressToken = meta.progressToken;
      forwardedParams = { ...params, _meta: { ...meta, progressToken: upstreamId } };
    }
    const pending: PendingCall = { method, askedTask: asksForTask(params), context, clientProgressToken, resolve, timer: undefined };
    if (timeoutMs > 0) {
      pending.timer = setTimeout(() => {
        this.cancelRequest(upstreamId, 'timeout');
        settle(pending, {
          error: new GatewayError('upstream_timeout', `Upstream '${this.upstreamName}' did not answer ${method} within ${timeoutMs} ms`, {
            upstream: this.upstreamName,
          }).toJsonRpc(),
        });
      }, timeoutMs);
    }
    this.pending.set(upstreamId, pending);
    const message: JsonRpcRequest = { jsonrpc: '2.0', id: upstreamId, method };
    if (forwardedParams !== undefined) message.params = forwardedParams;
    this.transport.send(message, outbound).catch((error: unknown) => this.finish(upstreamId, { error: failureOf(this.upstreamName, error) }));
    return call;
  }

  /** Routes the messages of an upstream task to its call's context until the returned function is called. */
  followTask(taskId: string, follow: FollowedTask): () => void {
    this.followed.set(taskId, follow);
    if (follow.progress !== undefined) this.followedProgress.set(follow.progress.token, follow);
    return () => {
      if (this.followed.get(taskId) === follow) this.followed.delete(taskId);
      if (follow.progress !== undefined && this.followedProgress.get(follow.progress.token) === follow) this.followedProgress.delete(follow.progress.token);
    };
  }

  notify(method: string, params?: JsonObject): void {
    if (this.closedReason !== undefined) return;
    const message: JsonRpcNotification = { jsonrpc: '2.0', method };
    if (params !== undefined) message.params = params;
    this.transport.send(message).catch((error: Error) => this.logger.debug({ err: error, method }, 'notification to upstream failed'));
  }

  async close(): Promise<void> {
    this.onClosed('the gateway closed the connection');
    await this.transport.close();
  }

  /** Tells the upstream to stop call `upstreamId` (notifications/cancelled) and settles it locally; see UpstreamCall.cancel. */
  cancelRequest(upstreamId: number, reason: string): void {
    if (!this.pending.has(upstreamId)) return;
    this.notify('notifications/cancelled', { requestId: upstreamId, reason });
    this.finish(upstreamId, { error: { code: RequestCancelled, message: `Request cancelled: ${reason}` } });
  }

  private finish(id: RequestId, outcome: Outcome): void {
    const pending = this.pending.get(id);
    if (pending !== undefined && this.pending.delete(id)) settle(pending, outcome);
  }

  /**
   * A message too large to take fails the call it answers, where that is known (it came on the call's own stream,
   * or its head names the call), at once rather than leaving it to wait for an answer that was dropped. A request
   * of the upstream's own is refused, so that the upstream does not wait either.
   */
  private dropOversized({ limit, relatedTo, head, excerpt }: OversizedMessage): void {
    const call = relatedTo ?? (head.kind === 'response' ? head.id : undefined);
    const failed = call !== undefined && this.pending.has(call);
    warnViolation(this.logger, 'a message larger than maxMessageBytes', { maxMessageBytes: limit, head: excerpt, ...(failed ? { failedCall: call } : {}) }, this.events);
    if (call !== undefined) this.finish(call, { error: upstreamMessageTooLarge(this.upstreamName, limit).toJsonRpc() });
    if (relatedTo === undefined && head.kind === 'request' && this.closedReason === undefined) {
      const refusal = errorResponse(head.id, InvalidRequest, `The request is larger than the gateway accepts from this server (maxMessageBytes: ${limit} bytes)`);
      this.transport.send(refusal).catch((error: Error) => this.logger.debug({ err: error }, 'could not refuse the oversized upstream request'));
    }
  }

  private unavailable(reason: string): GatewayError {
    return upstreamUnavailable(this.upstreamName, reason);
  }

  private receive(message: JsonRpcMessage, relatedTo: RequestId | undefined): void {
    const context = this.contextFor(message, relatedTo);
    if (context?.flow?.full && this.holdBack(message, relatedTo, context, context.flow)) return;
    if (isRequest(message)) {
      this.answer(message, this.contextOf(relatedTo) ?? this.followedBy(message.params)?.context);
      return;
    }
    if (isNotification(message)) {
      const params = message.params;
      if (message.method === 'notifications/progress' && params !== undefined) {
        const token = params.progressToken as RequestId;
        const pending = this.pending.get(token);
        const to = pending?.context !== undefined && pending.clientProgressToken !== undefined
          ? { context: pending.context, clientToken: pending.clientProgressToken }
          : followedProgressTarget(this.followedProgress.get(token));
        to?.context.notify({ ...message, params: { ...params, progressToken: to.clientToken } });
        return; // Progress for a call that already ended (or never asked for it) is stale.
      }
      if (message.method === 'notifications/tasks/status' && params !== undefined) {
        // An upstream task's status is its caller's business; another one's is nobody's (the ids are the upstream's).
        const taskId = this.notifiedTaskId(params);
        if (taskId !== undefined) this.followed.get(taskId)?.status(params);
        return;
      }
      if (message.method === 'notifications/cancelled') {
        // The upstream stops a request of its own (see AnswerCheck.cancelled): never a client's business.
        const inbound = this.inbound.get(params?.requestId as RequestId);
        if (inbound !== undefined) inbound.abort(typeof params?.reason === 'string' ? params.reason : 'cancelled by the upstream');
        else this.answers.cancelled(params?.requestId as RequestId);
        return;
      }
      this.handler.notification(message, this.contextOf(relatedTo) ?? this.followedBy(params)?.context);
      return;
    }
    this.answers.answer(message, relatedTo);
  }

  /**
   * A message for a call whose client is not taking what it was sent. Where waiting stalls nobody else (the call's
   * own response stream, or a connection of that client alone), the stream the message came on is not read again
   * until the client's stream drains, so the upstream waits (TCP or the pipe pushes back). Where it would stall
   * other clients (one stdout or SSE stream for all), the call fails instead: a request, answer or notification for
   * it is refused, and the upstream told to stop; progress and logs pass (the client's stream coalesces or drops
   * them).
   * True when the message was consumed here.
   */
  private holdBack(message: JsonRpcMessage, relatedTo: RequestId | undefined, context: CallContext, flow: ClientFlow): boolean {
    const ownStream = relatedTo !== undefined && this.relatesMessages;
    if (this.transport.hold !== undefined && (ownStream || this.servesOneClient)) {
      // An answer ends its own stream: nothing follows it there to hold back.
      if (!(ownStream && isResponse(message))) this.hold(relatedTo, flow);
      return false;
    }
    if (shedsWhenFull(message, this.notifiedTaskId)) return false;
    const error = new GatewayError(
      'client_not_reading',
      `The client is not reading its stream (more than ${flow.bound} waiting), and upstream '${this.upstreamName}' sends every client's messages over one connection, which cannot wait for one client: the call was cancelled`,
      { upstream: this.upstreamName },
    ).toJsonRpc();
    this.logger.info({ bound: flow.bound }, 'a call failed: its client is not reading its stream, and the upstream connection is shared');
    if (isResponse(message)) {
      this.finish(message.id as RequestId, { error });
      return true;
    }
    for (const [id, call] of [...this.pending]) {
      if (call.context !== context) continue;
      this.notify('notifications/cancelled', { requestId: id, reason: error.message });
      this.finish(id, { error });
    }
    if (isRequest(message)) {
      this.transport.send(toResponse(message.id, { error })).catch((failure: Error) => this.logger.debug({ err: failure }, 'could not answer the upstream request'));
    }
    return true;
  }

  private hold(relatedTo: RequestId | undefined, flow: ClientFlow): void {
    const drained = flow.drained();
    if (this.holding++ === 0) this.logger.debug({ bound: flow.bound }, 'holding back the upstream: a client is not reading its stream');
    void drained.then(() => {
      if (--this.holding === 0) this.logger.debug('reading the upstream again: its clients took what waited');
    });
    this.transport.hold?.(relatedTo, drained);
  }

  /**
   * The context of the call a message belongs to, as the rest of the connection and the upstream's handler
   * attribute it: its answer, its progress token, the stream it came on, its upstream task, or the only call running.
   */
  private contextFor(message: JsonRpcMessage, relatedTo: RequestId | undefined): CallContext | undefined {
    if (isResponse(message)) return this.pending.get(message.id as RequestId)?.context;
    const params = message.params;
    if (isNotification(message) && message.method === 'notifications/progress') {
      const token = params?.progressToken as RequestId;
      return this.pending.get(token)?.context ?? this.followedProgress.get(token)?.context;
    }
    const context = this.contextOf(relatedTo) ?? this.followedBy(params)?.context;
    if (context !== undefined || relatedTo !== undefined || this.pending.size !== 1) return context;
    const [only] = this.pending.values();
    return only?.context;
  }

  private contextOf(relatedTo: RequestId | undefined): CallContext | undefined {
    return relatedTo === undefined ? undefined : this.pending.get(relatedTo)?.context;
  }

  /** The followed task a message is marked with (`_meta` related-task), if any. */
  private followedBy(params: JsonObject | undefined): FollowedTask | undefined {
    if (this.followed.size === 0) return undefined;
    const taskId = asObject(asObject(params?._meta)?.[RELATED_TASK_META])?.taskId;
    return typeof taskId === 'string' ? this.followed.get(taskId) : undefined;
  }

  private answer(message: JsonRpcRequest, context: CallContext | undefined): void {
    const abort = new AbortController();
    this.inbound.set(message.id, abort);
    this.answers.upstreamRequest(message.id);
    this.handler
      .request(message, context, abort.signal)
      .catch((error: Error) => ({ error: { code: InternalError, message: error.message } }) as Outcome)
      .then((outcome) => {
        this.inbound.delete(message.id);
        if (abort.signal.aborted || this.closedReason !== undefined) return;
        this.transport.send(toResponse(message.id, outcome)).catch((error: Error) =>
          this.logger.debug({ err: error }, 'could not answer the upstream request'),
        );
      });
  }

  private onClosed(reason: string): void {
    if (this.closedReason !== undefined) return;
    this.closedReason = reason;
    this.followed.clear();
    this.followedProgress.clear();
    const error = this.unavailable(reason).toJsonRpc();
    for (const [id] of this.pending) this.finish(id, { error });
    for (const abort of this.inbound.values()) abort.abort(reason);
    this.inbound.clear();
    this.handler.closed(reason);
  }
}

function followedProgressTarget(follow: FollowedTask | undefined): { context: CallContext; clientToken: unknown } | undefined {
  return follow?.progress === undefined ? undefined : { context: follow.context, clientToken: follow.progress.clientToken };
}
