import type { JsonObject } from '../jsonrpc.js';
import type { NamedKind } from '../protocol/mcp.js';
import type { UpstreamCatalog } from '../protocol/ports.js';
import type { Upstream } from '../upstream/upstream.js';

const MAX_KNOWN_URIS = 100_000;

/**
 * The merged view of all upstreams: exposed names (prefixes), which upstream serves a tool, prompt or resource
 * URI, and the capabilities the gateway offers as their union.
 */
export class Catalog implements UpstreamCatalog {
  private readonly uriOwners = new Map<string, Upstream>();

  constructor(readonly upstreams: readonly Upstream[]) {}

  expose(upstream: Upstream, item: JsonObject): JsonObject {
    const prefix = upstream.config.prefix;
    if (prefix === '' || typeof item.name !== 'string') return item;
    return { ...item, name: `${prefix}${item.name}` };
  }

  /**
   * Which upstream serves an exposed tool or prompt name, and its name there. Among upstreams whose prefix
   * matches, the one that lists the name wins (longest prefix first); an unlisted name goes to the longest
   * matching prefix, so the upstream itself reports it unknown.
   */
  route(kind: NamedKind, exposedName: string): { upstream: Upstream; name: string } | undefined {
    const candidates = this.upstreams
      .filter((u) => exposedName.startsWith(u.config.prefix) && exposedName.length > u.config.prefix.length)
      .sort((a, b) => b.config.prefix.length - a.config.prefix.length);
    const listing = candidates.find((u) => {
      const name = exposedName.slice(u.config.prefix.length);
      return u.catalog[kind].some((item) => item.name === name);
    });
    const upstream = listing ?? candidates[0];
    return upstream === undefined ? undefined : { upstream, name: exposedName.slice(upstream.config.prefix.length) };
  }

  /** The upstream's definition of an exposed tool (for its input schema), when its upstream lists it. */
  tool(exposedName: string): JsonObject | undefined {
    const route = this.route('tools', exposedName);
    return route?.upstream.catalog.tools.find((tool) => tool.name === route.name);
  }

  /** Remembers which upstream listed a resource, so reads and subscriptions go back to it. */
  noteResources(upstream: Upstream, resources: readonly JsonObject[]): void {
    if (this.uriOwners.size > MAX_KNOWN_URIS) this.uriOwners.clear();
    for (const resource of resources) if (typeof resource.uri === 'string') this.uriOwners.set(resource.uri, upstream);
  }

  routeUri(uri: string): Upstream | undefined {
    const known = this.uriOwners.get(uri);
    if (known !== undefined) return known;
    for (const upstream of this.upstreams) {
      if (upstream.catalog.resources.some((r) => r.uri === uri)) return upstream;
      if (upstream.catalog.resourceTemplates.some((t) => typeof t.uriTemplate === 'string' && templateMatches(t.uriTemplate, uri))) {
        return upstream;
      }
    }
    const withResources = this.upstreams.filter((u) => u.capabilities.resources !== undefined);
    return withResources.length === 1 ? withResources[0] : undefined;
  }

  /** Exposed tool and prompt names offered by two upstreams, as messages naming both. */
  collisions(): string[] {
    const problems: string[] = [];
    for (const kind of ['tools', 'prompts'] as const) {
      const owners = new Map<string, Upstream>();
      for (const upstream of this.upstreams) {
        for (const item of upstream.catalog[kind]) {
          const exposed = this.expose(upstream, item).name as string;
          const first = owners.get(exposed);
          if (first !== undefined && first !== upstream) {
            problems.push(
              `${kind === 'tools' ? 'tool' : 'prompt'} '${exposed}' is offered by both upstream '${first.name}' and upstream '${upstream.name}'; give them distinct prefixes`,
            );
          } else owners.set(exposed, upstream);
        }
      }
    }
    return problems;
  }

  /** The union of the upstreams' capabilities, as the gateway declares them to clients. */
  capabilities(): JsonObject {
    const merged: JsonObject = { tools: { listChanged: true } };
    for (const upstream of this.upstreams) {
      for (const [name, value] of Object.entries(upstream.capabilities)) {
        if (name === 'tasks') continue; // Task support is the gateway's own, declared by the task engine.
        const current = merged[name];
        merged[name] = typeof value === 'object' && value !== null && !Array.isArray(value)
          ? mergeFlags(current as JsonObject | undefined, value as JsonObject)
          : value;
      }
    }
    return merged;
  }

  instructions(): string | undefined {
    const parts = this.upstreams.flatMap((u) => {
      const text = u.description?.instructions;
      return typeof text === 'string' && text.trim() !== '' ? [{ name: u.name, text }] : [];
    });
    if (parts.length === 0) return undefined;
    if (this.upstreams.length === 1) return parts[0]?.text;
    return parts.map((p) => `## ${p.name}\n${p.text}`).join('\n\n');
  }
}

function mergeFlags(current: JsonObject | undefined, next: JsonObject): JsonObject {
  const merged: JsonObject = { ...(current ?? {}) };
  for (const [key, value] of Object.entries(next)) {
    if (key === '__proto__') continue; // an upstream's JSON may carry it as a key; assigning it would not add one
    const existing = merged[key];
    if (typeof value === 'boolean') merged[key] = existing === true || value;
    else if (typeof value === 'object' && value !== null && !Array.isArray(value) && typeof existing === 'object' && existing !== null) {
      merged[key] = mergeFlags(existing as JsonObject, value as JsonObject);
    } else if (existing === undefined) merged[key] = value;
  }
  return merged;
}

/** RFC 6570 match, loose: every expression matches one or more characters. */
function templateMatches(template: string, uri: string): boolean {
  const pattern = template
    .split(/\{[^}]*\}/)
    .map((literal) => literal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.+');
  return new RegExp(`^${pattern}$`).test(uri);
}
