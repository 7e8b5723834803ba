// What every group of metrics shares: the bounded label values.
import { BoundedLabel } from './metrics-labels.js';

export interface MetricLabels {
  /** MCP's own methods as they are; anything else is "other". */
  method: BoundedLabel;
  /** Tools the catalog exposes (else "other"). */
  tool: BoundedLabel;
  /** Configured upstream names (bounded by the configuration; capped all the same). */
  upstream: BoundedLabel;
  /** Principals, when `metrics.principalLabels` is on; undefined otherwise (no principal label at all). */
  principal: BoundedLabel | undefined;
}

export function metricLabels(options: { methods: ReadonlySet<string>; knownTool: (name: string) => boolean; principalLabels: boolean }): MetricLabels {
  const { methods } = options;
  return {
    method: new BoundedLabel((method) => methods.has(method)),
    tool: new BoundedLabel(options.knownTool),
    upstream: new BoundedLabel(() => true),
    principal: options.principalLabels ? new BoundedLabel(() => true) : undefined,
  };
}
