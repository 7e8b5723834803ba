// A connected user's access token for an upstream (issue 41, the UserTokens port): read from the store on every call
// (no copy here can outlive a DELETE on another replica), refreshed once it is past half its lifetime or after the
// upstream refused it. One refresh per expiry across replicas and calls: the calls of one replica share one refresh,
// the replicas take the store's lock for it, and whoever does not get the lock waits for the record to change. A
// rotated refresh token is stored (compare and set) before the new access token is used; the old one is kept when
// none comes back; `invalid_grant` deletes the connection, and the caller is asked to connect again.
import { createHash } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import type { GatewayEvents } from '../events.js';
import { UpstreamCredentialError } from '../identity/credential-error.js';
import { credentialFailure } from '../identity/oauth-failure.js';
import { ConsentRequiredError } from '../identity/user-tokens.js';
import type { StoredConnection } from '../store/connections.js';
import type { ConsentClients, ConsentPartsDeps } from './clients.js';
import type { ConsentUpstream } from './settings.js';
import { underStoreLock } from './store-lock.js';
import type { TokenSet } from './vault.js';

/** How many (principal, upstream) pairs this replica remembers what it last served for (hashes only). */
const SERVED_LIMIT = 10_000;

/**
 * Whether a connection's access token should be refreshed now: once half its lifetime has passed (at most half its
 * lifetime early: a 4 s token is refreshed after 2 s, not on every call). Without an expiry, never by time.
 */
export function refreshDue(connection: Pick<StoredConnection, 'issuedAtMs' | 'expiresAtMs'>, now: number): boolean {
  if (connection.expiresAtMs === undefined) return false;
  return now >= connection.issuedAtMs + (connection.expiresAtMs - connection.issuedAtMs) / 2;
}

export interface ConnectionTokensDeps extends ConsentPartsDeps {
  clients: ConsentClients;
  events: GatewayEvents;
  replicaId: string;
  /** The connection was deleted here (the server refused its grant): other replicas are told. */
  removed: (principal: string, upstream: string) => void;
}

export class ConnectionTokens {
  /** Refreshes this replica runs, per (principal, upstream): its concurrent calls share one. */
  private readonly refreshing = new Map<string, Promise<string>>();
  /** What this replica last served per pair (a hash of the token), and whether a refresh token stood behind it. */
  private readonly served = new Map<string, { token: string; refreshable: boolean }>();
  /** Tokens the upstream refused (hashes), per pair: the next accessToken() refreshes instead of serving them. */
  private readonly refusedTokens = new Map<string, string>();

  constructor(private readonly deps: ConnectionTokensDeps) {}

  async accessToken(upstream: ConsentUpstream, principal: string): Promise<string> {
    const record = await this.deps.connections.get(principal, upstream.name);
    if (record === undefined) throw new ConsentRequiredError(upstream.name, principal, 'not_connected');
    const tokens = await this.open(upstream, record);
    const pair = pairKey(principal, upstream.name);
    if (this.usable(pair, record, tokens)) return this.serve(pair, tokens);
    let running = this.refreshing.get(pair);
    if (running === undefined) {
      running = this.refresh(upstream, record).finally(() => this.refreshing.delete(pair));
      this.refreshing.set(pair, running);
    }
    return running;
  }

  refused(principal: string, upstream: string, token: string): boolean {
    const pair = pairKey(principal, upstream);
    const hash = digest(token);
    remember(this.refusedTokens, pair, hash);
    const served = this.served.get(pair);
    return served !== undefined && served.token === hash && served.refreshable;
  }

  /** The pair was disconnected (here or on another replica): nothing of it is kept. */
  forget(principal: string, upstream: string): void {
    const pair = pairKey(principal, upstream);
    this.served.delete(pair);
    this.refusedTokens.delete(pair);
  }

  private usable(pair: string, record: StoredConnection, tokens: TokenSet): boolean {
    if (this.refusedTokens.get(pair) === digest(tokens.access_token)) return false;
    if (tokens.refresh_token === undefined) return record.expiresAtMs === undefined || this.deps.now() < record.expiresAtMs;
    return !refreshDue(record, this.deps.now());
  }

  /** Unexpired and not refused: usable, though due for a refresh. */
  private stillValid(pair: string, record: StoredConnection, tokens: TokenSet): boolean {
    return record.expiresAtMs !== undefined && this.deps.now() < record.expiresAtMs && this.refusedTokens.get(pair) !== digest(tokens.access_token);
  }

  private serve(pair: string, tokens: TokenSet): string {
    remember(this.served, pair, { token: digest(tokens.access_token), refreshable: tokens.refresh_token !== undefined });
    return tokens.access_token;
  }

  private async refresh(upstream: ConsentUpstream, seen: StoredConnection): Promise<string> {
    const { principal } = seen;
    const pair = pairKey(principal, upstream.name);
    const signal = AbortSignal.timeout(upstream.timeoutMs);
    let version = seen.version;
    return underStoreLock({
      connections: this.deps.connections,
      name: pair,
      replicaId: this.deps.replicaId,
      ttlMs: upstream.timeoutMs * 2,
      signal,
      work: () => this.refreshLocked(upstream, principal, signal),
      settled: async () => {
        const now = await this.deps.connections.get(principal, upstream.name);
        if (now === undefined) throw new ConsentRequiredError(upstream.name, principal, 'not_connected');
        if (now.version === version) return undefined;
        version = now.version;
        const tokens = await this.open(upstream, now);
        return this.usable(pair, now, tokens) ? this.serve(pair, tokens) : undefined;
      },
      timedOut: () => new UpstreamCredentialError({ upstream: upstream.name, step: 'refresh', reason: 'timeout', detail: `no refreshed token within ${upstream.timeoutMs} ms` }),
    });
  }

  /** Under the lock: read again (another replica may have refreshed already), refresh, store, then serve. */
  private async refreshLocked(upstream: ConsentUpstream, principal: string, signal: AbortSignal): Promise<string> {
    const pair = pairKey(principal, upstream.name);
    const current = await this.deps.connections.get(principal, upstream.name);
    if (current === undefined) throw new ConsentRequiredError(upstream.name, principal, 'not_connected');
    const tokens = await this.open(upstream, current);
    if (this.usable(pair, current, tokens)) return this.serve(pair, tokens);
    const facts = { principal, upstream: upstream.name, issuer: current.issuer };
    if (tokens.refresh_token === undefined) {
      // Nothing to refresh with: the token expired, or the upstream refused it.
      const refused = this.refusedTokens.get(pair) === digest(tokens.access_token);
      await this.drop(current, refused ? 'token_refused' : 'expired');
      throw new ConsentRequiredError(upstream.name, principal, refused ? 'grant_refused' : 'not_connected');
    }
    let answer: oauth.TokenEndpointResponse;
    try {
      const as = await this.deps.servers.ofIssuer(upstream, current.issuer, signal, 'refresh');
      const { client, auth } = await this.deps.clients.resolve(upstream, as, signal);
      const response = await oauth.refreshTokenGrantRequest(as, client, auth, tokens.refresh_token, {
        ...this.deps.servers.requestOptions(upstream, as.token_endpoint, signal),
        additionalParameters: { resource: upstream.code.resource },
      });
      answer = await oauth.processRefreshTokenResponse(as, client, response);
    } catch (err) {
      const failure = await credentialFailure(err, { upstream: upstream.name, step: 'refresh', timeoutMs: upstream.timeoutMs, signal, what: `refresh at ${current.issuer}` });
      if (failure.oauthError === 'invalid_grant') {
        await this.drop(current, 'invalid_grant');
        throw new ConsentRequiredError(upstream.name, principal, 'grant_refused');
      }
      this.deps.events.emit('connection.failed', { ...facts, reason: failure.oauthError ?? failure.reason, step: 'refresh' });
      // Refreshing ahead failed, but the token has time left and nobody refused it: the call goes on with it.
      if (this.stillValid(pair, current, tokens)) {
        this.deps.logger.warn({ principal, upstream: upstream.name, reason: failure.message }, 'could not refresh a connection ahead of its expiry: its token is used while it lasts');
        return this.serve(pair, tokens);
      }
      throw failure;
    }
    const next: TokenSet = { access_token: answer.access_token, token_type: answer.token_type, refresh_token: answer.refresh_token ?? tokens.refresh_token };
    const now = this.deps.now();
    const { expiresAtMs: _previous, ...kept } = current;
    const record: StoredConnection = {
      ...kept,
      sealed: this.deps.vault.sealTokens(next, current),
      scopes: typeof answer.scope === 'string' ? answer.scope.split(' ').filter((s) => s !== '') : current.scopes,
      ...(answer.expires_in !== undefined && { expiresAtMs: now + answer.expires_in * 1000 }),
      issuedAtMs: now,
      version: current.version + 1,
    };
    // The rotated refresh token is stored before the access token that came with it is used: a crash here loses
    // nothing the server still accepts.
    if (!(await this.deps.connections.put(record, current.version))) {
      this.deps.logger.warn({ principal, upstream: upstream.name }, 'a refreshed connection was written by someone else meanwhile (the refresh lock expired?): not using the new token');
      throw new UpstreamCredentialError({ upstream: upstream.name, step: 'refresh', reason: 'invalid_response', detail: 'the connection changed while it was being refreshed; try again' });
    }
    this.refusedTokens.delete(pair);
    this.deps.events.emit('connection.refreshed', { ...facts, rotated: answer.refresh_token !== undefined && answer.refresh_token !== tokens.refresh_token });
    return this.serve(pair, next);
  }

  /** The server refused the grant (or the token expired with nothing to refresh it): the connection goes. */
  private async drop(record: StoredConnection, reason: 'invalid_grant' | 'expired' | 'token_refused'): Promise<void> {
    const { principal, upstream, issuer } = record;
    const stored = await this.deps.connections.get(principal, upstream);
    // A connection made again meanwhile (another version) is not this one.
    if (stored !== undefined && stored.version === record.version) await this.deps.connections.delete(principal, upstream);
    this.forget(principal, upstream);
    this.deps.removed(principal, upstream);
    this.deps.events.emit('connection.failed', { principal, upstream, issuer, reason, step: 'refresh' });
    this.deps.events.emit('connection.revoked', { principal, upstream, issuer, by: 'server', revokedAtServer: reason !== 'expired' });
  }

  /** The record's tokens; one that no longer opens (a sealing key removed, an altered record) is as good as none. */
  private async open(upstream: ConsentUpstream, record: StoredConnection): Promise<TokenSet> {
    try {
      return this.deps.vault.openTokens(record.sealed, record);
    } catch (err) {
      this.deps.logger.warn({ principal: record.principal, upstream: upstream.name, reason: (err as Error).message }, 'a stored connection does not open: it is deleted');
      await this.deps.connections.delete(record.principal, record.upstream);
      throw new ConsentRequiredError(upstream.name, record.principal, 'not_connected');
    }
  }
}

export function pairKey(principal: string, upstream: string): string {
  return `${principal}\0${upstream}`;
}

function digest(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

/** Sets `key` as the newest entry, dropping the oldest past SERVED_LIMIT. */
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > SERVED_LIMIT) map.delete(map.keys().next().value as string);
}
