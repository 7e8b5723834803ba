// The UserConnections service (ports.ts, issue 41), assembled from its parts: where each upstream's authorization
// server is (authorization-servers.ts), the gateway's client there (clients.ts), the browser flow (flows.ts), the
// tokens and their refresh (tokens.ts), the sealed vault (vault.ts) and the signals between replicas (signals.ts).
// Everything it keeps is in the store, so any replica serves any step; start() subscribes to the bus, stop() ends it.
import { randomBytes, randomUUID } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import type { GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import { credentialFailure } from '../identity/oauth-failure.js';
import type { Sealer } from '../identity/sealing.js';
import { ConsentRequiredError } from '../identity/user-tokens.js';
import { nameOf } from '../principals.js';
import type { ReplicaBus } from '../store/bus.js';
import type { Connections, ConsentLink } from '../store/connections.js';
import { AuthorizationServers } from './authorization-servers.js';
import { ConsentClients } from './clients.js';
import { ConsentFlows } from './flows.js';
import { connectionStatus, LINK_TTL_MS, type CallbackParams, type ConnectionStatus, type ConsentPage, type ConsentRequest, type UserConnections } from './ports.js';
import { connectUrl, consentUpstreams, publicOrigin, type ConsentConfig, type ConsentUpstream } from './settings.js';
import { ConnectionSignals, type Connected } from './signals.js';
import { ConnectionTokens } from './tokens.js';
import { ConsentVault } from './vault.js';

/** Links remembered for reuse (principal and upstream pairs); past it the least recently made is forgotten. */
const OPEN_LINKS_KEPT = 10_000;

/** How often a wait for a connection re-reads the store besides listening on the bus. */
const RECHECK_MS = 2_000;

export interface UserConnectionsDeps {
  config: ConsentConfig;
  /** The task store's `connections` and `bus` (a TaskStore fits). */
  store: { readonly connections: Connections; readonly bus: ReplicaBus };
  /** identity.sealingKeys' sealer (src/identity/parts.ts). */
  sealer: Sealer;
  events: GatewayEvents;
  logger: Logger;
  /** This replica's id: lock owners are named after it. */
  replicaId: string;
  now?: () => number;
  /** How often a wait for a connection re-reads the store (default 2 s). */
  recheckMs?: number;
}

export interface UserConnectionsService extends UserConnections {
  /** Subscribes to the bus (connections made and removed on other replicas). */
  start(): Promise<void>;
  /** Unsubscribes; pending whenConnected() waits resolve false. */
  stop(): Promise<void>;
}

export function createUserConnections(deps: UserConnectionsDeps): UserConnectionsService {
  return new StoredUserConnections(deps);
}

class StoredUserConnections implements UserConnectionsService {
  private readonly upstreamsByName: ReadonlyMap<string, ConsentUpstream>;
  private readonly origin: string;
  private readonly connections: Connections;
  private readonly now: () => number;
  private readonly servers: AuthorizationServers;
  private readonly clients: ConsentClients;
  private readonly tokens: ConnectionTokens;
  private readonly flows: ConsentFlows;
  private readonly signals: ConnectionSignals;
  /** The last link made here per principal and upstream (openLink). */
  private readonly openLinks = new Map<string, ConsentLink>();

  constructor(private readonly deps: UserConnectionsDeps) {
    const { config, store, events, logger, replicaId } = deps;
    this.upstreamsByName = consentUpstreams(config);
    this.origin = publicOrigin(config);
    this.connections = store.connections;
    this.now = deps.now ?? Date.now;
    const vault = new ConsentVault(deps.sealer);
    this.servers = new AuthorizationServers({ allowed: config.identity?.allowedAuthorizationServers, now: this.now });
    const shared = { connections: this.connections, vault, servers: this.servers, logger, now: this.now };
    this.clients = new ConsentClients({ ...shared, origin: this.origin, replicaId });
    this.signals = new ConnectionSignals({
      bus: store.bus, logger, recheckMs: deps.recheckMs ?? RECHECK_MS,
      isConnected: (principal, upstream) => this.isConnected(principal, upstream),
      changed: (principal, upstream) => this.tokens.forget(principal, upstream),
    });
    this.tokens = new ConnectionTokens({
      ...shared, clients: this.clients, events, replicaId,
      removed: (principal, upstream) => this.signals.announce('removed', { principal, upstream }),
    });
    this.flows = new ConsentFlows({
      ...shared, clients: this.clients, events, origin: this.origin,
      upstream: (name) => this.upstreamsByName.get(name),
      connected: (connected) => this.signals.announce('connected', connected),
    });
  }

  async start(): Promise<void> {
    await this.signals.start();
  }

  async stop(): Promise<void> {
    this.signals.stop();
  }

  requires(upstream: string): boolean {
    return this.upstreamsByName.has(upstream);
  }

  upstreams(): string[] {
    return [...this.upstreamsByName.keys()];
  }

  async isConnected(principal: string, upstream: string): Promise<boolean> {
    return (await this.connections.get(principal, upstream)) !== undefined;
  }

  async accessToken(principal: string, upstream: string): Promise<string> {
    const settings = this.settings(upstream);
    if (nameOf(principal)?.credential !== 'oauth') throw new ConsentRequiredError(upstream, principal, 'no_user');
    return this.tokens.accessToken(settings, principal);
  }

  refused(principal: string, upstream: string, token: string): boolean {
    return this.tokens.refused(principal, upstream, token);
  }

  anyConnected(upstream: string): Promise<string | undefined> {
    return this.connections.anyConnected(upstream);
  }

  async request(principal: string, upstream: string, via: 'call' | 'task' | 'connections'): Promise<ConsentRequest> {
    const settings = this.settings(upstream);
    if (nameOf(principal)?.credential !== 'oauth') throw new ConsentRequiredError(upstream, principal, 'no_user');
    const link = await this.openLink(principal, upstream);
    const issuer = this.servers.knownIssuer(settings);
    const at = issuer === undefined ? '' : ` at ${new URL(issuer).host}`;
    this.deps.events.emit('consent.requested', { principal, upstream, via, ...(issuer !== undefined && { issuer }) });
    return {
      upstream,
      elicitationId: link.elicitationId,
      url: connectUrl(this.origin, link.id),
      message: `'${upstream}' acts as you at your own account${at}: open this link to connect it (valid ${LINK_TTL_MS / 60_000} minutes), then try again.`,
    };
  }

  /**
   * The link `principal` is sent for `upstream`: the one this replica made last while it is unused and has more than
   * half its life left, else a new one. A caller who calls again and again before connecting (or a flood of them)
   * gets one link per replica every 5 minutes, not one stored link per call.
   */
  private async openLink(principal: string, upstream: string): Promise<ConsentLink> {
    const key = `${principal}\u0000${upstream}`;
    const now = this.now();
    const last = this.openLinks.get(key);
    if (last !== undefined && last.expiresAtMs - now > LINK_TTL_MS / 2 && (await this.connections.getLink(last.id)) !== undefined) return last;
    const link = { id: randomBytes(32).toString('base64url'), principal, upstream, elicitationId: randomUUID(), createdAtMs: now, expiresAtMs: now + LINK_TTL_MS };
    await this.connections.putLink(link);
    this.openLinks.delete(key);
    this.openLinks.set(key, link);
    if (this.openLinks.size > OPEN_LINKS_KEPT) this.openLinks.delete(this.openLinks.keys().next().value as string);
    return link;
  }

  whenConnected(principal: string, upstream: string, signal: AbortSignal): Promise<boolean> {
    return this.signals.whenConnected(principal, upstream, signal);
  }

  onConnected(listener: (connected: Connected) => void): () => void {
    return this.signals.onConnected(listener);
  }

  async link(id: string): Promise<{ principal: string; upstream: string } | undefined> {
    const link = await this.connections.getLink(id);
    return link === undefined ? undefined : { principal: link.principal, upstream: link.upstream };
  }

  begin(id: string, browserPrincipal: string): Promise<ConsentPage> {
    return this.flows.begin(id, browserPrincipal);
  }

  complete(params: CallbackParams): Promise<{ principal: string; upstream: string }> {
    return this.flows.complete(params);
  }

  async list(principal: string, upstreams: readonly string[]): Promise<ConnectionStatus[]> {
    const stored = new Map((await this.connections.list(principal)).map((c) => [c.upstream, c]));
    const listed: ConnectionStatus[] = [];
    for (const upstream of upstreams) {
      const settings = this.upstreamsByName.get(upstream);
      if (settings === undefined) continue;
      const connection = stored.get(upstream);
      if (connection !== undefined) {
        listed.push(connectionStatus(connection));
        continue;
      }
      const user = nameOf(principal)?.credential === 'oauth';
      const connect = user ? (await this.request(principal, upstream, 'connections')).url : undefined;
      listed.push({ upstream, connected: false, scopes: [...settings.code.scopes], ...(connect !== undefined && { connectUrl: connect }) });
    }
    return listed;
  }

  async disconnect(principal: string, upstream: string): Promise<boolean> {
    const settings = this.settings(upstream);
    const connection = await this.connections.get(principal, upstream);
    if (connection === undefined) return false;
    const revokedAtServer = await this.revoke(settings, connection);
    const deleted = await this.connections.delete(principal, upstream);
    this.tokens.forget(principal, upstream);
    this.signals.announce('removed', { principal, upstream });
    this.deps.events.emit('connection.revoked', { principal, upstream, issuer: connection.issuer, by: 'user', revokedAtServer });
    return deleted !== undefined;
  }

  /** RFC 7009: the refresh token (else the access token) revoked where the server has a revocation endpoint. */
  private async revoke(upstream: ConsentUpstream, connection: { principal: string; upstream: string; issuer: string; sealed: string }): Promise<boolean> {
    const facts = { principal: connection.principal, upstream: upstream.name, issuer: connection.issuer };
    const signal = AbortSignal.timeout(upstream.timeoutMs);
    try {
      const tokens = new ConsentVault(this.deps.sealer).openTokens(connection.sealed, connection);
      const as = await this.servers.ofIssuer(upstream, connection.issuer, signal, 'revocation');
      if (as.revocation_endpoint === undefined) return false;
      const { client, auth } = await this.clients.resolve(upstream, as, signal);
      const token = tokens.refresh_token ?? tokens.access_token;
      const response = await oauth.revocationRequest(as, client, auth, token, {
        ...this.servers.requestOptions(upstream, as.revocation_endpoint, signal),
        additionalParameters: { token_type_hint: tokens.refresh_token !== undefined ? 'refresh_token' : 'access_token' },
      });
      await oauth.processRevocationResponse(response);
      return true;
    } catch (err) {
      const failure = await credentialFailure(err, { upstream: upstream.name, step: 'revocation', timeoutMs: upstream.timeoutMs, signal, what: 'revocation (RFC 7009)' });
      this.deps.events.emit('connection.failed', { ...facts, reason: failure.oauthError ?? failure.reason, step: 'revocation' });
      this.deps.logger.warn({ ...facts, reason: failure.message }, 'could not revoke a connection at its authorization server: deleted here anyway');
      return false;
    }
  }

  private settings(upstream: string): ConsentUpstream {
    const settings = this.upstreamsByName.get(upstream);
    if (settings === undefined) throw new Error(`upstream '${upstream}' has no auth.authorizationCode`);
    return settings;
  }
}
