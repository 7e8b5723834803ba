import type { GatewayConfig, TaskPolicy } from '../config/types.js';
import { effectiveMode, resolvePolicy } from '../config/policy.js';
import { Catalog } from './catalog.js';
import { InternalError } from '../errors.js';
import type { Logger } from '../log.js';
import { Upstream, type UpstreamMessageSink } from '../upstream/upstream.js';
import { VERSION } from '../version.js';

export interface ToolPolicyReport {
  /** `policy.mode` is what clients see; `upstreamTaskSupport` is set where the upstream runs the tool as its own task. */
  tools: { name: string; upstream: string; policy: TaskPolicy; upstreamTaskSupport?: 'optional' | 'required' }[];
  unreachable: { upstream: string; error: string }[];
  collisions: string[];
}

/** Connects to every upstream once, lists its tools and resolves each exposed tool's task policy. */
export async function reportToolPolicies(config: GatewayConfig, logger: Logger): Promise<ToolPolicyReport> {
  const sink: UpstreamMessageSink = {
    notification: () => undefined,
    request: async () => ({ error: { code: InternalError, message: 'taskgate check-config answers no requests' } }),
    catalogChanged: () => undefined,
  };
  const upstreams = config.upstreams.map((u) => new Upstream(u, logger, sink, { version: VERSION }));
  try {
    await Promise.all(upstreams.map((u) => u.start()));
    const catalog = new Catalog(upstreams);
    const tools = upstreams.flatMap((upstream) =>
      upstream.catalog.tools.flatMap((tool) => {
        const name = catalog.present(upstream, 'tools', tool)?.name;
        if (typeof name !== 'string') return [];
        const policy = resolvePolicy(config.tasks, name);
        const support = upstream.taskSupportOf(tool.name);
        return [{
          name,
          upstream: upstream.name,
          policy: { ...policy, mode: effectiveMode(policy.mode, support) },
          ...(support === 'forbidden' ? {} : { upstreamTaskSupport: support }),
        }];
      }),
    );
    const unreachable = upstreams.filter((u) => u.state !== 'ready').map((u) => ({ upstream: u.name, error: u.lastError ?? 'not connected' }));
    return { tools, unreachable, collisions: catalog.collisions() };
  } finally {
    await Promise.all(upstreams.map((u) => u.close()));
  }
}
