// The sides of one upstream (adapter.ts), one per revision that may speak to it as configured, in the registry's
// order (stateless first): which ones it speaks, what it says about itself, its catalog merged over them, and
// which side a neutral call goes to. Nothing here knows a revision by name.
import type { TaskMode } from '../../config/types.js';
import type { JsonObject, JsonRpcNotification } from '../../jsonrpc.js';
import type { SessionIdentity, UpstreamSide } from './adapter.js';
import { mergeCatalogs, type UpstreamCatalog } from './catalog.js';

/** Names (and URIs) one side lists, by kind. */
type Listed = Record<'tools' | 'prompts' | 'resources', Set<unknown>>;

export class UpstreamSides {
  /** What each side listed when last read: a name only one side lists is called on that side. */
  private readonly listed = new Map<UpstreamSide, Listed>();

  constructor(private readonly all: readonly UpstreamSide[]) {}

  /** The side of a revision, while the upstream speaks it. */
  side(revision: string): UpstreamSide | undefined {
    return this.all.find((side) => side.revision === revision && side.speaks);
  }

  /** The sides the upstream speaks, in the registry's order. */
  get speaking(): UpstreamSide[] {
    return this.all.filter((side) => side.speaks);
  }

  /** The side whose word about the upstream counts: a session revision's first (its handshake says most). */
  private get first(): UpstreamSide | undefined {
    return this.speaking.at(-1);
  }

  get capabilities(): JsonObject {
    return this.first?.capabilities ?? {};
  }

  get description(): JsonObject | undefined {
    return this.first?.description;
  }

  /** The upstream's server info and the versions it speaks, for /readyz. */
  get status(): { serverInfo: unknown; protocols: string[] } {
    return {
      serverInfo: this.speaking.reverse().map((side) => side.serverInfo).find((info) => info !== undefined),
      protocols: this.speaking.map((side) => String(side.protocolVersion)),
    };
  }

  /** The handshake a client session's own connection opens with, if a revision with sessions may be spoken. */
  get sessionHandshake(): ((identity: SessionIdentity) => JsonObject) | undefined {
    return this.all.find((side) => side.sessionHandshake !== undefined)?.sessionHandshake;
  }

  /** Asks each side whether the upstream speaks its revision; resolves with why none does, if none does. */
  async connect(): Promise<string | undefined> {
    let failure: string | undefined;
    for (const side of this.all) failure = (await side.connect()) ?? failure;
    return this.speaking.length > 0 ? undefined : (failure ?? 'it speaks no revision the gateway speaks');
  }

  /**
   * The side a neutral call goes to: the one side that lists its name, if only one does; else the last the
   * upstream speaks in the registry's order (a session revision: the call is a plain request there); while it
   * speaks none, the side with sessions (its connection may open now).
   */
  sideFor(method: string, params: JsonObject): UpstreamSide | undefined {
    const speaking = this.speaking;
    const named = namedIn(method, params);
    if (speaking.length > 1 && named !== undefined) {
      const listing = speaking.filter((side) => this.listed.get(side)?.[named.kind].has(named.name) === true);
      if (listing.length === 1) return listing[0];
    }
    return speaking.at(-1) ?? this.all.find((side) => side.sessionHandshake !== undefined) ?? this.all.at(-1);
  }

  /** How the upstream runs a tool (`tool`: as listed) as a task of its own, on the side a call of it goes to. */
  taskSupportOf(name: string, tool: JsonObject | undefined): TaskMode {
    return this.sideFor('tools/call', { name })?.taskSupportOf(tool) ?? 'forbidden';
  }

  /**
   * Everything the upstream lists in each revision it speaks, merged: it may offer more (or richer definitions)
   * in one, the registry's first side's definition winning. Undefined: no side could be read now.
   */
  async readCatalog(): Promise<UpstreamCatalog | undefined> {
    const catalogs: UpstreamCatalog[] = [];
    for (const side of this.speaking) {
      const catalog = await side.readCatalog();
      if (catalog === undefined) continue; // not readable now (its connection is down): its last listing stands
      catalogs.push(catalog);
      this.listed.set(side, listedIn(catalog));
    }
    const [first, ...rest] = catalogs;
    return first === undefined ? undefined : rest.reduce(mergeCatalogs, first);
  }

  /** Follows what each side tells the gateway itself (list changes above all). */
  watch(onMessage: (message: JsonRpcNotification) => void): void {
    for (const side of this.speaking) side.watch(onMessage);
  }

  async subscribe(uri: string): Promise<void> {
    await Promise.all(this.speaking.map((side) => side.subscribe(uri)));
  }

  async stop(): Promise<void> {
    await Promise.all(this.all.map((side) => side.stop()));
  }
}

function listedIn(catalog: UpstreamCatalog): Listed {
  return {
    tools: new Set(catalog.tools.map((tool) => tool.name)),
    prompts: new Set(catalog.prompts.map((prompt) => prompt.name)),
    resources: new Set(catalog.resources.map((resource) => resource.uri)),
  };
}

/** What a call names in the lists, if it names something listed. */
function namedIn(method: string, params: JsonObject): { kind: keyof Listed; name: unknown } | undefined {
  if (method === 'tools/call') return { kind: 'tools', name: String(params.name) };
  if (method === 'prompts/get') return { kind: 'prompts', name: String(params.name) };
  if (method === 'resources/read') return { kind: 'resources', name: String(params.uri) };
  return undefined;
}
