import { randomUUID } from 'node:crypto';
import type { SessionsConfig, SseConfig } from '../config/types.js';
import { GatewayError, storeUnavailable } from '../errors.js';
import { NO_EVENTS, type GatewayEvents, type GatewayEventMap } from '../events.js';
import type { JsonObject } from '../jsonrpc.js';
import { logLevelRank, type LogLevel } from '../mcp.js';
import type { Session, Sessions } from '../protocol/revision-ports.js';
import type { StreamBudget } from '../streams/stream-budget.js';
import type { NotifiedTaskId } from '../upstream/peer/client-flow.js';
import type { TaskStore } from '../store/task-store.js';
import { ANONYMOUS_PRINCIPAL } from '../principals.js';
import { ClientSession, type SessionPeers } from './session.js';

/** `storeTouchedAt` of a session the store does not have yet (made while it was away). */
const UNSTORED = 0;

/** The counting semaphore of a principal's open sessions (leased for the idle timeout, renewed with the session). */
const sessionSlot = (principal: string | undefined): string => `sessions:${principal ?? ANONYMOUS_PRINCIPAL}`;
/** Recorded with each session's ticket (for debugging): sessions belong to no replica. */
const SLOT_OWNER = 'session';

/** What the registry needs from the other replicas besides what sessions need. */
export interface RegistryPeers extends SessionPeers {
  /** Tells every replica that the client ended the session (DELETE); resolves once the message is on its way to them. */
  ended(sessionId: string): Promise<void>;
  /** Tells every replica that the client cancelled a request of the session (whichever runs it stops it). */
  cancelled(sessionId: string, params: JsonObject): void;
}

export interface SessionRegistryDeps {
  config: SessionsConfig;
  sse: SseConfig;
  store: Pick<TaskStore, 'sessions' | 'slots'>;
  /** The other replicas, for what reaches a session's streams held elsewhere. */
  peers: RegistryPeers;
  /** A session ended (DELETE or idle): its calls and upstream connections go. */
  onEnd: (session: ClientSession) => void;
  /** What the replica's streams may hold for clients that do not read. */
  budget: StreamBudget;
  /** The task a task-status notification names, in whichever revision (its streams coalesce by it). */
  notifiedTaskId: NotifiedTaskId;
  /** Told when this replica starts and stops holding a session. */
  events?: GatewayEvents;
}

/**
 * Client sessions (2025-11-25 and the older session revisions). A session lives in the store, so any replica serves any of its requests: each replica
 * keeps a view of the sessions it served (their streams and calls here), made from the store's record on first
 * use. A session unused this long anywhere is gone from the store, and its id then gets 404 everywhere.
 */
export class SessionRegistry implements Sessions {
  private readonly sessions = new Map<string, ClientSession>();
  /** Views being made from the store, so concurrent first requests share one. */
  private readonly loading = new Map<string, Promise<ClientSession | undefined>>();
  private sweeper: NodeJS.Timeout | undefined;
  private readonly config: SessionsConfig;
  private readonly sse: SseConfig;
  private readonly store: Pick<TaskStore, 'sessions' | 'slots'>;
  /** The other replicas, for what reaches a session's streams held elsewhere. */
  readonly peers: RegistryPeers;
  private readonly onEnd: (session: ClientSession) => void;
  private readonly budget: StreamBudget;
  private readonly notifiedTaskId: NotifiedTaskId;
  private readonly events: GatewayEvents;

  constructor(deps: SessionRegistryDeps) {
    ({ config: this.config, sse: this.sse, store: this.store, peers: this.peers, onEnd: this.onEnd, budget: this.budget, notifiedTaskId: this.notifiedTaskId } = deps);
    this.events = deps.events ?? NO_EVENTS;
  }

  /** Starts ending the views of sessions idle for longer than idleTimeoutMs; endAll() stops it. */
  start(): void {
    if (this.sweeper !== undefined) return;
    this.sweeper = setInterval(() => this.sweep(), Math.max(1000, Math.min(60_000, this.config.idleTimeoutMs / 4)));
    this.sweeper.unref();
  }

  /**
   * Records a new session in the store (any replica then serves it) and returns this replica's view of it.
   * Refused when its principal already holds `maxPerPrincipal` open sessions. `principal` is the authenticated
   * caller's (undefined without authentication): only that principal's requests find the session.
   */
  async create(protocolVersion: string, capabilities: JsonObject, clientInfo: JsonObject | undefined, principal?: string): Promise<ClientSession> {
    const sessionId = randomUUID();
    await this.count(sessionId, principal);
    const fields = sessionFields({ protocolVersion, capabilities, clientInfo, logLevel: undefined, principal });
    const stored = await this.store.sessions.save(sessionId, fields, this.config.idleTimeoutMs, { create: true }).catch(() => false);
    const session = this.view(sessionId, fields, false);
    // A store outage must not stop plain proxying: the session works on this replica, and is stored (so the
    // other replicas serve it too) once the store is back.
    if (!stored) session.storeTouchedAt = UNSTORED;
    return session;
  }

  /**
   * The session a client's request names, for its `principal` (undefined without authentication): undefined when it
   * ended or expired, or when it belongs to another principal (to whom it does not exist). Counts as activity.
   */
  async getFor(sessionId: string, principal: string | undefined): Promise<ClientSession | undefined> {
    const found = this.sessions.get(sessionId) ?? (await this.load(sessionId));
    // Checked first: another principal's requests must not keep the session alive either.
    return found === undefined || found.principal !== principal ? undefined : this.get(sessionId);
  }

  /** The session, from this replica's views or the store, whoever owns it; undefined when it ended or expired. */
  async get(sessionId: string): Promise<ClientSession | undefined> {
    const session = this.sessions.get(sessionId) ?? (await this.load(sessionId));
    if (session === undefined) return undefined;
    session.touch();
    // The store's copy expires on its own; renewing it on every request would cost a write each.
    if (session.lastSeen - session.storeTouchedAt > this.config.idleTimeoutMs / 4) this.keepAlive(session);
    return session;
  }

  /** This replica's view, without the store or counting as activity (messages from upstreams). */
  peek(sessionId: string): ClientSession | undefined {
    return this.sessions.get(sessionId);
  }

  all(): IterableIterator<ClientSession> {
    return this.sessions.values();
  }

  get size(): number {
    return this.sessions.size;
  }

  /** The client ended the session (DELETE): gone from the store, and every replica drops its view. */
  async end(session: ClientSession): Promise<void> {
    const { sessionId, principal } = session;
    await this.store.sessions.delete(sessionId).catch((error: unknown) => {
      throw storeUnavailable(error);
    });
    if (this.config.maxPerPrincipal > 0) void this.store.slots.release(sessionSlot(principal), sessionId).catch(() => undefined);
    this.endHere(sessionId, 'deleted');
    // Awaited: the DELETE is answered only after Redis handed the end to the other replicas, so a request the
    // client sends another replica next finds the session gone there too.
    await this.peers.ended(sessionId);
  }

  /** Drops this replica's view: its streams close, its calls here stop, its upstream connections here go. */
  endHere(sessionId: string, reason: GatewayEventMap['session.closed']['reason']): boolean {
    const session = this.sessions.get(sessionId);
    if (session === undefined) return false;
    this.sessions.delete(sessionId);
    session.close();
    this.onEnd(session);
    this.events.emit('session.closed', { sessionId, principal: session.principal ?? ANONYMOUS_PRINCIPAL, reason });
    return true;
  }

  /** Saves the session's log level for every replica's view made from now on. */
  saveLogLevel(session: ClientSession): void {
    if (session.logLevel === undefined) return;
    void this.store.sessions.save(session.sessionId, { logLevel: session.logLevel }, this.config.idleTimeoutMs).catch(() => undefined);
  }

  cancelledElsewhere(sessionId: string, params: JsonObject): void {
    this.peers.cancelled(sessionId, params);
  }

  subscribedElsewhere(session: Session, uri: string): boolean {
    for (const other of this.sessions.values()) if (other !== session && other.subscriptions.has(uri)) return true;
    return false;
  }

  mostVerboseLevel(): LogLevel | undefined {
    let best: LogLevel | undefined;
    for (const session of this.sessions.values()) {
      if (session.logLevel !== undefined && (best === undefined || logLevelRank(session.logLevel) < logLevelRank(best))) best = session.logLevel;
    }
    return best;
  }

  /** Drops every view (this replica shuts down); the sessions themselves live on for the other replicas. */
  endAll(): void {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
    for (const id of [...this.sessions.keys()]) this.endHere(id, 'shutdown');
  }

  /** Counts a new session against its principal's cap; a store that cannot count does not stop proxying. */
  private async count(sessionId: string, principal: string | undefined): Promise<void> {
    const limit = this.config.maxPerPrincipal;
    if (limit <= 0) return;
    const grant = await this.store.slots
      .acquire(sessionSlot(principal), sessionId, SLOT_OWNER, limit, this.config.idleTimeoutMs, { queue: false })
      .catch(() => undefined);
    if (grant !== undefined && !grant.granted) {
      throw new GatewayError(
        'too_many_sessions',
        `Too many sessions: ${grant.ahead} are open (sessions.maxPerPrincipal: ${limit}); end unused sessions with DELETE or wait until they expire (sessions.idleTimeoutMs)`,
      );
    }
  }

  private load(sessionId: string): Promise<ClientSession | undefined> {
    let loading = this.loading.get(sessionId);
    if (loading === undefined) {
      loading = this.store.sessions
        .get(sessionId)
        .then((fields) => (fields === undefined ? undefined : (this.sessions.get(sessionId) ?? this.view(sessionId, fields, true))))
        .catch((error: unknown) => {
          throw storeUnavailable(error);
        })
        .finally(() => this.loading.delete(sessionId));
      this.loading.set(sessionId, loading);
    }
    return loading;
  }

  private view(sessionId: string, fields: Record<string, string>, resumed: boolean): ClientSession {
    const parse = (text: string | undefined): JsonObject | undefined => {
      try {
        return text === undefined ? undefined : (JSON.parse(text) as JsonObject);
      } catch {
        return undefined;
      }
    };
    const session = new ClientSession({
      sessionId,
      protocolVersion: fields.protocolVersion ?? '',
      capabilities: parse(fields.capabilities) ?? {},
      clientInfo: parse(fields.clientInfo),
      principal: fields.principal,
      sse: this.sse,
      peers: this.peers,
      budget: this.budget,
      notifiedTaskId: this.notifiedTaskId,
    });
    if (logLevelRank(fields.logLevel) >= 0) session.logLevel = fields.logLevel as LogLevel;
    this.sessions.set(sessionId, session);
    const principal = session.principal ?? ANONYMOUS_PRINCIPAL;
    this.events.emit('session.opened', { sessionId, principal, protocolVersion: session.protocolVersion, ...(resumed ? { resumed } : {}) });
    return session;
  }

  /**
   * Renews the store's copy; one that is gone (ended through another replica, or expired) ends the view here.
   * A session made while the store was away is stored now.
   */
  private keepAlive(session: ClientSession): void {
    const unstored = session.storeTouchedAt === UNSTORED;
    session.storeTouchedAt = Date.now();
    if (this.config.maxPerPrincipal > 0) {
      const slot = { key: sessionSlot(session.principal), ticket: session.sessionId };
      // A session made while the store was away is counted now (it exists already: over the cap or not).
      const counted = unstored
        ? this.store.slots.acquire(slot.key, slot.ticket, SLOT_OWNER, Number.MAX_SAFE_INTEGER, this.config.idleTimeoutMs, { queue: false })
        : this.store.slots.renew([slot], this.config.idleTimeoutMs);
      void counted.catch(() => undefined);
    }
    const fields: Record<string, string> = unstored ? sessionFields(session) : {};
    this.store.sessions.save(session.sessionId, fields, this.config.idleTimeoutMs, { create: unstored }).then(
      (alive) => {
        if (!alive) this.endHere(session.sessionId, 'evicted');
      },
      () => {
        if (unstored) session.storeTouchedAt = UNSTORED; // still away: the next request or sweep tries again
      },
    );
  }

  private sweep(): void {
    const cutoff = Date.now() - this.config.idleTimeoutMs;
    for (const session of [...this.sessions.values()]) {
      const busy = session.inflight.size > 0 || session.activeTasks > 0;
      // A session with calls or tasks still running here is not idle, whatever its last request: it stays in the
      // store too. An idle view goes; the session itself lives on while other replicas keep it in use.
      if (busy || session.storeTouchedAt === UNSTORED) this.keepAlive(session);
      else if (session.lastSeen < cutoff) this.endHere(session.sessionId, 'idle');
    }
  }
}

/** The store's record of a session: what `initialize` fixed, its owner, and the log level (read back by `view`). */
function sessionFields(session: Pick<ClientSession, 'protocolVersion' | 'capabilities' | 'clientInfo' | 'logLevel' | 'principal'>): Record<string, string> {
  const fields: Record<string, string> = { protocolVersion: session.protocolVersion, capabilities: JSON.stringify(session.capabilities) };
  if (session.principal !== undefined) fields.principal = session.principal;
  if (session.clientInfo !== undefined) fields.clientInfo = JSON.stringify(session.clientInfo);
  if (session.logLevel !== undefined) fields.logLevel = session.logLevel;
  return fields;
}
