// Wire shapes of 2026-07-28 and its Tasks extension (SEP-2663). Nothing outside this file knows that era's field
// names (`resultType`, `ttlMs`, `inputRequests`, caching hints).
import { InvalidParams, ResourceNotFound, withoutMetaKey, type JsonObject, type Outcome } from '../../jsonrpc.js';
import type { TaskRecord } from '../../store/task-store.js';
import { RELATED_TASK_META } from '../mcp.js';

/** Results the revision requires caching hints on. */
const CACHEABLE_METHODS = new Set(['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read', 'server/discover']);

/**
 * A result for a modern client: `resultType` is required on every result (an upstream's own value is kept), and
 * list/read results carry caching hints. The gateway's answers may differ per principal, so its hints are
 * `private` and immediately stale unless the upstream said otherwise.
 */
export function modernResult(method: string, result: JsonObject): JsonObject {
  const out: JsonObject = typeof result.resultType === 'string' ? { ...result } : { resultType: 'complete', ...result };
  if (CACHEABLE_METHODS.has(method)) {
    if (typeof out.ttlMs !== 'number') out.ttlMs = 0;
    if (out.cacheScope !== 'public' && out.cacheScope !== 'private') out.cacheScope = 'private';
  }
  return out;
}

/** `{}` acknowledgements (tasks/update, tasks/cancel). */
export const ACK: JsonObject = Object.freeze({ resultType: 'complete' }) as JsonObject;

/** The status a modern client sees: a tool error (`isError`) is a completed task whose result says so. */
export function modernStatus(task: TaskRecord): TaskRecord['status'] {
  if (task.status === 'failed' && task.outcome !== undefined && 'result' in task.outcome) return 'completed';
  return task.status;
}

function taskFields(task: TaskRecord): JsonObject {
  const wire: JsonObject = {
    taskId: task.taskId,
    status: modernStatus(task),
    createdAt: new Date(task.createdAt).toISOString(),
    lastUpdatedAt: new Date(task.lastUpdatedAt).toISOString(),
    ttlMs: task.ttlMs,
    pollIntervalMs: task.pollIntervalMs,
  };
  if (task.statusMessage !== undefined) wire.statusMessage = task.statusMessage;
  return wire;
}

/** The flat CreateTaskResult (no `task` wrapper, no `ttl`/`pollInterval`, no `requestState`). */
export function createTaskResult(task: TaskRecord): JsonObject {
  return { resultType: 'task', ...taskFields(task) };
}

/**
 * The DetailedTask: the task with its result inlined when completed (without the related-task marker the legacy
 * era adds), its JSON-RPC error when failed, and every outstanding input request while input_required. Terminal
 * tasks need their outcome read with them.
 */
export function detailedTask(task: TaskRecord): JsonObject {
  const wire = taskFields(task);
  const outcome = task.outcome;
  if (outcome !== undefined) {
    if ('error' in outcome) wire.error = outcome.error;
    // The inlined result is a CallToolResult of this revision, `resultType` included (requester libraries validate it).
    else wire.result = modernResult('tools/call', withoutMetaKey(outcome.result, RELATED_TASK_META));
  }
  if (task.status === 'input_required' && task.inputRequests !== undefined) wire.inputRequests = task.inputRequests;
  return wire;
}

/** An InputRequiredResult for a synchronous call whose upstream waits on the client (MRTR). */
export function inputRequiredResult(inputRequests: JsonObject, requestState: string): JsonObject {
  return { resultType: 'input_required', inputRequests, requestState };
}

/** An outcome for a modern client: results get `resultType` (and hints where due); errors pass unchanged. */
export function modernOutcome(method: string, outcome: Outcome): Outcome {
  if ('error' in outcome) {
    // -32002 does not exist in this revision: resource-not-found is invalid params with the URI in data.
    if (outcome.error.code === ResourceNotFound) return { error: { ...outcome.error, code: InvalidParams } };
    return outcome;
  }
  return { result: modernResult(method, outcome.result) };
}
