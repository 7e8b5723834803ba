// What both revisions' routers need from the gateway layer above them, as interfaces. The gateway's parts
// implement them and composition (src/taskgate.ts) passes them in: importing them would point up the layers.
import type { JsonObject } from '../jsonrpc.js';
import type { ListAsker, Upstream } from '../upstream/life/upstream.js';
import type { ListKind, NamedKind } from '../mcp.js';

/** The merged view of all upstreams (gateway/merged-catalog.ts), as the routers read it. */
export interface GatewayCatalog {
  readonly upstreams: readonly Upstream[];
  /**
   * Which upstream serves an exposed tool or prompt name, and its name there: only a name it listed, exactly
   * (DESIGN invariant 11); anything else is unknown and reaches no upstream.
   */
  route(kind: NamedKind, exposedName: string): { upstream: Upstream; name: string } | undefined;
  /**
   * `route`, reading the upstreams' catalogs again (bounded) when no upstream lists the name; throws the
   * upstream's unavailability when the one that would serve it is not connected. `asker`: whom the request acts
   * for (a per-principal upstream's lists are read over that principal's own child).
   */
  resolve(kind: NamedKind, exposedName: string, asker?: ListAsker): Promise<{ upstream: Upstream; name: string } | undefined>;
  /**
   * The upstream that acts as each user at their own account (issue 41) whose prefix an exposed tool or prompt name
   * carries, and the name it would have there, for a name no upstream lists: before anyone connected it, its catalog
   * is empty, and a caller is answered with the consent request rather than as for an unknown name.
   */
  consentOwner(kind: NamedKind, exposedName: string): { upstream: Upstream; name: string } | undefined;
  /** Which upstream serves a resource URI. */
  routeUri(uri: string): Upstream | undefined;
  /** `routeUri`, reading the upstreams' catalogs again (bounded) when none lists the URI. */
  resolveUri(uri: string): Promise<Upstream | undefined>;
  /** The upstream's definition of an exposed tool, when its upstream lists it. */
  tool(exposedName: string): JsonObject | undefined;
  /**
   * Resolves once the upstreams of the gateway's start have made their first attempts (bounded): the capabilities
   * and lists answered before would miss those still connecting.
   */
  whenStarted(): Promise<void>;
  /** The union of the upstreams' capabilities, as the gateway declares them to clients. */
  capabilities(): JsonObject;
  instructions(): string | undefined;
}

/** Aggregated lists in pages, the same for both revisions (gateway/list-pages.ts). */
export interface AggregatedLists {
  /**
   * One page of the list `method` names. `fetchPage` asks one upstream in the client's revision; `decorateTool`
   * gives a tool the task support the client sees; `visible` leaves out what the caller may not use.
   */
  page(
    method: string,
    params: JsonObject,
    fetchPage: (upstream: Upstream, params: JsonObject) => Promise<JsonObject>,
    decorateTool?: (tool: JsonObject, upstream: Upstream, upstreamTool: JsonObject) => JsonObject,
    visible?: (kind: ListKind, item: JsonObject) => boolean,
    ownShown?: (tool: JsonObject) => boolean,
  ): Promise<JsonObject>;
}
