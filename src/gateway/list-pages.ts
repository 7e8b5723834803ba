// Aggregated lists (tools, prompts, resources, templates) in pages, the same for both revisions: answered from the
// catalog the gateway holds of each upstream (read by its own connection, kept fresh by list_changed), or, for an
// upstream that lists per caller, asked of it as the caller, every such upstream at once; a signed cursor says where
// the next page begins.
import { GatewayError } from '../errors.js';
import type { JsonObject } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import type { CursorCodec } from '../store/task-store.js';
import type { Upstream } from '../upstream/life/upstream.js';
import { LIST_METHODS, type ListKind } from '../mcp.js';
import type { AggregatedLists } from '../protocol/ports.js';
import type { MergedCatalog } from './merged-catalog.js';

/**
 * Where the next page of an aggregated list starts: at upstream `upstream`, on its page `cursor` (its first page
 * when absent), after `skip` of that page's items.
 */
export interface ListPosition {
  upstream: string;
  cursor?: unknown;
  skip: number;
}

/**
 * Cursors of aggregated lists, signed with the store's shared secret: any replica continues a list, and a
 * client can neither read nor forge where one points (nor use a tools/list cursor for prompts/list).
 */
export class ListCursors {
  constructor(private readonly codec: () => Promise<CursorCodec>) {}

  async encode(method: string, position: ListPosition): Promise<string> {
    return (await this.codec()).encode(method, JSON.stringify(position));
  }

  async decode(method: string, cursor: unknown): Promise<ListPosition> {
    if (typeof cursor !== 'string') throw new GatewayError('invalid_params', 'Invalid cursor: expected a string');
    const codec = await this.codec();
    let position: unknown;
    try {
      position = JSON.parse(codec.decode(method, cursor));
    } catch {
      throw new GatewayError('invalid_params', 'Invalid cursor');
    }
    const { upstream, skip } = (position ?? {}) as Partial<ListPosition>;
    if (typeof upstream !== 'string' || typeof skip !== 'number') throw new GatewayError('invalid_params', 'Invalid cursor');
    return position as ListPosition;
  }
}

export interface ListPagesDeps {
  catalog: MergedCatalog;
  logger: Logger;
  /** lists.pageSize (a config reload may change it: reconfigure). */
  pageSize: number;
  cursors: ListCursors;
  /**
   * The gateway's own tools (the task tools): first on the first page of tools/list, for every caller (they act
   * only on the caller's own tasks). An upstream tool of the same name is left out: calls reach the gateway's.
   */
  ownTools?: readonly JsonObject[];
}

export class ListPages implements AggregatedLists {
  private readonly catalog: MergedCatalog;
  private readonly logger: Logger;
  private pageSize: number;
  private readonly cursors: ListCursors;
  private ownTools: readonly JsonObject[];

  constructor(deps: ListPagesDeps) {
    ({ catalog: this.catalog, logger: this.logger, pageSize: this.pageSize, cursors: this.cursors } = deps);
    this.ownTools = deps.ownTools ?? [];
    this.ownNames = new Set(this.ownTools.map((tool) => tool.name));
  }

  private ownNames: ReadonlySet<unknown>;
  private readonly shadowed = new Set<string>();

  /** A config reload's page size and task tools: the next list uses them. */
  reconfigure(pageSize: number, ownTools: readonly JsonObject[]): void {
    this.pageSize = pageSize;
    this.ownTools = ownTools;
    this.ownNames = new Set(ownTools.map((tool) => tool.name));
  }

  /**
   * One page of an aggregated list. Every upstream that offers the list is asked at once, and their items come in
   * one page in upstream order (most hosts read only the first page): the page ends early only past
   * `lists.pageSize` items or where an upstream paginates itself, and a signed cursor says where the next begins.
   * Items are as the upstream's selection exposes them (left out, renamed), names with their prefixes. `fetchPage` asks one upstream in the client's era.
   */
  async page(
    method: string,
    params: JsonObject,
    fetchPage: (upstream: Upstream, params: JsonObject) => Promise<JsonObject>,
    decorateTool: (tool: JsonObject, upstream: Upstream, upstreamTool: JsonObject) => JsonObject = (tool) => tool,
    visible: (kind: ListKind, item: JsonObject) => boolean = () => true,
    /** Which of the gateway's own tools the caller sees (the approval tools: approvers only). */
    ownShown: (tool: JsonObject) => boolean = () => true,
  ): Promise<JsonObject> {
    const { key, capability } = LIST_METHODS.get(method) ?? { key: 'tools', capability: 'tools' };
    // Asked while the gateway starts: the upstreams still making their first attempt are waited for (bounded).
    await this.catalog.whenStarted();
    // An upstream that is down is left out (it shows in /readyz; list_changed follows when it is back) rather
    // than making every list wait for its connect timeout.
    const offers = (u: Upstream): boolean => u.state === 'ready' && u.capabilities[capability] !== undefined;
    let upstreams = this.catalog.upstreams.filter(offers);
    let start: ListPosition | undefined;
    if (params.cursor !== undefined) {
      start = await this.cursors.decode(method, params.cursor);
      const from = this.catalog.upstreams.findIndex((u) => u.name === start?.upstream);
      if (from < 0) throw new GatewayError('invalid_params', 'Invalid cursor: it names no configured upstream');
      upstreams = this.catalog.upstreams.slice(from).filter(offers);
      if (upstreams[0]?.name !== start.upstream) start = undefined; // it went down since: its followers go on
    }
    const pageOf = (upstream: Upstream, pageParams: JsonObject): Promise<JsonObject> =>
      // The gateway's own catalog of an upstream lists the same for every caller: answered from it, no upstream
      // session is opened (nor waited for) to list. An upstream told who each caller is may list differently per
      // caller (per-caller credentials, per-principal children): asked as that caller.
      upstream.actsPerCaller ? fetchPage(upstream, pageParams) : Promise.resolve({ [key]: upstream.catalog[key] });
    const pages = await Promise.all(
      upstreams.map((upstream, i) =>
        pageOf(upstream, i === 0 && start?.cursor !== undefined ? { cursor: start.cursor } : {}).catch((error: unknown) => {
          // One broken upstream must not hide the others' items; it is visible in /readyz and the log.
          this.logger.warn({ upstream: upstream.name, method, reason: (error as Error).message }, 'upstream left out of a list');
          return undefined;
        }),
      ),
    );
    const items: JsonObject[] = key === 'tools' && params.cursor === undefined ? this.ownTools.filter(ownShown) : [];
    const result: JsonObject = {};
    for (const [i, page] of pages.entries()) {
      const upstream = upstreams[i] as Upstream;
      if (page === undefined) continue;
      const listed = Array.isArray(page[key]) ? (page[key] as JsonObject[]) : [];
      // What the upstream's selection leaves out is gone before paging: cursors count exposed items only.
      const selected = listed.flatMap((item) => {
        const shown = this.catalog.present(upstream, key, item);
        if (shown === undefined) return [];
        return [key === 'tools' ? decorateTool(shown, upstream, item) : shown];
      });
      if (key === 'resources') this.catalog.noteResources(upstream, selected);
      const skip = i === 0 ? (start?.skip ?? 0) : 0;
      const exposed = selected.filter((item) => visible(key, item) && !(key === 'tools' && this.shadows(upstream, item))).slice(skip);
      const room = Math.max(0, this.pageSize - items.length);
      if (exposed.length > room) {
        items.push(...exposed.slice(0, room));
        const rest: ListPosition = { upstream: upstream.name, skip: skip + room };
        if (i === 0 && start?.cursor !== undefined) rest.cursor = start.cursor;
        result.nextCursor = await this.cursors.encode(method, rest);
        break;
      }
      items.push(...exposed);
      const next = page.nextCursor;
      if (typeof next === 'string' && next !== '') {
        // The upstream paginates itself: the page ends with its page, and goes on with its next one.
        result.nextCursor = await this.cursors.encode(method, { upstream: upstream.name, cursor: next, skip: 0 });
        break;
      }
    }
    return { [key]: items, ...result };
  }

  /** Whether an upstream tool has the name of one of the gateway's own (said once per name in the log). */
  private shadows(upstream: Upstream, tool: JsonObject): boolean {
    if (!this.ownNames.has(tool.name)) return false;
    if (!this.shadowed.has(tool.name as string)) {
      this.shadowed.add(tool.name as string);
      this.logger.warn({ upstream: upstream.name, tool: tool.name }, 'an upstream tool has the name of a task tool of the gateway and is hidden: rename the task tools (tasks.taskTools) or prefix the upstream');
    }
    return true;
  }
}
