// The Tasks extension's methods on top of the task core: the gateway decides when a call becomes a task, then
// tasks/get (the DetailedTask, with the result, error or outstanding input requests inlined), tasks/update (the
// client's answers) and tasks/cancel (acknowledged, terminal or not).
import type { JsonObject, Outcome } from '../../jsonrpc.js';
import { refusedInput, refusedUrlElicitation } from '../../mcp.js';
import { isTerminal, type TaskRecord } from '../../store/task-store.js';
import type { TaskCaller } from '../../tasks/local-run.js';
import type { TaskPeerLink } from '../../tasks/task-peer-messages.js';
import type { TaskPolicies } from '../../tasks/task-policies.js';
import type { TaskQueries } from '../../tasks/task-queries.js';
import type { TaskRecords } from '../../tasks/task-records.js';
import type { TaskRuns } from '../../tasks/task-runs.js';
import type { CallPlans, TaskLaunch, ToolCallRequest } from '../../tasks/call-plan.js';
import { GatewayError } from '../../errors.js';
import type { TaskReader } from '../../principals.js';
import type { UpstreamCall } from '../../upstream/peer/connection.js';
import { ACK, codec } from './codec.js';
import type { StatelessExchange } from './exchange.js';

/**
 * A 2026-07-28 client is not reachable between its requests: it reads the task's input requests with tasks/get
 * and answers with tasks/update, and hears nothing else of the running call.
 */
export const STATELESS_CALLER: TaskCaller = Object.freeze({
  deliver: () => undefined,
  notify: () => undefined,
  ended: () => undefined,
});

/**
 * A client without the Tasks extension whose call went to the background: it reads the task's input requests
 * through task_result (an InputRequiredResult there), so only those it declared the capability for may wait; the
 * rest are refused to the upstream at once, as an exchange refuses them before a task exists.
 */
export function plainClientCaller(capabilities: JsonObject): TaskCaller {
  return {
    deliver: () => undefined,
    refuse: (request) => refusedInput(request.method, capabilities) ?? refusedUrlElicitation(request, capabilities),
    notify: () => undefined,
    ended: () => undefined,
  };
}

/**
 * A client with the Tasks extension, as its task's run reaches it: as STATELESS_CALLER, but a URL elicitation (a task
 * waiting for its user's connection, issue 41) waits only for a client that declared that mode; one that did not
 * reads the link in the task's result instead.
 */
export function taskClientCaller(capabilities: JsonObject): TaskCaller {
  return { ...STATELESS_CALLER, refuse: (request) => refusedUrlElicitation(request, capabilities) };
}

/** The parts of the task core the Tasks extension and its router use (the TaskEngine has them all). */
export interface StatelessTaskParts {
  policies: Pick<TaskPolicies, 'policyFor'>;
  queries: Pick<TaskQueries, 'find' | 'waitFor'>;
  runs: Pick<TaskRuns, 'cancel'>;
  /** What becomes of a tool call (tasks/call-plan.ts): its task opened and run, a held call waited for. */
  calls: Pick<CallPlans, 'openTask' | 'replayed' | 'waitHeld' | 'consent' | 'consentLost'>;
  records: Pick<TaskRecords, 'recordNative' | 'recordNativeEnd'>;
  peerLink: Pick<TaskPeerLink, 'answer'>;
}

export class StatelessTasks {
  /** Every tool's task policy, for the router. */
  readonly policies: StatelessTaskParts['policies'];
  /** Reads: tasks/get needs nothing else. */
  readonly queries: StatelessTaskParts['queries'];
  /** The records of tasks upstreams run themselves, for the router's pass-through. */
  readonly records: StatelessTaskParts['records'];
  /** Where answers go, on whichever replica runs the call. */
  readonly peerLink: StatelessTaskParts['peerLink'];
  /** Cancels tasks. */
  readonly runs: StatelessTaskParts['runs'];
  /** The core's steps for a planned tool call. */
  readonly plans: StatelessTaskParts['calls'];

  constructor(parts: StatelessTaskParts) {
    ({ policies: this.policies, queries: this.queries, records: this.records, peerLink: this.peerLink, runs: this.runs, calls: this.plans } = parts);
  }

  /**
   * A task for a 2026-07-28 client. `exchange` is the upstream call: already running when the gateway waited for it
   * first (the task adopts it), else `start` starts it once a slot is free. From now on the upstream's questions are
   * the task's input requests. Resolves with the stored task, which is readable on every replica by then. Under an
   * idempotency key that made a task already, that task, as it is: the call is not started, or (running) is stopped.
   */
  async create(exchange: StatelessExchange, start: (() => Promise<UpstreamCall | undefined>) | undefined, caller: TaskCaller = STATELESS_CALLER): Promise<TaskRecord> {
    return (await this.plans.openTask(callOf(exchange), launchOf(exchange, start, caller))).task;
  }

  /**
   * A plain caller of a held call: a task at once, whose end answers the request (undefined once `signal` aborts:
   * the plan says what becomes of the task).
   */
  waitHeld(exchange: StatelessExchange, start: () => Promise<UpstreamCall | undefined>, caller: TaskCaller, signal: AbortSignal): Promise<Outcome | undefined> {
    return this.plans.waitHeld(callOf(exchange), launchOf(exchange, start, caller), signal);
  }

  /**
   * The task a tasks/* request names: a native record (routed to its upstream by the caller) or the gateway's own;
   * another principal's task, or one of a tool the reader may no longer use, is unknown.
   */
  find(taskId: unknown, withOutcome: boolean, reader: TaskReader): Promise<TaskRecord> {
    return this.queries.find(taskId, { withOutcome, allowNative: true, reader });
  }

  /** The DetailedTask (`task` read with its outcome). */
  get(task: TaskRecord): Outcome {
    return { result: codec.taskResult(task) };
  }

  /**
   * Routes each answer (keyed by input key, as the codec read them) to the upstream request waiting on it;
   * acknowledged once the store reflects what is left.
   */
  async update(task: TaskRecord, answers: JsonObject): Promise<Outcome> {
    await this.peerLink.answer(task, answers);
    return { result: { ...ACK } };
  }

  /** Acknowledges, terminal or not; a running task is recorded `cancelled` first, then its call is stopped. */
  async cancel(task: TaskRecord): Promise<Outcome> {
    if (!isTerminal(task.status)) await this.runs.cancel(task);
    return { result: codec.cancelResult(task) };
  }
}

/** The tool call an exchange carries (only a tools/call becomes a task). */
function callOf(exchange: StatelessExchange): ToolCallRequest {
  if (exchange.request === undefined) throw new GatewayError('internal', 'Only a tool call can become a task');
  return exchange.request;
}

/**
 * How an exchange's task runs: the exchange's call, adopted when it runs already, else started by `start`; the run
 * then takes the upstream's questions over, or, when the key's task existed already, the call stops.
 */
function launchOf(exchange: StatelessExchange, start: (() => Promise<UpstreamCall | undefined>) | undefined, caller: TaskCaller): TaskLaunch {
  return {
    caller: () => caller,
    running: () => exchange.call,
    start: async () => start?.(),
    launched: (run) => (run === undefined ? exchange.cancel('another call with the same idempotency key made the task') : exchange.adopt(run)),
  };
}
