// The body of a delivery, as Standard Webhooks shapes it: `{ type, timestamp, data }`, `type` first (the delivery
// loop reads it back without parsing the body). `data` is the task as it stood when the event was queued: id, tool,
// upstream, principal, status, status message, times, and what the event itself adds (an approval's decision);
// with `includeResult`, an ended task's result (or error) too, unless that would pass maxBodyBytes. Without it, the
// status message of a failure the upstream reported is a generic one: the error's text is the tool's output.
import type { TaskRecord } from '../store/task-store.js';
import type { JsonObject } from '../jsonrpc.js';
import { nameOf } from '../principals.js';
import type { WebhookEvent } from './webhook-events.js';

/**
 * What a delivery without the result says of a failure the upstream reported (a JSON-RPC error or a tool error): the
 * status message would be the error's own text, which is the tool's output as much as a result is.
 */
export const TOOL_ERROR_WITHHELD = 'The tool reported an error; its text goes only to endpoints with includeResult';

/** The `type` of a body this module built. */
export function typeOfBody(body: string): string {
  return /^\{"type":"([a-z_.]+)"/.exec(body)?.[1] ?? 'unknown';
}

/**
 * The body for one endpoint, or undefined when even without the result it is larger than `maxBodyBytes`. `task` is
 * the stored record (with its outcome when a result may go with it); undefined when it is already gone.
 */
export function webhookBody(event: WebhookEvent, task: TaskRecord | undefined, includeResult: boolean, maxBodyBytes: number): string | undefined {
  const { facts } = event;
  const data: JsonObject = {
    // A connection event (issue 41) is about a user and an upstream: no task, no tool.
    ...(facts.taskId !== undefined && { taskId: facts.taskId, tool: facts.tool }),
    upstream: facts.upstream,
    ...(facts.taskId === undefined && facts.issuer !== undefined && { issuer: facts.issuer }),
    // Only an authenticated principal is named: without auth a principal is a session id, which is a bearer.
    principal: nameOf(facts.principal) === undefined ? 'anonymous' : facts.principal,
  };
  if (task !== undefined) {
    data.status = task.status;
    // A failure with no reason of the gateway's (maxRunMs, lost, ...) was reported by the upstream: its message is its text.
    const toolError = event.ended && task.status === 'failed' && event.details.reason === undefined;
    if (task.message !== undefined) data.statusMessage = toolError && !includeResult ? TOOL_ERROR_WITHHELD : task.message;
    data.createdAt = new Date(task.createdMs).toISOString();
    data.lastUpdatedAt = new Date(task.updatedMs).toISOString();
  }
  Object.assign(data, event.details);
  const timestamp = new Date(event.atMs).toISOString();
  const outcome = includeResult && event.ended ? task?.outcome : undefined;
  if (outcome !== undefined) {
    const withResult = JSON.stringify({ type: event.type, timestamp, data: { ...data, ...outcome } });
    if (Buffer.byteLength(withResult) <= maxBodyBytes) return withResult;
    data.resultOmitted = true;
  }
  const body = JSON.stringify({ type: event.type, timestamp, data });
  return Buffer.byteLength(body) <= maxBodyBytes ? body : undefined;
}
