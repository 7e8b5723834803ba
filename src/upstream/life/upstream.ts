// One configured upstream server: its control connection, per-session connections, reconnection with backoff,
// and the sides of the revisions it speaks. What each revision says and reads is that revision's side
// (peer/adapter.ts: the contract; src/protocol/rev*/upstream/: the sides, handed in as a registry); this file keeps
// the connections' life and picks the side a call goes to. Beside it: how its transports are made
// (upstream-transports.ts), when its catalog is read again (catalog-reads.ts), the record of its upstream sessions
// (session-ledger.ts).
import type { TaskMode, UpstreamConfig } from '../../config/types.js';
import { upstreamUnavailable } from '../../errors.js';
import { UpstreamHealth, type UpstreamState } from './upstream-health.js';
import { SessionConnections } from './session-connections.js';
import { DEFAULTS } from '../../config/schema/defaults.js';
import { NO_EVENTS, type GatewayEvents } from '../../events.js';
import { asObject, type JsonObject, type JsonRpcNotification, type JsonRpcRequest, type Outcome } from '../../jsonrpc.js';
import type { Logger } from '../../log.js';
import { UpstreamConnection, type ConnectionHandler, type UpstreamCall } from '../peer/connection.js';
import { UpstreamTransports } from './upstream-transports.js';
import type { UpstreamTransport } from '../transports/transport.js';
import { recordSession, type UpstreamSessionLedger } from './session-ledger.js';
import { CatalogReads, type ListAsker } from './catalog-reads.js';
import { createdTaskIdIn, notifiedTaskIdIn, type ActingFor, type SessionIdentity, type UpstreamAdapter, type UpstreamCallRequest, type UpstreamCaller, type UpstreamLink, type UpstreamSide } from '../peer/adapter.js';
import { countViolations } from '../transports/violations.js';
import type { UpstreamCatalog } from '../peer/catalog.js';
import { CONTROL_ORIGIN, originOf, type ConnectionRole, type MessageOrigin } from '../peer/message-origin.js';
import { UpstreamSides } from '../peer/sides.js';
import { withTimeout } from './deadline.js';
import { CallerIdentity } from '../peer/caller-identity.js';
import type { IdentityParts } from '../../identity/credential-sources.js';
import { childStarter, childStatus, CHILDREN_NOT_HEARD, principalChildrenOf, type PrincipalChildren } from './principal-children.js';

export type { OpenedUpstreamSession, UpstreamSessionLedger } from './session-ledger.js';
export type { SessionIdentity, UpstreamCallRequest } from '../peer/adapter.js';
export type { MessageOrigin } from '../peer/message-origin.js';
export type { ListAsker } from './catalog-reads.js';

export type { UpstreamState } from './upstream-health.js';

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
  /** Counts each call from its start until its outcome settles (calls-in-flight.ts: the drain waits for them). */
  calls?: { track<T extends UpstreamCall>(start: () => Promise<T>): Promise<T> };
}

/**
 * One configured upstream server: its control connection (catalog, health, and for shared stdio the only
 * connection), the per-session connections, and reconnection with backoff.
 */
export class Upstream {
  /** Whether it is up, and why not. */
  private readonly health: UpstreamHealth;
  /** One per revision that may speak to this upstream as configured, in the registry's order. */
  private readonly sides: UpstreamSides;
  /** Who the gateway is to the upstream, for its own requests and for each caller's. */
  private readonly callers: CallerIdentity;

  private control: UpstreamConnection | undefined;
  /** The client sessions' own connections, and the principals' own sessions where clients share one. */
  private readonly perSession: SessionConnections;
  /** A per-principal stdio upstream's children, one per principal (issue 33); undefined for every other upstream. */
  private readonly children: PrincipalChildren | undefined;
  /** What it lists (its catalog), and when that is read again. */
  private readonly lists: CatalogReads;
  /** Connections being closed (their upstream sessions ended): close() waits for them. */
  private readonly closing = new Set<Promise<void>>();
  /** Connections still in their handshake: close() ends them too (a child stuck in initialize is stopped at once). */
  private readonly opening = new Set<UpstreamConnection>();
  private readonly transports: UpstreamTransports;
  private readonly logger: Logger;

  constructor(
    readonly config: UpstreamConfig,
    logger: Logger,
    private readonly sink: UpstreamMessageSink,
    private readonly gateway: UpstreamGatewaySide,
  ) {
    this.logger = countViolations(logger.child({ upstream: config.name }), gateway.events);
    this.transports = new UpstreamTransports(config, this.logger);
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
    this.lists = this.catalogReads();
    this.health = new UpstreamHealth(config, this.events, () => this.connectControl());
  }

  get name(): string {
    return this.config.name;
  }

  get state(): UpstreamState {
    return this.health.state;
  }

  /** Why it is down, while it is not ready. */
  get lastError(): string | undefined {
    return this.health.lastError;
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
    return asObject(this.lists.childrenSaid?.capabilities) ?? CHILDREN_NOT_HEARD;
  }

  /** What the upstream says about itself (instructions, server info), in whichever revision it answered. */
  get description(): JsonObject | undefined {
    return this.children === undefined ? this.sides.description : this.lists.childrenSaid;
  }

  /**
   * Connects the control connection once; on failure keeps retrying in the background. A per-principal upstream
   * has none: it is ready at once, its children start with their principals' calls.
   */
  async start(): Promise<void> {
    if (this.children === undefined) return this.health.attempt();
    if (this.state === 'closed') return;
    this.health.up();
    this.logger.info('upstream ready: a child starts for each principal on its first call, and its lists are read from it');
  }

  /**
   * A per-principal upstream none of whose children has answered yet: nothing is listed, and its lists can only be
   * read over a caller's own child (refreshListed with that caller), which fails as that caller's call would.
   */
  get awaitsFirstChild(): boolean {
    return this.children !== undefined && this.lists.childrenSaid === undefined;
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

  /** Starts a neutral call (no envelope) on the side that serves it; `context` answers the upstream's questions. */
  async callFor(call: UpstreamCallRequest): Promise<UpstreamCall> {
    const { method, params } = call;
    const side = this.sides.sideFor(method, params);
    if (side === undefined) throw upstreamUnavailable(this.name, 'it speaks no revision the gateway speaks');
    const start = (): Promise<UpstreamCall> => side.call({ caller: this.callerOf(call.session, call.actingFor), method, params, context: call.context, timeoutMs: call.timeoutMs, asTask: call.asTask === true });
    return this.gateway.calls === undefined ? start() : this.gateway.calls.track(start);
  }

  /** How this upstream runs one of its tools (by its own name) as a task of its own: `required` means only as one. */
  taskSupportOf(toolName: unknown): TaskMode {
    return this.sides.taskSupportOf(String(toolName), this.tool(toolName));
  }

  /** The tool of that name (its own) in the upstream's catalog as last read; undefined when it lists none. */
  tool(name: unknown): JsonObject | undefined {
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
  endOrphanSession(sessionId: string, protocolVersion: string | undefined): Promise<boolean> {
    return this.transports.endOrphanSession(sessionId, protocolVersion, this.callers.gateway);
  }

  status(): JsonObject {
    const status: JsonObject = { name: this.name, transport: this.config.transport, state: this.state };
    if (!this.isShared) status.sessions = this.perSession.size + (this.children?.size ?? 0);
    if (this.lastError !== undefined && this.state !== 'ready') status.error = this.lastError;
    const { serverInfo, protocols } = this.children === undefined ? this.sides.status : childStatus(this.lists.childrenSaid);
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
    this.health.close();
    await this.sides.stop();
    await Promise.all([this.perSession.close(), this.children?.close(), ...[...this.opening].map((c) => c.close().catch(() => undefined))]);
    // Sessions released just before (their client sessions ended with the gateway) are ending too.
    await Promise.all([...this.closing]);
    await this.control?.close().catch(() => undefined);
    await this.transports.close();
    this.callers.forget();
    this.events.emit('upstream.stopped', { upstream: this.name });
  }

  /** What it lists, as last read: calls route on it. */
  get catalog(): UpstreamCatalog {
    return this.lists.catalog;
  }

  /**
   * Reads the catalog again because a client named something it does not list (gateway/listed-refresh.ts bounds
   * how often); clients hear of it when it changed, as after `list_changed`.
   */
  refreshListed(asker?: ListAsker): Promise<void> {
    return this.lists.refreshListed(asker);
  }

  /** When its lists are read again, and over which connection (a per-principal upstream's: its principals' children). */
  private catalogReads(): CatalogReads {
    return new CatalogReads({
      logger: this.logger,
      requestTimeoutMs: this.config.requestTimeoutMs,
      readCatalog: () => this.sides.readCatalog(),
      changed: (reconnected) => this.sink.catalogChanged(this, reconnected),
      closed: () => this.state === 'closed',
      capabilities: () => this.capabilities,
      childFor: this.children === undefined ? undefined : (asker) => this.connectionOf(this.callerOf(childStarter(asker.actingFor), asker.actingFor)),
    });
  }

  /** What this upstream lends its sides. */
  private link(): UpstreamLink {
    return {
      config: this.config,
      logger: this.logger,
      events: this.gateway.events,
      gatewayVersion: this.gateway.version,
      agent: this.transports.agent,
      credentials: this.callers.gateway,
      openControl: (handshake) => this.openControl(handshake),
      control: () => this.control,
      connectionFor: (caller) => this.connectionOf(caller),
      tool: (name) => this.tool(name),
      createdTaskId: (result) => this.createdTaskId(result),
    };
  }

  /**
   * Tries the control connection now rather than after its backoff (a consent upstream's first user connected, issue
   * 41); resolves once that attempt, or the one under way, has ended. At once when it is not down.
   */
  retryNow(): Promise<void> {
    return this.health.retryNow();
  }

  /** Asks each side whether the upstream speaks its revision; up when one does and the catalog is read. */
  private async connectControl(): Promise<void> {
    if (this.state === 'closed') return;
    const failure = await this.sides.connect();
    if (failure !== undefined) {
      // An upstream the gateway is closing (shutdown, removed by a reload) is no trouble to report.
      if ((this.state as UpstreamState) !== 'closed') this.logger.warn({ reason: failure }, 'cannot connect to upstream');
      this.health.down(failure);
      return;
    }
    try {
      await this.lists.read();
    } catch (error) {
      this.health.down((error as Error).message);
      return;
    }
    this.health.up();
    this.sides.watch((message) => this.controlMessage(message));
    this.logger.info(this.sides.status, 'upstream connected');
    this.sink.catalogChanged(this, true);
  }

  /** Opens the control connection with a side's handshake; resolves with its answer, or rejects with why not. */
  private async openControl(handshake: JsonObject): Promise<JsonObject> {
    const { connection, recorded } = this.newConnection(this.transports.create(this.callers.gateway), undefined, (reason) => {
      if (this.control !== connection || this.state === 'closed') return;
      this.logger.warn({ reason }, 'upstream connection lost');
      this.health.down(reason);
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

  /** Opens `caller`'s own upstream session, bound to its identity: its requests carry its credentials (a child: its env). */
  private async openSessionConnection(key: string, caller: UpstreamCaller, env?: () => Promise<Record<string, string>>): Promise<UpstreamConnection> {
    const session = caller.identity;
    const sessionHandshake = this.sides.sessionHandshake;
    if (sessionHandshake === undefined) throw new Error('it speaks no revision with sessions');
    const { connection, recorded } = this.newConnection(this.transports.create(this.callers.sessionCredentialsOf(caller), env), session, (reason) => {
      this.logger.debug({ session: session.sessionId, reason }, 'per-session upstream connection closed');
      this.perSession.closed(key, connection);
      this.children?.closed(key, connection);
    });
    try {
      const said = await this.handshake(connection, sessionHandshake(session));
      if (this.state === 'closed') throw new Error('the gateway closed the upstream');
      // A child that cannot be listed still serves its principal's calls: the catalog stays as it was.
      if (this.children !== undefined) await this.lists.learnFrom(connection, said).catch((error: Error) => this.logger.warn({ reason: error.message }, 'reading a per-principal child\'s lists failed'));
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
    recorded.opened();
    return connection;
  }

  /**
   * A connection of this upstream over `transport`: the control connection, or `session`'s own. Its upstream session
   * is recorded in the ledger until it closes (then `closed`); its messages go where its role says (handler()).
   */
  private newConnection(transport: UpstreamTransport, session: SessionIdentity | undefined, closed: (reason: string) => void): { connection: UpstreamConnection; recorded: { opened(): void } } {
    const recorded = recordSession(this.gateway.sessionLedger, this.name, transport, this.closing);
    const handler = this.handler(session === undefined ? 'control' : 'session', session?.sessionId, () => connection);
    const connection: UpstreamConnection = new UpstreamConnection({
      upstreamName: this.name,
      transport,
      handler: {
        ...handler,
        closed: (reason) => {
          recorded.forget();
          closed(reason);
        },
      },
      logger: session === undefined ? this.logger : this.logger.child({ session: session.sessionId }),
      servesOneClient: session !== undefined && session.manyClients !== true,
      events: this.gateway.events,
      createdTaskId: this.createdTaskId,
      notifiedTaskId: this.notifiedTaskId,
    });
    return { connection, recorded };
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
        if (kind === 'control') return this.controlMessage(message, origin);
        const reading = message.method.endsWith('/list_changed') ? this.sessionListChanged(current()) : undefined;
        if (reading === undefined) this.sink.notification(this, message, origin);
        else void reading.then(() => this.sink.notification(this, message, origin));
      },
      request: (message, call, signal) => this.sink.request(this, message, originOf(role, call, message.method), signal),
    };
  }

  /**
   * What a session's connection said changed is read before its client hears of it (undefined: nothing to read):
   * a per-principal child's lists become the upstream's catalog; a client session's client lists from the catalog
   * (gateway/list-pages.ts). Where callers are told apart, each lists over its own session: nothing is read.
   */
  private sessionListChanged(connection: UpstreamConnection | undefined): Promise<void> | undefined {
    if (this.children !== undefined && connection !== undefined) {
      return this.lists.learnFrom(connection).catch((error: Error) => this.logger.warn({ reason: error.message }, 'reading a per-principal child\'s lists failed'));
    }
    return this.actsPerCaller ? undefined : this.lists.reread();
  }

  /** A message for the gateway itself or on the control connection: a list change is read before it is passed on. */
  private controlMessage(message: JsonRpcNotification, origin: MessageOrigin = CONTROL_ORIGIN): void {
    if (message.method.endsWith('/list_changed')) void this.lists.afterListChanged().then(() => this.sink.notification(this, message, origin));
    else this.sink.notification(this, message, origin);
  }
}

