import type { JsonObject } from '../jsonrpc.js';
import type { ListKind, NamedKind } from '../protocol/mcp.js';
import type { GatewayCatalog } from '../protocol/ports.js';
import type { Upstream } from '../upstream/upstream.js';
import type { UpstreamConfig } from '../config/types.js';
import { selectionOf, type UpstreamSelection } from './tool-selection.js';

const MAX_KNOWN_URIS = 100_000;

/**
 * The merged view of all upstreams: exposed names (each upstream's selection and prefix), which upstream serves a
 * tool, prompt or resource URI, and the capabilities the gateway offers as their union.
 */
export class MergedCatalog implements GatewayCatalog {
  private readonly uriOwners = new Map<string, Upstream>();
  /** Selections a config reload gave running upstreams, by upstream name; others use their own config's. */
  private selections = new Map<string, UpstreamSelection>();

  /** `configs`: where the upstreams' selections come from, when not from the configs they were started with. */
  constructor(readonly upstreams: readonly Upstream[], configs?: readonly UpstreamConfig[]) {
    if (configs !== undefined) this.reselect(configs);
  }

  /**
   * A config reload's selections (`tools`, `prompts`, `resources` per upstream): they apply from the next
   * request on, to the running upstreams, without reconnecting them.
   */
  reselect(configs: readonly UpstreamConfig[]): void {
    this.selections = new Map(configs.map((config) => [config.name, selectionOf(config)]));
    this.uriOwners.clear(); // noted under the old selections
  }

  private selectionFor(upstream: Upstream): UpstreamSelection {
    return this.selections.get(upstream.name) ?? selectionOf(upstream.config);
  }

  /**
   * A listed item as clients see it, or undefined when the upstream's selection leaves it out: tools renamed and
   * re-described by their overrides, tool and prompt names with the upstream's prefix.
   */
  present(upstream: Upstream, kind: ListKind, item: JsonObject): JsonObject | undefined {
    const selection = this.selectionFor(upstream);
    switch (kind) {
      case 'tools': {
        const tool = selection.presentTool(item);
        return tool === undefined ? undefined : withPrefix(upstream, tool);
      }
      case 'prompts':
        return selection.exposesPrompt(item.name) ? withPrefix(upstream, item) : undefined;
      case 'resources':
        return selection.exposesResource(item.uri) ? item : undefined;
      case 'resourceTemplates':
        return selection.exposesResource(item.uriTemplate) ? item : undefined;
    }
  }

  /**
   * Which upstream serves an exposed tool or prompt name, and its name there. Among upstreams whose prefix
   * matches, the one that lists the name wins (longest prefix first); an unlisted name goes to the longest
   * matching prefix, so the upstream itself reports it unknown. A name the upstream's selection leaves out
   * (excluded, or a tool's name before its rename) routes nowhere: it never reaches that upstream.
   */
  route(kind: NamedKind, exposedName: string): { upstream: Upstream; name: string } | undefined {
    const candidates = this.upstreams
      .filter((u) => exposedName.startsWith(u.config.prefix) && exposedName.length > u.config.prefix.length)
      .sort((a, b) => b.config.prefix.length - a.config.prefix.length)
      .map((upstream) => ({ upstream, name: this.selectionFor(upstream).upstreamName(kind, exposedName.slice(upstream.config.prefix.length)) }));
    const routes = candidates.filter((c): c is { upstream: Upstream; name: string } => c.name !== undefined);
    const listing = routes.find((r) => r.upstream.catalog[kind].some((item) => item.name === r.name));
    if (listing !== undefined) return listing;
    const longest = candidates[0];
    return longest?.name === undefined ? undefined : { upstream: longest.upstream, name: longest.name };
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

  /**
   * Which upstream serves a resource URI. An upstream whose selection leaves the URI out, by itself or by the
   * template it matches, does not serve it: read elsewhere or nowhere.
   */
  routeUri(uri: string): Upstream | undefined {
    const known = this.uriOwners.get(uri);
    // Noted only when exposed; the owner may have been replaced by a reload since.
    if (known !== undefined && this.upstreams.includes(known)) return known;
    const serves = (upstream: Upstream): boolean => this.selectionFor(upstream).exposesResource(uri);
    for (const upstream of this.upstreams) {
      if (!serves(upstream)) continue;
      if (upstream.catalog.resources.some((r) => r.uri === uri)) return upstream;
      if (matchingTemplates(upstream, uri).some((t) => this.selectionFor(upstream).exposesResource(t))) return upstream;
    }
    // Unlisted URIs go to the only upstream with resources, unless it leaves them out.
    const withResources = this.upstreams.filter((u) => u.capabilities.resources !== undefined);
    const only = withResources.length === 1 ? withResources[0] : undefined;
    if (only === undefined || !serves(only) || matchingTemplates(only, uri).length > 0) return undefined;
    return only;
  }

  /**
   * Exposed tool and prompt names offered twice, as messages naming both owners: by two upstreams, or by one
   * upstream whose overrides rename a tool onto another of its tools.
   */
  collisions(): string[] {
    const problems: string[] = [];
    for (const kind of ['tools', 'prompts'] as const) {
      const noun = kind === 'tools' ? 'tool' : 'prompt';
      const owners = new Map<string, { upstream: Upstream; name: unknown }>();
      for (const upstream of this.upstreams) {
        for (const item of upstream.catalog[kind]) {
          const exposed = this.present(upstream, kind, item)?.name;
          if (typeof exposed !== 'string') continue;
          const first = owners.get(exposed);
          if (first === undefined) owners.set(exposed, { upstream, name: item.name });
          else if (first.upstream !== upstream) {
            problems.push(`${noun} '${exposed}' is offered by both upstream '${first.upstream.name}' and upstream '${upstream.name}'; give them distinct prefixes`);
          } else if (first.name !== item.name) {
            problems.push(`${noun} '${exposed}' is offered twice by upstream '${upstream.name}' (its tools '${String(first.name)}' and '${String(item.name)}'); change upstreams.${upstream.name}.tools.overrides`);
          }
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

function withPrefix(upstream: Upstream, item: JsonObject): JsonObject {
  const prefix = upstream.config.prefix;
  return prefix === '' || typeof item.name !== 'string' ? item : { ...item, name: `${prefix}${item.name}` };
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

function matchingTemplates(upstream: Upstream, uri: string): string[] {
  return upstream.catalog.resourceTemplates.flatMap((t) => (typeof t.uriTemplate === 'string' && templateMatches(t.uriTemplate, uri) ? [t.uriTemplate] : []));
}

/** RFC 6570 match, loose: every expression matches one or more characters. */
function templateMatches(template: string, uri: string): boolean {
  const pattern = template
    .split(/\{[^}]*\}/)
    .map((literal) => literal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.+');
  return new RegExp(`^${pattern}$`).test(uri);
}
