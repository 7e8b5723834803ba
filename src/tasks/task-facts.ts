// What every task event says about its task (src/events.ts), read off the stored record.
import type { TaskFacts } from '../events.js';
import type { TaskRecord } from '../store/task-store.js';

export function taskFacts(task: Pick<TaskRecord, 'taskId' | 'principal' | 'tool' | 'upstream'>): TaskFacts {
  return { taskId: task.taskId, principal: task.principal, tool: task.tool, upstream: task.upstream };
}

/** How long a task has existed, for `task.ended`. */
export function taskAgeMs(task: Pick<TaskRecord, 'createdMs'>): number {
  return Math.max(0, Date.now() - task.createdMs);
}
