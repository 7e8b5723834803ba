// Per-user connections on Redis (store.connections). A connection is a hash (its version and its JSON record) under
// its upstream's hash tag, beside the set of principals connected to that upstream: put-connection.lua (compare and
// set) and delete-connection.lua keep both in one step. Links and flows are JSON strings that Redis expires itself
// and GETDEL takes (one taker, however many race); a registration is written once (SET NX); a lock is its owner's
// name (SET NX PX), released by unlock.lua only for that owner. The embedded store's twin is memory/connections.ts.
import type { ClientRegistration, ConsentFlow, ConsentLink, Connections, StoredConnection } from '../connections.js';
import type { RedisClient } from '../redis-connection.js';
import type { RedisKeys } from '../redis-keys.js';
import type { RunScript } from './scripts.js';

/** How many times register() tries again when the registration it lost to is gone before it could be read. */
const REGISTER_ATTEMPTS = 3;

export class RedisConnections implements Connections {
  constructor(
    private readonly run: RunScript,
    private readonly keys: RedisKeys,
    private readonly redis: RedisClient,
  ) {}

  async get(principal: string, upstream: string): Promise<StoredConnection | undefined> {
    const [version, record] = await this.redis.hmget(this.keys.connection(principal, upstream), 'version', 'record');
    return connectionOf(version, record);
  }

  async list(principal: string): Promise<StoredConnection[]> {
    const upstreams = await this.redis.smembers(this.keys.principalConnections(principal));
    // One command per upstream: each record is in its upstream's slot (a handful per principal).
    const found = await Promise.all(upstreams.sort().map((upstream) => this.get(principal, upstream)));
    return found.filter((connection) => connection !== undefined);
  }

  async put(connection: StoredConnection, expectedVersion: number): Promise<boolean> {
    if (!Number.isSafeInteger(expectedVersion) || expectedVersion < 0) throw new RangeError(`a connection's expected version is a whole number ≥ 0, not ${expectedVersion}`);
    const { principal, upstream } = connection;
    // The principal's index is in another slot: written first, a replica lost before the record leaves a member
    // that list() reads as no connection, never a record list() misses.
    await this.redis.sadd(this.keys.principalConnections(principal), upstream);
    const record = JSON.stringify({ ...connection, version: expectedVersion + 1 });
    const written = await this.run('put-connection', this.keys.connection(principal, upstream), this.keys.connectedPrincipals(upstream), String(expectedVersion), record, principal);
    return written === 1;
  }

  async delete(principal: string, upstream: string): Promise<StoredConnection | undefined> {
    const record = (await this.run('delete-connection', this.keys.connection(principal, upstream), this.keys.connectedPrincipals(upstream), principal)) as string | null;
    return record === null ? undefined : (JSON.parse(record) as StoredConnection);
  }

  async anyConnected(upstream: string): Promise<string | undefined> {
    return (await this.redis.srandmember(this.keys.connectedPrincipals(upstream))) ?? undefined;
  }

  async putLink(link: ConsentLink): Promise<void> {
    await this.putExpiring(this.keys.consentLink(link.id), link, link.expiresAtMs);
  }

  async getLink(id: string): Promise<ConsentLink | undefined> {
    return parsed<ConsentLink>(await this.redis.get(this.keys.consentLink(id)));
  }

  async takeLink(id: string): Promise<ConsentLink | undefined> {
    return parsed<ConsentLink>(await this.redis.getdel(this.keys.consentLink(id)));
  }

  async putFlow(flow: ConsentFlow): Promise<void> {
    await this.putExpiring(this.keys.consentFlow(flow.state), flow, flow.expiresAtMs);
  }

  async takeFlow(state: string): Promise<ConsentFlow | undefined> {
    return parsed<ConsentFlow>(await this.redis.getdel(this.keys.consentFlow(state)));
  }

  async registration(issuer: string, redirectUri: string): Promise<ClientRegistration | undefined> {
    return parsed<ClientRegistration>(await this.redis.get(this.keys.clientRegistration(issuer, redirectUri)));
  }

  async register(registration: ClientRegistration): Promise<ClientRegistration> {
    const key = this.keys.clientRegistration(registration.issuer, registration.redirectUri);
    for (let attempt = 0; attempt < REGISTER_ATTEMPTS; attempt++) {
      if ((await this.redis.set(key, JSON.stringify(registration), 'NX')) === 'OK') return registration;
      const stored = parsed<ClientRegistration>(await this.redis.get(key));
      if (stored !== undefined) return stored;
    }
    throw new Error(`the client registration at ${registration.issuer} kept vanishing while it was being stored`);
  }

  async lock(name: string, owner: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(this.keys.lock(name), owner, 'PX', wholeMs(ttlMs), 'NX')) === 'OK';
  }

  async unlock(name: string, owner: string): Promise<void> {
    await this.run('unlock', this.keys.lock(name), owner);
  }

  /**
   * Stores `value` until `expiresAtMs` on this replica's clock (a relative PX: Redis's own clock need not agree
   * with the replicas'). One already past it is not written: it could never be read.
   */
  private async putExpiring(key: string, value: ConsentLink | ConsentFlow, expiresAtMs: number): Promise<void> {
    const ttlMs = Math.ceil(expiresAtMs - Date.now());
    if (ttlMs <= 0) return;
    await this.redis.set(key, JSON.stringify(value), 'PX', ttlMs);
  }
}

/** A connection's record at the version its hash holds (the one the next put compares with). */
function connectionOf(version: string | null | undefined, record: string | null | undefined): StoredConnection | undefined {
  if (record === null || record === undefined || version === null || version === undefined) return undefined;
  return { ...(JSON.parse(record) as StoredConnection), version: Number(version) };
}

function parsed<T>(text: string | null): T | undefined {
  return text === null ? undefined : (JSON.parse(text) as T);
}

/** A TTL Redis takes: whole milliseconds, at least one. */
function wholeMs(ms: number): number {
  return Math.max(1, Math.ceil(ms));
}
