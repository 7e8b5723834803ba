import type { JsonObject } from '../jsonrpc.js';
import type { ListKind, NamedKind } from '../mcp.js';
import type { GatewayCatalog } from '../protocol/ports.js';
import type { ListAsker, Upstream } from '../upstream/life/upstream.js';
import type { UpstreamConfig } from '../config/types.js';
import { upstreamUnavailable } from '../errors.js';
import { NO_FIRST_ATTEMPTS, type FirstAttempts } from './first-attempts.js';
import { ListedRefresh } from './listed-refresh.js';
import { selectionOf, type UpstreamSelection } from './tool-selection.js';
import { spellingProblem } from '../config/resource-uri.js';

const MAX_KNOWN_URIS = 100_000;

/**
 * The merged view of all upstreams: exposed names (each upstream's selection and prefix), which upstream serves a
 * tool, prompt or resource URI, and the capabilities the gateway offers as their union.
 */
export class MergedCatalog implements GatewayCatalog {
  private readonly uriOwners = new Map<string, Upstream>();
  /** Selections a config reload gave running upstreams, by upstream name; others use their own config's. */
  private selections = new Map<string, UpstreamSelection>();
  /** Catalogs read again when a client names what no upstream listed (bounded per upstream). */
  private readonly refresh = new ListedRefresh();

  /**
   * `configs`: where the upstreams' selections come from, when not from the configs they were started with.
   * `firstAttempts`: the gateway's start, which lists and lookups wait for (first-attempts.ts).
   */
  constructor(
    readonly upstreams: readonly Upstream[],
    configs?: readonly UpstreamConfig[],
    private readonly firstAttempts: FirstAttempts = NO_FIRST_ATTEMPTS,
  ) {
    if (configs !== undefined) this.reselect(configs);
  }

  /**
   * Resolves once every upstream of the gateway's start has made its first attempt (each bounded by its
   * initializeTimeoutMs): what is answered from the merged catalog before then would miss upstreams still connecting.
   */
  whenStarted(): Promise<void> {
    return this.firstAttempts.wait();
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
   * Which upstream serves an exposed tool or prompt name, and its name there, as the catalogs read so far list it:
   * the name after the prefix must be, byte for byte, one the upstream listed and its selection exposes (nothing
   * is folded, trimmed or normalised here; an upstream may look names up leniently, so a near miss would reach
   * what the selection hides). Among upstreams whose prefix matches, the longest prefix that lists it wins.
   */
  route(kind: NamedKind, exposedName: string): { upstream: Upstream; name: string } | undefined {
    for (const { upstream, name } of this.candidates(kind, exposedName)) {
      if (name !== undefined && upstream.catalog[kind].some((item) => item.name === name)) return { upstream, name };
    }
    return undefined;
  }

  /**
   * `route`, with the catalogs of the upstreams that could serve the name read again first when none lists it
   * (bounded: see ListedRefresh), so a tool added since the last list works before its `list_changed` arrives.
   * A name still unlisted is undefined; one whose upstream is not connected is that upstream's unavailability.
   */
  async resolve(kind: NamedKind, exposedName: string, asker?: ListAsker): Promise<{ upstream: Upstream; name: string } | undefined> {
    if (!this.firstAttempts.over) await this.firstAttempts.wait();
    const listed = this.route(kind, exposedName);
    if (listed !== undefined) return listed;
    const candidates = this.candidates(kind, exposedName).filter((c) => c.name !== undefined);
    if (candidates.length === 0) return undefined;
    const refreshed = await Promise.allSettled(candidates.map((c) => this.refresh.after(c.upstream, asker)));
    const found = this.route(kind, exposedName);
    if (found !== undefined) return found;
    // A per-principal upstream whose child could not start for this caller: that is why, not an unknown name.
    const failed = refreshed.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    const longest = candidates[0]?.upstream;
    if (longest !== undefined && longest.state !== 'ready') throw upstreamUnavailable(longest.name, longest.lastError ?? 'it is not connected yet');
    return undefined;
  }

  /**
   * The upstream that acts as each user (`auth.authorizationCode`) whose prefix an unlisted name carries, the longest
   * prefix first: before anyone connected it (its catalog unread), a call to such a name asks for consent.
   */
  consentOwner(kind: NamedKind, exposedName: string): { upstream: Upstream; name: string } | undefined {
    for (const { upstream, name } of this.candidates(kind, exposedName)) {
      if (name !== undefined && upstream.config.transport !== 'stdio' && upstream.config.auth?.authorizationCode !== undefined) return { upstream, name };
    }
    return undefined;
  }

  /** Upstreams whose prefix the name carries (longest first), each with the upstream name it would be there. */
  private candidates(kind: NamedKind, exposedName: string): { upstream: Upstream; name: string | undefined }[] {
    return this.upstreams
      .filter((u) => exposedName.startsWith(u.config.prefix) && exposedName.length > u.config.prefix.length)
      .sort((a, b) => b.config.prefix.length - a.config.prefix.length)
      .map((upstream) => ({ upstream, name: this.selectionFor(upstream).upstreamName(kind, exposedName.slice(upstream.config.prefix.length)) }));
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
   * Which upstream serves a resource URI: one that listed it (in its catalog or on a list page a client read), or
   * one of whose listed templates it matches exactly (or is), and whose selection exposes it (by itself or by that
   * template). Anything else is unknown: it reaches no upstream.
   */
  routeUri(uri: string): Upstream | undefined {
    const known = this.uriOwners.get(uri);
    // Noted only when exposed; the owner may have been replaced by a reload since.
    if (known !== undefined && this.upstreams.includes(known)) return known;
    for (const upstream of this.uriCandidates(uri)) {
      if (upstream.catalog.resources.some((r) => r.uri === uri)) return upstream;
      // A template named as itself: what completion/complete's ref/resource carries.
      if (upstream.catalog.resourceTemplates.some((t) => t.uriTemplate === uri)) return upstream;
      if (matchingTemplates(upstream, uri).some((t) => this.selectionFor(upstream).exposesResource(t))) return upstream;
    }
    return undefined;
  }

  /** `routeUri`, with the catalogs of the upstreams that could serve it read again first when none lists it. */
  async resolveUri(uri: string): Promise<Upstream | undefined> {
    if (!this.firstAttempts.over) await this.firstAttempts.wait();
    const listed = this.routeUri(uri);
    if (listed !== undefined) return listed;
    const candidates = this.uriCandidates(uri);
    await Promise.all(candidates.map((upstream) => this.refresh.after(upstream)));
    return this.routeUri(uri);
  }

  /** Upstreams with resources whose selection does not leave the URI out. */
  private uriCandidates(uri: string): Upstream[] {
    return this.upstreams.filter((u) => u.capabilities.resources !== undefined && this.selectionFor(u).exposesResource(uri));
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

// What one RFC 6570 expression may expand to: a simple `{var}` percent-encodes everything but the unreserved
// characters; `{+var}` and `{#var}` (after its `#`) also keep the reserved ones. Other operators match nothing.
// No expression matches an encoded slash or backslash (`%2F`, `%5C`): a server that decodes before it resolves
// would take it for a path separator, and no rule written on paths would see it.
const ENCODED = '%(?!2[Ff]|5[Cc])[0-9A-Fa-f]{2}';
const UNRESERVED = `(?:[A-Za-z0-9\\-._~]|${ENCODED})+`;
const RESERVED = `(?:[A-Za-z0-9\\-._~:/?#\\[\\]@!$&'()*+,;=]|${ENCODED})+`;
const EXPRESSION = /\{([^}]*)\}/g;

/**
 * Whether `uri` is an expansion of `template`, the whole of it (never a prefix): each expression matches only
 * what its expansion could produce. A URI not spelled in normal form (a `.` or `..` segment, an encoded unreserved
 * character, lower-case hex: config/resource-uri.ts) matches no template: it is refused, never rewritten.
 */
export function templateMatches(template: string, uri: string): boolean {
  if (spellingProblem(uri) !== undefined) return false;
  let pattern = '';
  let at = 0;
  for (const match of template.matchAll(EXPRESSION)) {
    pattern += escapeRegExp(template.slice(at, match.index));
    at = match.index + match[0].length;
    const expression = match[1] ?? '';
    const operator = expression[0];
    if (operator === '+') pattern += RESERVED;
    else if (operator === '#') pattern += `#${RESERVED}`;
    else if (/^[A-Za-z0-9_%.]+$/.test(expression)) pattern += UNRESERVED;
    else return false;
  }
  pattern += escapeRegExp(template.slice(at));
  return new RegExp(`^${pattern}$`).test(uri);
}

function escapeRegExp(literal: string): string {
  return literal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
