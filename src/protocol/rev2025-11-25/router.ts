// Method → handler for the session revisions (2025-11-25, 2025-06-18, 2025-03-26): initialize, lists, the task
// methods, subscriptions, log levels and cancellation; a request that reaches an upstream (a tool call, plain, as
// a task or in the background; prompts/get, resources/read, completion) is calls.ts's. Task methods, the codec
// and the error edge are files of their own; routing with access checks is shared with 2026-07-28
// (protocol/routing.ts).
import { GatewayError } from '../../errors.js';
import { NO_EVENTS, type GatewayEvents } from '../../events.js';
import {
  asObject,
  toResponse,
  type JsonObject,
  type JsonRpcNotification,
  type JsonRpcRequest,
  type JsonRpcResponse,
  type Outcome,
} from '../../jsonrpc.js';
import type { Logger } from '../../log.js';
import { effectiveMode } from '../../config/policy.js';
import type { Upstream } from '../../upstream/life/upstream.js';
import { codec, upstreamTaskSupport } from './codec.js';
import type { EventStream } from '../../streams/event-stream.js';
import {
  isSessionVersion,
  LATEST_SESSION_VERSION,
  SESSION_TASKS_CAPABILITY,
  LIST_METHODS,
  logLevelRank,
  LOG_LEVELS,
  supportsSessionTasks,
  type LogLevel,
} from '../../mcp.js';
import type { AggregatedLists, GatewayCatalog } from '../ports.js';
import { inRequestScope, requestInfo, type RequestScope } from '../request-scope.js';
import { sessionError, sessionErrorResponse, sessionFailure, type SessionOutcome } from './errors.js';
import type { Session, Sessions } from './session.js';
import type { SessionTasks } from './tasks.js';
import { SessionCalls } from './calls.js';
import type { Caller } from '../../principals.js';
import { CallerAccess } from '../access.js';
import { resourceOwner, routeNamed } from '../routing.js';
import { plainCallView } from '../task-tool-definitions.js';
import type { TaskTools } from '../task-tools.js';
import type { AccessRule } from '../../config/types.js';
import type { PostContext } from '../post-context.js';

/** Methods whose upstream may send progress, logs or requests before answering: answered on an SSE stream. */
export const STREAMED_METHODS = new Set(['tools/call', 'prompts/get', 'resources/read', 'completion/complete', 'tasks/result']);

/**
 * Method → handler for 2025-11-25 (and older) sessions. Forwarded results travel as the upstream sent them; only
 * names the gateway prefixed are translated. What upstreams send toward clients is gateway/upstream-messages.ts.
 */
export interface SessionRouterDeps {
  catalog: GatewayCatalog;
  tasks: SessionTasks;
  logger: Logger;
  lists: AggregatedLists;
  sessions: Sessions;
  /** The gateway's version, as `serverInfo` says. */
  version: string;
  /** `auth.access`: undefined when every caller may use everything. */
  access: readonly AccessRule[] | undefined;
  /** The gateway's own tools for background tasks (answered here, before any upstream). */
  taskTools: TaskTools;
  /** Where each request is announced (`mcp.request`). */
  events?: GatewayEvents;
  /** Where a URL elicitation a session's call was answered with is noted (SessionCallsDeps). */
  elicited?: (elicitationId: string, sessionId: string) => void;
}

export class SessionRouter {
  private readonly catalog: GatewayCatalog;
  private readonly tasks: SessionTasks;
  private readonly logger: Logger;
  private readonly lists: AggregatedLists;
  private readonly sessions: Sessions;
  private readonly serverVersion: string;
  private access: readonly AccessRule[] | undefined;
  private readonly taskTools: TaskTools;
  private readonly events: GatewayEvents;
  /** Session requests that reach an upstream (calls.ts). */
  private readonly calls: SessionCalls;
  /** Where each request is announced, and what its scope reads (built once: it is the same for every request). */
  private readonly requestScope: RequestScope;

  constructor(deps: SessionRouterDeps) {
    this.catalog = deps.catalog;
    this.tasks = deps.tasks;
    this.logger = deps.logger;
    this.lists = deps.lists;
    this.sessions = deps.sessions;
    this.serverVersion = deps.version;
    this.access = deps.access;
    this.taskTools = deps.taskTools;
    this.events = deps.events ?? NO_EVENTS;
    this.calls = new SessionCalls(deps);
    this.requestScope = { events: this.events, catalog: this.catalog, codec };
  }

  /** A config reload's access rules: they apply from the next request on. */
  reconfigure(access: readonly AccessRule[] | undefined): void {
    this.access = access;
  }

  /**
   * Starts a session: the client's revision when the gateway speaks it, else the newest (the client then
   * decides, as the spec says), with the upstreams' capabilities and the gateway's task support.
   */
  initialize(request: JsonRpcRequest, caller: Caller | undefined): Promise<{ response: JsonRpcResponse; sessionId?: string }> {
    const version = request.params?.protocolVersion;
    return inRequestScope(
      this.requestScope,
      () => requestInfo(request, { protocolVersion: typeof version === 'string' ? version : LATEST_SESSION_VERSION }, codec),
      ({ response }) => ('error' in response ? { error: response.error } : { result: response.result }),
      () => this.startSession(request, caller),
    );
  }

  private async startSession(request: JsonRpcRequest, caller: Caller | undefined): Promise<{ response: JsonRpcResponse; sessionId?: string }> {
    const params = request.params ?? {};
    const requested = typeof params.protocolVersion === 'string' ? params.protocolVersion : undefined;
    if (requested === undefined) {
      return { response: sessionErrorResponse(request.id, new GatewayError('invalid_params', 'initialize: params.protocolVersion must be a string')) };
    }
    const version = isSessionVersion(requested) ? requested : LATEST_SESSION_VERSION;
    const capabilities = asObject(params.capabilities) ?? {};
    const clientInfo = asObject(params.clientInfo);
    // A client connecting while the gateway starts is told what its upstreams offer, not what has joined so far
    // (and its session, made after, hears no list_changed for what joined meanwhile).
    await this.catalog.whenStarted();
    const session = await this.sessions.create(version, capabilities, clientInfo, caller?.principal);
    const serverCapabilities = this.catalog.capabilities();
    if (supportsSessionTasks(version)) serverCapabilities.tasks = SESSION_TASKS_CAPABILITY;
    const result: JsonObject = {
      protocolVersion: version,
      capabilities: serverCapabilities,
      serverInfo: { name: 'taskgate', title: 'taskgate MCP gateway', version: this.serverVersion },
    };
    const instructions = this.catalog.instructions();
    if (instructions !== undefined) result.instructions = instructions;
    this.logger.info({ session: session.sessionId, principal: caller?.principal, protocolVersion: version, client: clientInfo?.name }, 'session started');
    return { response: toResponse(request.id, { result }), sessionId: session.sessionId };
  }

  /**
   * Answers one client request. Resolves undefined when no response is owed (the client cancelled it). `post` is
   * what the front read of the POST that carried it: the caller, the body's bytes (held until this resolves, and
   * longer by a task that takes the call's arguments with it), its Idempotency-Key header.
   */
  handle(session: Session, request: JsonRpcRequest, stream: EventStream | undefined, post: PostContext = {}): Promise<SessionOutcome | undefined> {
    return inRequestScope(this.requestScope, () => requestInfo(request, session, codec), (outcome) => outcome, () => this.answer(session, request, stream, post));
  }

  private async answer(session: Session, request: JsonRpcRequest, stream: EventStream | undefined, post: PostContext): Promise<SessionOutcome | undefined> {
    try {
      return await this.dispatch(session, request, stream, new CallerAccess(this.access, post.caller, this.events), post);
    } catch (error) {
      if (!(error instanceof GatewayError)) this.logger.error({ err: error, method: request.method, session: session.sessionId }, 'request failed');
      return sessionFailure(error);
    }
  }

  /**
   * Whether the answer to `request` may need an SSE stream (the upstream's progress, logs or questions before it).
   * A task creation never does: it answers at once with the task, or with a refusal (a rate limit: HTTP 429),
   * and the task's messages go to its tasks/result or GET stream.
   */
  mayStream(session: Session, request: JsonRpcRequest): boolean {
    if (!STREAMED_METHODS.has(request.method)) return false;
    const params = request.params ?? {};
    const createsTask = request.method === 'tools/call' && params.task !== undefined && supportsSessionTasks(session.protocolVersion)
      && typeof params.name === 'string' && !this.taskTools.owns(params.name);
    return !createsTask;
  }

  handleNotification(session: Session, notification: JsonRpcNotification, caller?: Caller): void {
    const params = notification.params ?? {};
    switch (notification.method) {
      case 'notifications/cancelled':
        // The request may be running on another replica (the client's POSTs may reach any).
        if (!this.cancelInflight(session, params)) this.sessions.cancelledElsewhere(session.sessionId, params);
        return;
      case 'notifications/roots/list_changed':
        for (const upstream of this.catalog.upstreams) {
          if (upstream.state !== 'ready') continue;
          upstream.connectionFor(session, caller).then(
            (connection) => connection.notify(notification.method, notification.params),
            () => undefined,
          );
        }
        return;
      default:
        return; // notifications/initialized and anything else need no action.
    }
  }

  /** Stops a request of the session running here that the client cancelled; false when none runs here. */
  cancelInflight(session: Session, params: JsonObject): boolean {
    const inflight = session.inflight.get(params.requestId as string | number);
    if (inflight === undefined) return false;
    session.inflight.delete(params.requestId as string | number);
    inflight.cancelled = true;
    // Settles the call at once; its POST then ends with no response for it (others in a batch still get theirs).
    inflight.call.cancel(typeof params.reason === 'string' ? params.reason : 'cancelled by the client');
    return true;
  }

  private async dispatch(session: Session, request: JsonRpcRequest, stream: EventStream | undefined, access: CallerAccess, post: PostContext): Promise<Outcome | undefined> {
    const params = request.params ?? {};
    // `_meta` is the gateway's to read (progress tokens, related tasks) before anything goes upstream.
    if (params._meta !== undefined && asObject(params._meta) === undefined) {
      throw new GatewayError('invalid_params', `${request.method}: params._meta must be an object`);
    }
    if (LIST_METHODS.has(request.method)) return { result: await this.list(session, request.method, params, access) };
    switch (request.method) {
      case 'ping':
        return { result: {} };
      case 'tools/call':
        return this.calls.callTool(session, request, params, stream, access, post);
      case 'prompts/get': {
        const name = params.name;
        if (typeof name !== 'string') throw new GatewayError('invalid_params', 'prompts/get: params.name must be a string');
        const route = await routeNamed(this.catalog, access, 'prompts', name);
        return this.calls.forward(session, request, route.upstream, { ...params, name: route.name }, stream, { actingFor: access.actingFor });
      }
      case 'tasks/get':
      case 'tasks/result':
      case 'tasks/list':
      case 'tasks/cancel':
      case 'tasks/delete': {
        if (!supportsSessionTasks(session.protocolVersion)) {
          throw new GatewayError('method_not_found', `Method not found: ${request.method} (tasks need protocol 2025-11-25; this session negotiated ${session.protocolVersion})`);
        }
        const reader = access.taskReader(session.principal);
        if (request.method === 'tasks/list') return this.tasks.list(session, params.cursor, reader);
        const taskId = codec.taskIdOf(params);
        if (request.method === 'tasks/get') return this.tasks.get(taskId, reader);
        if (request.method === 'tasks/result') return this.tasks.result(taskId, stream, session, reader);
        if (request.method === 'tasks/delete') return this.tasks.delete(taskId, reader);
        return this.tasks.cancel(taskId, reader);
      }
      case 'resources/read':
        return this.calls.forward(session, request, await this.resourceOwner(params.uri, access), params, stream, { actingFor: access.actingFor });
      case 'resources/subscribe':
      case 'resources/unsubscribe':
        return this.subscription(session, request, params, access);
      case 'completion/complete':
        return this.complete(session, request, params, stream, access);
      case 'logging/setLevel':
        return this.setLevel(session, request, params, access);
      default:
        throw new GatewayError('method_not_found', `Method not found: ${request.method}`);
    }
  }

  /**
   * Sessions that speak tasks see each tool's task support as the gateway's policy makes it, never less than its
   * upstream requires. Older sessions see none: they cannot use tasks, and the gateway runs an upstream's task
   * for them.
   */
  private decorateTool(session: Session, listed: JsonObject, upstream: Upstream, upstreamTool: JsonObject): JsonObject {
    if (typeof listed.name !== 'string') return listed;
    const policy = this.tasks.policies.policyFor(listed.name);
    // Any session may call a tool plainly, even one that speaks tasks.
    const tool = plainCallView(listed, policy);
    if (!supportsSessionTasks(session.protocolVersion)) return codec.toolView(tool, undefined);
    return codec.toolView(tool, effectiveMode(policy.mode, upstreamTaskSupport(upstream.capabilities, upstreamTool)));
  }

  private async resourceOwner(uri: unknown, access: CallerAccess): Promise<Upstream> {
    return (await resourceOwner(this.catalog, access, uri, 'resource_not_found')).upstream;
  }

  private list(session: Session, method: string, params: JsonObject, access: CallerAccess): Promise<JsonObject> {
    return this.lists.page(
      method,
      params,
      async (upstream, pageParams) => {
        const outcome = await (await upstream.callFor({ session, actingFor: access.actingFor, method, params: pageParams, context: undefined, timeoutMs: upstream.config.requestTimeoutMs })).outcome;
        if ('error' in outcome) throw new Error(outcome.error.message);
        return outcome.result;
      },
      (tool, upstream, upstreamTool) => this.decorateTool(session, tool, upstream, upstreamTool),
      access.visible,
      (tool) => this.taskTools.shownTo(tool, access.who),
    );
  }

  private async subscription(session: Session, request: JsonRpcRequest, params: JsonObject, access: CallerAccess): Promise<Outcome | undefined> {
    const upstream = await this.resourceOwner(params.uri, access);
    const uri = params.uri as string;
    const subscribe = request.method === 'resources/subscribe';
    if (subscribe) session.subscriptions.add(uri);
    else session.subscriptions.delete(uri);
    if (upstream.isShared) {
      // One upstream subscription serves every session on a shared connection; the gateway fans updates out.
      if (this.sessions.subscribedElsewhere(session, uri)) return { result: {} };
    }
    return this.calls.forward(session, request, upstream, params, undefined, { actingFor: access.actingFor });
  }

  private async complete(session: Session, request: JsonRpcRequest, params: JsonObject, stream: EventStream | undefined, access: CallerAccess): Promise<Outcome | undefined> {
    const ref = asObject(params.ref);
    if (ref?.type === 'ref/prompt' && typeof ref.name === 'string') {
      const route = await routeNamed(this.catalog, access, 'prompts', ref.name);
      return this.calls.forward(session, request, route.upstream, { ...params, ref: { ...ref, name: route.name } }, stream, { actingFor: access.actingFor });
    }
    if (ref?.type === 'ref/resource') return this.calls.forward(session, request, await this.resourceOwner(ref.uri, access), params, stream, { actingFor: access.actingFor });
    throw new GatewayError('invalid_params', 'completion/complete: params.ref must be a ref/prompt or ref/resource');
  }

  private async setLevel(session: Session, request: JsonRpcRequest, params: JsonObject, access: CallerAccess): Promise<Outcome> {
    const level = params.level;
    if (logLevelRank(level) < 0) throw new GatewayError('invalid_params', `Invalid log level; expected one of ${LOG_LEVELS.join(', ')}`);
    session.logLevel = level as LogLevel;
    this.sessions.saveLogLevel(session);
    const targets = this.catalog.upstreams.filter((u) => u.capabilities.logging !== undefined);
    const results = await Promise.all(
      targets.map(async (upstream) => {
        // A shared connection logs at the most verbose level any session asked for; each session is filtered.
        const effective = upstream.isShared ? this.sessions.mostVerboseLevel() : session.logLevel;
        const connection = await upstream.connectionFor(session, access.actingFor);
        return connection.request(request.method, { ...params, level: effective }, undefined, upstream.config.requestTimeoutMs).outcome;
      }).map((p) => p.catch((error: unknown) => ({ error: sessionError(error) }) as Outcome)),
    );
    const failed = results.find((r): r is { error: { code: number; message: string } } => 'error' in r);
    if (failed !== undefined && results.length === 1) return failed;
    return { result: {} };
  }
}
