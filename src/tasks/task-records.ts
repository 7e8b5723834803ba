// Writes to task records that no run of this replica holds: an ended task deleted before its TTL, and the records
// that route the tasks a 2026-07-28 upstream runs itself (created when the upstream answers with a task, ended when
// an answer passing through says so). Nothing of the gateway runs these: no lease, no slot, no drain.
import { GatewayError } from '../errors.js';
import { NO_EVENTS, type GatewayEvents } from '../events.js';
import type { Era, TaskRecord, TaskStore } from '../store/task-store.js';
import type { Upstream } from '../upstream/life/upstream.js';
import { countedPrincipal, NATIVE_TASKS_PRINCIPAL } from '../principals.js';
import { taskAgeMs, taskFacts } from './task-facts.js';
import { NOT_FOUND, unavailable } from './task-queries.js';

export interface TaskRecordsDeps {
  store: TaskStore;
  /** Whether principals are authenticated: without, every client's stored results count against one principal. */
  authenticated: boolean;
  events?: GatewayEvents;
}

export class TaskRecords {
  private readonly store: TaskStore;
  private readonly authenticated: boolean;
  private readonly events: GatewayEvents;

  constructor(deps: TaskRecordsDeps) {
    ({ store: this.store, authenticated: this.authenticated } = deps);
    this.events = deps.events ?? NO_EVENTS;
  }

  /**
   * Deletes an ended task and its outcome before its TTL, which frees its bytes in the stored-results budgets; a
   * task still running is refused (cancel it first), as is one that is gone.
   */
  async delete(task: TaskRecord): Promise<void> {
    const verdict = await this.store.tasks.delete(task.taskId, countedPrincipal(task.principal, this.authenticated)).catch(unavailable);
    if (verdict === 'not_found') throw new GatewayError('invalid_params', NOT_FOUND);
    if (verdict === 'not_terminal') throw new GatewayError('invalid_params', `Cannot delete task: it is still ${stillDoing(task)}; cancel it first`);
    this.events.emit('task.deleted', taskFacts(task));
  }

  /**
   * Records a task a 2026-07-28 upstream runs itself, so that any replica routes its methods there. The record
   * shows it running on that upstream (`working`) until a tasks/get or tasks/cancel answer passing through says it
   * ended (recordNativeEnd); the store expires it with the task's TTL whatever its status, since the gateway may
   * never hear the end. It belongs to `owner` when the gateway authenticates, else to no client. `era`: the
   * revision whose upstream created it.
   */
  async recordNative(era: Era, taskId: string, exposedName: string, upstream: Upstream, retentionMs: number, owner: string | undefined): Promise<void> {
    if ((await this.store.tasks.get(taskId).catch(unavailable)) !== undefined) {
      // Native ids are the upstream's own; the gateway cannot route two tasks with one id.
      throw new GatewayError('internal', `Upstream '${upstream.name}' returned task id '${taskId}', which another task already uses`);
    }
    const message = `Runs on upstream '${upstream.name}'`;
    const task = await this.store.tasks
      .create({ taskId, principal: owner ?? NATIVE_TASKS_PRINCIPAL, era, tool: exposedName, upstream: upstream.name, retentionMs, pollMs: 0, message, native: true, ...(owner === undefined ? {} : { chargeTo: countedPrincipal(owner, this.authenticated) }) })
      .catch(unavailable);
    this.events.emit('task.created', { ...taskFacts(task), era, queued: false, native: true });
  }

  /**
   * An upstream's own task ended, as an answer of that upstream passing through says (`status`): its record
   * becomes terminal once, and the end is announced like any other (whichever replica saw it first).
   */
  async recordNativeEnd(taskId: string, status: 'completed' | 'failed' | 'cancelled'): Promise<void> {
    const changed = await this.store.tasks.transition(taskId, { to: status }).catch(unavailable);
    if (!changed.ok || changed.task.native !== true) return;
    this.events.emit('task.ended', { ...taskFacts(changed.task), status, durationMs: taskAgeMs(changed.task), era: changed.task.era });
  }
}

/**
 * What a task that has not ended is still doing, as a refusal to delete it says: a held call is neither running nor
 * waiting for its client, and the caller must know that cancelling it is what ends the hold.
 */
export function stillDoing(task: TaskRecord): string {
  if (task.approval?.state === 'pending') return 'waiting for approval';
  return task.status === 'input_required' ? 'waiting for input' : 'running';
}
