// What the task tools answer, in words a model reads and with the structured content beside them: a task's status,
// its result once it ended, a task still running, a held call; and the error result for what the model asked wrongly.
import type { TaskToolsConfig } from '../config/types.js';
import type { JsonObject } from '../jsonrpc.js';
import { RELATED_TASK_META } from '../mcp.js';
import type { TaskRecord } from '../store/task-store.js';
import { holdState } from '../tasks/approvals.js';

/** An isError tool result, for what the model asked wrongly (no JSON-RPC error: the host would hide the reason). */
export function toolError(text: string): JsonObject {
  return { content: [{ type: 'text', text }], isError: true };
}

export function taskSummary(task: TaskRecord): { taskId: string; tool: string; status: string; statusMessage?: string; createdAt: string; lastUpdatedAt: string; waitingFor?: string[] } {
  const summary: ReturnType<typeof taskSummary> = {
    taskId: task.taskId,
    tool: task.tool,
    status: task.status,
    createdAt: new Date(task.createdMs).toISOString(),
    lastUpdatedAt: new Date(task.updatedMs).toISOString(),
  };
  if (task.message !== undefined) summary.statusMessage = task.message;
  const waitingFor = describeRequests(task);
  if (waitingFor.length > 0) summary.waitingFor = waitingFor;
  return summary;
}

/** What the task's upstream waits for the client to answer, in words. */
function describeRequests(task: TaskRecord): string[] {
  if (task.status !== 'input_required' || task.openRequests === undefined) return [];
  return Object.values(task.openRequests).map((value) => {
    const request = (value ?? {}) as { method?: string; params?: { message?: unknown } };
    const message = typeof request.params?.message === 'string' ? `: ${request.params.message}` : '';
    if (request.method === 'elicitation/create') return `the user's answer to a question${message}`;
    if (request.method === 'sampling/createMessage') return 'a reply from the model (sampling)';
    return `an answer to ${String(request.method)}`;
  });
}

export function statusResult(task: TaskRecord, lead?: string): JsonObject {
  const summary = taskSummary(task);
  const lines = [
    lead ?? `Task ${task.taskId} (${task.tool}) is ${task.status}.`,
    ...(task.message === undefined ? [] : [`Status: ${task.message}`]),
    ...(summary.waitingFor ?? []).map((what) => `It waits for ${what}. Calling the result tool puts the question to you.`),
  ];
  return { content: [{ type: 'text', text: lines.join('\n') }], structuredContent: summary as unknown as JsonObject };
}

export function stillRunning(task: TaskRecord, names: TaskToolsConfig['names']): JsonObject {
  const progress = task.message === undefined ? '' : ` Latest status: ${task.message}.`;
  const waiting = describeRequests(task).map((what) => ` It waits for ${what}.`).join('');
  const text = `Task ${task.taskId} (${task.tool}) is still ${task.status === 'input_required' ? 'waiting for input' : 'running'}.${progress}${waiting} ` +
    `Call ${names.result} again to keep waiting, or ${names.cancel} to stop it.`;
  return { content: [{ type: 'text', text }], _meta: { [RELATED_TASK_META]: { taskId: task.taskId } } };
}

/**
 * A terminal task as task_result returns it: the upstream's result exactly (content, structuredContent, isError),
 * marked with the task; a JSON-RPC error, a cancellation or a loss as an error result that says what happened.
 */
export function resultOf(task: TaskRecord): JsonObject {
  const marker = { [RELATED_TASK_META]: { taskId: task.taskId } };
  const outcome = task.outcome;
  if (outcome !== undefined && 'result' in outcome) {
    const meta = typeof outcome.result._meta === 'object' && outcome.result._meta !== null ? (outcome.result._meta as JsonObject) : {};
    return { ...outcome.result, _meta: { ...meta, ...marker } };
  }
  const why = outcome !== undefined ? `${outcome.error.message} (error ${outcome.error.code})`
    : task.status === 'cancelled' ? 'it was cancelled'
    : (task.message ?? `it ended ${task.status}`);
  return { ...toolError(`Task ${task.taskId} (${task.tool}) ${task.status === 'cancelled' ? 'was cancelled' : 'failed'}: ${why}`), _meta: marker };
}

/** A held call as the approval tools show it (what /approvals lists, in short). */
export function heldCallSummary(task: TaskRecord, now: number): JsonObject {
  const params = task.call?.params;
  return {
    taskId: task.taskId,
    tool: task.tool,
    upstream: task.upstream,
    principal: task.principal,
    arguments: params?.arguments ?? {},
    ageMs: Math.max(0, now - task.createdMs),
    ...(task.approval === undefined ? {} : { status: holdState(task) ?? task.approval.state, digest: task.approval.digest, deadline: new Date(task.approval.deadlineMs).toISOString() }),
    ...(task.approval?.decidedBy === undefined ? {} : { decidedBy: task.approval.decidedBy }),
  };
}
