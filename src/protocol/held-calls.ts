// A plain call (no task asked for) to a tool held for approval, under `plainCalls: wait`: the call waits as a task
// all the same (the hold must outlive the request and any replica), and the request is answered with what the
// task ends with. Both revisions' routers wait here; keep-alive progress is theirs. A caller that stops waiting
// (its request cancelled, its own timeout, a disconnect) leaves the hold to its approvers unless the rule says
// `approval.onCallerGone: cancel`: hosts time out long before people decide, and an SDK's timeout cancels.
import type { TaskPolicy } from '../config/types.js';
import { InternalError } from '../errors.js';
import type { Outcome } from '../jsonrpc.js';
import { isTerminal } from '../store/task-store.js';
import type { TaskQueries } from '../tasks/task-queries.js';

/**
 * What the held task ends with, as the plain call's answer: the upstream's own result or error once approved,
 * the denial, expiry or cancellation as an error; undefined when `signal` aborts first (the request is gone).
 */
export async function heldOutcome(queries: Pick<TaskQueries, 'waitFor' | 'find'>, taskId: string, signal: AbortSignal): Promise<Outcome | undefined> {
  const ended = await queries.waitFor(taskId, (task) => isTerminal(task.status), signal);
  if (ended === undefined) return undefined;
  const task = ended.outcome !== undefined ? ended : await queries.find(taskId, { withOutcome: true });
  return task.outcome ?? { error: { code: InternalError, message: task.message ?? `The call ended ${task.status}` } };
}

/** Whether a plain caller that stopped waiting takes its held call with it (`approval.onCallerGone: cancel`). */
export function leavingCancels(policy: Pick<TaskPolicy, 'approval'>): boolean {
  return policy.approval?.onCallerGone === 'cancel';
}
