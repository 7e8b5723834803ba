import { GatewayError, toJsonRpcError } from '../../errors.js';
import type { EventStream } from '../../gateway/event-stream.js';
import {
  asObject,
  InternalError,
  type JsonObject,
  type JsonRpcNotification,
  type JsonRpcRequest,
  type Outcome,
} from '../../jsonrpc.js';
import type { Logger } from '../../log.js';
import { logLevelRank, LOG_LEVELS, supportsLegacyTasks, type LogLevel } from '../mcp.js';
import { effectiveMode } from '../../config/policy.js';
import type { LegacyTasks } from './tasks.js';
import type { CallContext } from '../../upstream/connection.js';
import type { MessageOrigin, Upstream, UpstreamMessageSink } from '../../upstream/upstream.js';
import { upstreamTaskSupport } from '../../upstream/upstream-task.js';
import { LIST_METHODS, type Catalog } from '../../gateway/catalog.js';
import type { ListPages } from '../../gateway/list-pages.js';
import type { ClientSession } from '../../gateway/session.js';
import type { SessionRegistry } from '../../gateway/sessions.js';

/** Methods whose upstream may send progress, logs or requests before answering: answered on an SSE stream. */
export const STREAMED_METHODS = new Set(['tools/call', 'prompts/get', 'resources/read', 'completion/complete', 'tasks/result']);

/**
 * Method → handler for legacy-era sessions, and the reverse path: messages upstreams send toward clients.
 * Forwarded results travel as the upstream sent them; only names the gateway prefixed are translated.
 */
export class Router implements UpstreamMessageSink {

  constructor(
    private readonly catalog: Catalog,
    private readonly tasks: LegacyTasks,
    private readonly logger: Logger,
    private readonly lists: ListPages,
    private readonly sessions: SessionRegistry,
    /** Modern clients' listen streams, which get list changes and resource updates too. */
    private readonly listeners: { broadcast(message: JsonRpcNotification): void },
  ) {}

  /** Answers one client request. Resolves undefined when no response is owed (the client cancelled it). */
  async handle(session: ClientSession, request: JsonRpcRequest, stream: EventStream | undefined): Promise<Outcome | undefined> {
    try {
      return await this.dispatch(session, request, stream);
    } catch (error) {
      if (!(error instanceof GatewayError)) this.logger.error({ err: error, method: request.method, session: session.sessionId }, 'request failed');
      return { error: toJsonRpcError(error) };
    }
  }

  handleNotification(session: ClientSession, notification: JsonRpcNotification): void {
    const params = notification.params ?? {};
    switch (notification.method) {
      case 'notifications/cancelled':
        // The request may be running on another replica (the client's POSTs may reach any).
        if (!this.cancelInflight(session, params)) this.sessions.peers.cancelled(session.sessionId, params);
        return;
      case 'notifications/roots/list_changed':
        for (const upstream of this.catalog.upstreams) {
          if (upstream.state !== 'ready') continue;
          upstream.connectionFor(session).then(
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
  cancelInflight(session: ClientSession, params: JsonObject): boolean {
    const inflight = session.inflight.get(params.requestId as string | number);
    if (inflight === undefined) return false;
    session.inflight.delete(params.requestId as string | number);
    inflight.cancelled = true;
    // Settles the call at once; its POST then ends with no response for it (others in a batch still get theirs).
    inflight.call.cancel(typeof params.reason === 'string' ? params.reason : 'cancelled by the client');
    return true;
  }

  private async dispatch(session: ClientSession, request: JsonRpcRequest, stream: EventStream | undefined): Promise<Outcome | undefined> {
    const params = request.params ?? {};
    if (LIST_METHODS.has(request.method)) return { result: await this.list(session, request.method, params) };
    switch (request.method) {
      case 'ping':
        return { result: {} };
      case 'tools/call':
        return this.callTool(session, request, params, stream);
      case 'prompts/get': {
        const name = params.name;
        if (typeof name !== 'string') throw new GatewayError('invalid_params', 'prompts/get: params.name must be a string');
        const route = this.catalog.route('prompts', name);
        if (route === undefined) throw new GatewayError('invalid_params', `Unknown prompt: ${name}`);
        return this.forward(session, request, route.upstream, { ...params, name: route.name }, stream);
      }
      case 'tasks/get':
      case 'tasks/result':
      case 'tasks/list':
      case 'tasks/cancel':
        if (!supportsLegacyTasks(session.protocolVersion)) {
          throw new GatewayError('method_not_found', `Method not found: ${request.method} (tasks need protocol 2025-11-25; this session negotiated ${session.protocolVersion})`);
        }
        if (request.method === 'tasks/get') return this.tasks.get(params.taskId);
        if (request.method === 'tasks/result') return this.tasks.result(params.taskId, stream, session);
        if (request.method === 'tasks/list') return this.tasks.list(session, params.cursor);
        return this.tasks.cancel(params.taskId);
      case 'resources/read':
        return this.forward(session, request, this.resourceOwner(params.uri), params, stream);
      case 'resources/subscribe':
      case 'resources/unsubscribe':
        return this.subscription(session, request, params);
      case 'completion/complete':
        return this.complete(session, request, params, stream);
      case 'logging/setLevel':
        return this.setLevel(session, request, params);
      default:
        throw new GatewayError('method_not_found', `Method not found: ${request.method}`);
    }
  }

  /**
   * A tool call runs synchronously or as a task, as the client asked (`params.task`) within the tool's policy.
   * The task hint never goes upstream: the upstream only ever sees a plain call.
   */
  private async callTool(session: ClientSession, request: JsonRpcRequest, params: JsonObject, stream: EventStream | undefined): Promise<Outcome | undefined> {
    const name = params.name;
    if (typeof name !== 'string') throw new GatewayError('invalid_params', 'tools/call: params.name must be a string');
    const route = this.catalog.route('tools', name);
    if (route === undefined) throw new GatewayError('invalid_params', `Unknown tool: ${name}`);
    const { task, ...plain } = params;
    const upstreamParams = { ...plain, name: route.name };
    // Sessions without tasks call plainly; a tool its upstream runs only as a task is still run as one, upstream.
    if (!supportsLegacyTasks(session.protocolVersion)) return this.forward(session, request, route.upstream, upstreamParams, stream);
    const upstreamSupport = route.upstream.taskSupportOf(route.name);
    const mode = effectiveMode(this.tasks.engine.policyFor(name).mode, upstreamSupport);
    if (task !== undefined) {
      const ttl = asObject(task)?.ttl;
      if (asObject(task) === undefined || (ttl !== undefined && (typeof ttl !== 'number' || !Number.isFinite(ttl) || ttl < 0))) {
        throw new GatewayError('invalid_params', 'tools/call: params.task must be an object, with ttl (if given) a number of milliseconds >= 0');
      }
      if (mode === 'forbidden') {
        throw new GatewayError('method_not_found', `Tool '${name}' cannot be called as a task (task policy: forbidden); call it without params.task`);
      }
      return this.tasks.create(session, name, route.upstream, upstreamParams, ttl);
    }
    if (mode === 'required') {
      const why = upstreamSupport === 'required' ? `upstream '${route.upstream.name}' runs it only as a task` : 'task policy: required';
      throw new GatewayError('method_not_found', `Tool '${name}' must be called as a task (${why}); add params.task`);
    }
    return this.forward(session, request, route.upstream, upstreamParams, stream);
  }

  private async forward(
    session: ClientSession,
    request: JsonRpcRequest,
    upstream: Upstream,
    params: JsonObject,
    stream: EventStream | undefined,
  ): Promise<Outcome | undefined> {
    const context: CallContext = {
      sessionId: session.sessionId,
      notify: (message) => session.deliver(message, { stream }),
      ask: (message, signal) => session.ask(message, signal, { stream }),
    };
    // Tool calls run as long as they run: their deadline is task policy, not a transport default.
    const timeoutMs = request.method === 'tools/call' ? 0 : upstream.config.requestTimeoutMs;
    const call = await upstream.callFor(session, request.method, params, context, timeoutMs);
    const inflight = { call, cancelled: false };
    session.inflight.set(request.id, inflight);
    const outcome = await call.outcome;
    if (session.inflight.get(request.id) === inflight) session.inflight.delete(request.id);
    return inflight.cancelled ? undefined : outcome;
  }

  /**
   * Sessions that speak tasks see each tool's task support as the gateway's policy makes it, never less than its
   * upstream requires. Older sessions see none: they cannot use tasks, and the gateway runs an upstream's task
   * for them.
   */
  private decorateTool(session: ClientSession, tool: JsonObject, upstream: Upstream, upstreamTool: JsonObject): JsonObject {
    if (typeof tool.name !== 'string') return tool;
    const { taskSupport: _upstreams, ...execution } = asObject(tool.execution) ?? {};
    if (!supportsLegacyTasks(session.protocolVersion)) {
      if (tool.execution === undefined) return tool;
      const { execution: _execution, ...rest } = tool;
      return Object.keys(execution).length === 0 ? rest : { ...rest, execution };
    }
    const mode = effectiveMode(this.tasks.engine.policyFor(tool.name).mode, upstreamTaskSupport(upstream.capabilities, upstreamTool));
    return { ...tool, execution: { ...execution, taskSupport: mode } };
  }

  private resourceOwner(uri: unknown): Upstream {
    if (typeof uri !== 'string') throw new GatewayError('invalid_params', 'params.uri must be a string');
    const upstream = this.catalog.routeUri(uri);
    if (upstream === undefined) throw new GatewayError('resource_not_found', `Resource not found: ${uri}`, { uri });
    return upstream;
  }

  private list(session: ClientSession, method: string, params: JsonObject): Promise<JsonObject> {
    return this.lists.page(
      method,
      params,
      async (upstream, pageParams) => {
        const outcome = await (await upstream.callFor(session, method, pageParams, undefined, upstream.config.requestTimeoutMs)).outcome;
        if ('error' in outcome) throw new Error(outcome.error.message);
        return outcome.result;
      },
      (tool, upstream, upstreamTool) => this.decorateTool(session, tool, upstream, upstreamTool),
    );
  }

  private async subscription(session: ClientSession, request: JsonRpcRequest, params: JsonObject): Promise<Outcome | undefined> {
    const upstream = this.resourceOwner(params.uri);
    const uri = params.uri as string;
    const subscribe = request.method === 'resources/subscribe';
    if (subscribe) session.subscriptions.add(uri);
    else session.subscriptions.delete(uri);
    if (upstream.isShared) {
      // One upstream subscription serves every session on a shared connection; the gateway fans updates out.
      if (this.subscribedElsewhere(session, uri)) return { result: {} };
    }
    return this.forward(session, request, upstream, params, undefined);
  }

  private async complete(session: ClientSession, request: JsonRpcRequest, params: JsonObject, stream: EventStream | undefined): Promise<Outcome | undefined> {
    const ref = asObject(params.ref);
    if (ref?.type === 'ref/prompt' && typeof ref.name === 'string') {
      const route = this.catalog.route('prompts', ref.name);
      if (route === undefined) throw new GatewayError('invalid_params', `Unknown prompt: ${ref.name}`);
      return this.forward(session, request, route.upstream, { ...params, ref: { ...ref, name: route.name } }, stream);
    }
    if (ref?.type === 'ref/resource') return this.forward(session, request, this.resourceOwner(ref.uri), params, stream);
    throw new GatewayError('invalid_params', 'completion/complete: params.ref must be a ref/prompt or ref/resource');
  }

  private async setLevel(session: ClientSession, request: JsonRpcRequest, params: JsonObject): Promise<Outcome> {
    const level = params.level;
    if (logLevelRank(level) < 0) throw new GatewayError('invalid_params', `Invalid log level; expected one of ${LOG_LEVELS.join(', ')}`);
    session.logLevel = level as LogLevel;
    this.sessions.saveLogLevel(session);
    const targets = this.catalog.upstreams.filter((u) => u.capabilities.logging !== undefined);
    const results = await Promise.all(
      targets.map(async (upstream) => {
        // A shared connection logs at the most verbose level any session asked for; each session is filtered.
        const effective = upstream.isShared ? this.mostVerboseLevel() : session.logLevel;
        const connection = await upstream.connectionFor(session);
        return connection.request(request.method, { ...params, level: effective }, undefined, upstream.config.requestTimeoutMs).outcome;
      }).map((p) => p.catch((error: unknown) => ({ error: toJsonRpcError(error) }) as Outcome)),
    );
    const failed = results.find((r): r is { error: { code: number; message: string } } => 'error' in r);
    if (failed !== undefined && results.length === 1) return failed;
    return { result: {} };
  }

  private mostVerboseLevel(): LogLevel | undefined {
    let best: LogLevel | undefined;
    for (const session of this.allSessions()) {
      if (session.logLevel !== undefined && (best === undefined || logLevelRank(session.logLevel) < logLevelRank(best))) best = session.logLevel;
    }
    return best;
  }

  // ---- upstream → client ----

  notification(upstream: Upstream, message: JsonRpcNotification, origin: MessageOrigin): void {
    const method = message.method;
    // Connections not owned by one client (control, shared) carry what modern listen streams subscribe to.
    if (origin.kind !== 'session' && (method.endsWith('/list_changed') || method === 'notifications/resources/updated')) this.listeners.broadcast(message);
    if (origin.kind === 'control') return; // The gateway's own connection; catalog refreshes happen in Upstream.
    if (origin.kind === 'session') {
      const session = origin.sessionId === undefined ? undefined : this.sessions.peek(origin.sessionId);
      if (session !== undefined) this.toSession(session, upstream, message, origin.call);
      else origin.call?.notify(message); // a call of modern clients, which have no session
      return;
    }
    // A connection shared by all sessions.
    if (method.endsWith('/list_changed')) {
      // Every replica's shared connection hears it: each tells the streams it holds.
      for (const session of this.allSessions()) session.deliver(message, { localOnly: true });
      return;
    }
    if (method === 'notifications/resources/updated') {
      const uri = message.params?.uri;
      // Only the replica whose connection holds the subscription hears it: it reaches the client wherever it listens.
      for (const session of this.allSessions()) if (typeof uri === 'string' && session.subscriptions.has(uri)) session.deliver(message);
      return;
    }
    if (origin.sessionId !== undefined) {
      const session = this.sessions.peek(origin.sessionId);
      if (session !== undefined) this.toSession(session, upstream, message, origin.call);
      else origin.call?.notify(message);
      return;
    }
    if (method === 'notifications/message' && !origin.ambiguous) {
      for (const session of this.allSessions()) if (session.logLevel !== undefined) this.toSession(session, upstream, message, undefined);
      return;
    }
    // Calls of several sessions are running on the shared connection: delivering it to any of them could leak
    // one client's data to another. `isolation: per-session` avoids this.
    this.logger.debug({ upstream: upstream.name, method }, 'unattributable upstream notification on a shared connection; dropped');
  }

  async request(upstream: Upstream, message: JsonRpcRequest, origin: MessageOrigin, signal: AbortSignal): Promise<Outcome> {
    const session = origin.sessionId === undefined ? undefined : this.sessions.peek(origin.sessionId);
    if (session === undefined && origin.call !== undefined) {
      // A call of modern clients: the call's own context turns the request into MRTR or task input.
      const request: { method: string; params?: JsonObject } = { method: message.method };
      if (message.params !== undefined) request.params = message.params;
      return origin.call.ask(request, signal);
    }
    if (session === undefined) {
      if (message.method === 'roots/list' && !origin.ambiguous && (origin.sessionId === undefined || origin.standalone)) {
        // Asked outside any client's call (servers ask right after connecting): the gateway itself has no roots.
        return { result: { roots: [] } };
      }
      // stdio says nothing about which call a request belongs to: with one call running it is that call's.
      const why = origin.ambiguous
        ? `calls from several clients are running on upstream '${upstream.name}' (shared stdio connection), so the gateway cannot tell which client to ask; configure isolation: per-session`
        : origin.sessionId !== undefined
          ? `several 2026-07-28 calls are running on upstream '${upstream.name}' (stdio), so the gateway cannot tell which of them asked`
          : `no client call is running on upstream '${upstream.name}' to relate it to`;
      return { error: { code: InternalError, message: `taskgate cannot relay ${message.method}: ${why}` } };
    }
    const request: { method: string; params?: JsonObject } = { method: message.method };
    if (message.params !== undefined) request.params = message.params;
    return origin.call !== undefined ? origin.call.ask(request, signal) : session.ask(request, signal);
  }

  catalogChanged(upstream: Upstream, reconnected: boolean): void {
    const problems = this.catalog.collisions();
    for (const problem of problems) this.logger.error({ upstream: upstream.name }, problem);
    // A refresh follows the upstream's own list_changed, which reaches the clients by itself. An upstream
    // that (re)connected may have brought tools, prompts or resources the clients have not seen.
    if (!reconnected) return;
    this.listeners.broadcast({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    if (upstream.capabilities.prompts !== undefined) this.listeners.broadcast({ jsonrpc: '2.0', method: 'notifications/prompts/list_changed' });
    if (upstream.capabilities.resources !== undefined) this.listeners.broadcast({ jsonrpc: '2.0', method: 'notifications/resources/list_changed' });
    for (const session of this.allSessions()) {
      const here = { localOnly: true };
      session.deliver({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }, here);
      if (upstream.capabilities.prompts !== undefined) session.deliver({ jsonrpc: '2.0', method: 'notifications/prompts/list_changed' }, here);
      if (upstream.capabilities.resources !== undefined) session.deliver({ jsonrpc: '2.0', method: 'notifications/resources/list_changed' }, here);
    }
  }

  private toSession(session: ClientSession, upstream: Upstream, message: JsonRpcNotification, call: CallContext | undefined): void {
    if (message.method === 'notifications/message' && upstream.isShared && session.logLevel !== undefined) {
      if (logLevelRank(message.params?.level) < logLevelRank(session.logLevel)) return;
    }
    if (call !== undefined) call.notify(message);
    else session.deliver(message);
  }

  /** Whether another session holds a subscription to `uri` (one upstream subscription serves them all). */
  private subscribedElsewhere(session: ClientSession, uri: string): boolean {
    for (const other of this.allSessions()) if (other !== session && other.subscriptions.has(uri)) return true;
    return false;
  }

  private allSessions(): Iterable<ClientSession> {
    return this.sessions.all();
  }

  /**
   * Ends every upstream connection the session owns, and drops its share of subscriptions on shared
   * connections (unsubscribing upstream when it was the last subscriber).
   */
  async release(session: ClientSession): Promise<void> {
    for (const uri of session.subscriptions) {
      const upstream = this.catalog.routeUri(uri);
      if (upstream === undefined || !upstream.isShared) continue;
      if (this.subscribedElsewhere(session, uri)) continue;
      void upstream
        .connectionFor(session)
        .then((connection) => connection.request('resources/unsubscribe', { uri }, undefined, upstream.config.requestTimeoutMs).outcome)
        .catch(() => undefined);
    }
    session.subscriptions.clear();
    await Promise.all(this.catalog.upstreams.map((u) => u.releaseSession(session.sessionId)));
  }
}
