// State metrics, read when Prometheus scrapes rather than counted from events: whether this replica is ready (the
// answer /readyz gives), whether its task leases renew, and how long the soonest pending approval has left. Alerts
// need each of them and no event carries them: readiness combines several parts, a failing lease renewal is a
// state (logged once when it starts), and an approval nears its deadline while nothing happens at all.
import { Gauge, type Registry } from 'prom-client';

/** What the composition hands over to read on each scrape (it owns readiness, the task engine and the store). */
export interface ScrapedState {
  /** Whether /readyz would answer 200 now (compose/serving.ts readinessOf). */
  ready(): Promise<boolean>;
  /** Whether this replica's last task-lease renewal succeeded (the engine's lease health). */
  leasesRenewing(): boolean;
  /** The soonest deadline (epoch ms) among the store's pending approval holds, every replica's; undefined when none. */
  soonestApprovalDeadline(): Promise<number | undefined>;
}

/** How long a scrape waits for the store's pending-approvals index before it reports the value as unknown. */
const DEADLINE_READ_MS = 1_000;

/** Registers the state gauges in `registry`; returns what unregisters them. */
export function registerStateMetrics(registry: Registry, state: ScrapedState, now: () => number = Date.now): () => void {
  const names: string[] = [];
  const gauge = (name: string, help: string, value: () => number | Promise<number>): void => {
    names.push(name);
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        this.set(await value());
      },
    });
  };
  gauge(
    'taskgate_ready',
    'Whether this replica is ready (1) or not (0): what /readyz answers (store reachable, leases renewing, started, not shutting down).',
    async () => ((await state.ready()) ? 1 : 0),
  );
  gauge(
    'taskgate_task_leases_renewing',
    "Whether this replica's last task-lease renewal succeeded (1) or failed (0); after replicas.leaseMs of failures the other replicas declare its tasks lost.",
    () => (state.leasesRenewing() ? 1 : 0),
  );
  gauge(
    'taskgate_approval_expiry_seconds',
    "Seconds until the soonest pending approval hold expires (the store's, any replica's: the same on every replica); +Inf when none is pending, NaN when the store did not answer.",
    async () => {
      const deadline = await withinBound(state.soonestApprovalDeadline(), DEADLINE_READ_MS);
      if (deadline === 'unknown') return Number.NaN;
      return deadline === undefined ? Number.POSITIVE_INFINITY : (deadline - now()) / 1000;
    },
  );
  return () => {
    for (const name of names) registry.removeSingleMetric(name);
  };
}

/** The read's answer, or 'unknown' when it failed or took longer than `ms` (a scrape must not wait on a store outage). */
async function withinBound<T>(read: Promise<T>, ms: number): Promise<T | 'unknown'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'unknown'>((resolve) => (timer = setTimeout(() => resolve('unknown'), ms)));
  try {
    return await Promise.race([read.catch(() => 'unknown' as const), late]);
  } finally {
    clearTimeout(timer);
  }
}
