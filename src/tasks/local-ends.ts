// Ends of tasks written by this replica, told to the waiters on this replica by the run itself, outcome in hand,
// as soon as the store has taken the write. Without this a waiter here heard of the end from the store's event
// (which on one Redis server came about half a millisecond after the write's reply, and on a cluster later still)
// and then read the outcome back: a second round trip for an answer this process held all along. Other replicas
// still hear of the end from the store's event, and read the outcome from the store.
import type { TaskRecord } from '../store/task-store.js';

/** What a waiter is told when a write of an end here is over: the task with its outcome, or to ask the store. */
export type LocalEndListener = (ended: TaskRecord | undefined) => void;

export class LocalEnds {
  /** Tasks whose terminal write from this replica is in flight. */
  private readonly writing = new Set<string>();
  private readonly listeners = new Map<string, Set<LocalEndListener>>();

  /** A terminal write of `taskId` is about to go to the store. */
  begin(taskId: string): void {
    this.writing.add(taskId);
  }

  /**
   * Whether a terminal write of `taskId` is in flight here: a terminal event heard meanwhile may be that write's
   * own, and its waiters had better wait the moment it takes for the write's answer, which carries the outcome.
   */
  isWriting(taskId: string): boolean {
    return this.writing.has(taskId);
  }

  /**
   * The write is over. `ended`: the task as this write ended it, with its outcome (the store has it). Undefined:
   * this write did not end the task (it was terminal already, or the store did not answer), so the store says.
   */
  settle(taskId: string, ended: TaskRecord | undefined): void {
    if (!this.writing.delete(taskId)) return;
    const listeners = this.listeners.get(taskId);
    if (listeners !== undefined) for (const listener of [...listeners]) listener(ended);
  }

  /** Calls `listener` whenever a terminal write of `taskId` here is over, until the returned function is called. */
  listen(taskId: string, listener: LocalEndListener): () => void {
    let listeners = this.listeners.get(taskId);
    if (listeners === undefined) this.listeners.set(taskId, (listeners = new Set()));
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.listeners.get(taskId) === listeners) this.listeners.delete(taskId);
    };
  }
}
