// Task metrics: created and ended (by tool, status, why), how long tasks live and wait in line for slots, and the
// runs this replica holds in each status. Each run is on exactly one replica, so sum() of the status gauge across
// replicas is the cluster's count, without reading the store on scrape.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { GatewayEvents, TaskFacts } from '../events.js';
import type { MetricLabels } from './metrics-context.js';
import { OTHER } from './metrics-labels.js';

/** Seconds: tasks run from moments to hours. */
const TASK_BUCKETS = [0.1, 0.5, 1, 5, 15, 30, 60, 300, 900, 1800, 3600, 14400];
/** Seconds in line for a concurrency slot: mostly none. */
const WAIT_BUCKETS = [0.001, 0.01, 0.1, 0.5, 1, 5, 15, 60, 300, 900];
/** Why the gateway ended a task (src/events.ts task.ended): anything else is "other". */
const END_REASONS = new Set(['maxRunMs', 'lost', 'drained', 'cancelled', 'maxResultBytes']);

type RunStatus = 'working' | 'input_required' | 'queued';

/** Every task metric, each kind subscribed by its own function; returns what unsubscribes them all. */
export function subscribeTaskMetrics(registry: Registry, events: GatewayEvents, labels: MetricLabels): () => void {
  const stops = [...taskLives(registry, events, labels), ...runsHeld(registry, events), ...taskIncidents(registry, events, labels)];
  return () => {
    for (const stop of stops) stop();
  };
}

/** Tasks created and ended (by tool, status, why), how long they lived, how long their runs waited for slots. */
function taskLives(registry: Registry, events: GatewayEvents, labels: MetricLabels): (() => void)[] {
  const byPrincipal = labels.principal === undefined ? [] : ['principal'];
  const principal = (facts: TaskFacts): Record<string, string> => (labels.principal === undefined ? {} : { principal: labels.principal.of(facts.principal) });
  const created = new Counter({
    name: 'taskgate_tasks_created_total',
    help: 'Tasks created on this replica, by tool, upstream and era.',
    labelNames: ['tool', 'upstream', 'era', ...byPrincipal],
    registers: [registry],
  });
  const ended = new Counter({
    name: 'taskgate_tasks_ended_total',
    help: 'Tasks that reached a terminal status, by tool, status and reason (empty when the upstream ended it), counted by the replica that recorded the end.',
    labelNames: ['tool', 'status', 'reason', ...byPrincipal],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'taskgate_task_duration_seconds',
    help: 'From creation to the terminal status, by tool and status.',
    labelNames: ['tool', 'status'],
    buckets: TASK_BUCKETS,
    registers: [registry],
  });
  const queueWait = new Histogram({
    name: 'taskgate_task_queue_wait_seconds',
    help: 'How long task runs waited for concurrency slots (concurrency, taskConcurrency) before the upstream got the call, by tool.',
    labelNames: ['tool'],
    buckets: WAIT_BUCKETS,
    registers: [registry],
  });
  return [
    events.on('task.created', (e) => created.inc({ tool: labels.tool.of(e.tool), upstream: labels.upstream.of(e.upstream), era: e.era, ...principal(e) })),
    events.on('task.ended', (e) => {
      const tool = labels.tool.of(e.tool);
      const reason = e.reason === undefined ? '' : END_REASONS.has(e.reason) ? e.reason : OTHER;
      ended.inc({ tool, status: e.status, reason, ...principal(e) });
      duration.observe({ tool, status: e.status }, e.durationMs / 1000);
    }),
    events.on('task.started', (e) => queueWait.observe({ tool: labels.tool.of(e.tool) }, e.waitedMs / 1000)),
  ];
}

/** The runs this replica holds, by status: each run is on exactly one replica, so sum() across replicas is exact. */
function runsHeld(registry: Registry, events: GatewayEvents): (() => void)[] {
  const running = new Gauge({
    name: 'taskgate_tasks',
    help: 'Task runs this replica holds, by status (queued: waiting for a concurrency slot). Each run is on exactly one replica: sum() across replicas is exact.',
    labelNames: ['status'],
    registers: [registry],
  });
  for (const status of ['working', 'input_required', 'queued'] as const) running.set({ status }, 0);

  // The status of each run held here, so a move between statuses moves one count.
  const runs = new Map<string, RunStatus>();
  const move = (taskId: string, to: RunStatus): void => {
    const from = runs.get(taskId);
    if (from === undefined || from === to) return;
    runs.set(taskId, to);
    running.dec({ status: from });
    running.inc({ status: to });
  };
  return [
    events.on('task.status', (e) => move(e.taskId, e.queued === true ? 'queued' : e.status)),
    // The run's own promise, counted off on a branch of it: an async frame awaiting it would stay suspended for as
    // long as the task runs, a generator and its registers per task in flight (issue 23).
    events.around('task.run', (info, next) => {
      runs.set(info.taskId, 'working');
      running.inc({ status: 'working' });
      const run = next();
      const ended = (): void => {
        const status = runs.get(info.taskId);
        runs.delete(info.taskId);
        if (status !== undefined) running.dec({ status });
      };
      run.then(ended, ended);
      return run;
    }),
  ];
}

/** What happened to tasks on the way: input requests upstreams asked through them, and tasks of stopped replicas settled here. */
function taskIncidents(registry: Registry, events: GatewayEvents, labels: MetricLabels): (() => void)[] {
  const inputs = new Counter({
    name: 'taskgate_task_input_requests_total',
    help: 'Input requests (elicitation, sampling, roots) upstreams asked clients on behalf of tasks, by method.',
    labelNames: ['method'],
    registers: [registry],
  });
  const recovered = new Counter({
    name: 'taskgate_tasks_recovered_total',
    help: 'Tasks of a stopped replica this replica settled: requeued, retried or failed as lost.',
    labelNames: ['action'],
    registers: [registry],
  });
  const handedOver = new Counter({
    name: 'taskgate_tasks_handed_over_total',
    help: 'Tasks this replica left to the others as it shut down, by why: its call had not started, or its policy runs it again (retry.onLoss).',
    labelNames: ['why'],
    registers: [registry],
  });
  return [
    events.on('task.input.asked', (e) => inputs.inc({ method: labels.method.of(e.method) })),
    events.on('task.recovered', (e) => recovered.inc({ action: e.action })),
    events.on('task.handed_over', (e) => handedOver.inc({ why: e.why === 'not started' ? 'not_started' : 'retry_on_loss' })),
  ];
}
