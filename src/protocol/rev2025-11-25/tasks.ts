// The 2025-11-25 task methods on top of the task core: a client asks for a task (`params.task`), then polls
// tasks/get, blocks on tasks/result, lists and cancels. The session that created a task hears of every change
// (notifications/tasks/status), and the upstream's questions go to it, on an open tasks/result stream first, else
// its GET stream, else on its next tasks/result.
import { GatewayError, InternalError } from '../../errors.js';
import { NO_EVENTS, type GatewayEvents } from '../../events.js';
import { refusedInput, refusedUrlElicitation } from '../../mcp.js';
import type { EventStream } from '../../streams/event-stream.js';
import type { JsonObject, Outcome } from '../../jsonrpc.js';
import type { Logger } from '../../log.js';
import { isTerminal, type TaskRecord, type TaskStore } from '../../store/task-store.js';
import { sessionOfPrincipal, sessionPrincipal, type TaskReader } from '../../principals.js';
import type { TaskCaller } from '../../tasks/local-run.js';
import type { TaskRuns } from '../../tasks/task-runs.js';
import type { CallPlans, ToolCallRequest } from '../../tasks/call-plan.js';
import type { TaskPeerLink } from '../../tasks/task-peer-messages.js';
import type { TaskPolicies } from '../../tasks/task-policies.js';
import { NOT_FOUND, type TaskQueries } from '../../tasks/task-queries.js';
import type { TaskRecords } from '../../tasks/task-records.js';
import { taskFacts } from '../../tasks/task-facts.js';
import { codec, sessionTask, taskPayload, withRelatedTask } from './codec.js';
import type { Session } from './session.js';

/** The parts of the task core the 2025-11-25 task methods and their router use (the TaskEngine has them all). */
export interface SessionTaskParts {
  policies: Pick<TaskPolicies, 'policyFor'>;
  queries: Pick<TaskQueries, 'find' | 'list' | 'untilResult' | 'waitFor'>;
  runs: Pick<TaskRuns, 'runsHere' | 'cancel'>;
  /** What becomes of a tool call (tasks/call-plan.ts): its task opened and run, a held call waited for. */
  calls: Pick<CallPlans, 'openTask' | 'replayed' | 'waitHeld' | 'consent' | 'consentLost'>;
  records: Pick<TaskRecords, 'delete'>;
  peerLink: Pick<TaskPeerLink, 'reachable'>;
}

export interface SessionTasksDeps {
  /** The task core (the gateway's TaskEngine), as these methods use it. */
  engine: SessionTaskParts;
  store: TaskStore;
  logger: Logger;
  /** tasks.immediateResponse (a config reload may change it: reconfigure). */
  immediateResponse: string | undefined;
  /** Where retrievals of results are announced (audited). */
  events?: GatewayEvents;
}

export class SessionTasks {
  /** Open tasks/result streams per task running here: where its input requests go first. */
  private readonly resultStreams = new Map<string, Set<EventStream>>();

  /** Every tool's task policy, for the router. */
  readonly policies: SessionTaskParts['policies'];
  /** Where a client that can be reached again is announced, for the router's task tools. */
  readonly peerLink: SessionTaskParts['peerLink'];
  /** The core's steps for a planned tool call, for the router's calls. */
  readonly plans: SessionTaskParts['calls'];
  private readonly queries: SessionTaskParts['queries'];
  private readonly runs: SessionTaskParts['runs'];
  private readonly records: SessionTaskParts['records'];
  private readonly store: TaskStore;
  private readonly logger: Logger;
  private immediateResponse: string | undefined;
  private readonly events: GatewayEvents;

  constructor(deps: SessionTasksDeps) {
    ({ policies: this.policies, peerLink: this.peerLink, queries: this.queries, runs: this.runs, records: this.records, calls: this.plans } = deps.engine);
    ({ store: this.store, logger: this.logger, immediateResponse: this.immediateResponse } = deps);
    this.events = deps.events ?? NO_EVENTS;
  }

  /** A config reload's tasks.immediateResponse, for tasks created from now on. */
  reconfigure(immediateResponse: string | undefined): void {
    this.immediateResponse = immediateResponse;
  }

  /**
   * The call's task, stored and started (or, under an idempotency key already used, the key's task as it is now, and
   * nothing runs again), answered with the CreateTaskResult. The run holds the request's bytes until its call ends.
   */
  async create(session: Session, call: ToolCallRequest): Promise<Outcome> {
    const { task } = await this.plans.openTask(call, { caller: (made) => this.callerFor(made.taskId, session) });
    return { result: codec.createTaskResult(task, this.immediateResponse) };
  }

  /**
   * The session's side of a background task. Its client does not know the task protocol: no status
   * notifications, and no progress (the request it belonged to was answered; the status message keeps it). The
   * upstream's questions go wherever the client listens, a task_result call waiting on the task first; when it
   * listens nowhere, they wait for its next task_result call.
   */
  backgroundCaller(taskId: string, session: Session): TaskCaller {
    session.activeTasks++;
    return {
      deliver: (request, signal) => session.tryAsk({ method: request.method, params: withRelatedTask(request.params, taskId) }, signal, { taskId }),
      refuse: (request) => refusedInput(request.method, session.capabilities) ?? refusedUrlElicitation(request, session.capabilities),
      notify: (message) => {
        if (message.method !== 'notifications/progress') session.deliver(message, { taskId });
      },
      ended: () => {
        session.activeTasks--;
      },
    };
  }

  /** The session's side of a run: it counts the task, hears of every change, and is asked the upstream's questions. */
  callerFor(taskId: string, session: Session | undefined): TaskCaller {
    if (session === undefined) {
      return {
        deliver: async () => ({ error: { code: InternalError, message: 'The task has no client session to ask' } }),
        notify: () => undefined,
        ended: () => undefined,
      };
    }
    session.activeTasks++;
    // notifications/tasks/status on every change, to the session that created the task, until it is terminal.
    const stopWatching = this.store.tasks.watch(taskId, (changed) => {
      tellStatus(session, changed);
      if (isTerminal(changed.status)) stopWatching();
    });
    return {
      // The request carries the related-task marker and goes on the task's tasks/result stream when one is open,
      // else on the session's GET stream. With neither open (on any replica), it waits in the task, which shows
      // `input_required`, for the client's next tasks/result: the spec's way to it (see `result`).
      deliver: (request, signal) => {
        const stream = [...(this.resultStreams.get(taskId) ?? [])].find((s) => !s.finished);
        return session.tryAsk({ method: request.method, params: withRelatedTask(request.params, taskId) }, signal, { stream, taskId });
      },
      // A URL elicitation (a task waiting for its user's connection) only to a client that declared that mode: one
      // that did not reads the link in the task's result instead.
      refuse: (request) => refusedUrlElicitation(request, session.capabilities),
      notify: (message) => session.deliver(message, { taskId }),
      ended: () => {
        session.activeTasks--;
      },
    };
  }

  /** `reader` is the session's principal with the caller's access rules: whose tasks these calls may touch. */
  async get(taskId: unknown, reader: TaskReader): Promise<Outcome> {
    return { result: codec.taskResult(await this.queries.find(taskId, { reader })) };
  }

  /** Blocks until the task is terminal, then answers exactly what the upstream answered. */
  async result(taskId: unknown, stream: EventStream | undefined, session: Session, reader: TaskReader): Promise<Outcome> {
    const initial = await this.queries.find(taskId, { withOutcome: true, reader });
    const runsHere = this.runs.runsHere(initial.taskId);
    const streams = this.resultStreams.get(initial.taskId) ?? new Set<EventStream>();
    if (stream !== undefined && runsHere) this.resultStreams.set(initial.taskId, streams.add(stream));
    // The call runs on another replica: its requests for the client are to come here. Recorded before the replica
    // running it is asked to re-send what waits (below): a question it asks in between then finds this stream.
    const release = !runsHere && stream !== undefined && !isTerminal(initial.status) ? await session.holdResultStream(initial.taskId, stream) : undefined;
    try {
      // Requests that found the client listening nowhere go out now, on this stream, wherever the call runs.
      if (stream !== undefined && !isTerminal(initial.status)) await this.peerLink.reachable(initial).catch(() => undefined);
      const task = isTerminal(initial.status) ? initial : await this.queries.untilResult(initial.taskId, reader);
      this.events.emit('task.retrieved', { ...taskFacts(task), via: 'tasks/result' });
      if (task.outcome !== undefined) return taskPayload({ ...task, outcome: task.outcome });
      return { error: { code: InternalError, message: `Task ${task.taskId} was ${task.status}${task.message ? `: ${task.message}` : ''}` } };
    } finally {
      if (stream !== undefined && streams.delete(stream) && streams.size === 0) this.resultStreams.delete(initial.taskId);
      release?.();
    }
  }

  async list(session: Session, cursor: unknown, reader: TaskReader): Promise<Outcome> {
    const page = await this.queries.list(ownerOf(session), cursor, reader.mayUse);
    const result: JsonObject = { tasks: page.tasks.map(sessionTask) };
    if (page.nextCursor !== undefined) result.nextCursor = page.nextCursor;
    return { result };
  }

  /** Cancels a task that is not terminal (-32602 when it is): `cancelled` in the store before this answers. */
  async cancel(taskId: unknown, reader: TaskReader): Promise<Outcome> {
    const task = await this.queries.find(taskId, { reader });
    if (isTerminal(task.status)) throw new GatewayError('invalid_params', `Cannot cancel task: it is already ${task.status}`);
    const changed = await this.runs.cancel(task);
    if (!changed.ok) {
      if (changed.task === undefined) throw new GatewayError('invalid_params', NOT_FOUND);
      throw new GatewayError('invalid_params', `Cannot cancel task: it is already ${changed.task.status}`);
    }
    return { result: codec.cancelResult(changed.task) };
  }

  /**
   * tasks/delete (SEP-1686, kept as an extension on 2025-11-25 sessions): an ended task and its result go before
   * their TTL, freeing the principal's stored-results budget; answers `{}`. A running task is refused.
   */
  async delete(taskId: unknown, reader: TaskReader): Promise<Outcome> {
    await this.records.delete(await this.queries.find(taskId, { reader }));
    return { result: {} };
  }

  /** Tells a task's session of the change another replica's loss forced (the replica that would have is gone). */
  async tellSession(task: TaskRecord, session: (sessionId: string) => Promise<Session | undefined>): Promise<void> {
    // Without authentication the principal names the session; with it, the stored call does (if it was kept).
    const sessionId = sessionOfPrincipal(task.principal) ?? task.call?.identity.sessionId;
    const found = sessionId === undefined ? undefined : await session(sessionId).catch(() => undefined);
    if (found !== undefined) tellStatus(found, task);
  }
}

/** notifications/tasks/status to the session that created the task (on its tasks/result stream where open). */
function tellStatus(session: Session, task: TaskRecord): void {
  session.deliver({ jsonrpc: '2.0', method: 'notifications/tasks/status', params: sessionTask(task) }, { taskId: task.taskId });
}

/**
 * Whose a session's tasks are: the authenticated principal that created the session (its tasks/list shows them
 * from any of its sessions), or, without authentication, the session itself.
 */
export function ownerOf(session: Session): string {
  return session.principal ?? sessionPrincipal(session.sessionId);
}
