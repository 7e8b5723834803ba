// Wire shapes of 2026-07-28 and its Tasks extension (SEP-2663). Nothing outside this file knows that revision's field
// names (`resultType`, `ttlMs`, `inputRequests`, `inputResponses`, `requestState`, caching hints): `codec` is what
// the router, the task methods and the request scope ask (src/protocol/wire-codec.ts), the other exports are this
// revision's own (MRTR retries, discovery).
import { asObject, withoutMetaKey, type JsonObject, type Outcome } from '../../jsonrpc.js';
import { GatewayError, InvalidParams, ResourceNotFound } from '../../errors.js';
import type { TaskRecord } from '../../store/task-store.js';
import type { WireCodec } from '../wire-codec.js';
import { META_SERVER_INFO, RELATED_TASK_META, TASKS_EXTENSION } from '../../mcp.js';

/** The version this revision speaks; the registry (src/protocol/revisions.ts) lists every revision's. */
export const STATELESS_VERSION = '2026-07-28';
/** The versions served statelessly by this folder, newest first. */
export const STATELESS_VERSIONS: readonly string[] = [STATELESS_VERSION];

export function isStatelessVersion(version: string): boolean {
  return STATELESS_VERSIONS.includes(version);
}

/** Results the revision requires caching hints on. */
const CACHEABLE_METHODS = new Set(['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read', 'server/discover']);

/**
 * A result for a 2026-07-28 client: `resultType` is required on every result (an upstream's own value is kept), and
 * list/read results carry caching hints. The gateway's answers may differ per principal, so its hints are
 * `private` and immediately stale unless the upstream said otherwise.
 */
export function statelessResult(method: string, result: JsonObject): JsonObject {
  const out: JsonObject = typeof result.resultType === 'string' ? { ...result } : { resultType: 'complete', ...result };
  if (CACHEABLE_METHODS.has(method)) {
    if (typeof out.ttlMs !== 'number') out.ttlMs = 0;
    if (out.cacheScope !== 'public' && out.cacheScope !== 'private') out.cacheScope = 'private';
  }
  return out;
}

/**
 * What `server/discover` answers: the versions the gateway speaks (`supported`: every revision's, newest first, as the
 * registry lists them), the upstreams' capabilities and the Tasks extension.
 */
export function discoverResult(upstreamCapabilities: JsonObject, instructions: string | undefined, version: string, supported: readonly string[]): JsonObject {
  const capabilities = { ...upstreamCapabilities };
  // Listing works (possibly empty) whatever the upstreams offer; listen carries their changes.
  capabilities.tools = { ...asObject(capabilities.tools), listChanged: true };
  capabilities.prompts = { ...asObject(capabilities.prompts), listChanged: true };
  capabilities.resources = { ...asObject(capabilities.resources), listChanged: true };
  capabilities.extensions = { ...asObject(capabilities.extensions), [TASKS_EXTENSION]: {} };
  delete capabilities.tasks;
  const result: JsonObject = {
    resultType: 'complete',
    supportedVersions: [...supported],
    capabilities,
    ttlMs: 0,
    cacheScope: 'private',
    _meta: { [META_SERVER_INFO]: { name: 'taskgate', title: 'taskgate MCP gateway', version } },
  };
  if (instructions !== undefined) result.instructions = instructions;
  return result;
}

/** `{}` acknowledgements (tasks/update, tasks/cancel). */
export const ACK: JsonObject = Object.freeze({ resultType: 'complete' }) as JsonObject;

/** The status a 2026-07-28 client sees: a tool error (`isError`) is a completed task whose result says so. */
export function statelessStatus(task: TaskRecord): TaskRecord['status'] {
  if (task.status === 'failed' && task.outcome !== undefined && 'result' in task.outcome) return 'completed';
  return task.status;
}

function taskFields(task: TaskRecord): JsonObject {
  const wire: JsonObject = {
    taskId: task.taskId,
    status: statelessStatus(task),
    createdAt: new Date(task.createdMs).toISOString(),
    lastUpdatedAt: new Date(task.updatedMs).toISOString(),
    ttlMs: task.retentionMs,
    pollIntervalMs: task.pollMs,
  };
  if (task.message !== undefined) wire.statusMessage = task.message;
  return wire;
}

/** The flat CreateTaskResult (no `task` wrapper, no `ttl`/`pollInterval`, no `requestState`). */
export function createTaskResult(task: TaskRecord): JsonObject {
  return { resultType: 'task', ...taskFields(task) };
}

/**
 * The DetailedTask: the task with its result inlined when completed (without the related-task marker the session
 * era adds), its JSON-RPC error when failed, and every outstanding input request while input_required. Terminal
 * tasks need their outcome read with them.
 */
export function detailedTask(task: TaskRecord): JsonObject {
  const wire = taskFields(task);
  const outcome = task.outcome;
  if (outcome !== undefined) {
    if ('error' in outcome) wire.error = outcome.error;
    // The inlined result is a CallToolResult of this revision, `resultType` included (requester libraries validate it).
    else wire.result = statelessResult('tools/call', withoutMetaKey(outcome.result, RELATED_TASK_META));
  }
  if (task.status === 'input_required' && task.openRequests !== undefined) wire.inputRequests = task.openRequests;
  return wire;
}

/**
 * An InputRequiredResult for a synchronous call whose upstream waits on the client (MRTR): its `questions`, keyed,
 * and the signed state the retry must carry to resume the call (none when nothing is parked).
 */
export function inputRequiredResult(questions: JsonObject, state: string | undefined): JsonObject {
  return state === undefined ? { resultType: 'input_required', inputRequests: questions } : { resultType: 'input_required', inputRequests: questions, requestState: state };
}

// ---- a client's MRTR retry and tasks/update ----

/** The answers a retry carries (`inputResponses`) when they are an object, unchecked per key; else undefined. */
export function answersIn(params: JsonObject): JsonObject | undefined {
  return asObject(params.inputResponses);
}

/** A retry's answers, checked: each input key maps to the client's response object; undefined when none are sent. */
export function retryAnswers(params: JsonObject): JsonObject | undefined {
  const answers = params.inputResponses;
  if (answers === undefined) return undefined;
  if (asObject(answers) === undefined || Object.values(answers as JsonObject).some((v) => asObject(v) === undefined)) {
    throw new GatewayError('invalid_params', 'Invalid params: inputResponses must map each input key to the client\'s response object');
  }
  return answers as JsonObject;
}

/** The signed state a retry carries to resume a parked call (`requestState`), as sent; undefined on a first request. */
export function retryState(params: JsonObject): unknown {
  return params.requestState;
}

/** A request without a retry's own fields (its answers and state): what the upstream, and the params digest, see. */
export function withoutRetryFields(params: JsonObject): JsonObject {
  const { inputResponses: _answers, requestState: _state, ...rest } = params;
  return rest;
}

/** The answers of a tasks/update: an object of responses keyed by input key. */
export function taskUpdateAnswers(params: JsonObject): JsonObject {
  const answers = params.inputResponses;
  if (typeof answers !== 'object' || answers === null || Array.isArray(answers)) {
    throw new GatewayError('invalid_params', 'tasks/update: params.inputResponses must be an object');
  }
  return answers as JsonObject;
}

/** An outcome for a 2026-07-28 client: results get `resultType` (and hints where due); errors pass unchanged. */
export function statelessOutcome(method: string, outcome: Outcome): Outcome {
  if ('error' in outcome) {
    // -32002 does not exist in this revision: resource-not-found is invalid params with the URI in data.
    if (outcome.error.code === ResourceNotFound) return { error: { ...outcome.error, code: InvalidParams } };
    return outcome;
  }
  return { result: statelessResult(method, outcome.result) };
}

// ---- the gateway as a client of a 2026-07-28 upstream ----

/** Whether an upstream's server/discover result lists `version` among its supported versions. */
export function supportsVersion(discovered: JsonObject, version: string): boolean {
  const versions = discovered.supportedVersions;
  return Array.isArray(versions) && versions.includes(version);
}

/** Whether an upstream's capabilities declare the Tasks extension (it runs tasks of its own). */
export function declaresTasksExtension(capabilities: JsonObject): boolean {
  return asObject(asObject(capabilities.extensions)?.[TASKS_EXTENSION]) !== undefined;
}

/** An upstream's result as a 2025 client gets it: that revision has no resultType nor caching hints. */
export function withoutStatelessFields(result: JsonObject): JsonObject {
  const { resultType: _type, ttlMs: _ttl, cacheScope: _scope, ...rest } = result;
  return rest;
}

/** The questions of an upstream's InputRequiredResult, keyed by input key; undefined for any other result. */
export function inputRequestsOf(result: JsonObject): JsonObject | undefined {
  if (result.resultType !== 'input_required') return undefined;
  return typeof result.inputRequests === 'object' && result.inputRequests !== null && !Array.isArray(result.inputRequests) ? (result.inputRequests as JsonObject) : {};
}

/** The retry of a request after an InputRequiredResult: the first request's params with this round's answers. */
export function retryParams(params: JsonObject, answers: JsonObject, inputRequired: JsonObject): JsonObject {
  const { requestState: _previous, inputResponses: _answered, ...base } = params;
  const retry: JsonObject = { ...base, inputResponses: answers };
  if (typeof inputRequired.requestState === 'string') retry.requestState = inputRequired.requestState;
  return retry;
}

/**
 * The terminal status an upstream's tasks/get answer (a DetailedTask) gives its own task, or undefined while it is
 * not over (or the answer is not one).
 */
export function endedStatusOf(result: JsonObject): 'completed' | 'failed' | 'cancelled' | undefined {
  const status = result.status;
  return status === 'completed' || status === 'failed' || status === 'cancelled' ? status : undefined;
}

/** The 2026-07-28 codec: flat task results, `resultType` on every result, caching hints on lists and reads. */
export const codec: WireCodec = {
  revision: STATELESS_VERSION,
  // What the revision removed (initialize, ping, logging/setLevel, resources/subscribe, tasks/result, tasks/list)
  // is not here: its router answers those as unknown.
  methods: [
    // Client to server.
    'server/discover', 'subscriptions/listen', 'tools/list', 'tools/call', 'prompts/list', 'prompts/get',
    'resources/list', 'resources/templates/list', 'resources/read', 'completion/complete',
    'tasks/get', 'tasks/update', 'tasks/cancel',
    // Server to client, as a call's input requests.
    'sampling/createMessage', 'elicitation/create', 'roots/list',
    // Notifications, either direction.
    'notifications/cancelled', 'notifications/progress', 'notifications/message',
    'notifications/tools/list_changed', 'notifications/prompts/list_changed', 'notifications/resources/list_changed',
    'notifications/resources/updated', 'notifications/tasks',
  ],
  wireFields: ['resultType', 'ttlMs', 'pollIntervalMs', 'inputRequests', 'inputResponses', 'requestState', 'cacheScope'],
  taskIdOf: (params) => params.taskId,
  taskResult: (task) => ({ resultType: 'complete', ...detailedTask(task) }),
  // The revision has no place for an immediate response.
  createTaskResult: (task) => createTaskResult(task),
  cancelResult: () => ({ ...ACK }),
  // Tools are listed as their upstreams list them: with the Tasks extension the server decides when a call is a task.
  toolView: (tool) => tool,
  clientResult: statelessResult,
  createdTask: (result) => {
    if (result.resultType !== 'task' || typeof result.taskId !== 'string') return undefined;
    return { taskId: result.taskId, retentionMs: typeof result.ttlMs === 'number' && result.ttlMs > 0 ? result.ttlMs : undefined };
  },
};
