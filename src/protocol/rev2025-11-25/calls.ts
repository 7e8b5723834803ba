// One session request that reaches an upstream through the gateway: a tool call run synchronously, as a task
// the client asked for (`params.task`, within the tool's policy), or in the background past `taskAfterMs`
// (`plainCalls: background`); the gateway's task tools; and the forwarding every upstream call shares (the
// request's stream, keep-alive progress, the session's in-flight calls for cancellation). The router (router.ts)
// says which request goes where; this file is what happens to a call.
import { GatewayError, RequestCancelled } from '../../errors.js';
import { asObject, type JsonObject, type JsonRpcNotification, type JsonRpcRequest, type Outcome } from '../../jsonrpc.js';
import { effectiveMode } from '../../config/policy.js';
import type { CallContext } from '../../upstream/peer/connection.js';
import type { Upstream } from '../../upstream/life/upstream.js';
import { requestedTtl } from './codec.js';
import type { EventStream } from '../../streams/event-stream.js';
import { supportsSessionTasks } from '../../mcp.js';
import type { GatewayCatalog } from '../ports.js';
import type { Session } from './session.js';
import { ownerOf, type SessionTasks } from './tasks.js';
import type { CallerAccess } from '../access.js';
import type { ActingFor } from '../../upstream/peer/adapter.js';
import { routeNamed } from '../routing.js';
import { keepAliveFor, type ProgressKeepAlive } from '../../streams/keep-alive.js';
import type { TaskTools } from '../task-tools.js';
import type { TaskPolicy } from '../../config/types.js';
import type { RunHandle } from '../../tasks/local-run.js';
import type { InflightCharge } from '../../tasks/inflight-bytes.js';
import { idempotentCreation, type IdempotentCreation } from '../../tasks/idempotency.js';
import { idempotencyKeyOf, withoutIdempotencyMeta } from '../idempotency-key.js';

/** What a call needs of the gateway (part of the router's dependencies). */
export interface SessionCallsDeps {
  catalog: GatewayCatalog;
  tasks: SessionTasks;
  /** The gateway's own tools for background tasks (answered here, before any upstream). */
  taskTools: TaskTools;
}

export class SessionCalls {
  private readonly catalog: GatewayCatalog;
  private readonly tasks: SessionTasks;
  private readonly taskTools: TaskTools;

  constructor(deps: SessionCallsDeps) {
    ({ catalog: this.catalog, tasks: this.tasks, taskTools: this.taskTools } = deps);
  }

  /**
   * A tool call runs synchronously or as a task, as the client asked (`params.task`) within the tool's policy.
   * The task hint never goes upstream: the upstream only ever sees a plain call. `idempotencyHeader` is the POST's
   * Idempotency-Key, which (or the call's `_meta`) makes a task-creating call retry-safe.
   */
  async callTool(
    session: Session,
    request: JsonRpcRequest,
    params: JsonObject,
    stream: EventStream | undefined,
    access: CallerAccess,
    charge: InflightCharge | undefined,
    idempotencyHeader?: string,
  ): Promise<Outcome | undefined> {
    const name = params.name;
    if (typeof name !== 'string') throw new GatewayError('invalid_params', 'tools/call: params.name must be a string');
    if (this.taskTools.owns(name)) return this.taskTool(session, request, name, params, stream, access);
    const once = idempotentCreation(idempotencyKeyOf(idempotencyHeader, asObject(params._meta)), name, params.arguments);
    const route = await routeNamed(this.catalog, access, 'tools', name);
    const { task, ...plain } = withoutIdempotencyMeta(params);
    const upstreamParams = { ...plain, name: route.name };
    const policy = this.tasks.policies.policyFor(name);
    // Hosts that never ask for a task (of any revision) get a background task where policy says so.
    if (task === undefined && policy.plainCalls === 'background' && policy.mode !== 'forbidden') {
      return this.background(session, request, name, route.upstream, upstreamParams, policy, stream, access.actingFor, charge, once);
    }
    // A plain call held for approval waits as a task all the same (a tool that must be called as one still says so).
    if (task === undefined && policy.approval !== undefined && !(supportsSessionTasks(session.protocolVersion) && effectiveMode(policy.mode, route.upstream.taskSupportOf(route.name)) === 'required')) {
      return this.waitHeld(session, request, name, route.upstream, upstreamParams, policy, stream, access.actingFor, charge, once);
    }
    // Sessions without tasks call plainly; a tool its upstream runs only as a task is still run as one, upstream.
    if (!supportsSessionTasks(session.protocolVersion)) return this.forward(session, request, route.upstream, upstreamParams, stream, access.actingFor, policy.keepAliveProgressMs);
    const upstreamSupport = route.upstream.taskSupportOf(route.name);
    const mode = effectiveMode(policy.mode, upstreamSupport);
    if (task !== undefined) {
      const ttl = requestedTtl(task);
      if (mode === 'forbidden') {
        throw new GatewayError('method_not_found', `Tool '${name}' cannot be called as a task (task policy: forbidden); call it without params.task`);
      }
      return this.tasks.create(session, name, route.upstream, upstreamParams, ttl, access.actingFor, charge, once);
    }
    if (mode === 'required') {
      const why = upstreamSupport === 'required' ? `upstream '${route.upstream.name}' runs it only as a task` : 'task policy: required';
      throw new GatewayError('method_not_found', `Tool '${name}' must be called as a task (${why}); add params.task`);
    }
    return this.forward(session, request, route.upstream, upstreamParams, stream, access.actingFor, policy.keepAliveProgressMs);
  }

  /**
   * A plain call under `plainCalls: background`: answered as usual when the upstream answers within
   * `taskAfterMs`; past that, the call becomes a task as it runs, and the client gets a tool result naming it and
   * the tools that fetch its result. Under an idempotency key that made a task already, that task is named and
   * the upstream is not called; a call answered within `taskAfterMs` made no task, and leaves its key unused.
   */
  private async background(
    session: Session,
    request: JsonRpcRequest,
    name: string,
    upstream: Upstream,
    params: JsonObject,
    policy: TaskPolicy,
    stream: EventStream | undefined,
    actingFor: ActingFor | undefined,
    /** The request's bytes, which the task holds once the call becomes one. */
    charge: InflightCharge | undefined,
    once: IdempotentCreation | undefined,
  ): Promise<Outcome | undefined> {
    // A call held for approval never starts before the decision: a task at once (or the one its key made: one hold).
    if (policy.taskAfterMs === 0 || policy.approval !== undefined) return { result: this.taskTools.handle(await this.tasks.startBackground(session, name, upstream, params, actingFor, charge, once)) };
    const made = once === undefined ? undefined : await this.tasks.keyed(session, once);
    if (made !== undefined) return { result: this.taskTools.handle(made) };
    const { context: own, keepAlive } = this.requestContext(session, params, stream, policy.keepAliveProgressMs);
    // Until taskAfterMs, the call's messages belong to this request; from then on (the task being stored), to the task.
    let task: Promise<RunHandle> | undefined = undefined;
    const context: CallContext = {
      sessionId: session.sessionId,
      notify: (message) => (task === undefined ? own.notify(message) : void task.then((run) => run.notify(message), () => undefined)),
      ask: (message, signal) =>
        task === undefined
          ? own.ask(message, signal)
          : task.then((run) => run.ask(message, signal), () => ({ error: { code: RequestCancelled, message: 'Request cancelled: the call could not become a background task' } })),
      status: (message) => void task?.then((run) => run.status(message), () => undefined),
      // Once a task, no client stream waits on the call.
      get flow() {
        return task === undefined ? own.flow : undefined;
      },
    };
    const call = await upstream.callFor({ session, actingFor, method: 'tools/call', params, context, timeoutMs: 0, asTask: true });
    const inflight = { call, cancelled: false };
    session.inflight.set(request.id, inflight);
    let timer: NodeJS.Timeout | undefined;
    const answered = await Promise.race([call.outcome, new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), policy.taskAfterMs)))]);
    clearTimeout(timer);
    keepAlive?.stop();
    if (session.inflight.get(request.id) === inflight) session.inflight.delete(request.id);
    if (inflight.cancelled) return undefined;
    if (answered !== undefined) return answered;
    const adopted = this.tasks.adopt(session, name, upstream, params, call, actingFor, charge, once);
    task = adopted.then((a) => a.run ?? Promise.reject(new Error('another call with the idempotency key made the task')));
    task.catch(() => undefined); // whoever routes a message to it handles its failure; nobody else need
    try {
      const { task: made, run } = await adopted;
      // A retry with the key made the task while this call waited out taskAfterMs: that one runs, this one stops.
      if (run === undefined) call.cancel('another call with the same idempotency key made the task');
      return { result: this.taskTools.handle(made) };
    } catch (error) {
      // No task could hold it (a limit, the store): the call stops, and the client hears why.
      call.cancel('the call could not become a background task');
      throw error;
    }
  }

  /**
   * A plain call held for approval under `plainCalls: wait`: answered when its task ends (approved and run, denied,
   * expired), with keep-alive progress meanwhile for a client that asked for progress; cancelling the request
   * cancels the task. A retry under the same idempotency key waits for the same task.
   */
  private async waitHeld(
    session: Session,
    request: JsonRpcRequest,
    name: string,
    upstream: Upstream,
    params: JsonObject,
    policy: TaskPolicy,
    stream: EventStream | undefined,
    actingFor: ActingFor | undefined,
    charge: InflightCharge | undefined,
    once: IdempotentCreation | undefined,
  ): Promise<Outcome | undefined> {
    const stop = new AbortController();
    const inflight = {
      call: { upstreamId: -1, outcome: new Promise<Outcome>(() => undefined), cancel: (reason: string) => stop.abort(new Error(reason)) },
      cancelled: false,
    };
    session.inflight.set(request.id, inflight);
    const keepAlive = stream === undefined ? undefined : keepAliveFor(asObject(params._meta), policy.keepAliveProgressMs, (message) => session.deliver(message, { stream }));
    try {
      const outcome = await this.tasks.waitHeld(session, name, upstream, params, actingFor, stop.signal, charge, once);
      return inflight.cancelled ? undefined : outcome;
    } finally {
      keepAlive?.stop();
      if (session.inflight.get(request.id) === inflight) session.inflight.delete(request.id);
    }
  }

  /** The task tools: the caller's tasks, with task_result's wait ending when the client cancels the request. */
  private async taskTool(session: Session, request: JsonRpcRequest, name: string, params: JsonObject, stream: EventStream | undefined, access: CallerAccess): Promise<Outcome | undefined> {
    const stop = new AbortController();
    const inflight = {
      call: { upstreamId: -1, outcome: new Promise<Outcome>(() => undefined), cancel: (reason: string) => stop.abort(new Error(reason)) },
      cancelled: false,
    };
    session.inflight.set(request.id, inflight);
    // While task_result waits, a host that resets its timeout on progress is kept waiting (as for a plain call).
    const keepAlive = stream === undefined
      ? undefined
      : keepAliveFor(asObject(params._meta), this.tasks.policies.policyFor(name).keepAliveProgressMs, (message) => session.deliver(message, { stream }));
    try {
      const outcome = await this.taskTools.call(name, params.arguments, {
        reader: access.taskReader(session.principal),
        caller: access.who,
        principal: ownerOf(session),
        signal: stop.signal,
        // The task's questions come on this request's stream while it waits (wherever the call runs), including
        // those that found the client listening nowhere before.
        hold: stream === undefined ? undefined : async (task) => {
          const release = await session.holdResultStream(task.taskId, stream);
          await this.tasks.peerLink.reachable(task).catch(() => undefined);
          return release;
        },
      });
      return inflight.cancelled ? undefined : outcome;
    } finally {
      keepAlive?.stop();
      if (session.inflight.get(request.id) === inflight) session.inflight.delete(request.id);
    }
  }

  async forward(
    session: Session,
    request: JsonRpcRequest,
    upstream: Upstream,
    params: JsonObject,
    stream: EventStream | undefined,
    /** Whom the gateway acts for at the upstream (none: no authentication). */
    actingFor: ActingFor | undefined,
    /** A plain tool call's keep-alive interval (policy): progress while the upstream is silent, if the client asked for progress. */
    keepAliveMs = 0,
  ): Promise<Outcome | undefined> {
    const { context, keepAlive } = this.requestContext(session, params, stream, keepAliveMs);
    // Tool calls run as long as they run: their deadline is task policy, not a transport default.
    const timeoutMs = request.method === 'tools/call' ? 0 : upstream.config.requestTimeoutMs;
    const call = await upstream.callFor({ session, actingFor, method: request.method, params, context, timeoutMs });
    const inflight = { call, cancelled: false };
    session.inflight.set(request.id, inflight);
    const outcome = await call.outcome.finally(() => keepAlive?.stop());
    if (session.inflight.get(request.id) === inflight) session.inflight.delete(request.id);
    return inflight.cancelled ? undefined : outcome;
  }

  /**
   * Where an upstream call's messages go while its client request is open: on the request's stream, with the
   * upstream's progress kept alive (`keepAliveMs`, when the request asked for progress).
   */
  private requestContext(session: Session, params: JsonObject, stream: EventStream | undefined, keepAliveMs: number): { context: CallContext; keepAlive: ProgressKeepAlive | undefined } {
    // The call's upstream is held back (or the call fails) while the stream is full, so its messages are not dropped.
    const deliver = (message: JsonRpcNotification): void => session.deliver(message, { stream, flowControlled: true });
    const keepAlive = keepAliveFor(asObject(params._meta), keepAliveMs, deliver);
    const context: CallContext = {
      sessionId: session.sessionId,
      notify: (message) => (keepAlive !== undefined && message.method === 'notifications/progress' ? keepAlive.forward(message) : deliver(message)),
      ask: (message, signal) => session.ask(message, signal, { stream }),
      flow: session.flow(stream),
    };
    return { context, keepAlive };
  }
}
