// One configured upstream server: its control connection, per-session connections, reconnection with backoff,
// and the sides of the revisions it speaks. What each revision says and reads is that revision's side
// (adapter.ts: the contract; src/protocol/rev*/upstream/: the sides, handed in as a registry); this file keeps
// the connections' life and picks the side a call goes to. Its catalog reading lives in catalog.ts, the record of
// its upstream sessions in session-ledger.ts.
import type { Agent } from 'undici';
import type { TaskMode, UpstreamConfig } from '../../config/types.js';
import { upstreamUnavailable } from '../../errors.js';
import { RestartBackoff } from './restart-backoff.js';
import { SessionConnections } from './session-connections.js';
import { DEFAULTS } from '../../config/schema/defaults.js';
import { NO_EVENTS, type GatewayEvents } from '../../events.js';
import { asObject, type JsonObject, type JsonRpcNotification, type JsonRpcRequest, type Outcome } from '../../jsonrpc.js';
import type { Logger } from '../../log.js';
import { UpstreamConnection, type CallContext, type ConnectionHandler, type UpstreamCall } from '../peer/connection.js';
import { createUpstreamAgent, upstreamDispatcher } from '../transports/http-agent.js';
import { HttpSseTransport } from '../transports/http-sse.js';
import { StdioTransport } from '../transports/stdio.js';
import { endUpstreamSession, StreamableHttpTransport } from '../transports/streamable-http.js';
import { recordSession, type UpstreamSessionLedger } from './session-ledger.js';
import type { UpstreamTransport } from '../transports/transport.js';
import { createdTaskIdIn, notifiedTaskIdIn, RELAY_CAPABILITIES, type ActingFor, type CredentialSource, type SessionIdentity, type UpstreamAdapter, type UpstreamCaller, type UpstreamLink, type UpstreamSide } from '../peer/adapter.js';
import { countViolations } from '../transports/violations.js';
import { fetchCatalog, type UpstreamCatalog } from '../peer/catalog.js';
import { CONTROL_ORIGIN, originOf, type ConnectionRole, type MessageOrigin } from '../peer/message-origin.js';
import { UpstreamSides } from '../peer/sides.js';
import { withTimeout } from './deadline.js';
import { CallerIdentity } from '../peer/caller-identity.js';
import type { IdentityParts } from '../../identity/credential-sources.js';
import { principalChildrenOf, type PrincipalChildren } from './principal-children.js';

export type { OpenedUpstreamSession, UpstreamSessionLedger } from './session-ledger.js';
export type { SessionIdentity } from '../peer/adapter.js';
export type { MessageOrigin } from '../peer/message-origin.js';

export type UpstreamState = 'starting' | 'ready' | 'down' | 'closed';

/** Who asks for an upstream's lists to be read again (a client named something unlisted): whom the gateway acts for. */
export interface ListAsker {
  actingFor: ActingFor | undefined;
}

/** What a per-principal upstream offers as far as the gateway knows before any of its children has said. */
const CHILDREN_NOT_HEARD: JsonObject = Object.freeze({ tools: {} });

/**
 * The identity a principal's child is started with for a caller outside any session (a call that names a tool before
 * the child listed it): no client's version, so the handshake offers the latest the gateway speaks.
 */
function childStarter(actingFor: ActingFor | undefined): SessionIdentity {
  return { sessionId: `principal:${actingFor?.principal ?? ''}`, protocolVersion: '', capabilities: RELAY_CAPABILITIES, clientInfo: undefined, manyClients: true };
}

/** What /readyz says of a per-principal upstream's server: from its children's handshake. */
function childStatus(said: JsonObject | undefined): { serverInfo: unknown; protocols: string[] } {
  return { serverInfo: said?.serverInfo, protocols: typeof said?.protocolVersion === 'string' ? [said.protocolVersion] : [] };
}

export interface UpstreamMessageSink {
  notification(upstream: Upstream, message: JsonRpcNotification, origin: MessageOrigin): void;
  request(upstream: Upstream, message: JsonRpcRequest, origin: MessageOrigin, signal: AbortSignal): Promise<Outcome>;
  catalogChanged(upstream: Upstream, reconnected: boolean): void;
}

/** What an upstream knows of the gateway it serves. */
export interface UpstreamGatewaySide {
  /** The gateway's version, as its clientInfo says. */
  version: string;
  /** Where its requests are announced (`upstream.request`), and its health (up, down, restarted). */
  events?: GatewayEvents;
  /** Where the upstream sessions it opens are recorded; none: not recorded (one replica, or tests). */
  sessionLedger?: UpstreamSessionLedger;
  /** The revisions the gateway may speak to upstreams (src/protocol/revisions.ts: UPSTREAM_ADAPTERS), stateless first. */
  adapters: readonly UpstreamAdapter[];
  /** The token caches and signer every upstream's `auth` shares; none: upstreams get their `headers` only. */
  identity?: IdentityParts;
}

/**
 * One configured upstream server: its control connection (catalog, health, and for shared stdio the only
 * connection), the per-session connections, and reconnection with backoff.
 */
export class Upstream {
  state: UpstreamState = 'starting';
  lastError: string | undefined;
  catalog: UpstreamCatalog = { tools: [], prompts: [], resources: [], resourceTemplates: [] };
  /** One per revision that may speak to this upstream as configured, in the registry's order. */
  private readonly sides: UpstreamSides;
  /** Who the gateway is to the upstream, for its own requests and for each caller's. */
  private readonly callers: CallerIdentity;

  private control: UpstreamConnection | undefined;
  /** The client sessions' own connections, and the principals' own sessions where clients share one. */
  private readonly perSession: SessionConnections;
  /** A per-principal stdio upstream's children, one per principal (issue 33); undefined for every other upstream. */
  private readonly children: PrincipalChildren | undefined;
  /**
   * What a per-principal upstream's children said in their handshake (the latest to start): such an upstream has
   * no control child (one with no principal would run with its caller placeholders unfilled, and a server that
   * checks its environment would refuse to start), so its capabilities and catalog come from its principals' own.
   */
  private childrenSaid: JsonObject | undefined;
  /** How many times a child's lists were read: a miss that started a child need not read them twice. */
  private childListReads = 0;
  /** Connections being closed (their upstream sessions ended): close() waits for them. */
  private readonly closing = new Set<Promise<void>>();
  /** Connections still in their handshake: close() ends them too (a child stuck in initialize is stopped at once). */
  private readonly opening = new Set<UpstreamConnection>();
  private readonly agent: Agent | undefined;
  private readonly backoff: RestartBackoff;
  private restartTimer: NodeJS.Timeout | undefined;
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
    this.callers = new CallerIdentity(config, gateway.identity);
    const link = this.link();
    this.sides = new UpstreamSides(gateway.adapters.filter((adapter) => adapter.speaksTo(config)).map((adapter) => adapter.side(link)));
    this.perSession = new SessionConnections({
      upstreamName: config.name,
      maxSessions: config.maxSessions ?? DEFAULTS.maxUpstreamSessions,
      // A per-principal stdio upstream's children are its principals' sessions; per-session children end with theirs.
      idleTimeoutMs: config.transport === 'stdio' ? 0 : config.idleTimeoutMs,
      logger: this.logger,
      closing: this.closing,
    });
    this.children = principalChildrenOf(config, { maxChildren: config.maxSessions ?? DEFAULTS.maxUpstreamSessions, logger: this.logger, closing: this.closing, gatewayVersion: gateway.version });
    const stdio = config.transport === 'stdio';
    this.backoff = new RestartBackoff(stdio ? config.restart.initialDelayMs : 1000, stdio ? config.restart.maxDelayMs : 30_000);
  }

  get name(): string {
    return this.config.name;
  }

  private get events(): GatewayEvents {
    return this.gateway.events ?? NO_EVENTS;
  }

  /** One connection carries every session: stdio with `isolation: shared`. */
  get isShared(): boolean {
    return this.config.transport === 'stdio' && this.config.isolation === 'shared';
  }

  /** The side of a revision, while the upstream speaks it: a router passes its own clients' requests through it. */
  side(revision: string): UpstreamSide | undefined {
    return this.sides.side(revision);
  }

  get capabilities(): JsonObject {
    if (this.children === undefined) return this.sides.capabilities;
    // Until a principal's child has said what it offers, it is taken to offer tools: a principal's first list then
    // starts its child, whose lists are read (and clients told of its prompts and resources once known).
    return asObject(this.childrenSaid?.capabilities) ?? CHILDREN_NOT_HEARD;
  }

  /** What the upstream says about itself (instructions, server info), in whichever revision it answered. */
  get description(): JsonObject | undefined {
    return this.children === undefined ? this.sides.description : this.childrenSaid;
  }

  /**
   * Connects the control connection once; on failure keeps retrying in the background. A per-principal upstream
   * has none: it is ready at once, its children start with their principals' calls.
   */
  async start(): Promise<void> {
    if (this.children === undefined) return this.connectControl();
    if (this.state === 'closed') return;
    this.state = 'ready';
    this.wasUp = true;
    this.events.emit('upstream.up', { upstream: this.name, transport: this.config.transport });
    this.logger.info('upstream ready: a child starts for each principal on its first call, and its lists are read from it');
  }

  /**
   * A per-principal upstream none of whose children has answered yet: nothing is listed, and its lists can only be
   * read over a caller's own child (refreshListed with that caller), which fails as that caller's call would.
   */
  get awaitsFirstChild(): boolean {
    return this.children !== undefined && this.childrenSaid === undefined;
  }

  /** Whether the upstream is told who each caller is (its `auth`): a call must not run as the gateway instead. */
  get actsPerCaller(): boolean {
    return this.callers.perCaller;
  }

  /** A caller as the upstream's sides see it: its session, and whom the gateway acts for (none: itself). */
  callerOf(identity: SessionIdentity, actingFor: ActingFor | undefined): UpstreamCaller {
    return this.callers.callerOf(identity, actingFor);
  }

  connectionFor(session: SessionIdentity, actingFor: ActingFor | undefined): Promise<UpstreamConnection> {
    return this.connectionOf(this.callerOf(session, actingFor));
  }

  private async connectionOf(caller: UpstreamCaller): Promise<UpstreamConnection> {
    const { key, perPrincipal } = this.callers.upstreamSessionOf(caller);
    if (this.children !== undefined) return this.children.get(key, caller, (identity, env) => this.openSessionConnection(key, { ...caller, identity }, env));
    if (this.isShared) {
      if (this.control === undefined || !this.control.isOpen || this.state !== 'ready') throw upstreamUnavailable(this.name, this.lastError ?? 'it is not connected yet');
      return this.control;
    }
    return this.perSession.get(key, () => this.openSessionConnection(key, caller), { perPrincipal });
  }

  /** Subscribes the gateway itself to a resource, whose updates reach listeners; once per URI per connection. */
  async subscribeControl(uri: string): Promise<void> {
    await this.sides.subscribe(uri);
  }

  /**
   * Starts a neutral call (no revision's envelope) on the side that serves it, which translates it to its revision
   * and its answer back; `context` answers the upstream's questions, or nobody does.
   */
  async callFor(
    session: SessionIdentity,
    actingFor: ActingFor | undefined,
    method: string,
    params: JsonObject,
    context: CallContext | undefined,
    timeoutMs: number,
    options: { asTask?: boolean } = {},
  ): Promise<UpstreamCall> {
    const side = this.sides.sideFor(method, params);
    if (side === undefined) throw upstreamUnavailable(this.name, 'it speaks no revision the gateway speaks');
    return side.call({ caller: this.callerOf(session, actingFor), method, params, context, timeoutMs, asTask: options.asTask === true });
  }

  /** How this upstream runs one of its tools (by its own name) as a task of its own: `required` means only as one. */
  taskSupportOf(toolName: unknown): TaskMode {
    return this.sides.taskSupportOf(String(toolName), this.tool(toolName));
  }

  private tool(name: unknown): JsonObject | undefined {
    return this.catalog.tools.find((tool) => tool.name === name);
  }

  /** Ends the session's own upstream connection (and with it the upstream session or child process). */
  releaseSession(sessionId: string): Promise<void> {
    return this.perSession.release(sessionId);
  }

  /**
   * Ends an upstream session another replica opened and left open when it died (its record taken from the store
   * by this replica's sweep). Resolves whether the upstream answered; only Streamable HTTP upstreams have sessions
   * to end. Whose it was is not recorded: ended as the gateway (an upstream binding sessions to users may refuse).
   */
  async endOrphanSession(sessionId: string, protocolVersion: string | undefined): Promise<boolean> {
    if (this.config.transport !== 'streamable-http' || this.agent === undefined) return false;
    return endUpstreamSession({ dispatcher: upstreamDispatcher(this.agent, this.callers.gateway), url: this.config.url }, sessionId, protocolVersion);
  }

  status(): JsonObject {
    const status: JsonObject = { name: this.name, transport: this.config.transport, state: this.state };
    if (!this.isShared) status.sessions = this.perSession.size + (this.children?.size ?? 0);
    if (this.lastError !== undefined && this.state !== 'ready') status.error = this.lastError;
    const { serverInfo, protocols } = this.children === undefined ? this.sides.status : childStatus(this.childrenSaid);
    if (serverInfo !== undefined) status.serverInfo = serverInfo;
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
    await this.sides.stop();
    await Promise.all([this.perSession.close(), this.children?.close(), ...[...this.opening].map((c) => c.close().catch(() => undefined))]);
    // Sessions released just before (their client sessions ended with the gateway) are ending too.
    await Promise.all([...this.closing]);
    await this.control?.close().catch(() => undefined);
    await this.agent?.close().catch(() => undefined);
    this.callers.forget();
    this.events.emit('upstream.stopped', { upstream: this.name });
  }

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
   * Reads the catalog again after a client session's connection said a list changed (every session's connection
   * may say so at once): one read runs at a time, and every call made while one runs shares the one read after it,
   * which sees the change. Resolves whether or not the read worked; clients hear of a change as after `list_changed`.
   */
  private rereadCatalog(): Promise<void> {
    if (this.nextRead !== undefined) return this.nextRead;
    const read: Promise<void> = this.lastRead
      .then(() => {
        this.nextRead = undefined;
        return this.refreshCatalog();
      })
      .then(() => this.sink.catalogChanged(this, false))
      .catch((error: Error) => {
        if (this.state !== 'closed') this.logger.warn({ reason: error.message }, 'catalog refresh failed');
      });
    this.nextRead = read;
    this.lastRead = read;
    return read;
  }

  /** The last catalog read rereadCatalog started, and the one waiting behind it (calls meanwhile share it). */
  private lastRead: Promise<void> = Promise.resolve();
  private nextRead: Promise<void> | undefined;

  /**
   * Reads the catalog again because a client named something it does not list (gateway/listed-refresh.ts bounds
   * how often); clients hear of it when it changed, as after `list_changed`.
   */
  async refreshListed(asker?: ListAsker): Promise<void> {
    if (this.children !== undefined) {
      // Lists are read over a principal's own child: the asker's, started for it if it has none (then it was just read).
      if (asker === undefined) return;
      const reads = this.childListReads;
      const connection = await this.connectionOf(this.callerOf(childStarter(asker.actingFor), asker.actingFor));
      if (this.childListReads === reads) await this.learnFrom(connection);
      return;
    }
    const before = JSON.stringify(this.catalog);
    await this.refreshCatalog();
    if (JSON.stringify(this.catalog) !== before) this.sink.catalogChanged(this, false);
  }

  /**
   * A per-principal child's lists become the upstream's catalog (what calls are routed by): read when a child
   * starts, when one says its lists changed, and on a miss. Clients are told when it changed.
   */
  private async learnFrom(connection: UpstreamConnection, said?: JsonObject): Promise<void> {
    this.childListReads++;
    const firstHeard = this.childrenSaid === undefined;
    if (said !== undefined) this.childrenSaid = said;
    const timeoutMs = this.config.requestTimeoutMs;
    const catalog = await fetchCatalog(this.capabilities, (method, page) => connection.request(method, page, undefined, timeoutMs).outcome);
    if (this.state === 'closed') return;
    const changed = JSON.stringify(catalog) !== JSON.stringify(this.catalog);
    this.catalog = catalog;
    if (changed || firstHeard) this.sink.catalogChanged(this, firstHeard);
  }

  /**
   * Lists everything the upstream offers in each revision it speaks (sides.ts merges them), following pagination.
   * The catalog is replaced whole at the end: calls route on it meanwhile, and must not see half of it.
   */
  async refreshCatalog(): Promise<void> {
    this.catalog = (await this.sides.readCatalog()) ?? this.catalog;
  }

  /** What this upstream lends its sides. */
  private link(): UpstreamLink {
    return {
      config: this.config,
      logger: this.logger,
      events: this.gateway.events,
      gatewayVersion: this.gateway.version,
      agent: this.agent,
      credentials: this.callers.gateway,
      openControl: (handshake) => this.openControl(handshake),
      control: () => this.control,
      connectionFor: (caller) => this.connectionOf(caller),
      tool: (name) => this.tool(name),
      createdTaskId: (result) => this.createdTaskId(result),
    };
  }

  /** A transport whose requests authenticate with `credentials` (stdio: none; `env`: a per-principal child's). */
  private createTransport(credentials: CredentialSource, env?: () => Promise<Record<string, string>>): UpstreamTransport {
    const config = this.config;
    if (config.transport === 'stdio') return new StdioTransport(config, this.logger, env);
    const dispatcher = upstreamDispatcher(this.agent as Agent, credentials);
    const options = { url: config.url, dispatcher, logger: this.logger, maxMessageBytes: config.maxMessageBytes };
    if (config.transport === 'sse') return new HttpSseTransport(options);
    return new StreamableHttpTransport(options);
  }

  /** Asks each side whether the upstream speaks its revision; up when one does and the catalog is read. */
  private async connectControl(): Promise<void> {
    if (this.state === 'closed') return;
    const failure = await this.sides.connect();
    if (failure !== undefined) {
      // An upstream the gateway is closing (shutdown, removed by a reload) is no trouble to report.
      if ((this.state as UpstreamState) !== 'closed') this.logger.warn({ reason: failure }, 'cannot connect to upstream');
      this.markDown(failure);
      return;
    }
    try {
      await this.refreshCatalog();
    } catch (error) {
      this.markDown((error as Error).message);
      return;
    }
    this.backoff.up();
    const restarted = this.wasUp && this.state === 'down' && this.config.transport === 'stdio';
    this.wasUp = true;
    this.state = 'ready';
    this.lastError = undefined;
    this.events.emit('upstream.up', { upstream: this.name, transport: this.config.transport });
    if (restarted) this.events.emit('upstream.restarted', { upstream: this.name, attempt: this.backoff.attempts });
    this.sides.watch((message) => this.controlMessage(message));
    this.logger.info(this.sides.status, 'upstream connected');
    this.sink.catalogChanged(this, true);
  }

  /** Opens the control connection with a side's handshake; resolves with its answer, or rejects with why not. */
  private async openControl(handshake: JsonObject): Promise<JsonObject> {
    const transport = this.createTransport(this.callers.gateway);
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
      createdTaskId: this.createdTaskId,
      notifiedTaskId: this.notifiedTaskId,
    });
    try {
      const result = await this.handshake(connection, handshake);
      if (this.state === 'closed') throw new Error('the gateway closed the upstream');
      this.control = connection;
      recorded.opened();
      return result;
    } catch (error) {
      await connection.close().catch(() => undefined);
      this.control = undefined;
      throw error;
    }
  }

  /** The task id of a create-task result in any revision the gateway speaks (answers.ts checks it was asked for). */
  private readonly createdTaskId = (result: JsonObject): string | undefined => createdTaskIdIn(this.gateway.adapters, result);

  /** The task a task-status notification names, in any revision the gateway speaks. */
  private readonly notifiedTaskId = (params: JsonObject): string | undefined => notifiedTaskIdIn(this.gateway.adapters, params);

  private markDown(reason: string): void {
    if (this.state === 'closed') return;
    // Announced once per outage (at start too: an upstream not reachable yet is down), not at every failed retry.
    if (this.state !== 'down') this.events.emit('upstream.down', { upstream: this.name, reason });
    this.state = 'down';
    this.lastError = reason;
    const delay = this.backoff.next();
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => void this.connectControl(), delay);
    this.restartTimer.unref();
  }

  /** Opens `caller`'s own upstream session, bound to its identity: its requests carry its credentials (a child: its env). */
  private async openSessionConnection(key: string, caller: UpstreamCaller, env?: () => Promise<Record<string, string>>): Promise<UpstreamConnection> {
    const session = caller.identity;
    const sessionHandshake = this.sides.sessionHandshake;
    if (sessionHandshake === undefined) throw new Error('it speaks no revision with sessions');
    const sessionHandler = this.handler('session', session.sessionId, () => connection);
    // A per-principal child's list change is read into the upstream's catalog before clients hear of it.
    const handler: typeof sessionHandler = this.children === undefined ? sessionHandler : {
      ...sessionHandler,
      notification: (message, call) => {
        if (!message.method.endsWith('/list_changed')) return sessionHandler.notification(message, call);
        void this.learnFrom(connection)
          .catch((error: Error) => this.logger.warn({ reason: error.message }, 'reading a per-principal child\'s lists failed'))
          .then(() => sessionHandler.notification(message, call));
      },
    };
    const transport = this.createTransport(this.callers.sessionCredentialsOf(caller), env);
    const recorded = recordSession(this.gateway.sessionLedger, this.name, transport, this.closing);
    const connection: UpstreamConnection = new UpstreamConnection({
      upstreamName: this.name,
      transport,
      handler: {
        ...handler,
        closed: (reason) => {
          recorded.forget();
          this.logger.debug({ session: session.sessionId, reason }, 'per-session upstream connection closed');
          this.perSession.closed(key, connection);
          this.children?.closed(key, connection);
        },
      },
      logger: this.logger.child({ session: session.sessionId }),
      servesOneClient: session.manyClients !== true,
      events: this.gateway.events,
      createdTaskId: this.createdTaskId,
      notifiedTaskId: this.notifiedTaskId,
    });
    try {
      const said = await this.handshake(connection, sessionHandshake(session));
      if (this.state === 'closed') throw new Error('the gateway closed the upstream');
      // A child that cannot be listed still serves its principal's calls: the catalog stays as it was.
      if (this.children !== undefined) await this.learnFrom(connection, said).catch((error: Error) => this.logger.warn({ reason: error.message }, 'reading a per-principal child\'s lists failed'));
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

  private handler(kind: 'control' | 'session', ownerSessionId: string | undefined, current: () => UpstreamConnection | undefined): Omit<ConnectionHandler, 'closed'> {
    const role: ConnectionRole = { kind, ownerSessionId, shared: this.isShared, current };
    return {
      notification: (message, call) => {
        const origin = originOf(role, call, message.method);
        if (kind === 'control') this.controlMessage(message, origin);
        else if (message.method.endsWith('/list_changed') && !this.actsPerCaller) {
          // Its client lists from the catalog (gateway/list-pages.ts): read again before the client hears to list.
          void this.rereadCatalog().then(() => this.sink.notification(this, message, origin));
        } else this.sink.notification(this, message, origin);
      },
      request: (message, call, signal) => this.sink.request(this, message, originOf(role, call, message.method), signal),
    };
  }

  /** A message for the gateway itself or on the control connection: a list change is read before it is passed on. */
  private controlMessage(message: JsonRpcNotification, origin: MessageOrigin = CONTROL_ORIGIN): void {
    if (message.method.endsWith('/list_changed')) void this.refreshAfterListChanged().then(() => this.sink.notification(this, message, origin));
    else this.sink.notification(this, message, origin);
  }
}

