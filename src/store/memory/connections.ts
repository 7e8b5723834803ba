// Per-user connections in the embedded store (store.connections), twin of redis/connections.ts in one process: each
// step is synchronous, so compare-and-set, single-use takes and first-wins registration need nothing more. Links,
// flows and locks expire on this store's clock: whatever reads one past its time finds nothing, and sweep() drops
// those nobody reads. Records are copied in and out: no caller holds the store's own.
import type { ClientRegistration, ConsentFlow, ConsentLink, Connections, StoredConnection } from '../connections.js';

interface HeldLock {
  owner: string;
  expiresAtMs: number;
}

export class MemoryConnections implements Connections {
  /** Principal → upstream → connection. */
  private readonly connections = new Map<string, Map<string, StoredConnection>>();
  private readonly links = new Map<string, ConsentLink>();
  private readonly flows = new Map<string, ConsentFlow>();
  /** `JSON.stringify([issuer, redirectUri])` → registration. */
  private readonly registrations = new Map<string, ClientRegistration>();
  private readonly locks = new Map<string, HeldLock>();

  constructor(private readonly now: () => number) {}

  async get(principal: string, upstream: string): Promise<StoredConnection | undefined> {
    const connection = this.connections.get(principal)?.get(upstream);
    return connection === undefined ? undefined : structuredClone(connection);
  }

  async list(principal: string): Promise<StoredConnection[]> {
    const mine = this.connections.get(principal);
    if (mine === undefined) return [];
    return [...mine.keys()].sort().map((upstream) => structuredClone(mine.get(upstream) as StoredConnection));
  }

  async put(connection: StoredConnection, expectedVersion: number): Promise<boolean> {
    if (!Number.isSafeInteger(expectedVersion) || expectedVersion < 0) throw new RangeError(`a connection's expected version is a whole number ≥ 0, not ${expectedVersion}`);
    const { principal, upstream } = connection;
    const stored = this.connections.get(principal)?.get(upstream);
    if ((stored?.version ?? 0) !== expectedVersion) return false;
    let mine = this.connections.get(principal);
    if (mine === undefined) this.connections.set(principal, (mine = new Map()));
    mine.set(upstream, { ...structuredClone(connection), version: expectedVersion + 1 });
    return true;
  }

  async delete(principal: string, upstream: string): Promise<StoredConnection | undefined> {
    const mine = this.connections.get(principal);
    const stored = mine?.get(upstream);
    if (mine === undefined || stored === undefined) return undefined;
    mine.delete(upstream);
    if (mine.size === 0) this.connections.delete(principal);
    return stored;
  }

  async anyConnected(upstream: string): Promise<string | undefined> {
    for (const [principal, mine] of this.connections) if (mine.has(upstream)) return principal;
    return undefined;
  }

  async putLink(link: ConsentLink): Promise<void> {
    this.links.set(link.id, structuredClone(link));
  }

  async getLink(id: string): Promise<ConsentLink | undefined> {
    const link = this.live(this.links, id);
    return link === undefined ? undefined : structuredClone(link);
  }

  async takeLink(id: string): Promise<ConsentLink | undefined> {
    const link = this.live(this.links, id);
    this.links.delete(id);
    return link;
  }

  async putFlow(flow: ConsentFlow): Promise<void> {
    this.flows.set(flow.state, structuredClone(flow));
  }

  async takeFlow(state: string): Promise<ConsentFlow | undefined> {
    const flow = this.live(this.flows, state);
    this.flows.delete(state);
    return flow;
  }

  async registration(issuer: string, redirectUri: string): Promise<ClientRegistration | undefined> {
    const registration = this.registrations.get(registrationKey(issuer, redirectUri));
    return registration === undefined ? undefined : structuredClone(registration);
  }

  async register(registration: ClientRegistration): Promise<ClientRegistration> {
    const key = registrationKey(registration.issuer, registration.redirectUri);
    const stored = this.registrations.get(key);
    if (stored !== undefined) return structuredClone(stored);
    this.registrations.set(key, structuredClone(registration));
    return registration;
  }

  async lock(name: string, owner: string, ttlMs: number): Promise<boolean> {
    if (this.live(this.locks, name) !== undefined) return false;
    this.locks.set(name, { owner, expiresAtMs: this.now() + Math.max(1, Math.ceil(ttlMs)) });
    return true;
  }

  async unlock(name: string, owner: string): Promise<void> {
    if (this.live(this.locks, name)?.owner === owner) this.locks.delete(name);
  }

  /** Drops the links, flows and locks past their time. */
  sweep(): void {
    for (const entries of [this.links, this.flows, this.locks] as Map<string, { expiresAtMs: number }>[]) {
      for (const key of [...entries.keys()]) this.live(entries, key);
    }
  }

  /** The entry under `key` unless past its time (then dropped). */
  private live<T extends { expiresAtMs: number }>(entries: Map<string, T>, key: string): T | undefined {
    const entry = entries.get(key);
    if (entry !== undefined && entry.expiresAtMs <= this.now()) {
      entries.delete(key);
      return undefined;
    }
    return entry;
  }
}

/** One key per (issuer, redirect URI) pair, whatever characters either holds. */
function registrationKey(issuer: string, redirectUri: string): string {
  return JSON.stringify([issuer, redirectUri]);
}
