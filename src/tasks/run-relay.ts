// What a run's handle does (local-run.ts RunActions): what its upstream call sends towards the client while it
// runs. The upstream's questions become the task's keyed input requests (the task is `input_required` while any
// waits), put to the client through the run's TaskCaller where it can be reached and kept for later where not;
// answers settle them, wherever they came in (task-peer-messages.ts brings those of other replicas). Progress and
// the upstream task's own status messages become the task's status message. One instance serves every run.
import { RequestCancelled } from '../errors.js';
import type { GatewayEvents } from '../events.js';
import type { JsonObject, JsonRpcNotification, Outcome } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import type { TaskStore } from '../store/task-store.js';
import { runInputs, runSignal, type LocalRun, type RunActions } from './local-run.js';
import type { InputRequest } from './pending-inputs.js';
import { taskFacts } from './task-facts.js';

/** Progress updates the task's status message at most this often (each update is a store write). */
const STATUS_MESSAGE_INTERVAL_MS = 1000;

export interface RunRelayDeps {
  store: TaskStore;
  logger: Logger;
  /** Where questions asked and answered, and status messages, are announced. */
  events: GatewayEvents;
}

export class RunRelay implements RunActions {
  private readonly store: TaskStore;
  private readonly logger: Logger;
  private readonly events: GatewayEvents;

  constructor(deps: RunRelayDeps) {
    ({ store: this.store, logger: this.logger, events: this.events } = deps);
  }

  /**
   * The upstream asks the client something during the task: the question becomes one of the task's keyed input
   * requests (the task is `input_required` until every one is answered), and goes to the client now where the
   * caller can put it there; otherwise the client reads it from the task and answers through `answer`.
   */
  ask(run: LocalRun, request: InputRequest, signal: AbortSignal): Promise<Outcome> {
    if (run.ended) return Promise.resolve({ error: { code: RequestCancelled, message: 'The task has ended' } });
    const refused = run.caller.refuse?.(request);
    if (refused !== undefined) return Promise.resolve(refused);
    const { key, answer } = runInputs(run, () => void this.syncInputs(run)).ask(request, signal);
    const facts = taskFacts(run.task);
    this.events.emit('task.input.asked', { ...facts, method: request.method });
    this.deliver(run, key, request, AbortSignal.any([signal, runSignal(run)]));
    void answer.finally(() => {
      run.undelivered?.delete(key);
      // Not an answer: the run ended, or the upstream withdrew its question.
      if (!run.ended && !signal.aborted) this.events.emit('task.input.answered', { ...facts, method: request.method });
    });
    return answer;
  }

  /**
   * The upstream runs the call as its own task: its status message becomes this task's. Its `input_required`
   * is not copied: this task is `input_required` while the upstream's questions wait here (ask).
   */
  status(run: LocalRun, message: string): void {
    if (run.ended || message === run.upstreamStatusMessage) return;
    run.upstreamStatusMessage = message;
    this.recordStatus(run, message);
  }

  /** Progress goes to the caller with its own token until the task ends, and into the task's status message. */
  notify(run: LocalRun, message: JsonRpcNotification): void {
    if (run.ended) return;
    run.caller.notify(message);
    if (message.method !== 'notifications/progress') return;
    const now = Date.now();
    if (now - run.lastMessageAt < STATUS_MESSAGE_INTERVAL_MS) return;
    run.lastMessageAt = now;
    const p = message.params ?? {};
    const text = typeof p.message === 'string' ? p.message : typeof p.total === 'number' ? `${String(p.progress)}/${p.total}` : `progress ${String(p.progress)}`;
    this.recordStatus(run, text);
  }

  /** Settles the run's waiting input requests the answers name; the store shows what is left before this resolves. */
  async answer(run: LocalRun, answers: JsonObject): Promise<void> {
    if (run.ended) return;
    if (run.inputs !== undefined && run.inputs.answer(answers) > 0) await run.inputSync;
  }

  /** The client can be reached now: the run's input requests that found no way to it are put to it again. */
  redeliver(run: LocalRun): void {
    const undelivered = run.undelivered;
    if (undelivered === undefined) return;
    for (const [key, { request, signal }] of [...undelivered]) {
      undelivered.delete(key);
      this.deliver(run, key, request, signal);
    }
  }

  /** Puts one open input request to the client through the caller; kept for later when it cannot reach it now. */
  private deliver(run: LocalRun, key: string, request: InputRequest, signal: AbortSignal): void {
    void run.caller.deliver(request, signal)?.then((outcome) => {
      if (outcome !== undefined) run.inputs?.settle(key, outcome);
      else if (!signal.aborted && run.inputs?.isOpen(key) === true) (run.undelivered ??= new Map()).set(key, { request, signal });
    });
  }

  /** Writes the run's outstanding input requests (and the status they imply) to the store, in order. */
  private syncInputs(run: LocalRun): Promise<unknown> {
    const inputs = run.inputs;
    if (inputs === undefined) return Promise.resolve();
    run.inputSync = (run.inputSync ?? Promise.resolve()).then(async () => {
      if (run.ended) return;
      const waiting = inputs.size > 0;
      const status = (run.status = waiting ? 'input_required' : 'working');
      const message = waiting ? `Waiting for the client to answer ${inputs.size} input request(s)` : undefined;
      await this.store.tasks
        .transition(run.task.taskId, waiting ? { to: 'input_required', openRequests: inputs.outstanding(), message } : { to: 'working', openRequests: null, message: null })
        .then(
          (changed) => {
            if (changed.ok) this.events.emit('task.status', { ...taskFacts(run.task), status, ...(message === undefined ? {} : { message }) });
          },
          (error: unknown) => this.logger.error({ task: run.task.taskId, err: error }, 'could not record input requests'),
        );
    });
    return run.inputSync;
  }

  /** A new status message of a running task, in the store and announced (once the store took it). */
  private recordStatus(run: LocalRun, message: string): void {
    const status = run.status;
    void this.store.tasks.transition(run.task.taskId, { to: status, message }).then(
      (changed) => {
        if (changed.ok) this.events.emit('task.status', { ...taskFacts(run.task), status, message });
      },
      () => undefined,
    );
  }
}
