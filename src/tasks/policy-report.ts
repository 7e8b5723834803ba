import type { GatewayConfig, TaskPolicy } from '../config/types.js';
import { resolvePolicy } from '../config/policy.js';
import { Catalog } from '../gateway/catalog.js';
import type { Logger } from '../log.js';
import { Upstream, type UpstreamMessageSink } from '../upstream/upstream.js';
import { VERSION } from '../version.js';

export interface ToolPolicyReport {
  tools: { name: string; upstream: string; policy: TaskPolicy }[];
  unreachable: { upstream: string; error: string }[];
  collisions: string[];
}

/** Connects to every upstream once, lists its tools and resolves each exposed tool's task policy. */
export async function reportToolPolicies(config: GatewayConfig, logger: Logger): Promise<ToolPolicyReport> {
  const sink: UpstreamMessageSink = {
    notification: () => undefined,
    request: async () => ({ error: { code: -32603, message: 'taskgate check-config answers no requests' } }),
    catalogChanged: () => undefined,
  };
  const upstreams = config.upstreams.map((u) => new Upstream(u, logger, sink, VERSION));
  try {
    await Promise.all(upstreams.map((u) => u.start()));
    const catalog = new Catalog(upstreams);
    const tools = upstreams.flatMap((upstream) =>
      upstream.catalog.tools.map((tool) => {
        const name = catalog.expose(upstream, tool).name as string;
        return { name, upstream: upstream.name, policy: resolvePolicy(config.tasks, name) };
      }),
    );
    const unreachable = upstreams.filter((u) => u.state !== 'ready').map((u) => ({ upstream: u.name, error: u.lastError ?? 'not connected' }));
    return { tools, unreachable, collisions: catalog.collisions() };
  } finally {
    await Promise.all(upstreams.map((u) => u.close()));
  }
}
