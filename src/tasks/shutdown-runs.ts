// What a replica that shuts down does with the runs still here once its drain is over (issue 42): each passes to
// another replica where that replica would take it over from a lost one (leases.ts: takeOverLost), else fails
// saying the gateway shut down. Handing over costs nothing here: the run lets go, its lease stays this replica's,
// and the replica then gives up its liveness (TaskLeases.handOver) so the others' next sweep takes it.
import type { GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import { failedWith, isTerminal, type TaskRecord, type TaskStore } from '../store/task-store.js';
import type { Upstream } from '../upstream/life/upstream.js';
import type { LocalRun, RunOutcome } from './local-run.js';
import { taskAgeMs, taskFacts } from './task-facts.js';
import type { TaskPolicies } from './task-policies.js';

/** Why a run passes to another replica at shutdown: its call never reached the upstream, or its policy runs it again. */
export type HandOver = 'not started' | 'retry on loss';

/** What a task failed by a shutdown says (status message and error). */
export const SHUT_DOWN_MESSAGE = 'The gateway shut down while the task was running';

export interface ShutdownDeps {
  store: Pick<TaskStore, 'tasks' | 'leases'>;
  events: GatewayEvents;
  logger: Logger;
  policies: Pick<TaskPolicies, 'policyFor'>;
  /** The live upstream of that name, on which another replica would run the call (this one's config stands for theirs). */
  upstream(name: string): Upstream | undefined;
  /** Marks the run over (TaskRuns.endRun): with a reason, its upstream call is cancelled. */
  endRun(run: LocalRun, outcome: RunOutcome, cancelReason: string | undefined): void;
}

/**
 * Hands over or fails every run of `runs`. A run passes where another replica would carry it on: one that never
 * reached its upstream (held for approval, waiting for its user's connection or a slot: marked queued), and one
 * whose policy allows running it again (`retry.onLoss`, attempts left: its call here is cancelled). The rest fail
 * saying why. Resolves with how many were handed over.
 */
export async function closeRuns(runs: LocalRun[], deps: ShutdownDeps): Promise<number> {
  const closed = await Promise.all(runs.map((run) => closeRun(run, deps)));
  const handedOver = closed.filter((how) => how === 'handed over').length;
  const failed = closed.filter((how) => how === 'failed').length;
  if (handedOver > 0) deps.logger.info({ handedOver, failed }, 'tasks handed over');
  else if (failed > 0) deps.logger.info({ failed }, 'tasks failed at shutdown');
  return handedOver;
}

/**
 * Hands one run over, or fails it. Decided on the task as the store has it: a run whose call ends meanwhile ends
 * as its call did (recorded once, as any end), and a task ended elsewhere is only let go.
 */
async function closeRun(run: LocalRun, deps: ShutdownDeps): Promise<'handed over' | 'failed' | 'ended'> {
  const { store, events, endRun } = deps;
  const taskId = run.task.taskId;
  const stored = await store.tasks.get(taskId, { call: true }).catch(() => undefined);
  if (run.ended) return 'ended';
  if (stored !== undefined && isTerminal(stored.status)) {
    endRun(run, stored.status as RunOutcome, `the task was ${stored.status}`);
    await store.leases.release(taskId).catch(() => undefined);
    return 'ended';
  }
  const passes = stored === undefined ? undefined : passesOn(run, stored, deps);
  if (passes !== undefined) {
    endRun(run, 'handed over', run.reached === true ? 'the gateway handed the task over to another replica' : undefined);
    // The mark another replica goes by: the upstream never saw this call.
    if (passes === 'not started') await store.tasks.transition(taskId, { to: 'working', queued: true }).catch(() => undefined);
    events.emit('task.handed_over', { ...taskFacts(run.task), why: passes });
    return 'handed over';
  }
  endRun(run, 'failed', 'the gateway shut down');
  const changed = await store.tasks.transition(taskId, failedWith(SHUT_DOWN_MESSAGE)).catch(() => undefined);
  if (changed?.ok === true) events.emit('task.ended', { ...taskFacts(run.task), status: 'failed', reason: 'drained', durationMs: taskAgeMs(run.task) });
  await store.leases.release(taskId).catch(() => undefined);
  return 'failed';
}

/** Why another replica would carry the run on (as it takes over a lost replica's task); undefined: it would not. */
function passesOn(run: LocalRun, stored: TaskRecord, deps: ShutdownDeps): HandOver | undefined {
  if (stored.call === undefined || deps.upstream(stored.upstream) === undefined) return undefined;
  if (run.reached !== true) return 'not started';
  const { retry } = deps.policies.policyFor(stored.tool);
  return retry.onLoss && (stored.attempt ?? 1) + 1 <= retry.maxAttempts ? 'retry on loss' : undefined;
}
