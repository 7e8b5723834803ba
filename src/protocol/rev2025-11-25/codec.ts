// Wire shapes of the 2025-11-25 tasks protocol (`ttl`, `pollInterval`, a tool's `execution.taskSupport`, the
// nested CreateTaskResult). Nothing outside this file knows that revision's field names: `codec` is what the router,
// the task methods and the request scope ask (src/protocol/wire-codec.ts), the other exports this revision's own.
import type { TaskMode } from '../../config/types.js';
import { GatewayError } from '../../errors.js';
import { asObject, type JsonObject, type Outcome } from '../../jsonrpc.js';
import { RELATED_TASK_META } from '../../mcp.js';
import type { TaskRecord } from '../../store/task-store.js';
import type { CreatedTask, WireCodec } from '../wire-codec.js';

export const MODEL_IMMEDIATE_RESPONSE_META = 'io.modelcontextprotocol/model-immediate-response';

/**
 * The retention a task-augmented request asks for (`params.task.ttl`), or undefined for the policy's default. A
 * whole number of milliseconds from 1 to 2^53 - 1; anything else is invalid params, since a fraction would round to
 * 0 and 0 (or less) asks for a task that is gone before it can be read. Above `maxTtlMs` it is clamped (the spec lets
 * receivers override it) and the granted ttl is reported back.
 */
export function requestedTtl(task: unknown): number | undefined {
  const ttl = asObject(task)?.ttl;
  if (asObject(task) !== undefined && (ttl === undefined || (typeof ttl === 'number' && Number.isSafeInteger(ttl) && ttl >= 1))) return ttl;
  const given = typeof ttl === 'number' ? `; got ttl ${ttl}` : ttl === undefined ? '' : `; got a ttl of type ${ttl === null ? 'null' : Array.isArray(ttl) ? 'array' : typeof ttl}`;
  throw new GatewayError('invalid_params', `tools/call: params.task must be an object whose ttl, if given, is a whole number of milliseconds from 1 to ${Number.MAX_SAFE_INTEGER}${given}`);
}

/** The `Task` object of 2025-11-25. */
export function sessionTask(task: TaskRecord): JsonObject {
  const wire: JsonObject = {
    taskId: task.taskId,
    status: task.status,
    ttl: task.retentionMs,
    createdAt: new Date(task.createdMs).toISOString(),
    lastUpdatedAt: new Date(task.updatedMs).toISOString(),
    pollInterval: task.pollMs,
  };
  if (task.message !== undefined) wire.statusMessage = task.message;
  return wire;
}

export function createTaskResult(task: TaskRecord, immediateResponse: string | undefined): JsonObject {
  const result: JsonObject = { task: sessionTask(task) };
  if (immediateResponse !== undefined && immediateResponse !== '') {
    result._meta = { [MODEL_IMMEDIATE_RESPONSE_META]: immediateResponse };
  }
  return result;
}

/**
 * What `tasks/result` answers: exactly what the upstream returned, with the related-task `_meta` added to a
 * result; a JSON-RPC error is returned unchanged.
 */
export function taskPayload(task: TaskRecord & { outcome: Outcome }): Outcome {
  if ('error' in task.outcome) return task.outcome;
  const result = task.outcome.result;
  const meta = typeof result._meta === 'object' && result._meta !== null ? (result._meta as JsonObject) : {};
  return { result: { ...result, _meta: { ...meta, [RELATED_TASK_META]: { taskId: task.taskId } } } };
}

/** `params._meta` carrying the related-task marker, for messages the gateway sends on a task's behalf. */
export function withRelatedTask(params: JsonObject | undefined, taskId: string): JsonObject {
  const base = params ?? {};
  const meta = typeof base._meta === 'object' && base._meta !== null ? (base._meta as JsonObject) : {};
  return { ...base, _meta: { ...meta, [RELATED_TASK_META]: { taskId } } };
}

// ---- the gateway as a client: an upstream's own 2025-11-25 tasks ----

/**
 * How an upstream runs one of its tools as a task: the tool's `execution.taskSupport`, counted only when the
 * upstream declares task-augmented tool calls in its capabilities (otherwise a client must not try).
 */
export function upstreamTaskSupport(capabilities: JsonObject, tool: JsonObject | undefined): TaskMode {
  const toolCalls = asObject(asObject(asObject(asObject(capabilities.tasks)?.requests)?.tools)?.call);
  const declared = asObject(tool?.execution)?.taskSupport;
  if (toolCalls === undefined || (declared !== 'optional' && declared !== 'required')) return 'forbidden';
  return declared;
}

/** The poll interval an upstream's Task (or tasks/get result) suggests, in milliseconds, if it gives one. */
export function suggestedPollMs(task: JsonObject): number | undefined {
  return typeof task.pollInterval === 'number' && Number.isFinite(task.pollInterval) ? task.pollInterval : undefined;
}

/** The status message of an upstream's Task or of its notifications/tasks/status, if any. */
export function taskStatusMessage(task: JsonObject | undefined): string | undefined {
  return typeof task?.statusMessage === 'string' ? task.statusMessage : undefined;
}

/**
 * A tool as a session lists it: its task support the gateway's mode for it (never the upstream's own), or none at
 * all for a session that speaks no tasks (an `execution` left empty by that goes too).
 */
function toolView(tool: JsonObject, mode: TaskMode | undefined): JsonObject {
  const { taskSupport: _upstreams, ...execution } = asObject(tool.execution) ?? {};
  if (mode === undefined) {
    if (tool.execution === undefined) return tool;
    const { execution: _execution, ...rest } = tool;
    return Object.keys(execution).length === 0 ? rest : { ...rest, execution };
  }
  return { ...tool, execution: { ...execution, taskSupport: mode } };
}

/** The Task object an upstream's CreateTaskResult nests under `task` (its status message, its poll interval). */
export function createdTaskObject(result: JsonObject): JsonObject | undefined {
  return asObject(result.task);
}

/** The task of an upstream's CreateTaskResult, which nests it under `task`. */
function createdTask(result: JsonObject): CreatedTask | undefined {
  const task = asObject(result.task);
  const taskId = task?.taskId;
  if (typeof taskId !== 'string') return undefined;
  return { taskId, retentionMs: typeof task?.ttl === 'number' ? task.ttl : undefined };
}

/** The 2025-11-25 codec (it serves the older session revisions too, which list tools without task support). */
export const codec: WireCodec = {
  revision: '2025-11-25',
  methods: [
    // Client to server (the session revisions' tasks/* as this revision's router answers them).
    'initialize', 'ping', 'tools/list', 'tools/call', 'prompts/list', 'prompts/get',
    'resources/list', 'resources/templates/list', 'resources/read', 'resources/subscribe', 'resources/unsubscribe',
    'logging/setLevel', 'completion/complete', 'tasks/get', 'tasks/result', 'tasks/list', 'tasks/cancel', 'tasks/delete',
    // Server to client.
    'sampling/createMessage', 'elicitation/create', 'roots/list',
    // Notifications, either direction.
    'notifications/initialized', 'notifications/cancelled', 'notifications/progress', 'notifications/message',
    'notifications/roots/list_changed', 'notifications/tools/list_changed', 'notifications/prompts/list_changed',
    'notifications/resources/list_changed', 'notifications/resources/updated', 'notifications/tasks/status',
    'notifications/elicitation/complete',
  ],
  wireFields: ['ttl', 'pollInterval', 'taskSupport'],
  taskIdOf: (params) => params.taskId,
  taskResult: sessionTask,
  createTaskResult,
  // The task as it is now: cancelled.
  cancelResult: sessionTask,
  toolView,
  // Results travel as the upstream sent them.
  clientResult: (_method, result) => result,
  createdTask,
};
