// The runs of this replica: a task opened (task-admission.ts), its upstream call run detached from any HTTP request
// once its slots are free, its deadline, its end (recorded through end-writes.ts), cancel, and the drains that end
// runs when an upstream or the replica goes away. A run reaches whoever started it only through the TaskCaller handed to it; what its call
// sends that way is run-relay.ts, and what other replicas ask of these runs is task-peer-messages.ts.
import { InvalidParams, RequestCancelled, toJsonRpcError } from '../errors.js';
import type { JsonObject, Outcome } from '../jsonrpc.js';
import { failedWith, isTerminal, type StoredCall, type TaskRecord } from '../store/task-store.js';
import type { CallContext, UpstreamCall } from '../upstream/peer/connection.js';
import type { SessionIdentity, Upstream } from '../upstream/life/upstream.js';
import type { EndWrites } from './end-writes.js';
import { TaskAdmission, type TaskAdmissionDeps, type TaskOpening } from './task-admission.js';
import type { IdempotentCreation, Opened } from './idempotency.js';
import type { InflightCharge } from './inflight-bytes.js';
import type { LossHandling } from './leases.js';
import { abortRun, newLocalRun, NOTHING_TO_DO, RunChannel, runSignal, type LocalRun, type RunHandle, type RunOutcome, type TaskCaller } from './local-run.js';
import { countedPrincipal } from '../principals.js';
import { closeRuns } from './shutdown-runs.js';
import type { RunRelay } from './run-relay.js';
import type { SlotTicket } from './slots.js';
import { boundedEnd } from './stored-results.js';
import { taskAgeMs, taskFacts } from './task-facts.js';
import { unavailable, type TaskQueries } from './task-queries.js';
import type { ActingFor } from '../upstream/peer/adapter.js';
import { ActingCallers } from './acting-callers.js';
import type { Approvals } from './approvals.js';
import type { UserConnections } from '../consent/ports.js';
import { isUserPrincipal, lostConsent, noUserError, untilConnected } from './consent-wait.js';

/** How many times a task's call waits for its user's connection again after losing it mid-call (then it fails). */
const MAX_CONSENT_ROUNDS = 3;

/** What running a lost task's call again needs, and telling of a task failed as lost. */
export interface RecoveryDeps extends LossHandling {
  /**
   * The caller a recovered task runs for, the identity its call runs under again, and the bytes of its arguments
   * (held by the run from here on; the run takes its own hold and gives back `release`'s).
   */
  resume(task: TaskRecord & { call: StoredCall }): Promise<{ caller: TaskCaller; identity: SessionIdentity; bytes?: { charge: InflightCharge; release: () => void } }>;
}

/** What opening needs (task-admission.ts) but the count of runs, which TaskRuns keeps; and what running needs. */
export interface TaskRunsDeps extends Omit<TaskAdmissionDeps, 'running'> {
  endWrites: EndWrites;
  /** What every run's handle does. */
  relay: RunRelay;
  /** Finds the task an operator cancels. */
  queries: Pick<TaskQueries, 'find'>;
  recovery: RecoveryDeps;
  /** Holds calls for approval before they start (tasks.rules[].approval); without it a held call never starts. */
  approvals?: Approvals;
  /** Per-user connections (issue 41): a task at an upstream that acts as each user waits for its user's. */
  consent?: UserConnections | undefined;
}

/** A tools/call a task runs: its params, the upstream session it runs over, as whom, and the bytes it holds. */
export interface ToolCallRun {
  params: JsonObject;
  identity: SessionIdentity;
  /** Whom the upstream sees the call from; a function: restored when the run starts (a recovered task). */
  actingFor: ActingFor | undefined | (() => ActingFor | undefined);
  charge?: InflightCharge | undefined;
}

export class TaskRuns {
  private readonly runs = new Map<string, LocalRun>();
  private readonly admission: TaskAdmission;
  private readonly acting: ActingCallers;
  /** Set once the replica drains (SIGTERM): a run that waited (approval, connection, slot) no longer starts. */
  private draining = false;
  /** Drains waiting for the last active run to end (idle()). */
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly deps: TaskRunsDeps) {
    this.acting = deps.acting ?? new ActingCallers(undefined);
    this.admission = new TaskAdmission({ ...deps, acting: this.acting, running: () => this.runs.size });
  }

  /** Opens a task (task-admission.ts): checked, stored and leased before anyone hears of it; run it at once. */
  async open(opening: TaskOpening): Promise<TaskRecord> {
    const task = await this.admission.open(opening);
    this.deps.approvals?.requested(task);
    return task;
  }

  /**
   * open(), for a call that may carry an idempotency key (`once`; none: a new task, as open() makes it): the key's
   * task when it has one (`existing`: it runs already, or ran; do not run it again), else a new one to run at once.
   */
  async openOnce(once: IdempotentCreation | undefined, opening: TaskOpening): Promise<Opened> {
    if (once === undefined) return { task: await this.open(opening), existing: false };
    const opened = await this.admission.openOnce(once, opening);
    // A hold is announced once, by the call that made it: a retry finds it announced already.
    if (!opened.existing) this.deps.approvals?.requested(opened.task);
    return opened;
  }

  /** The task `once`'s key made for `principal`, if it still exists (-32602 when it was made for another call). */
  async keyed(once: IdempotentCreation, principal: string): Promise<TaskRecord | undefined> {
    return (await this.admission.keyed(once, principal)).task;
  }

  /**
   * Runs a task's upstream call here, for `caller`. `start` makes the call with the context it is given, once the
   * task's slots are free (`queue`), or at once for a call that already runs (adopted: it holds no place in line).
   */
  run(
    task: TaskRecord,
    upstream: Upstream,
    caller: TaskCaller,
    start: (context: CallContext) => Promise<UpstreamCall | undefined>,
    /** `params`: the tools/call params `start` sends, checked against what was approved when the call is held. */
    options: { queue?: boolean; sessionId?: string; charge?: InflightCharge | undefined; params?: JsonObject } = {},
  ): RunHandle {
    const run = this.newRun(task, caller, options.charge);
    run.upstream = upstream;
    // The session the call runs for: a shared upstream connection tells its messages apart by it.
    const channel = new RunChannel(this.deps.relay, run, options.sessionId ?? task.taskId);
    const queue = options.queue ?? true;
    void this.deps.events.scope('task.run', run.scope, () => this.execute(run, upstream, queue, () => (run.ended ? Promise.resolve(undefined) : start(channel)), options.params));
    return channel;
  }

  /**
   * Runs a task whose call is a tools/call of `call.params`, over the upstream session of `call.identity`; the run
   * holds `call.charge` (the bytes of the request that carried the params) until it ends.
   */
  runToolCall(task: TaskRecord, upstream: Upstream, caller: TaskCaller, call: ToolCallRun): RunHandle {
    const { params, identity, actingFor, charge } = call;
    const acting = typeof actingFor === 'function' ? actingFor : () => actingFor;
    return this.run(task, upstream, caller, async (context) => upstream.callFor({ session: identity, actingFor: acting(), method: 'tools/call', params, context, timeoutMs: 0, asTask: true }), {
      sessionId: identity.sessionId,
      charge,
      params,
    });
  }

  /** Runs a lost task's call again here, for whoever created it (leases.ts took it over from a dead replica). */
  async runAgain(task: TaskRecord & { call: StoredCall }, upstream: Upstream): Promise<void> {
    // Still the principal's task: counted again (its old ticket expired with the lost replica's leases).
    if (this.deps.policies.policyFor(task.tool).maxTasksPerPrincipal > 0) await this.deps.slots.reclaimPrincipal(task.principal, task.taskId);
    const { caller, identity, bytes } = await this.deps.recovery.resume(task);
    try {
      // As its caller, restored when the run starts (it may wait in line first); failing that, the task fails saying why.
      const actingFor = () => this.acting.restore(task, upstream.actsPerCaller);
      this.runToolCall(task, upstream, caller, { params: task.call.params, identity, actingFor, charge: bytes?.charge });
    } finally {
      bytes?.release(); // the run holds its own
    }
  }

  /** Whether a task is being opened here: its id is leased to this replica, its run not started yet. */
  isOpening(taskId: string): boolean {
    return this.admission.isOpening(taskId);
  }

  /** Whether the task's upstream call runs in this process. */
  runsHere(taskId: string): boolean {
    return this.runs.has(taskId);
  }

  /** The run of the task here, while it runs. */
  get(taskId: string): LocalRun | undefined {
    return this.runs.get(taskId);
  }

  /** How many tasks run here. */
  get count(): number {
    return this.runs.size;
  }

  /** The slot tickets the runs hold or wait in line with (the heartbeat renews them). */
  heldSlots(): SlotTicket[] {
    return [...this.runs.values()].flatMap((run) => run.slots);
  }

  /**
   * Cancels a task that is not terminal: `cancelled` in the store before this resolves, then its call is stopped
   * (here, or by the replica that runs it, which watches the task). Resolves with the store's answer (not ok when
   * it was terminal already).
   */
  async cancel(task: TaskRecord): Promise<{ ok: true; task: TaskRecord } | { ok: false; task: TaskRecord | undefined }> {
    const { store, events } = this.deps;
    const changed = await store.tasks.transition(task.taskId, { to: 'cancelled', message: 'The task was cancelled by request.' }).catch(unavailable);
    const run = this.runs.get(task.taskId);
    if (run !== undefined) this.endRun(run, 'cancelled', 'the task was cancelled');
    void store.leases.release(task.taskId).catch(() => undefined);
    if (!changed.ok) return { ok: false, task: changed.reason === 'not_found' ? undefined : changed.task };
    const ended = changed.task;
    // Cancelling a held call ends its hold: the upstream never sees it.
    this.deps.approvals?.endedWhileHeld(ended, 'cancelled');
    events.emit('task.ended', { ...taskFacts(ended), status: 'cancelled', reason: 'cancelled', durationMs: taskAgeMs(ended), era: ended.era });
    return { ok: true, task: ended };
  }

  /**
   * Cancels any principal's task for an operator (the dashboard), recorded exactly as a client's cancel is, and
   * audited with who asked (`admin`: their principal, or `anonymous` without auth). Unknown, expired and
   * upstream-run tasks are refused as `find` refuses them; a terminal one answers not ok.
   */
  async cancelAsAdmin(taskId: string, admin: string): Promise<{ ok: true; task: TaskRecord } | { ok: false; task: TaskRecord | undefined }> {
    const cancelled = await this.cancel(await this.deps.queries.find(taskId));
    if (cancelled.ok) this.deps.logger.info({ audit: 'task.cancelled.admin', task: taskId, principal: cancelled.task.principal, by: admin }, 'task cancelled by an administrator');
    return cancelled;
  }

  /**
   * The replica drains (SIGTERM: it no longer takes requests): runs on their way to the upstream or there go on; a
   * run that waits (for its approval, its user's connection or a slot) no longer starts here, and close() hands it
   * over to another replica.
   */
  beginDrain(): void {
    this.draining = true;
  }

  /** Runs that are not waiting (see LocalRun.waiting): what a drain waits for. */
  get busy(): number {
    return [...this.runs.values()].filter((run) => run.waiting !== true).length;
  }

  /** Resolves once no run is busy: at once when none is. */
  idle(): Promise<void> {
    if (this.busy === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Gives the runs on `upstream` (removed or replaced by a config reload) up to `timeoutMs` to finish; those still
   * running then fail with `message`. Resolves with how many were failed so.
   */
  async drainUpstream(upstream: Upstream, timeoutMs: number, message: string): Promise<number> {
    const runs = [...this.runs.values()].filter((run) => run.upstream === upstream);
    if (runs.length === 0) return 0;
    this.deps.logger.info({ upstream: upstream.name, running: runs.length, timeoutMs }, 'draining the tasks of an upstream the config no longer has');
    let timer: NodeJS.Timeout | undefined;
    // endRun aborts a run's signal, whichever way it ends.
    const ended = runs.map((run) => new Promise<void>((resolve) => (runSignal(run).aborted ? resolve() : runSignal(run).addEventListener('abort', () => resolve(), { once: true }))));
    await Promise.race([Promise.all(ended), new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
    const left = runs.filter((run) => !run.ended);
    await Promise.all(
      left.map(async (run) => {
        this.endRun(run, 'failed', message);
        await this.deps.endWrites.record({ task: run.task, change: failedWith(message), reason: 'upstream removed' });
      }),
    );
    return left.length;
  }

  /** Ends every local run (shutdown, after the drain): handed over or failed (shutdown-runs.ts); how many were handed over. */
  close(): Promise<number> {
    const { store, events, logger, policies, recovery } = this.deps;
    const endRun = (run: LocalRun, outcome: RunOutcome, reason: string | undefined): void => this.endRun(run, outcome, reason);
    return closeRuns([...this.runs.values()], { store, events, logger, policies, upstream: (name) => recovery.upstream(name), endRun });
  }

  private newRun(task: TaskRecord, caller: TaskCaller, charge: InflightCharge | undefined): LocalRun {
    const { store, policies, slots } = this.deps;
    const run = newLocalRun(task, caller, charge?.hold() ?? NOTHING_TO_DO);
    this.runs.set(task.taskId, run);
    this.admission.started(task.taskId);
    if (policies.policyFor(task.tool).maxTasksPerPrincipal > 0) run.slots.push(slots.principalTicket(task.principal, task.taskId));
    // A task cancelled through another replica (or any other way) stops its upstream call here.
    run.stopWatching = store.tasks.watch(task.taskId, (changed) => {
      if (!isTerminal(changed.status) || run.ended) return;
      this.endRun(run, changed.status as RunOutcome, `the task was ${changed.status}`);
      void store.leases.release(task.taskId).catch(() => undefined);
    });
    return run;
  }

  /**
   * Runs the upstream call of a task (after its concurrency slots) and records how it ended. The wait for the
   * call's answer is a reaction on its promise, not an async frame: it lasts as long as the tool does (hours), and
   * a frame suspended on it per task in flight is a generator and its registers (issue 23).
   */
  private execute(run: LocalRun, upstream: Upstream, queue: boolean, start: () => Promise<UpstreamCall | undefined>, params: JsonObject | undefined, again = false): Promise<void> {
    // A call that lost its user's connection before it left waits for it again (its slots stay held; no new approval).
    const ended = (outcome: Outcome): Promise<void> => (this.consentLostBy(run, outcome) ? this.execute(run, upstream, false, start, params, true) : this.callEnded(run, outcome));
    const failed = (error: unknown): Promise<void> => ended({ error: toJsonRpcError(error) });
    return this.startCall(run, upstream, queue, start, params, again).then((call) => call?.outcome.then(ended, failed), failed);
  }

  /** The call failed for want of its user's connection (disconnected, grant refused) before it left: wait again, a few times. */
  private consentLostBy(run: LocalRun, outcome: Outcome): boolean {
    if (run.ended || this.deps.consent === undefined || !lostConsent(outcome, run.task.upstream)) return false;
    run.consentRounds = (run.consentRounds ?? 0) + 1;
    run.reached = false; // it never left
    clearTimeout(run.deadline);
    return run.consentRounds <= MAX_CONSENT_ROUNDS;
  }

  /**
   * A task at an upstream that acts as each user waits, before its call, until its user is connected
   * (consent-wait.ts): marked queued meanwhile (nothing reached the upstream: another replica takes it over and asks
   * again if this one dies or shuts down). False when the run ended, or the wait ended the task (declined, a client
   * that takes no URL elicitation, nobody who can connect).
   */
  private async connected(run: LocalRun, upstreamOf: Upstream, toolName: unknown): Promise<boolean> {
    const upstream = upstreamOf.name;
    const consent = this.deps.consent;
    if (consent === undefined || !consent.requires(upstream)) return true;
    const { store } = this.deps;
    const principal = run.task.principal;
    if (!isUserPrincipal(principal)) {
      await this.callEnded(run, { error: noUserError(upstream).toJsonRpc() });
      return false;
    }
    if (await consent.isConnected(principal, upstream)) return this.listedOnceConnected(run, upstreamOf, toolName);
    const waiting = `Waiting for the user to connect their account at upstream '${upstream}'`;
    const marked = await store.tasks.transition(run.task.taskId, { to: 'working', queued: true, message: waiting }).catch(() => undefined);
    if (marked?.ok === true) run.task = marked.task;
    const accepted = async (): Promise<void> => {
      await run.inputSync; // the answered question has left the task (run-relay.ts), which cleared its message
      const again = await store.tasks.transition(run.task.taskId, { to: 'working', message: waiting }).catch(() => undefined);
      if (again?.ok === true) run.task = again.task;
    };
    this.waits(run, true);
    const end = await untilConnected(consent, { principal, upstream, signal: runSignal(run), ask: (question, signal) => this.deps.relay.ask(run, question, signal), refuse: (question) => run.caller.refuse?.(question), accepted });
    this.waits(run, false);
    if (end.connected && !run.ended) {
      const cleared = await store.tasks.transition(run.task.taskId, { to: 'working', queued: false, message: null }).catch(() => undefined);
      if (cleared?.ok === true) run.task = cleared.task;
      return this.listedOnceConnected(run, upstreamOf, toolName);
    }
    if (!end.connected && end.outcome !== undefined) await this.callEnded(run, end.outcome);
    return false;
  }

  /**
   * After the wait for a connection: the upstream (which may have waited for a first connected user to read its
   * catalog) is tried again now, and only a tool it lists is called; the task made for a name under its prefix that
   * it turns out not to list fails as unknown (never forwarded on its prefix alone).
   */
  private async listedOnceConnected(run: LocalRun, upstream: Upstream, toolName: unknown): Promise<boolean> {
    await upstream.retryNow();
    if (upstream.tool(toolName) !== undefined || run.ended) return !run.ended;
    await this.callEnded(run, { error: { code: InvalidParams, message: `Unknown tool: ${run.task.tool}` } });
    return false;
  }

  /** Starts the task's upstream call once its slots are free; undefined when the run ended first. */
  private async startCall(run: LocalRun, upstream: Upstream, queue: boolean, start: () => Promise<UpstreamCall | undefined>, params: JsonObject | undefined, again: boolean): Promise<UpstreamCall | undefined> {
    if (run.task.approval !== undefined && !again) {
      // Held until an approver decides (the run's end stops the wait); then in line for slots like any call.
      this.waits(run, true);
      const approved = this.deps.approvals !== undefined && await this.deps.approvals.untilApproved({ get task() { return run.task; }, set task(task) { run.task = task; }, get ended() { return run.ended; }, get signal() { return runSignal(run); } }, params);
      this.waits(run, false);
      if (!approved) {
        if (!run.ended) this.endRun(run, 'failed', undefined);
        return undefined;
      }
    }
    if (!(await this.connected(run, upstream, params?.name)) || run.ended) return undefined;
    const policy = this.deps.policies.policyFor(run.task.tool);
    const limits = { name: upstream.name, taskConcurrency: upstream.config.taskConcurrency };
    const lineSince = performance.now();
    // A drain stops the wait in line too (a place taken meanwhile is given back when the run is handed over).
    const draining = (): boolean => this.draining;
    const inLine = (waiting: boolean): void => this.waits(run, waiting);
    const waiter = { task: run.task, slots: run.slots, get ended() { return run.ended; }, get signal() { return runSignal(run); }, inLine, get stopWaiting() { return draining(); } };
    const taken = !queue || (await this.deps.slots.take(waiter, limits, policy)); // false: cancelled or drained while queued
    // A run that waited does not start once the replica drains: close() hands it over. A call adopted (`queue`
    // false) runs already; one that never waited goes on as it would have a moment earlier.
    if (!run.ended && (!taken || (queue && this.draining && run.waited === true))) this.waits(run, true);
    if (!taken || run.ended || run.waiting === true) return undefined;
    const waitedMs = performance.now() - lineSince;
    run.reached = true;
    const call = await start();
    if (call === undefined || run.ended) {
      call?.cancel('the task ended before the call started');
      return undefined;
    }
    run.call = call;
    this.deps.events.emit('task.started', { ...taskFacts(run.task), attempt: run.scope.attempt, waitedMs });
    if (policy.maxRunMs > 0) {
      run.deadline = setTimeout(() => void this.deadlinePassed(run, policy.maxRunMs), policy.maxRunMs);
    }
    return call;
  }

  /** The task's upstream call ended with `outcome` (unless the task ended first): its terminal status is recorded. */
  private async callEnded(run: LocalRun, outcome: Outcome): Promise<void> {
    if (run.ended) return;
    const failed = 'error' in outcome || outcome.result.isError === true;
    const message = 'error' in outcome ? outcome.error.message : failed ? toolErrorText(outcome.result) : null;
    // A result over tasks.maxResultBytes is dropped here, and the task fails saying so.
    const ended = boundedEnd({ to: failed ? 'failed' : 'completed', message, outcome }, run.task.upstream, this.deps.policies.config.maxResultBytes);
    const change = { ...ended, chargeTo: countedPrincipal(run.task.principal, this.deps.callers.authenticated) };
    this.endRun(run, change.to as RunOutcome, undefined, { keepSlots: true });
    const recorded = this.deps.endWrites.record({ task: run.task, change, reason: change.to === 'failed' && !failed ? 'maxResultBytes' : undefined });
    // The slots go back once the terminal write is on its way (one connection keeps the order): the write that
    // a waiting tasks/result answers after does not queue behind a release (a script, and a message to every replica).
    this.releaseSlots(run);
    await recorded;
  }

  private async deadlinePassed(run: LocalRun, maxRunMs: number): Promise<void> {
    if (run.ended) return;
    const message = `The tool call exceeded its maximum run time of ${maxRunMs} ms (maxRunMs) and was cancelled`;
    this.endRun(run, 'failed', 'maxRunMs exceeded');
    await this.deps.endWrites.record({ task: run.task, change: failedWith(message), reason: 'maxRunMs' });
  }

  /**
   * Marks the run over (`outcome` is how, for its scope); with a reason, also cancels its upstream call. Its slots
   * go back too, unless `keepSlots` (the caller gives them back itself, with releaseSlots).
   */
  private endRun(run: LocalRun, outcome: RunOutcome, cancelReason: string | undefined, options: { keepSlots?: boolean } = {}): void {
    if (run.ended) return;
    run.ended = true;
    run.scope.outcome = outcome;
    run.stopWatching();
    run.releaseBytes();
    run.caller.ended();
    abortRun(run, new Error(cancelReason ?? 'the task ended'));
    if (options.keepSlots !== true) this.releaseSlots(run);
    clearTimeout(run.deadline);
    run.inputs?.settleAll({ error: { code: RequestCancelled, message: 'The task has ended' } });
    if (cancelReason !== undefined) run.call?.cancel(cancelReason);
    this.runs.delete(run.task.taskId);
    if (this.idleWaiters.length > 0 && this.busy === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  /** The run starts (or stops) waiting: a drain waits no longer for a run that waits, which is told of here. */
  private waits(run: LocalRun, waiting: boolean): void {
    run.waiting = waiting;
    if (waiting) run.waited = true;
    if (waiting && this.idleWaiters.length > 0 && this.busy === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  /** Slots held and places in line go back (the principal's count included: the task is ending). */
  private releaseSlots(run: LocalRun): void {
    for (const slot of run.slots.splice(0)) this.deps.slots.release(slot);
  }
}

/** The call as the task record keeps it, for another replica to run again (JSON has no `undefined` clientInfo). */
export function storedCall(params: JsonObject, identity: SessionIdentity): StoredCall {
  const { sessionId, protocolVersion, capabilities, clientInfo } = identity;
  return { params, identity: clientInfo === undefined ? { sessionId, protocolVersion, capabilities } : { sessionId, protocolVersion, capabilities, clientInfo } };
}

function toolErrorText(result: JsonObject): string {
  const content = Array.isArray(result.content) ? (result.content as { type?: string; text?: string }[]) : [];
  const text = content.filter((c) => c.type === 'text' && typeof c.text === 'string').map((c) => c.text).join(' ').trim();
  return text === '' ? 'The tool reported an error' : text.slice(0, 500);
}
