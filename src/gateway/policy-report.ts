import type { GatewayConfig, TaskPolicy } from '../config/types.js';
import { effectiveMode, resolvePolicy } from '../config/policy.js';
import { MergedCatalog } from './merged-catalog.js';
import { describeExclusion, selectionOf } from './tool-selection.js';
import { InternalError } from '../errors.js';
import type { Logger } from '../log.js';
import type { UpstreamAdapter } from '../upstream/peer/adapter.js';
import { Upstream, type UpstreamMessageSink } from '../upstream/life/upstream.js';
import { VERSION } from '../version.js';

export interface ToolPolicyReport {
  /** `policy.mode` is what clients see; `upstreamTaskSupport` is set where the upstream runs the tool as its own task. */
  tools: { name: string; upstream: string; upstreamName?: string; policy: TaskPolicy; upstreamTaskSupport?: 'optional' | 'required' }[];
  /** Tools the upstreams' selections leave out, by their upstream's own name, and why (`describeExclusion`). */
  excluded: { upstream: string; tool: string; reason: string }[];
  /** `tools.overrides` keys a reachable upstream does not list (a typo, or a tool it no longer has). */
  unmatchedOverrides: { upstream: string; tool: string }[];
  unreachable: { upstream: string; error: string }[];
  collisions: string[];
}

/**
 * Connects to every upstream once, lists its tools and resolves each exposed tool's task policy; says which tools
 * the upstreams' selections rename or leave out.
 */
export async function reportToolPolicies(config: GatewayConfig, logger: Logger, adapters: readonly UpstreamAdapter[]): Promise<ToolPolicyReport> {
  const sink: UpstreamMessageSink = {
    notification: () => undefined,
    request: async () => ({ error: { code: InternalError, message: 'taskgate check-config answers no requests' } }),
    catalogChanged: () => undefined,
  };
  const upstreams = config.upstreams.map((u) => new Upstream(u, logger, sink, { version: VERSION, adapters }));
  try {
    await Promise.all(upstreams.map((u) => u.start()));
    const catalog = new MergedCatalog(upstreams);
    const tools = upstreams.flatMap((upstream) =>
      upstream.catalog.tools.flatMap((tool) => {
        const name = catalog.present(upstream, 'tools', tool)?.name;
        if (typeof name !== 'string') return [];
        const policy = resolvePolicy(config.tasks, name);
        const support = upstream.taskSupportOf(tool.name);
        return [{
          name,
          upstream: upstream.name,
          ...(tool.name !== name.slice(upstream.config.prefix.length) ? { upstreamName: String(tool.name) } : {}),
          policy: { ...policy, mode: effectiveMode(policy.mode, support) },
          ...(support === 'forbidden' ? {} : { upstreamTaskSupport: support }),
        }];
      }),
    );
    const unreachable = upstreams.filter((u) => u.state !== 'ready').map((u) => ({ upstream: u.name, error: u.lastError ?? 'not connected' }));
    const excluded = upstreams.flatMap((upstream) =>
      upstream.catalog.tools.flatMap((tool) => {
        const exclusion = typeof tool.name === 'string' ? selectionOf(upstream.config).toolExclusion(tool.name) : undefined;
        return exclusion === undefined ? [] : [{ upstream: upstream.name, tool: tool.name as string, reason: describeExclusion(exclusion) }];
      }),
    );
    const unmatchedOverrides = upstreams.filter((u) => u.state === 'ready').flatMap((upstream) =>
      Object.keys(upstream.config.tools?.overrides ?? {})
        .filter((tool) => !upstream.catalog.tools.some((listed) => listed.name === tool))
        .map((tool) => ({ upstream: upstream.name, tool })),
    );
    return { tools, excluded, unmatchedOverrides, unreachable, collisions: catalog.collisions() };
  } finally {
    await Promise.all(upstreams.map((u) => u.close()));
  }
}
