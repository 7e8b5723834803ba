// Approval metrics (tasks.rules[].approval): holds waiting now, how long approvers take, and how holds end. The
// gauge goes up on the replica that held the call and down on the one that saw the decision (any replica), so
// sum() across replicas is the cluster's count of pending holds, as with the task gauges.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { GatewayEvents } from '../events.js';
import type { MetricLabels } from './metrics-context.js';

/** Seconds to a decision: a person answers in minutes to hours. */
const DECISION_BUCKETS = [1, 5, 15, 30, 60, 300, 900, 1800, 3600, 14400, 43200, 86400];

export function subscribeApprovalMetrics(registry: Registry, events: GatewayEvents, labels: MetricLabels): () => void {
  const pending = new Gauge({
    name: 'taskgate_approvals_pending',
    help: 'Calls held for approval and not decided yet (sum across replicas), by tool.',
    labelNames: ['tool'],
    registers: [registry],
  });
  const decisionTime = new Histogram({
    name: 'taskgate_approval_decision_seconds',
    help: 'From the call being held to its decision (approved, denied, expired, cancelled), by tool and decision.',
    labelNames: ['tool', 'decision'],
    buckets: DECISION_BUCKETS,
    registers: [registry],
  });
  const decided = new Counter({
    name: 'taskgate_approvals_decided_total',
    help: 'Holds decided, by tool and decision (approved, denied, expired, cancelled).',
    labelNames: ['tool', 'decision'],
    registers: [registry],
  });
  const offs = [
    events.on('approval.requested', (e) => pending.inc({ tool: labels.tool.of(e.tool) })),
    events.on('approval.decided', (e) => {
      const tool = labels.tool.of(e.tool);
      pending.dec({ tool });
      decided.inc({ tool, decision: e.decision });
      decisionTime.observe({ tool, decision: e.decision }, e.waitedMs / 1000);
    }),
  ];
  return () => offs.forEach((off) => off());
}
