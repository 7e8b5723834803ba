// One configured upstream server: its control connection, per-session connections, reconnection with backoff,
// discovery of the revisions it speaks, and how a call reaches it in each. Over 400 lines: these share the
// upstream's connection state (which connection is open, what it answered at initialize and discover), and
// splitting them would pass that state around (the client sessions' own connections among it: their bound, their
// release); its catalog reading lives in catalog.ts, the record of its upstream sessions in session-ledger.ts.
import type { Agent } from 'undici';
import type { TaskMode, UpstreamConfig } from '../config/types.js';
import { upstreamSessionsFull, upstreamUnavailable, MethodNotFound } from '../errors.js';
import { DEFAULTS } from '../config/schema/defaults.js';
import { NO_EVENTS, type GatewayEvents } from '../events.js';
import { asObject, type JsonObject, type JsonRpcNotification, type JsonRpcRequest, type Outcome } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import {
  LATEST_LEGACY_VERSION,
  META_CLIENT_CAPABILITIES,
  META_CLIENT_INFO,
  META_LOG_LEVEL,
  META_PROTOCOL_VERSION,
  MODERN_VERSION,
} from '../protocol/mcp.js';
import { UpstreamConnection, type CallContext, type ConnectionHandler, type UpstreamCall } from './connection.js';
import { createUpstreamAgent } from './http-agent.js';
import { LegacySseTransport } from './legacy-sse.js';
import { StdioTransport } from './stdio.js';
import { endUpstreamSession, StreamableHttpTransport } from './streamable-http.js';
import { recordSession, type UpstreamSessionLedger } from './session-ledger.js';
import { ModernUpstreamClient } from './modern-client.js';
import type { UpstreamTransport } from './transport.js';
import { upstreamTaskSupport } from '../protocol/rev2025-11-25/codec.js';
import { withoutModernFields } from '../protocol/rev2026-07-28/codec.js';
import { callAsUpstreamTask } from './upstream-task.js';
import { countViolations } from './violations.js';
import { fetchCatalog, mergeCatalogs, type UpstreamCatalog } from './catalog.js';

export type { OpenedUpstreamSession, UpstreamSessionLedger } from './session-ledger.js';

export type UpstreamState = 'starting' | 'ready' | 'down' | 'closed';

/** Who a client session is, as the upstream is told when the gateway opens a connection for it. */
export interface SessionIdentity {
  sessionId: string;
  protocolVersion: string;
  capabilities: JsonObject;
  clientInfo: JsonObject | undefined;
  /** The identity stands for many clients (2026-07-28 clients share one upstream session): no one client may stall it. */
  readonly manyClients?: boolean;
}

/**
 * Where an unsolicited upstream message came from. `session`: a connection owned by one client session.
 * `shared`: a connection multiplexed over sessions; `sessionId` is set only when the calls pending on it all
 * belong to one session, and `ambiguous` when they belong to several. `control`: the gateway's own connection
 * (catalog and health), whose messages concern no client.
 */
export interface MessageOrigin {
  kind: 'session' | 'shared' | 'control';
  sessionId: string | undefined;
  call: CallContext | undefined;
  ambiguous: boolean;
  /** The transport says the message belongs to no call (it came on no request's stream); no call was guessed. */
  standalone: boolean;
}

export interface UpstreamMessageSink {
  notification(upstream: Upstream, message: JsonRpcNotification, origin: MessageOrigin): void;
  request(upstream: Upstream, message: JsonRpcRequest, origin: MessageOrigin, signal: AbortSignal): Promise<Outcome>;
  catalogChanged(upstream: Upstream, reconnected: boolean): void;
}

/**
 * The client capabilities every upstream connection declares, whatever the transport and whoever the client:
 * what the gateway can relay. Servers shape their tool lists by these, so one rule keeps a client's lists the
 * same over stdio, SSE and Streamable HTTP; a request the actual client cannot answer is refused by the gateway
 * (legacy sessions: an error to the upstream; 2026-07-28: -32021 naming the capability).
 */
/** What an upstream knows of the gateway it serves. */
export interface UpstreamGatewaySide {
  /** The gateway's version, as its clientInfo says. */
  version: string;
  /** Where its requests are announced (`upstream.request`), and its health (up, down, restarted). */
  events?: GatewayEvents;
  /** Where the upstream sessions it opens are recorded; none: not recorded (one replica, or tests). */
  sessionLedger?: UpstreamSessionLedger;
}

/** A client session's own connection to the upstream: while it opens, and once it is open. */
interface SessionConnection {
  connection: Promise<UpstreamConnection>;
  open?: UpstreamConnection;
}

const RELAY_CAPABILITIES: JsonObject = Object.freeze({ roots: { listChanged: true }, sampling: {}, elicitation: { form: {}, url: {} } });
const STABLE_AFTER_MS = 10_000;

/**
 * One configured upstream server: its control connection (catalog, health, and for shared stdio the only
 * connection), the per-session connections, and reconnection with backoff.
 */
export class Upstream {
  state: UpstreamState = 'starting';
  lastError: string | undefined;
  /** Set when the upstream speaks the session revisions (it answered initialize). */
  initializeResult: JsonObject | undefined;
  /** Set when the upstream speaks 2026-07-28 (it answered server/discover). */
  discoverResult: JsonObject | undefined;
  /** The stateless client for 2026-07-28, on Streamable HTTP upstreams not pinned to the session revisions. */
  readonly modern: ModernUpstreamClient | undefined;
  private listenAbort: AbortController | undefined;
  catalog: UpstreamCatalog = { tools: [], prompts: [], resources: [], resourceTemplates: [] };

  private control: UpstreamConnection | undefined;
  /** Names (and URIs) only the 2026-07-28 side of a dual-era upstream lists. */
  private modernOnly = { tools: new Set<unknown>(), prompts: new Set<unknown>(), resources: new Set<unknown>() };
  private readonly controlSubscriptions = new Set<string>();
  /** The client sessions' own connections, least recently used first (each use moves one to the end). */
  private readonly perSession = new Map<string, SessionConnection>();
  /** Connections being closed (their upstream sessions ended): close() waits for them. */
  private readonly closing = new Set<Promise<void>>();
  /** Connections still in their handshake: close() ends them too (a child stuck in initialize is stopped at once). */
  private readonly opening = new Set<UpstreamConnection>();
  private readonly agent: Agent | undefined;
  private restartDelayMs: number;
  private restartTimer: NodeJS.Timeout | undefined;
  private connectedAt = 0;
  /** Reconnection attempts since the upstream last stayed up (what `upstream.restarted` counts). */
  private attempts = 0;
  /** Whether it was ever up: coming up again after that is a restart, not a late start. */
  private wasUp = false;
  private readonly logger: Logger;

  constructor(
    readonly config: UpstreamConfig,
    logger: Logger,
    private readonly sink: UpstreamMessageSink,
    private readonly gateway: UpstreamGatewaySide,
  ) {
    this.logger = countViolations(logger.child({ upstream: config.name }), gateway.events);
    this.agent = config.transport === 'stdio' ? undefined : createUpstreamAgent(config);
    if (config.transport === 'streamable-http' && config.protocol !== 'legacy' && this.agent !== undefined) {
      this.modern = new ModernUpstreamClient({
        upstreamName: config.name,
        url: config.url,
        headers: config.headers,
        agent: this.agent,
        logger: this.logger,
        clientInfo: { name: 'taskgate', version: gateway.version },
        maxMessageBytes: config.maxMessageBytes,
        events: gateway.events,
      });
    }
    this.restartDelayMs = config.transport === 'stdio' ? config.restart.initialDelayMs : 1000;
  }

  get name(): string {
    return this.config.name;
  }

  private get gatewayVersion(): string {
    return this.gateway.version;
  }

  private get events(): GatewayEvents {
    return this.gateway.events ?? NO_EVENTS;
  }

  /** One connection carries every session: stdio with `isolation: shared`. */
  get isShared(): boolean {
    return this.config.transport === 'stdio' && this.config.isolation === 'shared';
  }

  get capabilities(): JsonObject {
    return (asObject(this.initializeResult?.capabilities) ?? asObject(this.discoverResult?.capabilities)) ?? {};
  }

  /** What the upstream offers 2026-07-28 clients (its server/discover capabilities). */
  get modernCapabilities(): JsonObject {
    return asObject(this.discoverResult?.capabilities) ?? {};
  }

  /**
   * Whether a call must go to the upstream's 2026-07-28 side: a dual-era upstream may offer some tools, prompts
   * or resources only there.
   */
  offersOnlyToModern(method: string, params: JsonObject): boolean {
    if (!this.speaksModern) return false;
    if (!this.speaksLegacy) return true;
    if (method === 'tools/call') return this.modernOnly.tools.has(String(params.name));
    if (method === 'prompts/get') return this.modernOnly.prompts.has(String(params.name));
    if (method === 'resources/read') return this.modernOnly.resources.has(String(params.uri));
    return false;
  }

  get speaksModern(): boolean {
    return this.discoverResult !== undefined && this.modern !== undefined;
  }

  get speaksLegacy(): boolean {
    return this.initializeResult !== undefined;
  }

  /** What the upstream says about itself (instructions, server info), in whichever revision it answered. */
  get description(): JsonObject | undefined {
    return this.initializeResult ?? this.discoverResult;
  }

  /** Connects the control connection once; on failure keeps retrying in the background. */
  async start(): Promise<void> {
    await this.connectControl();
  }

  async connectionFor(session: SessionIdentity): Promise<UpstreamConnection> {
    if (this.isShared) {
      const control = this.control;
      if (control === undefined || !control.isOpen || this.state !== 'ready') {
        throw upstreamUnavailable(this.name, this.lastError ?? 'it is not connected yet');
      }
      return control;
    }
    let entry = this.perSession.get(session.sessionId);
    if (entry === undefined) {
      this.makeRoom();
      const opening: SessionConnection = { connection: this.openSessionConnection(session) };
      entry = opening;
      opening.connection.then(
        (connection) => (opening.open = connection),
        () => {
          if (this.perSession.get(session.sessionId) === opening) this.perSession.delete(session.sessionId);
        },
      );
    } else this.perSession.delete(session.sessionId);
    this.perSession.set(session.sessionId, entry);
    try {
      return await entry.connection;
    } catch (error) {
      throw upstreamUnavailable(this.name, (error as Error).message);
    }
  }

  /**
   * Keeps the client sessions' own connections within maxSessions: at the bound, the least recently used one with
   * no call running is closed (its client gets a new one on its next request); when every one is busy, the new
   * session's request is refused.
   */
  private makeRoom(): void {
    const max = this.config.maxSessions ?? DEFAULTS.maxUpstreamSessions;
    if (max <= 0 || this.perSession.size < max) return;
    for (const [sessionId, entry] of this.perSession) {
      if (entry.open === undefined || !entry.open.isIdle) continue;
      this.logger.info({ session: sessionId, maxSessions: max }, 'closing the least recently used idle upstream session: maxSessions reached');
      void this.releaseSession(sessionId);
      return;
    }
    throw upstreamSessionsFull(this.name, max);
  }

  /**
   * Subscribes to a resource on the gateway's own connection, whose updates reach modern listen streams; once
   * per URI for the connection's life.
   */
  async subscribeControl(uri: string): Promise<void> {
    const control = this.control;
    if (control === undefined || !control.isOpen || this.controlSubscriptions.has(uri)) return;
    if (this.capabilities.resources === undefined || asObject(this.capabilities.resources)?.subscribe !== true) return;
    this.controlSubscriptions.add(uri);
    const outcome = await control.request('resources/subscribe', { uri }, undefined, this.config.requestTimeoutMs).outcome;
    if ('error' in outcome) {
      this.controlSubscriptions.delete(uri);
      throw new Error(outcome.error.message);
    }
  }

  /**
   * Starts a call for a legacy-era client in whichever revision the upstream speaks: over the session's upstream
   * connection, or, for an upstream that speaks only 2026-07-28, as stateless requests whose input rounds the
   * context answers (the gateway asks the legacy client).
   */
  async callFor(
    session: SessionIdentity,
    method: string,
    params: JsonObject,
    context: CallContext | undefined,
    timeoutMs: number,
    options: { asTask?: boolean } = {},
  ): Promise<UpstreamCall> {
    if (!this.offersOnlyToModern(method, params)) {
      const connection = await this.connectionFor(session);
      if (method === 'tools/call' && this.runsAsOwnTask(params.name, options.asTask === true)) {
        return callAsUpstreamTask(connection, params, context, { timeoutMs, requestTimeoutMs: this.config.requestTimeoutMs });
      }
      return connection.request(method, params, context, timeoutMs);
    }
    const client = this.modern as ModernUpstreamClient;
    const envelope: JsonObject = {
      [META_PROTOCOL_VERSION]: MODERN_VERSION,
      [META_CLIENT_CAPABILITIES]: RELAY_CAPABILITIES,
      [META_CLIENT_INFO]: session.clientInfo ?? { name: 'taskgate', version: this.gatewayVersion },
    };
    const logLevel = (session as { logLevel?: unknown }).logLevel;
    if (typeof logLevel === 'string') envelope[META_LOG_LEVEL] = logLevel;
    const forwarded = { ...params, _meta: { ...asObject(params._meta), ...envelope } };
    const tool = method === 'tools/call' ? this.catalog.tools.find((t) => t.name === params.name) : undefined;
    const noContext: CallContext = {
      sessionId: session.sessionId,
      notify: () => undefined,
      ask: async () => ({ error: { code: MethodNotFound, message: 'No client to ask' } }),
    };
    const call = client.callResolvingInput(method, forwarded, context ?? noContext, { tool, ...(timeoutMs > 0 ? { timeoutMs } : {}) });
    // The answer goes back as a 2025 result.
    const outcome = call.outcome.then((answer) => ('error' in answer ? answer : { result: withoutModernFields(answer.result) }));
    return { ...call, outcome };
  }

  /**
   * How this upstream runs one of its tools (by its own name) as a 2025-11-25 task of its own: `required` means
   * only as a task, whoever the client is.
   */
  taskSupportOf(toolName: unknown): TaskMode {
    return upstreamTaskSupport(asObject(this.initializeResult?.capabilities) ?? {}, this.catalog.tools.find((tool) => tool.name === toolName));
  }

  /**
   * Whether a call of the tool goes as the upstream's own task: always where the upstream requires it, and where
   * it allows it when the gateway runs the call as a task anyway (`asTask`), so the upstream's status shows.
   */
  private runsAsOwnTask(toolName: unknown, asTask: boolean): boolean {
    const support = this.taskSupportOf(toolName);
    return support === 'required' || (support === 'optional' && asTask);
  }

  /** Ends the session's own upstream connection (and with it the upstream session or child process). */
  async releaseSession(sessionId: string): Promise<void> {
    const entry = this.perSession.get(sessionId);
    if (entry === undefined) return;
    this.perSession.delete(sessionId);
    const closing = entry.connection.then((c) => c.close()).catch(() => undefined);
    this.closing.add(closing);
    await closing.finally(() => this.closing.delete(closing));
  }

  /**
   * Ends an upstream session another replica opened and left open when it died (its record taken from the store
   * by this replica's sweep). Resolves whether the upstream answered; only Streamable HTTP upstreams have sessions
   * to end.
   */
  async endOrphanSession(sessionId: string, protocolVersion: string | undefined): Promise<boolean> {
    if (this.config.transport !== 'streamable-http' || this.agent === undefined) return false;
    return endUpstreamSession({ agent: this.agent, url: this.config.url, headers: this.config.headers }, sessionId, protocolVersion);
  }

  status(): JsonObject {
    const status: JsonObject = { name: this.name, transport: this.config.transport, state: this.state };
    if (!this.isShared) status.sessions = this.perSession.size;
    if (this.lastError !== undefined && this.state !== 'ready') status.error = this.lastError;
    const serverInfo = this.initializeResult?.serverInfo ?? asObject(this.discoverResult?._meta)?.['io.modelcontextprotocol/serverInfo'];
    if (serverInfo !== undefined) status.serverInfo = serverInfo;
    const protocols: string[] = [];
    if (this.speaksModern) protocols.push(MODERN_VERSION);
    if (this.speaksLegacy) protocols.push(String(this.initializeResult?.protocolVersion));
    if (protocols.length > 0) status.protocols = protocols;
    return status;
  }

  /** Closes every connection (stopping its children) once; a second caller waits for the same close. */
  close(): Promise<void> {
    return (this.closed ??= this.closeOnce());
  }

  private closed: Promise<void> | undefined;

  private async closeOnce(): Promise<void> {
    this.state = 'closed';
    clearTimeout(this.restartTimer);
    this.listenAbort?.abort();
    const sessions = [...this.perSession.keys()];
    await Promise.all([...sessions.map((id) => this.releaseSession(id)), ...[...this.opening].map((c) => c.close().catch(() => undefined))]);
    // Sessions released just before (their client sessions ended with the gateway) are ending too.
    await Promise.all([...this.closing]);
    await this.control?.close().catch(() => undefined);
    await this.agent?.close().catch(() => undefined);
    this.events.emit('upstream.stopped', { upstream: this.name });
  }

  /** The upstream said a list changed: read the catalog again and tell the clients. */
  /**
   * Reads the catalog again after the upstream's `list_changed`, then passes the notification on: a client that
   * hears of the change and names the new tool at once must find it routed. Resolves whether or not the read worked.
   */
  private refreshAfterListChanged(): Promise<void> {
    return this.refreshCatalog()
      .then(() => this.sink.catalogChanged(this, false))
      .catch((error: Error) => {
        // A refresh cut short because the gateway is closing the upstream (a failed start, shutdown) is no news.
        if (this.state === 'closed') this.logger.debug({ err: error }, 'catalog refresh stopped: the upstream is closing');
        else this.logger.warn({ reason: error.message }, 'catalog refresh failed');
      });
  }

  /**
   * Reads the catalog again because a client named something it does not list (gateway/listed-refresh.ts bounds
   * how often); clients hear of it when it changed, as after `list_changed`.
   */
  async refreshListed(): Promise<void> {
    const before = JSON.stringify(this.catalog);
    await this.refreshCatalog();
    if (JSON.stringify(this.catalog) !== before) this.sink.catalogChanged(this, false);
  }

  /**
   * Lists everything the upstream offers, following pagination, over the control connection. The catalog is
   * replaced whole at the end: calls route on it meanwhile, and must not see half of it.
   */
  async refreshCatalog(): Promise<void> {
    const connection = this.control;
    if (connection === undefined || !connection.isOpen) {
      if (this.speaksModern) this.catalog = await this.fetchModernCatalog();
      return;
    }
    const legacy = await fetchCatalog(this.capabilities, (method, page) => connection.request(method, page, undefined, this.config.requestTimeoutMs).outcome);
    if (!this.speaksModern) {
      this.catalog = legacy;
      return;
    }
    // An upstream that speaks both revisions may offer more (or richer definitions) to 2026-07-28 clients.
    const modern = await this.fetchModernCatalog();
    const only = (items: JsonObject[], others: JsonObject[], key: string): Set<unknown> => {
      const known = new Set(others.map((item) => item[key]));
      return new Set(items.map((item) => item[key]).filter((name) => !known.has(name)));
    };
    this.modernOnly = {
      tools: only(modern.tools, legacy.tools, 'name'),
      prompts: only(modern.prompts, legacy.prompts, 'name'),
      resources: only(modern.resources, legacy.resources, 'uri'),
    };
    this.catalog = mergeCatalogs(modern, legacy);
  }

  private fetchModernCatalog(): Promise<UpstreamCatalog> {
    const client = this.modern as ModernUpstreamClient;
    return fetchCatalog(this.modernCapabilities, (method, page) =>
      client.request(method, { ...page, _meta: client.ownEnvelope() }, { timeoutMs: this.config.requestTimeoutMs }),
    );
  }

  /** Asks a Streamable HTTP upstream whether it speaks 2026-07-28; remembers its discover result if so. */
  private async discover(): Promise<void> {
    this.discoverResult = undefined;
    const client = this.modern;
    if (client === undefined) return;
    const outcome = await client.request('server/discover', { _meta: client.ownEnvelope() }, { timeoutMs: this.config.initializeTimeoutMs });
    const versions = 'result' in outcome ? outcome.result.supportedVersions : undefined;
    if (Array.isArray(versions) && versions.includes(MODERN_VERSION)) this.discoverResult = (outcome as { result: JsonObject }).result;
    else if (this.config.transport === 'streamable-http' && this.config.protocol === 'modern') {
      throw new Error(`it does not speak ${MODERN_VERSION} (server/discover: ${'error' in outcome ? outcome.error.message : 'no supportedVersions'})`);
    }
  }

  /** A 2026-07-28 upstream tells the gateway about list changes on a listen stream it keeps open. */
  private listenForChanges(): void {
    const client = this.modern;
    if (client === undefined || !this.speaksModern) return;
    this.listenAbort?.abort();
    const abort = new AbortController();
    this.listenAbort = abort;
    const origin: MessageOrigin = { kind: 'control', sessionId: undefined, call: undefined, ambiguous: false, standalone: true };
    void client.listen({ toolsListChanged: true, promptsListChanged: true, resourcesListChanged: true }, (message) => {
      if (message.method.endsWith('/list_changed')) void this.refreshAfterListChanged().then(() => this.sink.notification(this, message, origin));
      else this.sink.notification(this, message, origin);
    }, abort.signal);
  }

  private createTransport(): UpstreamTransport {
    const config = this.config;
    if (config.transport === 'stdio') return new StdioTransport(config, this.logger);
    const agent = this.agent as Agent;
    const options = { url: config.url, headers: config.headers, agent, logger: this.logger, maxMessageBytes: config.maxMessageBytes };
    if (config.transport === 'sse') return new LegacySseTransport(options);
    return new StreamableHttpTransport(options);
  }

  private async connectControl(): Promise<void> {
    if (this.state === 'closed') return;
    try {
      await this.discover();
    } catch (error) {
      this.markDown((error as Error).message);
      return;
    }
    const pinnedModern = this.config.transport === 'streamable-http' && this.config.protocol === 'modern';
    if (!pinnedModern) {
      const failure = await this.connectLegacy();
      // An upstream that speaks 2026-07-28 serves every client even when it does not also speak sessions.
      if (failure !== undefined && !this.speaksModern) {
        this.markDown(failure);
        return;
      }
    }
    try {
      if (this.control === undefined) await this.refreshCatalog();
    } catch (error) {
      this.markDown((error as Error).message);
      return;
    }
    this.connectedAt = Date.now();
    const restarted = this.wasUp && this.state === 'down' && this.config.transport === 'stdio';
    this.wasUp = true;
    this.state = 'ready';
    this.lastError = undefined;
    this.events.emit('upstream.up', { upstream: this.name, transport: this.config.transport });
    if (restarted) this.events.emit('upstream.restarted', { upstream: this.name, attempt: this.attempts });
    this.listenForChanges();
    this.logger.info({ serverInfo: this.status().serverInfo, protocols: this.status().protocols }, 'upstream connected');
    this.sink.catalogChanged(this, true);
  }

  /** The control connection in a session revision; resolves with why it failed, if it did. */
  private async connectLegacy(): Promise<string | undefined> {
    this.initializeResult = undefined;
    const transport = this.createTransport();
    const recorded = recordSession(this.gateway.sessionLedger, this.name, transport, this.closing);
    const handler = this.handler('control', undefined, () => connection);
    const connection: UpstreamConnection = new UpstreamConnection({
      upstreamName: this.name,
      transport,
      handler: {
        ...handler,
        closed: (reason) => {
          recorded.forget();
          if (this.control !== connection || this.state === 'closed') return;
          this.logger.warn({ reason }, 'upstream connection lost');
          this.markDown(reason);
        },
      },
      logger: this.logger,
      events: this.gateway.events,
    });
    try {
      const params: JsonObject = {
        protocolVersion: LATEST_LEGACY_VERSION,
        capabilities: RELAY_CAPABILITIES,
        clientInfo: { name: 'taskgate', version: this.gatewayVersion },
      };
      const result = await this.handshake(connection, params);
      if (this.state === 'closed') throw new Error('the gateway closed the upstream');
      this.control = connection;
      recorded.opened();
      this.controlSubscriptions.clear();
      this.initializeResult = result;
      await this.refreshCatalog();
      return undefined;
    } catch (error) {
      const reason = (error as Error).message;
      // An upstream the gateway is closing (shutdown, removed by a reload) is no trouble to report.
      if (!this.speaksModern && this.state !== 'closed') this.logger.warn({ reason }, 'cannot connect to upstream');
      await connection.close().catch(() => undefined);
      this.control = undefined;
      this.initializeResult = undefined;
      return reason;
    }
  }

  private markDown(reason: string): void {
    if (this.state === 'closed') return;
    // Announced once per outage (at start too: an upstream not reachable yet is down), not at every failed retry.
    if (this.state !== 'down') this.events.emit('upstream.down', { upstream: this.name, reason });
    this.state = 'down';
    this.lastError = reason;
    const initial = this.config.transport === 'stdio' ? this.config.restart.initialDelayMs : 1000;
    const max = this.config.transport === 'stdio' ? this.config.restart.maxDelayMs : 30_000;
    // A connection that stayed up a while earned a fresh start; one that keeps dying backs off exponentially.
    if (this.connectedAt > 0 && Date.now() - this.connectedAt > STABLE_AFTER_MS) {
      this.restartDelayMs = initial;
      this.attempts = 0;
    }
    this.attempts++;
    const delay = this.restartDelayMs;
    this.restartDelayMs = Math.min(max, this.restartDelayMs * 2);
    this.connectedAt = 0;
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => void this.connectControl(), delay);
    this.restartTimer.unref();
  }

  private async openSessionConnection(session: SessionIdentity): Promise<UpstreamConnection> {
    const handler = this.handler('session', session.sessionId, () => connection);
    const transport = this.createTransport();
    const recorded = recordSession(this.gateway.sessionLedger, this.name, transport, this.closing);
    const connection: UpstreamConnection = new UpstreamConnection({
      upstreamName: this.name,
      transport,
      handler: {
        ...handler,
        closed: (reason) => {
          recorded.forget();
          this.logger.debug({ session: session.sessionId, reason }, 'per-session upstream connection closed');
          void this.perSession.get(session.sessionId)?.connection.then(
            (current) => {
              if (current === connection) this.perSession.delete(session.sessionId);
            },
            () => undefined, // failed while opening: connectionFor already dropped it
          );
        },
      },
      logger: this.logger.child({ session: session.sessionId }),
      servesOneClient: session.manyClients !== true,
      events: this.gateway.events,
    });
    const params: JsonObject = { protocolVersion: session.protocolVersion, capabilities: RELAY_CAPABILITIES };
    params.clientInfo = session.clientInfo ?? { name: 'taskgate', version: this.gatewayVersion };
    try {
      await this.handshake(connection, params);
      if (this.state === 'closed') throw new Error('the gateway closed the upstream');
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
    recorded.opened();
    return connection;
  }

  /** Opens a connection within initializeTimeoutMs; while it opens, close() can end it. */
  private async handshake(connection: UpstreamConnection, params: JsonObject): Promise<JsonObject> {
    this.opening.add(connection);
    try {
      const timeoutMs = this.config.initializeTimeoutMs;
      return await withTimeout(connection.open(params), timeoutMs, `it did not finish initialize within initializeTimeoutMs (${timeoutMs} ms)`);
    } finally {
      this.opening.delete(connection);
    }
  }

  private handler(
    kind: 'control' | 'session',
    ownerSessionId: string | undefined,
    current: () => UpstreamConnection | undefined,
  ): Omit<ConnectionHandler, 'closed'> {
    // Without a call the transport names, a message is guessed to belong to the only call running, since stdio and
    // legacy SSE cannot say, and servers ask mid-call without relating it. Except roots/list on a transport that
    // relates messages: roots are the session's business, and servers ask for them unprompted after connecting.
    const origin = (call: CallContext | undefined, method: string): MessageOrigin => {
      const standalone = call === undefined && method === 'roots/list' && current()?.relatesMessages === true;
      if (kind === 'session') {
        const pending = call ? [call] : standalone ? [] : (current()?.pendingContexts() ?? []);
        return { kind, sessionId: ownerSessionId, call: pending.length === 1 ? pending[0] : undefined, ambiguous: false, standalone };
      }
      if (!this.isShared) return { kind: 'control', sessionId: undefined, call: undefined, ambiguous: false, standalone: true };
      if (call) return { kind: 'shared', sessionId: call.sessionId, call, ambiguous: false, standalone: false };
      const pending = current()?.pendingContexts() ?? [];
      const sessions = new Set(pending.map((c) => c.sessionId));
      const [only] = sessions;
      return {
        kind: 'shared',
        sessionId: sessions.size === 1 ? only : undefined,
        call: pending.length === 1 ? pending[0] : undefined,
        ambiguous: sessions.size > 1,
        standalone: false,
      };
    };
    return {
      notification: (message, call) => {
        const from = origin(call, message.method);
        if (kind === 'control' && message.method.endsWith('/list_changed')) void this.refreshAfterListChanged().then(() => this.sink.notification(this, message, from));
        else this.sink.notification(this, message, from);
      },
      request: (message, call, signal) => this.sink.request(this, message, origin(call, message.method), signal),
    };
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  if (ms <= 0) return promise;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
