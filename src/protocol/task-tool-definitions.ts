// The gateway's own tools as tools/list shows them (the same in both revisions): the task tools, under the names
// the config gives them, and the approval tools, listed to approvers only. And how a tool that may be answered in
// the background is shown to a client that calls it plainly.
import type { TaskPolicy, TaskToolsConfig } from '../config/types.js';
import type { JsonObject } from '../jsonrpc.js';
import { MAX_COMMENT_CHARS } from '../tasks/approvals.js';

/** The approval tools' names: the gateway's own, listed and answered only to approvers (tasks.rules[].approval). */
export const APPROVAL_TOOL_NAMES = { list: 'approval_list', decide: 'approval_decide' } as const;

const TASK_ID_INPUT = { type: 'string', description: 'The task id, as the background answer or task_list gave it.' };

const TASK_OUTPUT = {
  type: 'object',
  properties: {
    taskId: { type: 'string' },
    tool: { type: 'string' },
    status: { type: 'string', enum: ['working', 'input_required', 'completed', 'failed', 'cancelled'] },
    statusMessage: { type: 'string' },
    createdAt: { type: 'string' },
    lastUpdatedAt: { type: 'string' },
    waitingFor: { type: 'array', items: { type: 'string' } },
  },
  required: ['taskId', 'tool', 'status', 'createdAt', 'lastUpdatedAt'],
};

/** The task tools as tools/list shows them, in both revisions (none when they are off), then the approval tools. */
export function taskToolDefinitions(config: TaskToolsConfig): JsonObject[] {
  return [...ownTaskToolDefinitions(config), ...APPROVAL_TOOL_DEFINITIONS];
}

/** The approval tools (listed to approvers only: TaskTools.shownTo). */
const APPROVAL_TOOL_DEFINITIONS: readonly JsonObject[] = [
  {
    name: APPROVAL_TOOL_NAMES.list,
    title: 'Calls waiting for your approval',
    description: 'List the tool calls held until an approver decides, that you may approve or deny: task id, tool, who asked, the arguments exactly as the tool will get them, their digest (pass it to approval_decide), and the deadline. A page at a time, soonest deadline first: when the result has a nextCursor, call again with it to see more.',
    inputSchema: { type: 'object', properties: { cursor: { type: 'string', description: 'The nextCursor of the previous page; absent for the first page.' } } },
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: APPROVAL_TOOL_NAMES.decide,
    title: 'Approve or deny a held call',
    description: 'Approve (the call runs once, with the arguments listed) or deny (it never runs) a held tool call, with an optional comment the caller sees. The decision holds only for the call the digest names: if the call changed since it was listed, nothing is decided and the call is shown as it stands.',
    inputSchema: {
      type: 'object',
      properties: {
        taskId: { type: 'string', description: `The task id, as ${APPROVAL_TOOL_NAMES.list} gave it.` },
        decision: { type: 'string', enum: ['approve', 'deny'] },
        digest: { type: 'string', description: `The call's digest, as ${APPROVAL_TOOL_NAMES.list} gave it: binds the decision to the arguments shown.` },
        comment: { type: 'string', maxLength: MAX_COMMENT_CHARS, description: 'Why: shown to the caller with a denial.' },
      },
      required: ['taskId', 'decision', 'digest'],
    },
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  },
];

function ownTaskToolDefinitions(config: TaskToolsConfig): JsonObject[] {
  if (!config.enabled) return [];
  const { names, waitSeconds, maxWaitSeconds } = config;
  const readOnly = { readOnlyHint: true, openWorldHint: false };
  return [
    {
      name: names.result,
      title: 'Background task result',
      description:
        `Get the result of a tool call that is running in the background (its answer gave a task id). Waits up to waitSeconds ` +
        `(default ${waitSeconds}) for it to finish and then returns the tool's own result; if it is still running, ` +
        `says so: call this again to keep waiting.`,
      inputSchema: {
        type: 'object',
        properties: {
          taskId: TASK_ID_INPUT,
          waitSeconds: { type: 'number', minimum: 0, maximum: maxWaitSeconds, description: `Seconds to wait for the task to finish (0 = do not wait; at most ${maxWaitSeconds}).` },
        },
        required: ['taskId'],
      },
      annotations: readOnly,
    },
    {
      name: names.status,
      title: 'Background task status',
      description: 'Check on a background task without waiting: whether it is still working, waiting for input, or done, and its latest progress message.',
      inputSchema: { type: 'object', properties: { taskId: TASK_ID_INPUT }, required: ['taskId'] },
      outputSchema: TASK_OUTPUT,
      annotations: readOnly,
    },
    {
      name: names.cancel,
      title: 'Cancel a background task',
      description: 'Stop a background task whose result is no longer needed; its tool call is cancelled.',
      inputSchema: { type: 'object', properties: { taskId: TASK_ID_INPUT }, required: ['taskId'] },
      outputSchema: TASK_OUTPUT,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    {
      name: names.list,
      title: 'List background tasks',
      description: 'List your background tasks, newest first, with their ids, tools and status: use it to find a task id you no longer have.',
      inputSchema: { type: 'object', properties: { cursor: { type: 'string', description: 'From the previous page, to see older tasks.' } } },
      outputSchema: {
        type: 'object',
        properties: { tasks: { type: 'array', items: TASK_OUTPUT }, nextCursor: { type: 'string' } },
        required: ['tasks'],
      },
      annotations: readOnly,
    },
    {
      name: names.delete,
      title: 'Delete a background task',
      description: 'Delete a background task that has ended, with its result, once you no longer need it (do so promptly when the result holds sensitive data). A task still running must be cancelled first.',
      inputSchema: { type: 'object', properties: { taskId: TASK_ID_INPUT }, required: ['taskId'] },
      outputSchema: { type: 'object', properties: { taskId: { type: 'string' }, deleted: { type: 'boolean' } }, required: ['taskId', 'deleted'] },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
  ];
}

/**
 * A tool as a client that calls it plainly sees it. Under `plainCalls: background` its answer may be the task
 * handle, which cannot match an `outputSchema` (and clients check results against it), so the schema is not
 * listed; task_result still returns the tool's structuredContent unchanged.
 */
export function plainCallView(tool: JsonObject, policy: TaskPolicy): JsonObject {
  if (tool.outputSchema === undefined || policy.plainCalls !== 'background' || policy.mode === 'forbidden') return tool;
  const { outputSchema: _schema, ...rest } = tool;
  return rest;
}
