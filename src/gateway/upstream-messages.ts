// The upstream→client direction: what upstreams send toward clients (notifications, their own requests, a
// changed catalog) reaches the sessions, the calls and the 2026-07-28 listen streams it belongs to.
import type { JsonObject, JsonRpcNotification, JsonRpcRequest, Outcome } from '../jsonrpc.js';
import { InternalError } from '../errors.js';
import type { Logger } from '../log.js';
import { logLevelRank } from '../mcp.js';
import type { CallContext } from '../upstream/peer/connection.js';
import type { MessageOrigin, Upstream, UpstreamMessageSink } from '../upstream/life/upstream.js';
import type { MergedCatalog } from './merged-catalog.js';
import type { ClientSession } from './session.js';
import type { SessionRegistry } from './sessions.js';

export class UpstreamMessages implements UpstreamMessageSink {
  constructor(
    private readonly catalog: MergedCatalog,
    private readonly sessions: SessionRegistry,
    /** 2026-07-28 clients' listen streams, which get list changes and resource updates too. */
    private readonly listeners: { broadcast(message: JsonRpcNotification): void },
    private readonly logger: Logger,
  ) {}

  notification(upstream: Upstream, message: JsonRpcNotification, origin: MessageOrigin): void {
    const method = message.method;
    // Connections not owned by one client (control, shared) carry what 2026-07-28 listen streams subscribe to.
    if (origin.kind !== 'session' && (method.endsWith('/list_changed') || method === 'notifications/resources/updated')) this.listeners.broadcast(message);
    if (origin.kind === 'control') return; // The gateway's own connection; catalog refreshes happen in Upstream.
    if (origin.kind === 'session') {
      const session = origin.sessionId === undefined ? undefined : this.sessions.peek(origin.sessionId);
      if (session !== undefined) this.toSession(session, upstream, message, origin.call);
      else origin.call?.notify(message); // a call of 2026-07-28 clients, which have no session
      return;
    }
    // A connection shared by all sessions.
    if (method.endsWith('/list_changed')) {
      // Every replica's shared connection hears it: each tells the streams it holds.
      for (const session of this.sessions.all()) session.deliver(message, { localOnly: true });
      return;
    }
    if (method === 'notifications/resources/updated') {
      const uri = message.params?.uri;
      // Only the replica whose connection holds the subscription hears it: it reaches the client wherever it listens.
      for (const session of this.sessions.all()) if (typeof uri === 'string' && session.subscriptions.has(uri)) session.deliver(message);
      return;
    }
    if (origin.sessionId !== undefined) {
      const session = this.sessions.peek(origin.sessionId);
      if (session !== undefined) this.toSession(session, upstream, message, origin.call);
      else origin.call?.notify(message);
      return;
    }
    if (method === 'notifications/message' && !origin.ambiguous) {
      for (const session of this.sessions.all()) if (session.logLevel !== undefined) this.toSession(session, upstream, message, undefined);
      return;
    }
    // Calls of several sessions are running on the shared connection: delivering it to any of them could leak
    // one client's data to another. `isolation: per-session` avoids this.
    this.logger.debug({ upstream: upstream.name, method }, 'unattributable upstream notification on a shared connection; dropped');
  }

  async request(upstream: Upstream, message: JsonRpcRequest, origin: MessageOrigin, signal: AbortSignal): Promise<Outcome> {
    const session = origin.sessionId === undefined ? undefined : this.sessions.peek(origin.sessionId);
    if (session === undefined && origin.call !== undefined) {
      // A call of 2026-07-28 clients: the call's own context turns the request into MRTR or task input.
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
    this.listsChanged(['tools', ...(upstream.capabilities.prompts !== undefined ? ['prompts' as const] : []), ...(upstream.capabilities.resources !== undefined ? ['resources' as const] : [])]);
  }

  /**
   * Tells this replica's clients (2025 sessions' streams, 2026-07-28 listen streams) that merged lists changed:
   * an upstream (re)connected, or a config reload changed upstreams, access rules or task policy. Every replica
   * tells the streams it holds.
   */
  listsChanged(kinds: readonly ('tools' | 'prompts' | 'resources')[]): void {
    const messages = kinds.map((kind) => ({ jsonrpc: '2.0' as const, method: `notifications/${kind}/list_changed` }));
    for (const message of messages) this.listeners.broadcast(message);
    for (const session of this.sessions.all()) for (const message of messages) session.deliver(message, { localOnly: true });
  }

  private toSession(session: ClientSession, upstream: Upstream, message: JsonRpcNotification, call: CallContext | undefined): void {
    if (message.method === 'notifications/message' && upstream.isShared && session.logLevel !== undefined) {
      if (logLevelRank(message.params?.level) < logLevelRank(session.logLevel)) return;
    }
    if (call !== undefined) call.notify(message);
    else session.deliver(message);
  }

  /**
   * Ends every upstream connection the session owns, and drops its share of subscriptions on shared
   * connections (unsubscribing upstream when it was the last subscriber).
   */
  async release(session: ClientSession): Promise<void> {
    for (const uri of session.subscriptions) {
      const upstream = this.catalog.routeUri(uri);
      if (upstream === undefined || !upstream.isShared) continue;
      if (this.sessions.subscribedElsewhere(session, uri)) continue;
      void upstream
        // Ends the subscription of this session's own connection (shared stdio: the one connection of all).
        .connectionFor(session, undefined)
        .then((connection) => connection.request('resources/unsubscribe', { uri }, undefined, upstream.config.requestTimeoutMs).outcome)
        .catch(() => undefined);
    }
    session.subscriptions.clear();
    await Promise.all(this.catalog.upstreams.map((u) => u.releaseSession(session.sessionId)));
  }
}
