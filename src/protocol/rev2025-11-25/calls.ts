// One session request that reaches an upstream through the gateway: a tool call run synchronously, as a task
// the client asked for (`params.task`, within the tool's policy), or in the background past `taskAfterMs`
// (`plainCalls: background`); the gateway's task tools; and the forwarding every upstream call shares (the
// request's stream, keep-alive progress, the session's in-flight calls for cancellation). A caller without a
// connection at an upstream that acts as each user (issue 41) gets -32042 with the link, or the link in a tool error,
// or a task that waits for it. The router (router.ts) says which request goes where; this file is what happens to a call.
import { GatewayError, RequestCancelled } from '../../errors.js';
import { asObject, type JsonObject, type JsonRpcNotification, type JsonRpcRequest, type Outcome } from '../../jsonrpc.js';
import type { CallContext } from '../../upstream/peer/connection.js';
import type { Upstream } from '../../upstream/life/upstream.js';
import { codec, requestedTtl } from './codec.js';
import type { EventStream } from '../../streams/event-stream.js';
import { acceptsUrlElicitation, supportsSessionTasks } from '../../mcp.js';
import type { GatewayCatalog } from '../ports.js';
import type { Session } from './session.js';
import { ownerOf, type SessionTasks } from './tasks.js';
import type { CallerAccess } from '../access.js';
import type { ActingFor } from '../../upstream/peer/adapter.js';
import { listedOnceConnected, routeNamed } from '../routing.js';
import { keepAliveFor, type ProgressKeepAlive } from '../../streams/keep-alive.js';
import type { TaskTools } from '../task-tools.js';
import type { RunHandle, TaskCaller } from '../../tasks/local-run.js';
import type { TaskRecord } from '../../store/task-store.js';
import { planCall, toolCallRequest, type CallPlan, type ConsentAsk, type ConsentPlan, type ToolCallRequest } from '../../tasks/call-plan.js';
import { consentLinkResult, lostConsent, noUserError, urlElicitationRequired } from '../../tasks/consent-wait.js';
import { idempotencyKeyOf, withoutIdempotencyMeta } from '../idempotency-key.js';
import type { PostContext } from '../post-context.js';

/** What a call needs of the gateway (part of the router's dependencies). */
export interface SessionCallsDeps {
  catalog: GatewayCatalog;
  tasks: SessionTasks;
  /** The gateway's own tools for background tasks (answered here, before any upstream). */
  taskTools: TaskTools;
  /** Where a URL elicitation a session was sent is noted, for its `notifications/elicitation/complete` (issue 41). */
  elicited?: (elicitationId: string, sessionId: string) => void;
}

export class SessionCalls {
  private readonly catalog: GatewayCatalog;
  private readonly tasks: SessionTasks;
  private readonly taskTools: TaskTools;
  private readonly elicited: SessionCallsDeps['elicited'];

  constructor(deps: SessionCallsDeps) {
    ({ catalog: this.catalog, tasks: this.tasks, taskTools: this.taskTools, elicited: this.elicited } = deps);
  }

  /**
   * A tool call runs synchronously or as a task, as the call plan (tasks/call-plan.ts) decides from the tool's policy
   * and what the client asked (`params.task`). The task hint never goes upstream: the upstream only ever sees a
   * plain call. The POST's Idempotency-Key (or the call's `_meta`) makes a task-creating call retry-safe.
   */
  async callTool(session: Session, request: JsonRpcRequest, params: JsonObject, stream: EventStream | undefined, access: CallerAccess, post: PostContext): Promise<Outcome | undefined> {
    const name = params.name;
    if (typeof name !== 'string') throw new GatewayError('invalid_params', 'tools/call: params.name must be a string');
    if (this.taskTools.owns(name)) return this.taskTool(session, request, name, params, stream, access);
    const key = idempotencyKeyOf(post.idempotencyHeader, asObject(params._meta));
    const route = await routeNamed(this.catalog, access, 'tools', name, { consent: true });
    const { task, ...plain } = withoutIdempotencyMeta(params);
    const call = toolCallRequest({
      exposedName: name,
      upstream: route.upstream,
      params: { ...plain, name: route.name },
      policy: this.tasks.policies.policyFor(name),
      owner: ownerOf(session),
      actingFor: access.actingFor,
      identity: session,
      charge: post.charge,
      key,
      era: codec.revision,
    }, params.arguments);
    const speaksTasks = supportsSessionTasks(session.protocolVersion);
    const plan = planCall(call.policy, { speaksTasks, task: task === undefined ? 'none' : 'asked', upstreamSupport: route.upstream.taskSupportOf(route.name) });
    // The ttl a client asked for is read (and refused when malformed) wherever its session speaks tasks.
    const ttl = task !== undefined && speaksTasks ? requestedTtl(task) : undefined;
    // Before the upstream: a caller at an upstream that acts as each user, who has not connected it, is asked to.
    const consentAsk: ConsentAsk = { urlElicitation: acceptsUrlElicitation(session.capabilities), inputRequired: false };
    const consent = await this.tasks.plans.consent(route.upstream.name, access.actingFor?.principal, plan, consentAsk);
    const asked = this.consentAnswer(session, consent);
    if (asked !== undefined) return asked;
    // A task that waits for its user's connection checks the listing itself once connected (task-runs.ts).
    if (route.unlisted !== undefined && consent.kind !== 'in_task') await listedOnceConnected(this.catalog, access, name, { upstream: route.upstream, error: route.unlisted });
    switch (plan.kind) {
      case 'plain':
        return this.plain(session, request, call, stream, consentAsk);
      case 'task':
        return this.tasks.create(session, { ...call, requestedTtl: ttl });
      case 'background':
        return this.background(session, request, call, plan, stream);
      case 'wait_held':
        return this.waitHeld(session, request, call, stream);
      case 'refuse': {
        if (plan.why === 'task_forbidden') throw new GatewayError('method_not_found', `Tool '${name}' cannot be called as a task (task policy: forbidden); call it without params.task`);
        const why = plan.byUpstream ? `upstream '${route.upstream.name}' runs it only as a task` : 'task policy: required';
        throw new GatewayError('method_not_found', `Tool '${name}' must be called as a task (${why}); add params.task`);
      }
    }
  }

  /**
   * A plain call, forwarded; one whose credential failed for want of the caller's connection before it left (they
   * disconnected, the grant was refused) is answered with the consent request as a call that never had one.
   */
  private async plain(session: Session, request: JsonRpcRequest, call: ToolCallRequest, stream: EventStream | undefined, consentAsk: ConsentAsk): Promise<Outcome | undefined> {
    const upstream = call.upstream.name;
    let failure: Outcome | undefined;
    try {
      const outcome = await this.forward(session, request, call.upstream, call.params, stream, { actingFor: call.actingFor, keepAliveMs: call.policy.keepAliveProgressMs });
      if (outcome === undefined || !lostConsent(outcome, upstream)) return outcome;
      failure = outcome;
    } catch (error) {
      if (!lostConsent(error, upstream)) throw error;
      failure = { error: (error as GatewayError).toJsonRpc() };
    }
    return this.consentAnswer(session, await this.tasks.plans.consentLost(upstream, call.actingFor?.principal, consentAsk)) ?? failure;
  }

  /**
   * A consent plan on this revision's wire: -32042 with the URL elicitation (noted for its completion notice), the
   * link in a tool error, a clear error for nobody who can connect; undefined: the call goes on (or waits as a task).
   */
  private consentAnswer(session: Session, consent: ConsentPlan): Outcome | undefined {
    switch (consent.kind) {
      case 'none':
      case 'in_task':
        return undefined;
      case 'no_user':
        throw noUserError(consent.upstream);
      case 'link':
        return { result: consentLinkResult(consent.request) };
      case 'elicit':
      case 'input_required':
        this.elicited?.(consent.request.elicitationId, session.sessionId);
        throw urlElicitationRequired(consent.request);
    }
  }

  /**
   * A plain call under `plainCalls: background`: answered as usual when the upstream answers within `afterMs`;
   * past that, the call becomes a task as it runs, and the client gets a tool result naming it and the tools that
   * fetch its result. A call the key made a task for already names that task, and the upstream is not called; a
   * call answered within the window made no task, and leaves its key unused.
   */
  private async background(session: Session, request: JsonRpcRequest, call: ToolCallRequest, plan: CallPlan & { kind: 'background' }, stream: EventStream | undefined): Promise<Outcome | undefined> {
    const { afterMs } = plan;
    const plans = this.tasks.plans;
    const caller = (task: TaskRecord): TaskCaller => this.tasks.backgroundCaller(task.taskId, session);
    // A task at once (a held call never starts before the decision), or the one its key made: one task, one hold.
    if (afterMs === 0) return { result: this.taskTools.handle((await plans.openTask(call, { caller })).task) };
    const made = await plans.replayed(call, plan);
    if (made !== undefined) return { result: this.taskTools.handle(made) };
    const { upstream, params } = call;
    const { context: own, keepAlive } = this.requestContext(session, params, stream, call.policy.keepAliveProgressMs);
    // Until the window passes, the call's messages belong to this request; from then on (the task being stored), to the task.
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
    const running = await upstream.callFor({ session, actingFor: call.actingFor, method: 'tools/call', params, context, timeoutMs: 0, asTask: true });
    const inflight = { call: running, cancelled: false };
    session.inflight.set(request.id, inflight);
    let timer: NodeJS.Timeout | undefined;
    const answered = await Promise.race([running.outcome, new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), afterMs)))]);
    clearTimeout(timer);
    keepAlive?.stop();
    if (session.inflight.get(request.id) === inflight) session.inflight.delete(request.id);
    if (inflight.cancelled) return undefined;
    if (answered !== undefined) return answered;
    // The call runs on as a task (it holds no place in line).
    const adopted = plans.openTask(call, { caller, running: () => running });
    task = adopted.then((a) => a.run ?? Promise.reject(new Error('another call with the idempotency key made the task')));
    task.catch(() => undefined); // whoever routes a message to it handles its failure; nobody else need
    try {
      const { task: made, run } = await adopted;
      // A retry with the key made the task while this call waited out its window: that one runs, this one stops.
      if (run === undefined) running.cancel('another call with the same idempotency key made the task');
      return { result: this.taskTools.handle(made) };
    } catch (error) {
      // No task could hold it (a limit, the store): the call stops, and the client hears why.
      running.cancel('the call could not become a background task');
      throw error;
    }
  }

  /**
   * A plain caller of a call the plan holds (`plainCalls: wait`): answered when its task ends, with keep-alive
   * progress meanwhile for a client that asked for progress; cancelling the request stops the wait (the plan says
   * what becomes of the task). A retry under the same idempotency key waits for the same task.
   */
  private async waitHeld(session: Session, request: JsonRpcRequest, call: ToolCallRequest, stream: EventStream | undefined): Promise<Outcome | undefined> {
    const stop = new AbortController();
    const inflight = {
      call: { upstreamId: -1, outcome: new Promise<Outcome>(() => undefined), cancel: (reason: string) => stop.abort(new Error(reason)) },
      cancelled: false,
    };
    session.inflight.set(request.id, inflight);
    const keepAlive = stream === undefined ? undefined : keepAliveFor(asObject(call.params._meta), call.policy.keepAliveProgressMs, (message) => session.deliver(message, { stream }));
    try {
      const outcome = await this.tasks.plans.waitHeld(call, { caller: (task) => this.tasks.backgroundCaller(task.taskId, session) }, stop.signal);
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
    /**
     * `actingFor`: whom the gateway acts for at the upstream (none: no authentication); `keepAliveMs`: a plain tool
     * call's keep-alive interval (policy): progress while the upstream is silent, if the client asked for progress.
     */
    as: { actingFor: ActingFor | undefined; keepAliveMs?: number },
  ): Promise<Outcome | undefined> {
    const { actingFor, keepAliveMs = 0 } = as;
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
