// The gateway's own tools for hosts that do not speak tasks. A plain tools/call under `plainCalls: background`
// that outlives `taskAfterMs` is answered with an ordinary tool result naming its task; these tools then let the
// model fetch the upstream's real result, check on the task, stop it, find it again, or delete it once it ended
// (tasks/delete's rules: a running task is cancelled first). They act on the same
// tasks as tasks/*, under the same principal rules, and are the same in both revisions: what differs (how an
// input request reaches a client that is waiting on task_result) the revision's router supplies. What tools/list shows
// of them is in task-tool-definitions.ts, what they answer in task-tool-answers.ts.
import type { TaskToolsConfig } from '../config/types.js';
import { GatewayError } from '../errors.js';
import { NO_EVENTS, type GatewayEvents } from '../events.js';
import type { JsonObject, Outcome } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import { InvalidCursorError, isTerminal, type TaskRecord } from '../store/task-store.js';
import type { TaskQueries } from '../tasks/task-queries.js';
import type { TaskRuns } from '../tasks/task-runs.js';
import { stillDoing, type TaskRecords } from '../tasks/task-records.js';
import type { TaskReader } from '../principals.js';
import { taskFacts } from '../tasks/task-facts.js';
import { RELATED_TASK_META } from '../mcp.js';
import { approvesAnything, commentRefusal, type Approvals } from '../tasks/approvals.js';
import type { TaskPolicies } from '../tasks/task-policies.js';
import type { Caller } from '../principals.js';
import { APPROVAL_TOOL_NAMES } from './task-tool-definitions.js';
import { heldCallSummary, resultOf, statusResult, stillRunning, taskSummary, toolError } from './task-tool-answers.js';

type Kind = keyof TaskToolsConfig['names'];

/** A task tool call as the revision's router hands it over. */
export interface TaskToolRequest {
  /** Whose tasks these tools may touch: another principal's, or one of a tool the caller may no longer use, is unknown. */
  reader: TaskReader;
  /** Whose tasks task_list shows (the principal tasks/list would use). */
  principal: string;
  /** Aborted when the request is cancelled or its client went away: task_result stops waiting. */
  signal: AbortSignal;
  /**
   * While task_result waits on a task that may ask the client for input: makes this request a way to reach the
   * client (2025: its stream becomes the task's), and returns how to stop that.
   */
  hold?(task: TaskRecord): Promise<() => void>;
  /**
   * Where the revision answers input requests itself (2026: an InputRequiredResult on task_result): the answer
   * task_result gives while the task waits on the client.
   */
  inputRequired?(task: TaskRecord): Outcome;
  /** The authenticated caller: the approval tools act for approvers only. */
  caller?: Caller | undefined;
}

const APPROVAL_TOOLS: ReadonlySet<string> = new Set(Object.values(APPROVAL_TOOL_NAMES));

/** The parts of the task core these tools use: reads, cancel and delete (the TaskEngine has them all). */
export interface TaskToolParts {
  queries: Pick<TaskQueries, 'find' | 'list' | 'waitFor'>;
  runs: Pick<TaskRuns, 'cancel'>;
  records: Pick<TaskRecords, 'delete'>;
  /** Calls held for approval, and the policies that name their approvers (none: no approval tools). */
  approvals?: Pick<Approvals, 'pendingFor' | 'decide'>;
  policies?: Pick<TaskPolicies, 'config'>;
}

/** Whatever a task tool's caller got wrong (unknown id, bad arguments): an isError result the model can act on. */
class TaskToolError extends Error {}

export class TaskTools {
  private kinds: ReadonlyMap<string, Kind> = new Map();

  constructor(
    private readonly tasks: TaskToolParts,
    private config: TaskToolsConfig,
    private readonly logger: Logger,
    /** Where retrievals of results are announced (audited). */
    private readonly events: GatewayEvents = NO_EVENTS,
  ) {
    this.reconfigure(config);
  }

  /** The tools' names and settings (at start, and on a config reload: they apply to the next call). */
  reconfigure(config: TaskToolsConfig): void {
    const { names } = config;
    this.config = config;
    this.kinds = new Map<string, Kind>(config.enabled ? [[names.result, 'result'], [names.status, 'status'], [names.cancel, 'cancel'], [names.list, 'list'], [names.delete, 'delete']] : []);
  }

  /** Whether an exposed tool name is one of these tools (when they are on): they answer before any upstream. */
  owns(name: string): boolean {
    return this.kinds.has(name) || (this.tasks.approvals !== undefined && APPROVAL_TOOLS.has(name));
  }

  /** Whether `caller` sees the tool in tools/list: the approval tools only approvers (a rule in force names them). */
  shownTo(tool: JsonObject, caller: Caller | undefined): boolean {
    if (typeof tool.name !== 'string' || !APPROVAL_TOOLS.has(tool.name)) return true;
    return this.tasks.policies !== undefined && approvesAnything(this.tasks.policies, caller);
  }

  /**
   * What a background call answers once it outlived `taskAfterMs`: an ordinary tool result (never an error, and
   * never structuredContent, which a tool with an outputSchema would have to match) naming the task and the tools.
   */
  handle(task: TaskRecord): JsonObject {
    const { names, waitSeconds } = this.config;
    // A call held for approval has not started: the caller is told whom it waits for.
    const state = task.approval?.state === 'pending' ? `is waiting for approval (${task.message ?? 'an approver must decide'}), in the background,` : 'is still running, in the background,';
    const text =
      `The tool '${task.tool}' ${state} as task ${task.taskId}. ` +
      `To get its result, call ${names.result} with {"taskId": "${task.taskId}"}: it waits up to ${waitSeconds} seconds for the ` +
      `task to finish and can be called again. ${names.status} checks on it without waiting; ${names.cancel} stops it.`;
    return { content: [{ type: 'text', text }], _meta: { [RELATED_TASK_META]: { taskId: task.taskId } } };
  }

  /** Runs one of these tools; undefined when the request was cancelled while task_result waited. */
  async call(name: string, args: unknown, request: TaskToolRequest): Promise<Outcome | undefined> {
    const input = typeof args === 'object' && args !== null && !Array.isArray(args) ? (args as JsonObject) : {};
    if (APPROVAL_TOOLS.has(name) && this.tasks.approvals !== undefined) return this.approvalTool(name, input, request.caller, this.tasks.approvals);
    const kind = this.kinds.get(name);
    if (kind === undefined) throw new GatewayError('invalid_params', `Unknown tool: ${name}`);
    try {
      switch (kind) {
        case 'result':
          return await this.result(input, request);
        case 'status':
          return { result: statusResult(await this.find(input.taskId, request)) };
        case 'cancel':
          return { result: await this.cancel(await this.find(input.taskId, request)) };
        case 'list':
          return { result: await this.list(input.cursor, request) };
        case 'delete':
          return { result: await this.delete(await this.find(input.taskId, request)) };
      }
    } catch (error) {
      if (error instanceof TaskToolError) return { result: toolError(error.message) };
      throw error;
    }
  }

  /**
   * approval_list and approval_decide, for approvers' own hosts: the same list and decisions as /approvals. To
   * anyone who approves nothing they are unknown tools, as they are unlisted.
   */
  private async approvalTool(name: string, input: JsonObject, caller: Caller | undefined, approvals: NonNullable<TaskToolParts['approvals']>): Promise<Outcome> {
    if (caller === undefined || this.tasks.policies === undefined || !approvesAnything(this.tasks.policies, caller)) throw new GatewayError('invalid_params', `Unknown tool: ${name}`);
    if (name === APPROVAL_TOOL_NAMES.list) {
      const { cursor } = input;
      if (cursor !== undefined && (typeof cursor !== 'string' || cursor === '')) return { result: toolError(`cursor must be the nextCursor ${APPROVAL_TOOL_NAMES.list} gave`) };
      let page: Awaited<ReturnType<typeof approvals.pendingFor>>;
      try {
        page = await approvals.pendingFor(caller, cursor === undefined ? {} : { cursor });
      } catch (error) {
        if (error instanceof InvalidCursorError) return { result: toolError(`Invalid cursor: pass the nextCursor ${APPROVAL_TOOL_NAMES.list} gave you`) };
        throw error;
      }
      const now = Date.now();
      const pending = page.tasks.map((task) => heldCallSummary(task, now));
      const lines = pending.map((p) => `- ${String(p.taskId)}: ${String(p.tool)} for ${String(p.principal)} with ${JSON.stringify(p.arguments)}, until ${String(p.deadline)} (digest ${String(p.digest)})`);
      const more = page.nextCursor === undefined ? '' : `\nMore may wait: call ${APPROVAL_TOOL_NAMES.list} again with cursor "${page.nextCursor}".`;
      const text = pending.length === 0
        ? `No calls wait for your approval${page.nextCursor === undefined ? '.' : ' among the ones looked at so far.'}${more}`
        : `Calls waiting for your approval, soonest deadline first:\n${lines.join('\n')}\nDecide with ${APPROVAL_TOOL_NAMES.decide}, passing the taskId and the digest shown: a call that changed since is not decided.${more}`;
      return { result: { content: [{ type: 'text', text }], structuredContent: { approvals: pending, ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor }) } } };
    }
    const { taskId, decision, comment, digest } = input;
    if (typeof taskId !== 'string' || taskId === '') return { result: toolError(`taskId must be the task id ${APPROVAL_TOOL_NAMES.list} gave`) };
    if (decision !== 'approve' && decision !== 'deny') return { result: toolError('decision must be "approve" or "deny"') };
    // A comment is bounded as on the HTTP API: it goes into the caller's status, the audit log and webhooks.
    const badComment = commentRefusal(comment);
    if (badComment !== undefined) throw new GatewayError('invalid_params', `${APPROVAL_TOOL_NAMES.decide}: ${badComment}`);
    // The decision is bound to the call the approver was shown: without its digest there is nothing to bind it to.
    if (typeof digest !== 'string' || digest === '') return { result: toolError(`digest must be the digest ${APPROVAL_TOOL_NAMES.list} showed for the call: the decision holds only for that call`) };
    const answer = await approvals.decide(taskId, caller, { decision, comment: comment as string | undefined, digest });
    if (!answer.ok) {
      if (answer.status === 400) throw new GatewayError('invalid_params', `${APPROVAL_TOOL_NAMES.decide}: ${answer.message}`);
      // A changed call is shown as it stands now, so that the approver can look at it again.
      const now = answer.reason === 'changed' && answer.task !== undefined ? heldCallSummary(answer.task, Date.now()) : undefined;
      return { result: now === undefined ? toolError(answer.message) : { ...toolError(`${answer.message}:\n${JSON.stringify(now)}`), structuredContent: now } };
    }
    const state = answer.task.approval?.state ?? 'decided';
    return { result: { content: [{ type: 'text', text: `Task ${taskId} (${answer.task.tool}) is ${state}.` }], structuredContent: heldCallSummary(answer.task, Date.now()) } };
  }

  /** The upstream's result once the task is terminal, waiting for that up to the seconds asked for. */
  private async result(input: JsonObject, request: TaskToolRequest): Promise<Outcome | undefined> {
    const waitSeconds = input.waitSeconds ?? this.config.waitSeconds;
    if (typeof waitSeconds !== 'number' || !Number.isFinite(waitSeconds) || waitSeconds < 0) {
      throw new TaskToolError('waitSeconds must be a number of seconds >= 0');
    }
    let task = await this.find(input.taskId, request);
    if (!isTerminal(task.status)) {
      const release = await request.hold?.(task);
      // A timer of its own, not AbortSignal.timeout: that signal is held weakly and may be collected before it fires.
      const waited = new AbortController();
      const timer = setTimeout(() => waited.abort(), Math.min(waitSeconds, this.config.maxWaitSeconds) * 1000);
      const onGone = (): void => waited.abort();
      request.signal.addEventListener('abort', onGone, { once: true });
      try {
        // The revision answers input requests itself where it can: the wait ends when the task asks for input.
        const answersInput = request.inputRequired !== undefined;
        const stop = (t: TaskRecord): boolean => isTerminal(t.status) || (answersInput && t.status === 'input_required');
        task = (stop(task) ? task : await this.tasks.queries.waitFor(task.taskId, stop, waited.signal)) ?? (await this.find(task.taskId, request));
      } finally {
        clearTimeout(timer);
        request.signal.removeEventListener('abort', onGone);
        release?.();
      }
      if (request.signal.aborted) return undefined;
      if (task.status === 'input_required' && request.inputRequired !== undefined) return request.inputRequired(task);
      if (!isTerminal(task.status)) return { result: stillRunning(task, this.config.names) };
    }
    const done = await this.find(task.taskId, request, true);
    this.events.emit('task.retrieved', { ...taskFacts(done), via: 'task tool' });
    return { result: resultOf(done) };
  }

  private async cancel(task: TaskRecord): Promise<JsonObject> {
    if (isTerminal(task.status)) return statusResult(task, `Task ${task.taskId} had already ended (${task.status}); nothing was cancelled.`);
    const changed = await this.tasks.runs.cancel(task);
    const now = changed.task ?? task;
    if (!changed.ok) return statusResult(now, `Task ${task.taskId} had already ended (${now.status}); nothing was cancelled.`);
    return statusResult(now, `Task ${task.taskId} was cancelled; its tool call was stopped.`);
  }

  /** tasks/delete's rules: an ended task and its result go, on every replica; a running one is refused (cancel first). */
  private async delete(task: TaskRecord): Promise<JsonObject> {
    if (!isTerminal(task.status)) {
      throw new TaskToolError(`Task ${task.taskId} (${task.tool}) is still ${stillDoing(task)}: cancel it first with ${this.config.names.cancel}, then delete it.`);
    }
    try {
      await this.tasks.records.delete(task);
    } catch (error) {
      // Gone in between (expired, or deleted by another call): it is gone all the same, but say it as find would.
      if (error instanceof GatewayError && error.code === 'invalid_params') throw new TaskToolError(`There is no task ${task.taskId} you can use: the id is unknown or the task has expired.`);
      throw error;
    }
    return { content: [{ type: 'text', text: `Task ${task.taskId} (${task.tool}, ${task.status}) and its result were deleted.` }], structuredContent: { taskId: task.taskId, deleted: true } };
  }

  private async list(cursor: unknown, request: TaskToolRequest): Promise<JsonObject> {
    if (cursor !== undefined && typeof cursor !== 'string') throw new TaskToolError('cursor must be the string a previous page gave');
    let page;
    try {
      page = await this.tasks.queries.list(request.principal, cursor, request.reader.mayUse);
    } catch (error) {
      if (error instanceof GatewayError && error.code === 'invalid_params') throw new TaskToolError('That cursor is not one this gateway gave out; call without a cursor for the first page');
      throw error;
    }
    const tasks = page.tasks.filter((task) => task.native !== true).map(taskSummary);
    const lines = tasks.map((t) => `- ${t.taskId}: ${t.tool}, ${t.status}${t.statusMessage === undefined ? '' : ` (${t.statusMessage})`}, started ${t.createdAt}`);
    const more = page.nextCursor === undefined ? '' : `\nOlder tasks: call ${this.config.names.list} with {"cursor": "${page.nextCursor}"}.`;
    const text = tasks.length === 0 ? 'You have no background tasks.' : `Your background tasks, newest first:\n${lines.join('\n')}${more}`;
    const structured: JsonObject = { tasks: tasks as unknown as JsonObject[] };
    if (page.nextCursor !== undefined) structured.nextCursor = page.nextCursor;
    return { content: [{ type: 'text', text }], structuredContent: structured };
  }

  /** The caller's task, or a TaskToolError that says the id is not one it can use (unknown, expired, foreign alike). */
  private async find(taskId: unknown, request: TaskToolRequest, withOutcome = false): Promise<TaskRecord> {
    if (typeof taskId !== 'string' || taskId === '') throw new TaskToolError('taskId must be the task id string a background answer or task_list gave');
    let task: TaskRecord;
    try {
      task = await this.tasks.queries.find(taskId, { reader: request.reader, withOutcome });
    } catch (error) {
      if (error instanceof GatewayError && error.code === 'invalid_params') {
        throw new TaskToolError(`There is no task ${taskId} you can use: the id is unknown or the task has expired. ${this.config.names.list} lists your tasks.`);
      }
      throw error;
    }
    return task;
  }
}

