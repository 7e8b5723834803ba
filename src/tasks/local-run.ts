// A task whose upstream call runs in this process, as the task core keeps it while the call runs (task-runs.ts),
// and the handle the call and its caller reach it by. A replica holds thousands of these at once (issue 23: at
// most 5 KB of memory per task in flight), so what only some runs ever use is made on first use: the abort signal
// (an AbortSignal is an EventTarget with two maps of its own), the input requests and the queue that writes them.
// And the handle is one object whose methods live on its prototype, rather than a closure per method for every run.
import type { GatewayScopeMap } from '../events.js';
import type { JsonRpcNotification, Outcome } from '../jsonrpc.js';
import type { TaskRecord } from '../store/task-store.js';
import type { CallContext, UpstreamCall } from '../upstream/peer/connection.js';
import type { Upstream } from '../upstream/life/upstream.js';
import { PendingInputs, type InputRequest } from './pending-inputs.js';
import type { SlotTicket } from './slots.js';

/**
 * How a run reaches whoever started its task: an input channel and a notification sink, supplied by the
 * protocol revision that created the task.
 */
export interface TaskCaller {
  /**
   * Puts one of the task's input requests to the client now, resolving with the answer; or undefined when the
   * client fetches input requests itself and answers through `TaskPeerLink.answer` (2026-07-28 tasks/update). A
   * promise that resolves undefined: the client could not be reached now; the request stays open and is put again
   * when the client says it is reachable (`TaskPeerLink.reachable`).
   */
  deliver(request: InputRequest, signal: AbortSignal): Promise<Outcome | undefined> | undefined;
  /**
   * The answer to a request the client cannot take at all (it lacks the capability), given to the upstream at
   * once: the task never shows it as an input request. Undefined: the request goes to the client.
   */
  refuse?(request: InputRequest): Outcome | undefined;
  /** Notifications (progress, logs) of the upstream call, while the task runs. */
  notify(message: JsonRpcNotification): void;
  /** The run ended here (the caller stops counting it). */
  ended(): void;
}

/** What a running task offers the call it adopted: its input channel, the upstream task's status, its end. */
export interface RunHandle {
  ask(request: InputRequest, signal: AbortSignal): Promise<Outcome>;
  status(message: string): void;
  /** The call's notifications: progress becomes the task's status message; the caller hears what it takes. */
  notify(message: JsonRpcNotification): void;
  /** Aborted when the run ends. */
  readonly signal: AbortSignal;
}

/** How a run ended here, for its `task.run` scope (and the `task.ended` event of an end written here). */
export type RunOutcome = NonNullable<GatewayScopeMap['task.run']['outcome']>;

/** A task whose upstream call runs in this process. */
export interface LocalRun {
  task: TaskRecord;
  /** The run's `task.run` scope: its outcome is filled in when the run ends here. */
  scope: GatewayScopeMap['task.run'];
  caller: TaskCaller;
  /** The upstream instance the call runs on: a config reload that replaces or removes it drains its runs. */
  upstream?: Upstream;
  call: UpstreamCall | undefined;
  deadline: NodeJS.Timeout | undefined;
  /** Set once the task reached a terminal status through the task core (cancel, deadline): ignore the call's end. */
  ended: boolean;
  status: 'working' | 'input_required';
  /** Input requests the upstream waits on, by key, until the client answers them (made by the first; runInputs). */
  inputs: PendingInputs | undefined;
  /** Of those, the ones the caller could not put to the client yet, by key: put again once it is reachable. */
  undelivered: Map<string, { request: InputRequest; signal: AbortSignal }> | undefined;
  /** Serialises writes of `inputs` to the store, so the last write always reflects the latest state (from the first). */
  inputSync: Promise<unknown> | undefined;
  lastMessageAt: number;
  /**
   * Aborted when the run ends: stops waiting for a concurrency slot, and the questions it asked. Made when first
   * asked for (runSignal); a run that ends before that keeps only why, in `abortedWith`.
   */
  abort: AbortController | undefined;
  abortedWith: Error | undefined;
  /** Store semaphore tickets the run holds or waits in line with (limits across replicas); renewed by the heartbeat. */
  slots: SlotTicket[];
  /** Stops following the task's changes made elsewhere. */
  stopWatching: () => void;
  /** Gives back the run's hold on the bytes of the request that started it (its arguments live as long as the run). */
  releaseBytes: () => void;
  /** The last status message of the upstream's own task (when the upstream runs the call as one), as recorded. */
  upstreamStatusMessage: string | undefined;
  /**
   * Waits for its approval, its user's connection or a slot, or was kept from starting by a drain: nothing reached
   * the upstream, and a drain does not wait for it (it is handed over at shutdown). `waited`: it ever did.
   */
  waiting?: boolean;
  waited?: boolean;
  /**
   * Its call left for the upstream (or runs there already): a shutdown hands it over only where its policy allows
   * running it again. Until then nothing reached the upstream, and another replica may start it instead.
   */
  reached?: boolean;
  /** How many times its call lost its user's connection before it left, and waited for it again (issue 41). */
  consentRounds?: number;
}

/** Does nothing: the one placeholder every run shares where it has nothing to stop or give back. */
export const NOTHING_TO_DO = (): void => undefined;

/** A run of `task` for `caller`, nothing made yet; `releaseBytes` gives back what its request carried. */
export function newLocalRun(task: TaskRecord, caller: TaskCaller, releaseBytes: () => void): LocalRun {
  return {
    task,
    // Spelled out, not spread from taskFacts: V8 gives every object built by a spread and then extended a hidden
    // class of its own (about 200 bytes per task in flight).
    scope: { taskId: task.taskId, principal: task.principal, tool: task.tool, upstream: task.upstream, attempt: task.attempt ?? 1 },
    caller,
    call: undefined,
    deadline: undefined,
    ended: false,
    status: 'working',
    inputs: undefined,
    undelivered: undefined,
    inputSync: undefined,
    lastMessageAt: 0,
    abort: undefined,
    abortedWith: undefined,
    slots: [],
    stopWatching: NOTHING_TO_DO,
    upstreamStatusMessage: undefined,
    releaseBytes,
  };
}

/** The run's abort signal, made on first use; already aborted (with the run's reason) once the run ended. */
export function runSignal(run: LocalRun): AbortSignal {
  if (run.abort === undefined) {
    run.abort = new AbortController();
    if (run.ended) run.abort.abort(run.abortedWith);
  }
  return run.abort.signal;
}

/** Aborts the run's signal with `reason`, or keeps the reason for a signal not made yet. */
export function abortRun(run: LocalRun, reason: Error): void {
  if (run.abort === undefined) run.abortedWith = reason;
  else run.abort.abort(reason);
}

/** The run's input requests, made by its first one; `changed` is told whenever what is outstanding changes. */
export function runInputs(run: LocalRun, changed: () => void): PendingInputs {
  return (run.inputs ??= new PendingInputs(changed));
}

/** What the task core does for a run's handle (run-relay.ts): one set of these serves every run. */
export interface RunActions {
  ask(run: LocalRun, request: InputRequest, signal: AbortSignal): Promise<Outcome>;
  status(run: LocalRun, message: string): void;
  notify(run: LocalRun, message: JsonRpcNotification): void;
}

/**
 * A run's handle, and the context its upstream call runs in (the session it runs for: a shared upstream
 * connection tells its messages apart by it). Callers call its methods on it (`handle.ask(…)`): a method taken
 * off it loses the run.
 */
export class RunChannel implements RunHandle, CallContext {
  constructor(
    private readonly actions: RunActions,
    private readonly run: LocalRun,
    readonly sessionId: string,
  ) {}

  ask(request: InputRequest, signal: AbortSignal): Promise<Outcome> {
    return this.actions.ask(this.run, request, signal);
  }

  status(message: string): void {
    this.actions.status(this.run, message);
  }

  notify(message: JsonRpcNotification): void {
    this.actions.notify(this.run, message);
  }

  get signal(): AbortSignal {
    return runSignal(this.run);
  }
}
