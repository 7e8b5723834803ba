// What one upstream exposes (`upstreams.<name>.tools|prompts|resources`): which of its tools, prompts, resources
// and templates clients see, and under which tool names. Everything here speaks the upstream's own names; the
// catalog adds the prefix. A name this selection leaves out (excluded, or a tool's old name after a rename) is
// unknown to clients: the catalog routes it nowhere, so it never reaches the upstream.
import { globMatches } from '../config/policy.js';
import { uriGlobMatches } from '../config/resource-uri.js';
import type { NameSelection, ToolSelection, UpstreamCommon } from '../config/types.js';
import type { JsonObject } from '../jsonrpc.js';

/** Why a name is left out: the `exclude` glob that matches it, or no `include` glob matching it. */
export type Exclusion = { by: 'exclude'; pattern: string } | { by: 'include' };

const NOTHING_LEFT_OUT: NameSelection = { exclude: [] };
const NO_TOOL_CHANGES: ToolSelection = { exclude: [], overrides: {} };

/**
 * Why `selection` leaves `name` out, or undefined when it is exposed. `exclude` wins over `include`. `matches`:
 * how a glob is compared (resource URIs: in normal form, config/resource-uri.ts).
 */
export function exclusionOf(selection: NameSelection, name: string, matches: (glob: string, name: string) => boolean = globMatches): Exclusion | undefined {
  const pattern = selection.exclude.find((glob) => matches(glob, name));
  if (pattern !== undefined) return { by: 'exclude', pattern };
  if (selection.include !== undefined && !selection.include.some((glob) => matches(glob, name))) return { by: 'include' };
  return undefined;
}

/** An exclusion in words, for check-config. */
export function describeExclusion(exclusion: Exclusion): string {
  return exclusion.by === 'exclude' ? `excluded by '${exclusion.pattern}'` : 'matches no include';
}

export class UpstreamSelection {
  private readonly tools: ToolSelection;
  private readonly prompts: NameSelection;
  private readonly resources: NameSelection;
  /** New tool name → the upstream's, for the overrides that rename. */
  private readonly renamedFrom = new Map<string, string>();

  constructor(config: Pick<UpstreamCommon, 'tools' | 'prompts' | 'resources'>) {
    this.tools = config.tools ?? NO_TOOL_CHANGES;
    this.prompts = config.prompts ?? NOTHING_LEFT_OUT;
    this.resources = config.resources ?? NOTHING_LEFT_OUT;
    for (const [original, override] of Object.entries(this.tools.overrides)) {
      if (override.name !== undefined && override.name !== original) this.renamedFrom.set(override.name, original);
    }
  }

  /** Why the upstream tool `name` is left out, or undefined when it is exposed. */
  toolExclusion(name: string): Exclusion | undefined {
    return exclusionOf(this.tools, name);
  }

  /** The name clients see (before the prefix) for the upstream tool `name`, or undefined when it is left out. */
  exposedToolName(name: string): string | undefined {
    if (this.toolExclusion(name) !== undefined) return undefined;
    return this.overrideOf(name)?.name ?? name;
  }

  /**
   * The upstream's own name of the tool or prompt clients call `exposed` (before the prefix), or undefined when
   * that name is unknown here: left out, or the old name of a renamed tool.
   */
  upstreamName(kind: 'tools' | 'prompts', exposed: string): string | undefined {
    if (kind === 'prompts') return exclusionOf(this.prompts, exposed) === undefined ? exposed : undefined;
    const original = this.renamedFrom.get(exposed);
    if (original !== undefined) return this.toolExclusion(original) === undefined ? original : undefined;
    const ownName = this.overrideOf(exposed)?.name;
    if (ownName !== undefined && ownName !== exposed) return undefined;
    return this.toolExclusion(exposed) === undefined ? exposed : undefined;
  }

  /** A listed upstream tool as clients see it (before the prefix), or undefined when it is left out. */
  presentTool(tool: JsonObject): JsonObject | undefined {
    if (typeof tool.name !== 'string') return tool;
    if (this.toolExclusion(tool.name) !== undefined) return undefined;
    const override = this.overrideOf(tool.name);
    if (override === undefined) return tool;
    return {
      ...tool,
      ...(override.name !== undefined ? { name: override.name } : {}),
      ...(override.title !== undefined ? { title: override.title } : {}),
      ...(override.description !== undefined ? { description: override.description } : {}),
    };
  }

  exposesPrompt(name: unknown): boolean {
    return typeof name !== 'string' || exclusionOf(this.prompts, name) === undefined;
  }

  /**
   * Whether a resource URI, or a template's uriTemplate text, is exposed; globs and URI are compared in their
   * normal form, so `file:///%65tc/passwd` or `file:///public/../etc/passwd` is what `file:///etc/*` excludes.
   */
  exposesResource(uriOrTemplate: unknown): boolean {
    return typeof uriOrTemplate !== 'string' || exclusionOf(this.resources, uriOrTemplate, uriGlobMatches) === undefined;
  }

  private overrideOf(name: string): ToolSelection['overrides'][string] | undefined {
    // Own keys only: an upstream may name a tool `constructor` or `__proto__`.
    return Object.hasOwn(this.tools.overrides, name) ? this.tools.overrides[name] : undefined;
  }
}

// Upstream configs are frozen and replaced as a whole on reload, so one selection per config object stays right.
const selections = new WeakMap<object, UpstreamSelection>();

/** The selection an upstream's config describes (built once per config). */
export function selectionOf(config: UpstreamCommon): UpstreamSelection {
  let selection = selections.get(config);
  if (selection === undefined) {
    selection = new UpstreamSelection(config);
    selections.set(config, selection);
  }
  return selection;
}
