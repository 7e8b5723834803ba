// The terminal writes of runs that ended here. Each is written once and announced (`task.ended`); when the store
// is away the change is kept here and written once it is back (retried every PENDING_RETRY_MS), its lease renewed
// meanwhile because this replica still holds it: an upstream result is never lost to a store outage. Waiters on
// this replica hear of a written end with its outcome in hand (local-ends.ts).
import type { GatewayEventMap, GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import type { TaskChange, TaskRecord, TaskStore, TransitionResult } from '../store/task-store.js';
import type { LocalEnds } from './local-ends.js';
import { taskAgeMs, taskFacts } from './task-facts.js';

/** How often a kept terminal change is retried while the store is away. */
const PENDING_RETRY_MS = 1000;

/** A terminal change of a task, with what its `task.ended` event says once it is written. */
export interface PendingEnd {
  task: TaskRecord;
  change: TaskChange;
  reason: string | undefined;
}

export interface EndWritesDeps {
  store: TaskStore;
  logger: Logger;
  events: GatewayEvents;
  /** Told of each write here as it begins and ends, for this replica's waiters (task-queries.ts). */
  localEnds: LocalEnds;
}

export class EndWrites {
  /** Terminal changes the store could not take yet, by task: written when it is back. */
  private readonly pending = new Map<string, PendingEnd>();
  private retryTimer: NodeJS.Timeout | undefined;
  /** Writes under way: close() waits for them (a shutdown hands tasks over only once every end it made is written). */
  private readonly writing = new Set<Promise<void>>();
  private readonly store: TaskStore;
  private readonly logger: Logger;
  private readonly events: GatewayEvents;
  private readonly localEnds: LocalEnds;

  constructor(deps: EndWritesDeps) {
    ({ store: this.store, logger: this.logger, events: this.events, localEnds: this.localEnds } = deps);
  }

  /**
   * Writes a task's terminal status (and drops its lease), and announces the end. When the store is away the
   * change is kept and written once it is back (`kept` on the retries).
   */
  record(end: PendingEnd, kept = false): Promise<void> {
    const write = this.write(end, kept);
    this.writing.add(write);
    const settled = (): void => void this.writing.delete(write);
    write.then(settled, settled);
    return write;
  }

  private async write(end: PendingEnd, kept: boolean): Promise<void> {
    const { task, change, reason } = end;
    const taskId = task.taskId;
    try {
      this.localEnds.begin(taskId);
      // Once the store has it (before its stored-bytes charge, which nobody waiting needs): this replica's waiters
      // take the outcome from here, not from a read after the event.
      const tell = (result: TransitionResult): void => this.localEnds.settle(taskId, result.ok ? withOutcomeOf(result.task, change) : undefined);
      const changed = await this.store.tasks.transition(taskId, change, tell);
      this.pending.delete(taskId);
      // After the answers of the waiters just woken (they go out in this tick's promise reactions): nobody waits on it.
      setImmediate(() => void this.store.leases.release(taskId).catch(() => undefined));
      if (!changed.ok) return; // already terminal: whatever ended it announced it
      const ended = { ...taskFacts(task), status: change.to as GatewayEventMap['task.ended']['status'], durationMs: taskAgeMs(task) };
      this.events.emit('task.ended', { ...ended, ...(reason === undefined ? {} : { reason }), ...(kept ? { kept } : {}) });
    } catch (error) {
      this.localEnds.settle(taskId, undefined);
      if (!this.pending.has(taskId)) this.logger.warn({ task: taskId, err: error }, 'the task store is unavailable: the task outcome is kept and written when it is back');
      this.pending.set(taskId, end);
      this.retryTimer ??= setTimeout(() => {
        this.retryTimer = undefined;
        void this.flush();
      }, PENDING_RETRY_MS);
    }
  }

  /** Whether the outcome of the task waits here for the store: its lease is still this replica's. */
  holds(taskId: string): boolean {
    return this.pending.has(taskId);
  }

  /** How many outcomes wait here for the store. */
  get count(): number {
    return this.pending.size;
  }

  /**
   * Shutdown: the writes under way settle, then one last try at what is kept (the store may be back), and no more
   * retries after it.
   */
  async close(): Promise<void> {
    clearTimeout(this.retryTimer);
    await Promise.allSettled([...this.writing]);
    if (this.pending.size > 0) await this.flush();
    clearTimeout(this.retryTimer);
  }

  private async flush(): Promise<void> {
    for (const [taskId, end] of [...this.pending]) {
      await this.record(end, true);
      if (this.pending.has(taskId)) return; // still away; record scheduled the next try
    }
  }
}

/** The task as a terminal change made it, with the outcome the change carried (the transition's answer has none). */
function withOutcomeOf(task: TaskRecord, change: TaskChange): TaskRecord {
  return change.outcome === undefined ? task : { ...task, outcome: change.outcome };
}
