// When one upstream's catalog (what calls are routed by: peer/catalog.ts) is read again, and by whom: after its
// `list_changed`, after a client session's connection said a list changed (reads coalesced), when a client named
// something unlisted, and, for a per-principal stdio upstream with no control child, over a principal's own child.
// The catalog is replaced whole after each read: calls route on it meanwhile, and must not see half of it.
import type { JsonObject } from '../../jsonrpc.js';
import type { Logger } from '../../log.js';
import type { ActingFor } from '../peer/adapter.js';
import { fetchCatalog, type UpstreamCatalog } from '../peer/catalog.js';
import type { UpstreamConnection } from '../peer/connection.js';

/** Who asks for an upstream's lists to be read again (a client named something unlisted): whom the gateway acts for. */
export interface ListAsker {
  actingFor: ActingFor | undefined;
}

/** What the reads need of their upstream. */
export interface CatalogSource {
  readonly logger: Logger;
  readonly requestTimeoutMs: number;
  /** Everything the upstream lists over its control connection, in each revision it speaks (undefined: not now). */
  readCatalog(): Promise<UpstreamCatalog | undefined>;
  /** The catalog changed, or was read for the first time since the upstream (re)connected: clients are told. */
  changed(reconnected: boolean): void;
  /** The upstream is closing: a read cut short is no news. */
  closed(): boolean;
  /** What the upstream offers, as far as the gateway knows (a child's lists are read per its capabilities). */
  capabilities(): JsonObject;
  /**
   * A per-principal upstream: the asker's own child, started for it if it has none (whose start reads its lists:
   * learnFrom). Undefined for every other upstream, whose lists are read over its control connection.
   */
  readonly childFor: ((asker: ListAsker) => Promise<UpstreamConnection>) | undefined;
}

export class CatalogReads {
  catalog: UpstreamCatalog = { tools: [], prompts: [], resources: [], resourceTemplates: [] };
  /**
   * What a per-principal upstream's children said in their handshake (the latest to start): such an upstream has
   * no control child (one with no principal would run with its caller placeholders unfilled, and a server that
   * checks its environment would refuse to start), so its capabilities and catalog come from its principals' own.
   */
  childrenSaid: JsonObject | undefined;
  /** How many times a child's lists were read: a miss that started a child need not read them twice. */
  private childListReads = 0;
  /** The last read reread() started, and the one waiting behind it (calls meanwhile share it). */
  private lastRead: Promise<void> = Promise.resolve();
  private nextRead: Promise<void> | undefined;

  constructor(private readonly source: CatalogSource) {}

  /** Lists everything the upstream offers over its control connection; the last reading stands when it cannot. */
  async read(): Promise<void> {
    this.catalog = (await this.source.readCatalog()) ?? this.catalog;
  }

  /**
   * Reads the catalog again after the upstream's `list_changed`, before the notification is passed on: a client that
   * hears of the change and names the new tool at once must find it routed. Resolves whether or not the read worked.
   */
  afterListChanged(): Promise<void> {
    return this.read()
      .then(() => this.source.changed(false))
      .catch((error: Error) => {
        // A refresh cut short because the gateway is closing the upstream (a failed start, shutdown) is no news.
        if (this.source.closed()) this.source.logger.debug({ err: error }, 'catalog refresh stopped: the upstream is closing');
        else this.source.logger.warn({ reason: error.message }, 'catalog refresh failed');
      });
  }

  /**
   * Reads the catalog again after a client session's connection said a list changed (every session's connection
   * may say so at once): one read runs at a time, and every call made while one runs shares the one read after it,
   * which sees the change. Resolves whether or not the read worked; clients hear of a change as after `list_changed`.
   */
  reread(): Promise<void> {
    if (this.nextRead !== undefined) return this.nextRead;
    const read: Promise<void> = this.lastRead
      .then(() => {
        this.nextRead = undefined;
        return this.read();
      })
      .then(() => this.source.changed(false))
      .catch((error: Error) => {
        if (!this.source.closed()) this.source.logger.warn({ reason: error.message }, 'catalog refresh failed');
      });
    this.nextRead = read;
    this.lastRead = read;
    return read;
  }

  /**
   * Reads the catalog again because a client named something it does not list (gateway/listed-refresh.ts bounds
   * how often); clients hear of it when it changed, as after `list_changed`.
   */
  async refreshListed(asker?: ListAsker): Promise<void> {
    const childFor = this.source.childFor;
    if (childFor !== undefined) {
      // Lists are read over a principal's own child: the asker's, started for it if it has none (then it was just read).
      if (asker === undefined) return;
      const reads = this.childListReads;
      const connection = await childFor(asker);
      if (this.childListReads === reads) await this.learnFrom(connection);
      return;
    }
    const before = JSON.stringify(this.catalog);
    await this.read();
    if (JSON.stringify(this.catalog) !== before) this.source.changed(false);
  }

  /**
   * A per-principal child's lists become the upstream's catalog (what calls are routed by): read when a child
   * starts (`said`: its handshake's answer), when one says its lists changed, and on a miss. Clients are told when
   * it changed.
   */
  async learnFrom(connection: UpstreamConnection, said?: JsonObject): Promise<void> {
    this.childListReads++;
    const firstHeard = this.childrenSaid === undefined;
    if (said !== undefined) this.childrenSaid = said;
    const timeoutMs = this.source.requestTimeoutMs;
    const catalog = await fetchCatalog(this.source.capabilities(), (method, page) => connection.request(method, page, undefined, timeoutMs).outcome);
    if (this.source.closed()) return;
    const changed = JSON.stringify(catalog) !== JSON.stringify(this.catalog);
    this.catalog = catalog;
    if (changed || firstHeard) this.source.changed(firstHeard);
  }
}
