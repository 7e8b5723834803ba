// One call of a 2026-07-28 client to an upstream (tools/call, prompts/get, resources/read, completion/complete,
// and tasks/* of a task an upstream runs itself). To an upstream that speaks this revision it passes through as
// sent; over a session upstream it is an MRTR exchange: answered when the upstream answers, or with an
// InputRequiredResult (the call parked for the client's retry, which any replica may receive), or handed to a
// task (or, for a client without the Tasks extension, to the background) when the tool's policy says so. A caller
// without a connection at an upstream that acts as each user (issue 41) is answered with an input-required result
// carrying the URL elicitation (or the link in a tool error), or its task waits for it (consent.ts). The router
// (router.ts) says which request goes where; this file is what happens to a call.
import { GatewayError, RequestCancelled } from '../../errors.js';
import { asObject, withoutMeta, type JsonObject, type JsonRpcNotification, type JsonRpcRequest, type Outcome } from '../../jsonrpc.js';
import { STATELESS_PRINCIPAL } from '../../principals.js';
import type { Upstream, SessionIdentity } from '../../upstream/life/upstream.js';
import type { CredentialSource } from '../../upstream/peer/adapter.js';
import { LATEST_SESSION_VERSION, logLevelRank } from '../../mcp.js';
import type { GatewayCatalog } from '../ports.js';
import type { TaskPolicy } from '../../config/types.js';
import type { CallerAccess } from '../access.js';
import { listedOnceConnected, resourceOwner, routeNamed } from '../routing.js';
import { keepAliveFor, type ProgressKeepAlive } from '../../streams/keep-alive.js';
import { taskTiming } from '../../config/policy.js';
import { answersIn, codec, endedStatusOf, inputRequiredResult, retryAnswers, retryState, STATELESS_VERSION, withoutRetryFields } from './codec.js';
import { statelessError } from './errors.js';
import { checkParamHeaders, declaresTasks, missingTasksExtension, withoutEnvelope, withoutTasksExtension, type StatelessClient } from './envelope.js';
import { StatelessExchange, paramsDigest, type ParkedExchanges, type RequestStateCodec } from './exchange.js';
import type { StatelessPeerMessages, StatelessPeers } from './peers.js';
import type { StatelessResponder, ResponseSink } from './responder.js';
import { plainClientCaller, taskClientCaller, type StatelessTasks } from './tasks.js';
import { consentAfterFailure, consentStep } from './consent.js';
import type { TaskTools } from '../task-tools.js';
import { statelessSideOf, type StatelessUpstreamSide } from './upstream/side.js';
import { planCall, toolCallRequest, type CallPlan } from '../../tasks/call-plan.js';
import { idempotencyKeyOf, withoutIdempotencyMeta } from '../idempotency-key.js';
import type { PostContext } from '../post-context.js';

const STALE_STATE = 'Invalid requestState: the call it resumes is no longer waiting (it expired or was cancelled); send the request again without requestState';

/** Methods that may answer with an InputRequiredResult (MRTR). */
const MRTR_METHODS = new Set(['tools/call', 'prompts/get', 'resources/read']);

type Headers = Record<string, string | string[] | undefined>;
const PLAIN: CallPlan = Object.freeze({ kind: 'plain' });

/** One request's turn at an upstream: whose it is, what it asks (`name`: the tool, prompt or URI), and where its answer goes. */
interface Turn {
  client: StatelessClient;
  request: JsonRpcRequest;
  name: string;
  upstream: Upstream;
  responder: ResponseSink;
}

/** One request to an upstream as `call` hands it on: the client's, with what the front read and the tool call's plan. */
interface UpstreamRequest {
  client: StatelessClient;
  request: JsonRpcRequest;
  params: JsonObject;
  headers: Headers;
  responder: StatelessResponder;
  post: PostContext;
  /** A tool call's policy and plan (none for prompts and resources). */
  planned: { policy: TaskPolicy; plan: CallPlan } | undefined;
}

/** What a call needs of the gateway (part of the router's dependencies). */
export interface StatelessCallsDeps {
  catalog: GatewayCatalog;
  tasks: StatelessTasks;
  parked: ParkedExchanges;
  requestStates: () => Promise<RequestStateCodec>;
  /** The gateway's version, as the identity 2026-07-28 clients share upstream says. */
  version: string;
  replicas: StatelessPeers;
  /** The gateway's own tools for background tasks (answered here, before any upstream). */
  taskTools: TaskTools;
}

export class StatelessCalls {
  /**
   * Who 2026-07-28 clients are to a session upstream: one upstream session for them all. It declares what the gateway
   * can relay, as every upstream connection does; what one client cannot answer, its own exchange refuses.
   */
  readonly identity: SessionIdentity;
  /** Keep-alive progress of the plain tool calls being answered, by request. */
  private readonly keepAlives = new WeakMap<JsonRpcRequest, ProgressKeepAlive>();

  constructor(
    private readonly deps: StatelessCallsDeps,
    /** What the caller may use, by the access rules in force (a config reload changes them: the router holds them). */
    private readonly accessOf: (client: StatelessClient) => CallerAccess,
  ) {
    this.identity = {
      sessionId: 'statelessSide:clients',
      protocolVersion: LATEST_SESSION_VERSION,
      capabilities: {},
      clientInfo: { name: 'taskgate (for 2026-07-28 clients)', version: deps.version },
      manyClients: true,
    };
    deps.replicas.on('mrtr.resume', (body, peer) => this.resumeForPeer(body, peer));
  }

  /** A retry that reached another replica, for a call parked here: resumed here, answered through the peer. */
  private async resumeForPeer(body: StatelessPeerMessages['mrtr.resume']['body'], peer: { accept(): void; emit(event: JsonObject): void }): Promise<StatelessPeerMessages['mrtr.resume']['answer']> {
    const { method, name } = body;
    const exchange = this.deps.parked.unpark(body.x, body.caller?.principal);
    if (exchange === undefined) return { outcome: { error: statelessError(new GatewayError('invalid_params', STALE_STATE)) } };
    peer.accept();
    exchange.answer(body.answers);
    const client: StatelessClient = {
      protocolVersion: STATELESS_VERSION,
      capabilities: {},
      clientInfo: undefined,
      logLevel: typeof body.logLevel === 'string' ? (body.logLevel as StatelessClient['logLevel']) : undefined,
      caller: body.caller ?? undefined,
    };
    const meta: JsonObject = body.progressToken === null || body.progressToken === undefined ? {} : { progressToken: body.progressToken as JsonObject[string] };
    const request: JsonRpcRequest = { jsonrpc: '2.0', id: 0, method, params: { _meta: meta } };
    const sink: ResponseSink = { notify: (message) => peer.emit(message), gone: new AbortController().signal };
    try {
      // Listed here too: this replica's catalog may not have read the upstream's list since the first request did.
      const upstream = method === 'resources/read' ? await this.deps.catalog.resolveUri(name) : (await this.deps.catalog.resolve(method === 'tools/call' ? 'tools' : 'prompts', name))?.upstream;
      if (upstream === undefined) throw new GatewayError('invalid_params', STALE_STATE);
      const taskAfterMs = body.taskAfterMs ?? undefined;
      const outcome = await this.await({ client, request, name, upstream, responder: sink }, exchange, { taskAfterMs, background: body.background });
      return { outcome: outcome ?? { error: { code: RequestCancelled, message: 'Request cancelled' } } };
    } catch (error) {
      return { outcome: { error: statelessError(error) } };
    }
  }

  /**
   * tools/call, prompts/get, resources/read. The task tools answer here. A tool call's plan (tasks/call-plan.ts) is
   * made once, from its policy and whether the client declared the Tasks extension; one the client does not get as a
   * task is kept alive with progress while the upstream is silent, when the client asked for progress.
   */
  async call(client: StatelessClient, request: JsonRpcRequest, params: JsonObject, headers: Headers, responder: StatelessResponder, post: PostContext): Promise<Outcome | undefined> {
    if (request.method === 'tools/call' && typeof params.name === 'string' && this.deps.taskTools.owns(params.name)) return this.taskTool(client, params.name, params, responder);
    const policy = request.method === 'tools/call' && typeof params.name === 'string' ? this.deps.tasks.policies.policyFor(params.name) : undefined;
    const planned = policy === undefined ? undefined : { policy, plan: planCall(policy, { speaksTasks: true, task: declaresTasks(client) ? 'accepted' : 'none' }) };
    const keepAlive =
      planned !== undefined && planned.plan.kind !== 'task'
        ? keepAliveFor(asObject(params._meta), planned.policy.keepAliveProgressMs, (message) => responder.notify(message as unknown as JsonObject))
        : undefined;
    const call: UpstreamRequest = { client, request, params, headers, responder, post, planned };
    if (keepAlive === undefined) return this.consentChecked(call);
    this.keepAlives.set(request, keepAlive);
    try {
      return await this.consentChecked(call);
    } finally {
      keepAlive.stop();
    }
  }

  /** callUpstream; a tool call whose upstream session could not be opened for want of the caller's connection is asked for it. */
  private consentChecked(call: UpstreamRequest): Promise<Outcome | undefined> {
    return this.callUpstream(call).catch((error: unknown) => (call.planned === undefined ? Promise.reject(error) : consentAfterFailure(error, this.deps.tasks.plans, call.client)));
  }

  /**
   * A retry carrying `requestState` resumes the parked call it names; a first request starts one, plain, as a task
   * at once or past a window, as a background task, or as the wait of a plain caller for its held call, as the
   * tool call's plan says (`planned`, made once by `call`; none for prompts and resources).
   */
  private async callUpstream({ client, request, params, headers, responder, post, planned }: UpstreamRequest): Promise<Outcome | undefined> {
    const { upstream, upstreamParams, name, unlisted } = await this.route(request.method, params, this.accessOf(client));
    if (request.method === 'tools/call' && unlisted === undefined) checkParamHeaders(this.deps.catalog.tool(name), asObject(params.arguments), headers);
    const answers = retryAnswers(params);
    const plan = planned?.plan ?? PLAIN;
    // A caller who has not connected an upstream that acts as each user is asked to first, or its task waits.
    const consent = await consentStep(this.deps.tasks.plans, client, { upstream: upstream.name, plan: planned?.plan, answers, first: retryState(params) === undefined });
    if (consent.answer !== undefined) return consent.answer;
    if (unlisted !== undefined && !consent.waits) await listedOnceConnected(this.deps.catalog, this.accessOf(client), name, { upstream, error: unlisted });
    if (unlisted !== undefined && !consent.waits && request.method === 'tools/call') checkParamHeaders(this.deps.catalog.tool(name), asObject(params.arguments), headers);
    if (plan.kind === 'refuse') throw missingTasksExtension(`Tool '${name}'`);
    const background = plan.kind === 'background';
    // A held call is a task of the gateway's at once (the upstream sees nothing before the decision).
    const held = plan.kind === 'wait_held' || ((plan.kind === 'task' || background) && plan.held);
    // A task waiting for its user's connection is one at once (the upstream sees nothing before it).
    const taskAfterMs = plan.kind === 'plain' ? undefined : plan.kind === 'wait_held' || consent.waits ? 0 : plan.afterMs;
    const key = request.method === 'tools/call' ? idempotencyKeyOf(post.idempotencyHeader, asObject(params._meta)) : undefined;

    const statelessSide = statelessSideOf(upstream);
    const nativeTasks = statelessSide?.nativeTasks === true;
    if (!held && !consent.waits && statelessSide !== undefined && (plan.kind === 'plain' || (plan.kind === 'task' && nativeTasks))) {
      // The upstream speaks this revision: the request goes as the client sent it (its InputRequiredResults and
      // requestState, and its own tasks, pass through unchanged).
      return consent.lost(await this.passThrough({ client, request, name, upstream, responder }, { ...params, ...upstreamParams, _meta: params._meta }, statelessSide, nativeTasks));
    }

    let exchange: StatelessExchange;
    const sentState = retryState(params);
    if (sentState !== undefined) {
      const state = (await this.deps.requestStates()).decode(sentState, request.method, name, paramsDigest(upstreamParams));
      if (state.o !== this.deps.replicas.id) {
        // Another replica holds the parked call: it resumes it and answers through this one.
        const answer = await this.deps.replicas.ask(state.o, 'mrtr.resume', {
          x: state.x,
          answers: answers ?? {},
          method: request.method,
          name,
          taskAfterMs: taskAfterMs ?? null,
          background,
          logLevel: client.logLevel ?? null,
          progressToken: asObject(params._meta)?.progressToken ?? null,
          caller: client.caller ?? null,
        }, (event) => responder.notify(event));
        if (answer === undefined) throw new GatewayError('invalid_params', STALE_STATE);
        return answer.outcome;
      }
      const parked = this.deps.parked.unpark(state.x, client.caller?.principal);
      if (parked === undefined) throw new GatewayError('invalid_params', STALE_STATE);
      exchange = parked;
      exchange.answer(answers ?? {});
    } else {
      const identity = this.identity;
      exchange = new StatelessExchange(identity.sessionId, client.capabilities);
      exchange.owner = client.caller?.principal;
      exchange.digest = paramsDigest(upstreamParams);
      exchange.charge = post.charge;
      if (planned !== undefined) {
        exchange.request = toolCallRequest({
          exposedName: name,
          upstream,
          params: upstreamParams,
          policy: planned.policy,
          owner: principalOf(client),
          actingFor: client.caller,
          identity,
          charge: post.charge,
          key,
          era: codec.revision,
        }, params.arguments);
      }
      // A keyed replay: the task the key made already is the answer, and the upstream is not called again.
      const made = exchange.request === undefined ? undefined : await this.deps.tasks.plans.replayed(exchange.request, plan);
      if (made !== undefined) return { result: background ? this.deps.taskTools.handle(made) : codec.createTaskResult(made, undefined) };
      const timeoutMs = request.method === 'tools/call' ? 0 : upstream.config.requestTimeoutMs;
      const start = async (): Promise<StatelessExchange['call']> => {
        const call = statelessSide !== undefined
          // A 2026-07-28 upstream without tasks of its own, run as a task by the gateway: its questions are
          // re-asked through the exchange (MRTR with the gateway's keys, or task input requests).
          ? statelessSide.callResolvingInput(request.method, { ...upstreamParams, _meta: withoutTasksExtension(asObject(params._meta)) }, exchange.context(), { tool: this.deps.catalog.tool(name), timeoutMs, credentials: this.credentialsOf(upstream, client) })
          // A session upstream; one that runs the tool as its own task is waited on for every client, task or not.
          : await upstream.callFor({ session: identity, actingFor: client.caller, method: request.method, params: upstreamParams, context: exchange.context(), timeoutMs, asTask: plan.kind === 'task' });
        exchange.start(call);
        return call;
      };
      if (plan.kind === 'wait_held') return this.deps.tasks.waitHeld(exchange, start, plainClientCaller(client.capabilities), responder.gone);
      if (taskAfterMs === 0) return this.becomeTask(client, exchange, background, start);
      await start();
    }
    return consent.lost(await this.await({ client, request, name, upstream, responder }, exchange, { taskAfterMs, background }));
  }

  /** What a request for `client` authenticates with at `upstream`: the client's identity there, as its `auth` makes it. */
  credentialsOf(upstream: Upstream, client: StatelessClient): CredentialSource {
    return upstream.callerOf(this.identity, client.caller).credentials;
  }

  /** Forwards a request to a 2026-07-28 upstream as the client sent it; notifications stream back. */
  private async passThrough(turn: Turn, params: JsonObject, statelessSide: StatelessUpstreamSide, nativeTasks: boolean): Promise<Outcome | undefined> {
    const { client, request, name, upstream, responder } = turn;
    const outcome = await statelessSide.request(request.method, params, {
      credentials: this.credentialsOf(upstream, client),
      onNotification: (message) => this.relay(client, request, message, responder),
      clientFlow: () => responder.flow,
      signal: responder.gone,
      tool: request.method === 'tools/call' ? this.deps.catalog.tool(name) : undefined,
      ...(request.method === 'tools/call' ? {} : { timeoutMs: upstream.config.requestTimeoutMs }),
    });
    if (responder.gone.aborted) return undefined;
    const created = nativeTasks && 'result' in outcome ? codec.createdTask(outcome.result) : undefined;
    if (created !== undefined) {
      // Else the tool policy's default retention (a client asking for none gets the same).
      const retentionMs = created.retentionMs ?? taskTiming(this.deps.tasks.policies.policyFor(name), undefined).retentionMs;
      await this.deps.tasks.records.recordNative(codec.revision, created.taskId, name, upstream, retentionMs, client.caller?.principal);
    }
    return outcome;
  }

  /**
   * tasks/* for a task an upstream runs itself go to that upstream, as the client sent them. A tasks/get answer that
   * says the task ended ends its record too, so the dashboard and the audit log stop showing it running.
   */
  async nativeTask(client: StatelessClient, request: JsonRpcRequest, upstream: Upstream, responder: StatelessResponder): Promise<Outcome | undefined> {
    const statelessSide = statelessSideOf(upstream);
    if (statelessSide === undefined) throw new GatewayError('invalid_params', `Upstream '${upstream.name}' does not speak ${STATELESS_VERSION} now: its tasks are not available`);
    const outcome = await statelessSide.request(request.method, request.params ?? {}, {
      credentials: this.credentialsOf(upstream, client),
      signal: responder.gone,
      timeoutMs: upstream.config.requestTimeoutMs,
      onNotification: (message) => this.relay(client, request, message, responder),
      clientFlow: () => responder.flow,
    });
    const ended = request.method === 'tasks/get' && 'result' in outcome ? endedStatusOf(outcome.result) : undefined;
    const taskId = codec.taskIdOf(request.params ?? {});
    if (ended !== undefined && typeof taskId === 'string') {
      // Written before the answer goes out, so what the client saw ended shows ended; a store failure here costs the
      // dashboard a stale row only (the record still expires with the task's TTL), never the client its answer.
      await this.deps.tasks.records.recordNativeEnd(taskId, ended).catch(() => undefined);
    }
    return outcome;
  }

  /** Waits for what the call's client must hear next, and says it. */
  private async await(
    turn: Turn,
    exchange: StatelessExchange,
    /** Past `taskAfterMs` the call becomes a task; a `background` one's client gets the task tools' handle instead. */
    window: { taskAfterMs?: number | undefined; background?: boolean } = {},
  ): Promise<Outcome | undefined> {
    const { client, request, name, responder } = turn;
    const { taskAfterMs, background = false } = window;
    exchange.notifySink = (message) => this.relay(client, request, message, responder);
    exchange.sinkFlow = () => responder.flow;
    const gone = new Promise<'gone'>((resolve) => responder.gone.addEventListener('abort', () => resolve('gone'), { once: true }));
    const event = await Promise.race([exchange.next(taskAfterMs), gone]);
    exchange.notifySink = undefined;
    exchange.sinkFlow = undefined;
    if (event === 'gone') {
      // Closing the response stream cancels the request (the revision has no other way to say it).
      exchange.cancel('the client closed the request');
      return undefined;
    }
    switch (event.kind) {
      case 'outcome':
        return event.outcome;
      case 'input': {
        if (!MRTR_METHODS.has(request.method)) throw new GatewayError('internal', `${request.method} cannot ask the client for input`);
        this.deps.parked.park(exchange);
        const state = (await this.deps.requestStates()).encode({
          x: exchange.id,
          r: exchange.round,
          m: request.method,
          n: name,
          p: exchange.digest,
          e: this.deps.parked.deadline(),
          o: this.deps.replicas.id,
        });
        return { result: inputRequiredResult(event.questions, state) };
      }
      case 'missing_capability':
        exchange.cancel(`the client lacks the '${event.capability}' capability`);
        throw new GatewayError('missing_capability', `The upstream asked for ${event.method}, which needs the '${event.capability}' client capability`, {
          requiredCapabilities: { [event.capability]: {} },
        });
      case 'timeout':
        return this.becomeTask(client, exchange, background, undefined);
    }
  }

  /**
   * The call becomes a task (`start` starts it once it may run; without, it already runs): a client with the
   * extension gets the task, one without (a background call) a tool result naming it and the task tools.
   */
  private async becomeTask(client: StatelessClient, exchange: StatelessExchange, background: boolean, start: (() => Promise<StatelessExchange['call']>) | undefined): Promise<Outcome> {
    try {
      if (!background) return { result: codec.createTaskResult(await this.deps.tasks.create(exchange, start, taskClientCaller(client.capabilities)), undefined) };
      const task = await this.deps.tasks.create(exchange, start, plainClientCaller(client.capabilities));
      return { result: this.deps.taskTools.handle(task) };
    } catch (error) {
      // No task could hold it (a limit, a full replica, the store): a call that already runs stops, and the
      // client hears why (as a 2025 background call does).
      if (start === undefined) exchange.cancel('the call could not become a task');
      throw error;
    }
  }

  /**
   * The task tools, for clients without the extension. While the task waits on input that task_result is asked
   * for, the answer is an InputRequiredResult with the task's own input requests; the retry's inputResponses go
   * to the task (wherever its call runs) before task_result looks again.
   */
  private async taskTool(client: StatelessClient, name: string, params: JsonObject, responder: StatelessResponder): Promise<Outcome | undefined> {
    const reader = this.accessOf(client).taskReader(client.caller?.principal);
    const answers = answersIn(params);
    const taskId = asObject(params.arguments)?.taskId;
    if (answers !== undefined && typeof taskId === 'string') {
      const task = await this.deps.tasks.queries.find(taskId, { reader }).catch(() => undefined);
      if (task !== undefined) await this.deps.tasks.peerLink.answer(task, answers);
    }
    // While task_result waits, a host that resets its timeout on progress is kept waiting (as for a plain call).
    const keepAlive = keepAliveFor(asObject(params._meta), this.deps.tasks.policies.policyFor(name).keepAliveProgressMs, (message) => responder.notify(message as unknown as JsonObject));
    try {
      return await this.deps.taskTools.call(name, params.arguments, {
        reader,
        principal: principalOf(client),
        caller: client.caller ?? undefined,
        signal: responder.gone,
        inputRequired: (task) => ({ result: inputRequiredResult(task.openRequests ?? {}, undefined) }),
      });
    } finally {
      keepAlive?.stop();
    }
  }

  /** Progress always; logs only when the request asked for a level, and only at or above it. */
  private relay(client: StatelessClient, request: JsonRpcRequest, message: JsonRpcNotification, responder: ResponseSink): void {
    if (message.method === 'notifications/message') {
      if (client.logLevel === undefined || logLevelRank(message.params?.level) < logLevelRank(client.logLevel)) return;
    } else if (message.method !== 'notifications/progress') return;
    if (message.method === 'notifications/progress' && asObject(request.params?._meta)?.progressToken === undefined) return;
    const keepAlive = message.method === 'notifications/progress' ? this.keepAlives.get(request) : undefined;
    if (keepAlive !== undefined) keepAlive.forward(message);
    else responder.notify(message as unknown as JsonObject);
  }

  async complete(client: StatelessClient, request: JsonRpcRequest, params: JsonObject, responder: StatelessResponder): Promise<Outcome | undefined> {
    const ref = asObject(params.ref);
    let upstream: Upstream | undefined;
    let forwarded = params;
    if (ref?.type === 'ref/prompt' && typeof ref.name === 'string') {
      const route = await routeNamed(this.deps.catalog, this.accessOf(client), 'prompts', ref.name);
      upstream = route.upstream;
      forwarded = { ...params, ref: { ...ref, name: route.name } };
    } else if (ref?.type === 'ref/resource' && typeof ref.uri === 'string') {
      upstream = (await resourceOwner(this.deps.catalog, this.accessOf(client), ref.uri, 'invalid_params')).upstream;
    } else throw new GatewayError('invalid_params', 'completion/complete: params.ref must be a ref/prompt or ref/resource');
    const statelessSide = statelessSideOf(upstream);
    if (statelessSide !== undefined) return this.passThrough({ client, request, name: '', upstream, responder }, forwarded, statelessSide, false);
    const identity = this.identity;
    const exchange = new StatelessExchange(identity.sessionId, client.capabilities);
    exchange.start(await upstream.callFor({ session: identity, actingFor: client.caller, method: request.method, params: withoutMeta(forwarded), context: exchange.context(), timeoutMs: upstream.config.requestTimeoutMs }));
    return this.await({ client, request, name: '', upstream, responder }, exchange);
  }

  /**
   * Which upstream serves the request, and the request as it goes there; what the caller may not use is unknown. A
   * tool call's name no upstream lists, under the prefix of an upstream that acts as each user, is `unlisted` (the
   * error it gets unless the consent step answers it: see routing.ts NamedRoute).
   */
  private async route(method: string, params: JsonObject, access: CallerAccess): Promise<{ upstream: Upstream; upstreamParams: JsonObject; name: string; unlisted?: GatewayError | undefined }> {
    // The retry fields and the envelope are the gateway's business; the upstream sees a plain request.
    const { task: _task, ...plain } = withoutIdempotencyMeta(withoutRetryFields(params));
    const forwarded = withoutEnvelope(plain);
    if (method === 'resources/read') {
      const { upstream, uri } = await resourceOwner(this.deps.catalog, access, params.uri, 'invalid_params');
      return { upstream, upstreamParams: forwarded, name: uri };
    }
    const name = params.name;
    if (typeof name !== 'string') throw new GatewayError('invalid_params', `${method}: params.name must be a string`);
    const kind = method === 'tools/call' ? 'tools' : 'prompts';
    const route = await routeNamed(this.deps.catalog, access, kind, name, { consent: method === 'tools/call' });
    return { upstream: route.upstream, upstreamParams: { ...forwarded, name: route.name }, name, unlisted: route.unlisted };
  }
}

/** Whose a client's tasks are: the authenticated principal, or (without authentication) every 2026-07-28 client's. */
function principalOf(client: StatelessClient): string {
  return client.caller?.principal ?? STATELESS_PRINCIPAL;
}
