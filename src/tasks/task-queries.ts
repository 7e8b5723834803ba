// The read side of the task core: a task found by its id, a principal's tasks page by page, and waiting until a
// task reaches a state. Pure reads over the store and its events (plus the ends this replica is writing, whose
// outcome a waiter here takes without a second read); nothing here depends on what runs on this replica, so any
// replica answers them alike. tasks/get, tasks/list, tasks/result and the task tools read through this part.
import { GatewayError, storeUnavailable } from '../errors.js';
import { NO_EVENTS, type GatewayEvents } from '../events.js';
import { InvalidCursorError, isTerminal, type TaskPage, type TaskRecord, type TaskStore } from '../store/task-store.js';
import type { LocalEnds } from './local-ends.js';
import type { TaskReader } from '../principals.js';

const LIST_PAGE_SIZE = 50;
/** What an unknown task id gets (-32602), in every era. */
export const NOT_FOUND = 'Failed to retrieve task: Task not found';
const EXPIRED = 'Failed to retrieve task: Task has expired';

export interface TaskQueriesDeps {
  store: TaskStore;
  /** Ends of tasks this replica is writing (end-writes.ts): waiters here hear of them with the outcome in hand. */
  localEnds: LocalEnds;
  /** Where a read refused by the reader's access rules is announced (audited). */
  events?: GatewayEvents;
}

export class TaskQueries {
  private readonly store: TaskStore;
  private readonly localEnds: LocalEnds;
  private readonly events: GatewayEvents;

  constructor(deps: TaskQueriesDeps) {
    ({ store: this.store, localEnds: this.localEnds } = deps);
    this.events = deps.events ?? NO_EVENTS;
  }

  /**
   * The task an id names, read once (with its outcome when `withOutcome`). Unknown and expired ids are
   * invalid params, with the messages of the spec; a task an upstream runs itself only when `allowNative`. For a
   * `reader`, another principal's task, and a task of a tool the reader may no longer use, are answered exactly
   * like an unknown id: the rules hide that tool, so they hide what it did too.
   */
  async find(taskId: unknown, options: { withOutcome?: boolean; allowNative?: boolean; reader?: TaskReader } = {}): Promise<TaskRecord> {
    if (typeof taskId !== 'string' || taskId === '') throw new GatewayError('invalid_params', 'params.taskId must be a non-empty string');
    const task = await this.store.tasks.get(taskId, { outcome: options.withOutcome === true }).catch(unavailable);
    const reader = options.reader;
    if (task !== undefined && reader !== undefined && !this.readable(task, reader)) throw new GatewayError('invalid_params', NOT_FOUND);
    if (task?.native === true && options.allowNative !== true) {
      throw new GatewayError('invalid_params', `Task ${taskId} is run by upstream '${task.upstream}' itself; use its 2026-07-28 tasks methods`);
    }
    if (task !== undefined) return task;
    const expired = await this.store.tasks.expired(taskId).catch(unavailable);
    throw new GatewayError('invalid_params', expired ? EXPIRED : NOT_FOUND);
  }

  /** One page of a principal's tasks, newest first; without those of tools `mayUse` denies (the page may come out short). */
  async list(principal: string, cursor: unknown, mayUse: (tool: string) => boolean = () => true): Promise<TaskPage> {
    if (cursor !== undefined && typeof cursor !== 'string') throw new GatewayError('invalid_params', 'Invalid cursor');
    try {
      const page = await this.store.tasks.list(principal, cursor === undefined ? { limit: LIST_PAGE_SIZE } : { cursor, limit: LIST_PAGE_SIZE });
      return { ...page, tasks: page.tasks.filter((task) => mayUse(task.tool)) };
    } catch (error) {
      if (error instanceof InvalidCursorError) throw new GatewayError('invalid_params', 'Invalid cursor');
      throw storeUnavailable(error);
    }
  }

  /**
   * Resolves with the task once `done` holds for it (read again after subscribing: a change in between is not
   * missed), or undefined when `signal` aborts first.
   */
  waitFor(taskId: string, done: (task: TaskRecord) => boolean, signal: AbortSignal): Promise<TaskRecord | undefined> {
    return new Promise<TaskRecord | undefined>((resolve, reject) => {
      // A terminal state heard while this replica's own write of the task's end is in flight is held: the write's
      // answer follows at once, with the outcome (local-ends.ts). It counts only if that write did not end the task.
      let held: TaskRecord | undefined;
      const settle = (task: TaskRecord | undefined, error?: unknown): void => {
        stopWatching();
        stopLocal();
        signal.removeEventListener('abort', onAbort);
        if (error === undefined) resolve(task);
        else reject(error);
      };
      const onAbort = (): void => settle(undefined);
      const seen = (task: TaskRecord): void => {
        if (isTerminal(task.status) && this.localEnds.isWriting(taskId)) held = task;
        else if (done(task)) settle(task);
      };
      const stopWatching = this.store.tasks.watch(taskId, seen);
      const stopLocal = this.localEnds.listen(taskId, (ended) => {
        const task = ended ?? held;
        held = undefined;
        if (task !== undefined && done(task)) settle(task);
      });
      if (signal.aborted) return settle(undefined);
      signal.addEventListener('abort', onAbort, { once: true });
      this.store.tasks.get(taskId).then(
        (task) => (task === undefined ? settle(undefined, new GatewayError('invalid_params', NOT_FOUND)) : seen(task)),
        (error: unknown) => settle(undefined, storeUnavailable(error)),
      );
    });
  }

  /** Resolves once the task is terminal (read again after subscribing: a change in between is not missed). */
  async untilTerminal(taskId: string): Promise<TaskRecord> {
    // Never aborted: waitFor resolves only with the task.
    return (await this.waitFor(taskId, (task) => isTerminal(task.status), new AbortController().signal)) as TaskRecord;
  }

  /**
   * The task once terminal, with its outcome, refused as `find` refuses it (`reader`). When its run ended here the
   * outcome comes from the run (the store took it before anyone was told); otherwise it is read from the store.
   */
  async untilResult(taskId: string, reader?: TaskReader): Promise<TaskRecord> {
    const ended = await this.untilTerminal(taskId);
    if (ended.outcome === undefined) return this.find(taskId, { withOutcome: true, ...(reader === undefined ? {} : { reader }) });
    if (reader !== undefined && !this.readable(ended, reader)) throw new GatewayError('invalid_params', NOT_FOUND);
    return ended;
  }

  /** Whether `reader` may see the task: its own, and of a tool it may still use (a refusal of the tool is audited). */
  private readable(task: TaskRecord, reader: TaskReader): boolean {
    if (reader.principal !== undefined && task.principal !== reader.principal) return false;
    if (reader.mayUse(task.tool)) return true;
    this.events.emit('access.denied', { principal: reader.principal, kind: 'tools', name: task.tool, taskId: task.taskId });
    return false;
  }
}

/** A store failure as the client meets it: "the task store is unavailable", never the Redis client's own words. */
export function unavailable(error: unknown): never {
  throw storeUnavailable(error);
}
