// A 2025-11-25 upstream may run a tool call as its own task (when its tools/list and its `tasks`
// capability offer it). The gateway then makes the task-augmented call and waits on the upstream's task: `tasks/result`,
// held open, carries the upstream's questions and then the outcome; `tasks/get`, polled while the caller wants
// status, gives the status messages; `tasks/cancel` stops it. Whoever calls (a plain client, or a gateway task of
// either era) sees one UpstreamCall like any other, and never the upstream's task id.
import { asObject, withoutMetaKey, type JsonObject, type JsonRpcNotification, type Outcome } from '../../../jsonrpc.js';
import { RequestCancelled } from '../../../errors.js';
import { RELATED_TASK_META } from '../../../mcp.js';
import { codec, createdTaskObject, suggestedPollMs, taskStatusMessage } from '../codec.js';
import type { CallContext, UpstreamCall, UpstreamConnection } from '../../../upstream/peer/connection.js';
import type { CredentialSource } from '../../../upstream/peer/adapter.js';

/** Tells `context` the status message of an upstream task (a Task object or its status notification), if any. */
function reportTaskStatus(context: CallContext | undefined, task: JsonObject | undefined): void {
  const message = taskStatusMessage(task);
  if (message !== undefined) context?.status?.(message);
}

/** Status polls follow the interval the upstream suggests, kept within these bounds. */
const MIN_POLL_MS = 500;
const MAX_POLL_MS = 30_000;
const DEFAULT_POLL_MS = 1000;
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

export interface UpstreamTaskOptions {
  /** For the augmented call and `tasks/result` (0: none; a tool call runs as long as it runs). */
  timeoutMs: number;
  /** For each `tasks/get` and the `tasks/cancel`. */
  requestTimeoutMs: number;
  /** What each of the task's requests authenticates with: its caller's own credential. */
  credentials?: CredentialSource;
}

/** Runs `tools/call` as the upstream's own task over `connection`; settles with the upstream's final answer. */
export function callAsUpstreamTask(connection: UpstreamConnection, params: JsonObject, context: CallContext | undefined, options: UpstreamTaskOptions): UpstreamCall {
  return new UpstreamTaskCall(connection, params, context, options);
}

const NOTHING_TO_UNFOLLOW = (): void => undefined;

/**
 * The caller's context as the upstream task's messages reach it: without the upstream's related-task marker. One
 * object per call with its methods on the prototype (a gateway task's call lives as long as the task: issue 23).
 */
class WithoutRelatedTask implements CallContext {
  constructor(private readonly caller: CallContext) {}

  get sessionId(): string {
    return this.caller.sessionId;
  }

  get flow(): CallContext['flow'] {
    return this.caller.flow;
  }

  notify(message: JsonRpcNotification): void {
    this.caller.notify({ ...message, ...(message.params === undefined ? {} : { params: withoutRelatedTask(message.params) }) });
  }

  ask(request: { method: string; params?: JsonObject }, signal: AbortSignal): Promise<Outcome> {
    return this.caller.ask({ ...request, ...(request.params === undefined ? {} : { params: withoutRelatedTask(request.params) }) }, signal);
  }

  status(message: string): void {
    this.caller.status?.(message);
  }
}

class UpstreamTaskCall implements UpstreamCall {
  readonly upstreamId: number;
  readonly outcome: Promise<Outcome>;
  private settle!: (outcome: Outcome) => void;
  private settled = false;
  private taskId: string | undefined;
  private cancelledFor: string | undefined;
  private result: UpstreamCall | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private unfollow: () => void = NOTHING_TO_UNFOLLOW;
  /** What the caller hears: the upstream's task ids taken out. */
  private readonly context: CallContext | undefined;
  /** Whether the caller shows status messages (then the upstream's task is polled for them). */
  private readonly wantsStatus: boolean;

  constructor(
    private readonly connection: UpstreamConnection,
    params: JsonObject,
    context: CallContext | undefined,
    private readonly options: UpstreamTaskOptions,
  ) {
    this.outcome = new Promise<Outcome>((resolve) => (this.settle = resolve));
    this.context = context === undefined ? undefined : new WithoutRelatedTask(context);
    this.wantsStatus = context?.status !== undefined;
    const created = connection.request('tools/call', { ...params, task: {} }, this.context, options.timeoutMs, options.credentials);
    this.upstreamId = created.upstreamId;
    const clientToken = asObject(params._meta)?.progressToken;
    void created.outcome.then((answer) => this.created(answer, clientToken));
  }

  cancel(reason: string): void {
    if (this.settled) return;
    this.cancelledFor = reason;
    this.result?.cancel(reason);
    if (this.taskId !== undefined) this.cancelUpstream(this.taskId);
    // Before the upstream said which task it created, the cancel waits for that answer (see created).
    this.finish({ error: { code: RequestCancelled, message: `Request cancelled: ${reason}` } });
  }

  private created(answer: Outcome, clientToken: unknown): void {
    const created = 'result' in answer ? codec.createdTask(answer.result) : undefined;
    if (!('result' in answer) || created === undefined) {
      this.finish(answer); // an error, or the upstream answered the call directly (it may, for optional support)
      return;
    }
    const task = createdTaskObject(answer.result) ?? {};
    const taskId = created.taskId;
    this.taskId = taskId;
    if (this.cancelledFor !== undefined) {
      this.cancelUpstream(taskId);
      return;
    }
    if (this.context !== undefined) {
      this.unfollow = this.connection.followTask(taskId, {
        context: this.context,
        progress: clientToken === undefined ? undefined : { token: this.upstreamId, clientToken },
        status: (status) => reportTaskStatus(this.context, status),
      });
    }
    reportTaskStatus(this.context, task);
    this.result = this.connection.request('tasks/result', { taskId }, this.context, this.options.timeoutMs, this.options.credentials);
    void this.result.outcome.then((outcome) => this.finish('result' in outcome ? { result: withoutRelatedTask(outcome.result) } : outcome));
    if (this.wantsStatus) this.schedulePoll(taskId, pollIntervalOf(suggestedPollMs(task)));
  }

  /** Asks the upstream for the task's status now and then, for its status message. */
  private schedulePoll(taskId: string, intervalMs: number): void {
    this.pollTimer = setTimeout(() => {
      void this.connection.request('tasks/get', { taskId }, undefined, this.options.requestTimeoutMs, this.options.credentials).outcome.then((outcome) => {
        if (this.settled) return;
        if ('result' in outcome) {
          reportTaskStatus(this.context, outcome.result);
          if (TERMINAL.has(String(outcome.result.status))) return; // tasks/result answers next
        }
        this.schedulePoll(taskId, 'result' in outcome ? pollIntervalOf(suggestedPollMs(outcome.result)) : intervalMs);
      });
    }, intervalMs);
  }

  private cancelUpstream(taskId: string): void {
    // Fire and forget: the caller's outcome is already "cancelled"; an upstream that cannot cancel says so in its log.
    void this.connection.request('tasks/cancel', { taskId }, undefined, this.options.requestTimeoutMs, this.options.credentials).outcome;
  }

  private finish(outcome: Outcome): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.pollTimer);
    this.unfollow();
    this.settle(outcome);
  }
}

function pollIntervalOf(suggested: number | undefined): number {
  return suggested === undefined ? DEFAULT_POLL_MS : Math.min(MAX_POLL_MS, Math.max(MIN_POLL_MS, suggested));
}

/** The upstream's related-task marker names its own task, which the gateway's callers never see. */
function withoutRelatedTask(value: JsonObject): JsonObject {
  return withoutMetaKey(value, RELATED_TASK_META);
}
