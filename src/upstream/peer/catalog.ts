// What an upstream offers (tools, prompts, resources, templates), read whole from it in whichever revision it
// speaks, following its pagination.
import type { JsonObject, Outcome } from '../../jsonrpc.js';

export interface UpstreamCatalog {
  tools: JsonObject[];
  prompts: JsonObject[];
  resources: JsonObject[];
  resourceTemplates: JsonObject[];
}

/** Items of both, by name (or URI); `preferred`'s definition wins where both have one. */
export function mergeCatalogs(preferred: UpstreamCatalog, other: UpstreamCatalog): UpstreamCatalog {
  const merge = (a: JsonObject[], b: JsonObject[], key: string): JsonObject[] => {
    const seen = new Set(a.map((item) => item[key]));
    return [...a, ...b.filter((item) => !seen.has(item[key]))];
  };
  return {
    tools: merge(preferred.tools, other.tools, 'name'),
    prompts: merge(preferred.prompts, other.prompts, 'name'),
    resources: merge(preferred.resources, other.resources, 'uri'),
    resourceTemplates: merge(preferred.resourceTemplates, other.resourceTemplates, 'uriTemplate'),
  };
}

/** Everything the upstream offers, per its capabilities; `fetchPage` asks for one page of one list. */
export async function fetchCatalog(caps: JsonObject, fetchPage: (method: string, params: JsonObject) => Promise<Outcome>): Promise<UpstreamCatalog> {
  const list = (method: string, key: string): Promise<JsonObject[]> => listAll((page) => fetchPage(method, page), method, key);
  const [tools, prompts, resources, resourceTemplates] = await Promise.all([
    caps.tools ? list('tools/list', 'tools') : [],
    caps.prompts ? list('prompts/list', 'prompts') : [],
    caps.resources ? list('resources/list', 'resources') : [],
    caps.resources ? list('resources/templates/list', 'resourceTemplates') : [],
  ]);
  return { tools, prompts, resources, resourceTemplates };
}

/** Every item of a paginated list; `fetchPage` asks for one page in whichever revision the upstream speaks. */
async function listAll(fetchPage: (params: JsonObject) => Promise<Outcome>, method: string, key: string): Promise<JsonObject[]> {
  const items: JsonObject[] = [];
  let cursor: unknown;
  for (let page = 0; page < 1000; page++) {
    const outcome = await fetchPage(cursor === undefined ? {} : { cursor });
    if ('error' in outcome) throw new Error(`${method} failed: ${outcome.error.message}`);
    const list = outcome.result[key];
    if (Array.isArray(list)) items.push(...(list as JsonObject[]));
    cursor = outcome.result.nextCursor;
    if (cursor === undefined || cursor === null) break;
  }
  return items;
}
