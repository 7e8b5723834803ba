// The era-neutral task core: it stores tasks before anyone hears of them, runs their upstream calls detached from
// any HTTP request (after their slots), records every transition, cancels, and waits. A run reaches whoever
// started it only through the TaskCaller handed to it; each protocol revision serializes what this records.
//
// Over 400 lines because a run's life is one piece: its slots, deadline, input requests, progress, status
// messages and the terminal write the store may have to take later all act on the same LocalRun; splitting them
// would hand that record around. Leases and recovery of lost tasks are leases.ts; slots are slots.ts.
import type { ReplicasConfig, TaskPolicy, TasksConfig } from '../config/types.js';
import { resolvePolicy, taskTiming } from '../config/policy.js';
import { GatewayError, RequestCancelled, storeUnavailable, toJsonRpcError } from '../errors.js';
import { NO_EVENTS, type GatewayEvents, type GatewayScopeMap } from '../events.js';
import type { JsonObject, JsonRpcNotification, Outcome } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import {
  type Era,
  failedWith,
  InvalidCursorError,
  isTerminal,
  newTaskId,
  type StoredCall,
  type TaskChange,
  type TaskPage,
  type TaskRecord,
  type TaskStore,
} from '../store/task-store.js';
import type { CallContext, UpstreamCall } from '../upstream/connection.js';
import type { SessionIdentity, Upstream } from '../upstream/upstream.js';
import { SLOT_LEASES, TaskLeases, type LeasedRuns, type LeaseHealth, type LeasePeerMessages, type LossHandling } from './leases.js';
import { LocalEnds } from './local-ends.js';
import type { InputRequest } from './pending-inputs.js';
import { abortRun, newLocalRun, NOTHING_TO_DO, RunChannel, runInputs, runSignal, type LocalRun, type RunActions, type RunHandle, type TaskCaller } from './local-run.js';
import type { InflightCharge } from './inflight-bytes.js';
import type { Peers } from './peers.js';
import { countedPrincipal, NATIVE_TASKS_PRINCIPAL, type TaskReader } from './principals.js';
import type { RateLimiter } from './rate-limits.js';
import { TaskSlots } from './slots.js';
import { boundedEnd, checkStoredBudgets } from './stored-results.js';
import { taskAgeMs, taskFacts } from './task-facts.js';

const LIST_PAGE_SIZE = 50;
/** How often a kept terminal change is retried while the store is away. */
const PENDING_RETRY_MS = 1000;
/** Progress updates the task's status message at most this often (each update is a store write). */
const STATUS_MESSAGE_INTERVAL_MS = 1000;
/** What an unknown task id gets (-32602), in every era. */
export const NOT_FOUND = 'Failed to retrieve task: Task not found';
const EXPIRED = 'Failed to retrieve task: Task has expired';
/** When a client refused at replicas.maxRunningTasks is told to try again (Retry-After): tasks end all the time. */
const REPLICA_FULL_RETRY_MS = 1000;
/** At most one warning per this interval about tasks refused at replicas.maxRunningTasks. */
const FULL_WARNING_INTERVAL_MS = 60_000;

export type { RunHandle, TaskCaller } from './local-run.js';

/** The messages the engine exchanges with other replicas: their bodies and answers. */
export interface TaskPeerMessages extends LeasePeerMessages {
  /** A client's answers to input requests of a task whose call runs on whichever replica takes this up. */
  'task.update': { body: { taskId: string; answers: JsonObject }; answer: { ok: true } };
  /** The task's client can be reached now: its input requests that found no way to it are put again. */
  'task.reachable': { body: { taskId: string }; answer: { ok: true } };
}

/** The other replicas, as the engine needs them (the gateway's ReplicaLink). */
export type TaskPeers = Peers<TaskPeerMessages>;

/** What the engine needs to run a lost task's call again, and to tell of a task it failed as lost. */
export interface RecoveryDeps extends LossHandling {
  /**
   * The caller a recovered task runs for, the identity its call runs under again, and the bytes of its arguments
   * (held by the run from here on; the engine takes its own hold and gives back `release`'s).
   */
  resume(task: TaskRecord & { call: StoredCall }): Promise<{ caller: TaskCaller; identity: SessionIdentity; bytes?: { charge: InflightCharge; release: () => void } }>;
}

/** How a run ended here, for its `task.run` scope. */
type RunOutcome = NonNullable<GatewayScopeMap['task.run']['outcome']>;

/** A terminal change the store could not take yet, with what its `task.ended` event says once it is written. */
interface PendingEnd {
  task: TaskRecord;
  change: TaskChange;
  reason: string | undefined;
}

export interface TaskEngineDeps {
  store: TaskStore;
  /** The task policy (a config reload replaces it: reconfigure). */
  config: TasksConfig;
  logger: Logger;
  /** This replica's lease period, and how many tasks it runs at once at most (0: no limit). */
  replica: Pick<ReplicasConfig, 'leaseMs' | 'maxRunningTasks'>;
  /** Other replicas, for answers that belong to runs they hold, and to ask whether they still run a task. */
  peers: TaskPeers;
  /** What running a lost task's call again needs. */
  recovery: RecoveryDeps;
  /**
   * Who creates tasks. With `auth`: authenticated principals, each counted on its own, and task creations per
   * principal (`auth.rateLimits`). Without: every client counts as one anonymous principal.
   */
  callers: { authenticated: boolean; rateLimiter?: RateLimiter };
  /** Where the task's life is announced (src/events.ts): created, started, status, input, ended, the run's scope. */
  events?: GatewayEvents;
}

export class TaskEngine {
  private readonly runs = new Map<string, LocalRun>();
  private readonly slots: TaskSlots;
  /** Terminal changes the store could not take yet, by task: written when it is back. */
  private readonly pendingEnds = new Map<string, PendingEnd>();
  /** Ends written here, told to this replica's waiters with their outcome once the store has them. */
  private readonly localEnds = new LocalEnds();
  private flushTimer: NodeJS.Timeout | undefined;
  /** Set while draining: called when the last run ends. */
  private drained: (() => void) | undefined;
  private readonly leases: TaskLeases;
  /** Tasks opened here whose run has not started yet: they already count against replicas.maxRunningTasks. */
  private readonly opening = new Set<string>();
  /** Tasks refused at replicas.maxRunningTasks since the last warning, and when that was. */
  private refusedFull = { count: 0, warnedAt: 0 };
  /** What every run's handle does: one object for all of them (local-run.ts). */
  private readonly runActions: RunActions = {
    ask: (run, request, signal) => this.ask(run, request, signal),
    status: (run, message) => this.upstreamStatus(run, message),
    notify: (run, message) => this.relayNotification(run, message),
  };

  private readonly store: TaskStore;
  private config: TasksConfig;
  private readonly logger: Logger;
  private readonly replica: Pick<ReplicasConfig, 'leaseMs' | 'maxRunningTasks'>;
  private readonly peers: TaskPeers;
  private readonly recovery: RecoveryDeps;
  private readonly callers: { authenticated: boolean; rateLimiter?: RateLimiter };
  private readonly events: GatewayEvents;

  constructor(deps: TaskEngineDeps) {
    ({ store: this.store, config: this.config, logger: this.logger, replica: this.replica, peers: this.peers, recovery: this.recovery, callers: this.callers } = deps);
    this.events = deps.events ?? NO_EVENTS;
    const { store, logger, replica, peers, recovery, callers } = deps;
    const events = this.events;
    const leaseMs = replica.leaseMs;
    // Slot tickets carry leases of their own, longer than the replica's heartbeat (see SLOT_LEASES).
    const slotLeaseMs = leaseMs * SLOT_LEASES;
    this.slots = new TaskSlots({ store, logger, leaseMs: slotLeaseMs, replicaId: () => this.replicaId, authenticated: callers.authenticated, events });
    peers.on('task.update', async (body, peer) => {
      const run = this.runs.get(body.taskId);
      if (run === undefined || run.ended) return undefined;
      peer.accept();
      await this.answerHere(body.taskId, body.answers);
      return { ok: true };
    });
    peers.on('task.reachable', async (body, peer) => {
      const run = this.runs.get(body.taskId);
      if (run === undefined || run.ended) return undefined;
      peer.accept();
      this.redeliver(run);
      return { ok: true };
    });
    this.leases = new TaskLeases({ store, logger, leaseMs, peers, runs: this.leasedRuns(), losses: recovery, events });
  }

  /** A config reload's task policy: tasks created from now on get it (running ones keep the policy they started with). */
  reconfigure(config: TasksConfig): void {
    this.config = config;
  }

  policyFor(exposedName: string): TaskPolicy {
    return resolvePolicy(this.config, exposedName);
  }

  /**
   * Checks this replica's room and the principal's limit, and stores a new task: durable before anyone hears of
   * it, and leased, so that if this replica dies from here on, another one ends it. `call` is kept where another
   * replica may have to start it. The caller runs the task at once (run, runToolCall): its place among this
   * replica's running tasks is held from here until then.
   */
  async open(principal: string, era: Era, exposedName: string, upstream: Upstream, requestedTtl: unknown, call: StoredCall | undefined): Promise<TaskRecord> {
    const policy = this.policyFor(exposedName);
    const taskId = newTaskId();
    this.holdRoom(taskId, principal);
    try {
      await this.callers.rateLimiter?.taskCreation(principal);
      await checkStoredBudgets(this.store, this.config, countedPrincipal(principal, this.callers.authenticated), this.events, { together: !this.callers.authenticated });
      await this.slots.claimPrincipal(principal, taskId, policy);
      const { retentionMs, pollMs } = taskTiming(policy, requestedTtl);
      const task = await this.store
        // The call is kept only where another replica may have to start it: it can be large, and it is the
        // client's data. That is where policy allows a re-run, or where the task may wait in line for a slot.
        .create({ taskId, principal, era, tool: exposedName, upstream: upstream.name, retentionMs, pollMs, ...(call !== undefined && this.mayStartElsewhere(policy, upstream) ? { call } : {}) })
        .catch((error: unknown) => {
          if (policy.maxTasksPerPrincipal > 0) this.slots.release(this.slots.principalTicket(principal, taskId));
          throw storeUnavailable(error);
        });
      await this.leases.lease([task.taskId]).catch((error: unknown) => {
        this.logger.warn({ task: task.taskId, err: error }, 'could not lease the new task');
      });
      const queued = policy.concurrency > 0 || upstream.config.taskConcurrency > 0;
      this.events.emit('task.created', { ...taskFacts(task), era, queued });
      return task;
    } catch (error) {
      this.opening.delete(taskId);
      throw error;
    }
  }

  /**
   * Holds a place for a new task among this replica's running tasks, or refuses it when replicas.maxRunningTasks
   * are running (or being opened) here: a temporary refusal, which another replica (or a moment later) may take.
   * Tasks taken over from a lost replica are not refused: they are not new, and what a replica can lose is bounded.
   */
  private holdRoom(taskId: string, principal: string): void {
    const max = this.replica.maxRunningTasks;
    const running = this.runs.size + this.opening.size;
    if (max > 0 && running >= max) {
      const now = Date.now();
      this.refusedFull.count++;
      this.events.emit('rate.limited', { principal, limit: 'maxRunningTasks', retryAfterMs: REPLICA_FULL_RETRY_MS });
      if (now - this.refusedFull.warnedAt >= FULL_WARNING_INTERVAL_MS) {
        this.logger.warn({ running, maxRunningTasks: max, refused: this.refusedFull.count }, 'new tasks refused: this replica runs replicas.maxRunningTasks tasks');
        this.refusedFull = { count: 0, warnedAt: now };
      }
      throw new GatewayError(
        'replica_full',
        `This gateway replica already runs ${running} tasks (replicas.maxRunningTasks: ${max}); try again shortly`,
        { retryAfterMs: REPLICA_FULL_RETRY_MS },
      );
    }
    this.opening.add(taskId);
  }

  /** How lease renewal fares, and how many tasks run here: for readiness. */
  health(): { leases: LeaseHealth; running: number; maxRunningTasks: number } {
    return { leases: this.leases.health(), running: this.runs.size, maxRunningTasks: this.replica.maxRunningTasks };
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
    options: { queue?: boolean; sessionId?: string; charge?: InflightCharge | undefined } = {},
  ): RunHandle {
    const run = this.newRun(task, caller, options.charge);
    run.upstream = upstream;
    // The session the call runs for: a shared upstream connection tells its messages apart by it.
    const channel = new RunChannel(this.runActions, run, options.sessionId ?? task.taskId);
    const queue = options.queue ?? true;
    void this.events.scope('task.run', run.scope, () => this.execute(run, upstream, queue, () => (run.ended ? Promise.resolve(undefined) : start(channel))));
    return channel;
  }

  /**
   * Runs a task whose call is a tools/call of `params`, over the upstream session of `identity`; the run holds
   * `charge` (the bytes of the request that carried `params`) until it ends.
   */
  runToolCall(task: TaskRecord, upstream: Upstream, caller: TaskCaller, params: JsonObject, identity: SessionIdentity, charge?: InflightCharge): RunHandle {
    return this.run(task, upstream, caller, (context) => upstream.callFor(identity, 'tools/call', params, context, 0, { asTask: true }), {
      sessionId: identity.sessionId,
      charge,
    });
  }

  private get replicaId(): string {
    return this.peers.id;
  }

  private newRun(task: TaskRecord, caller: TaskCaller, charge: InflightCharge | undefined): LocalRun {
    const run = newLocalRun(task, caller, charge?.hold() ?? NOTHING_TO_DO);
    this.runs.set(task.taskId, run);
    this.opening.delete(task.taskId); // the place open() held is the run's now
    if (this.policyFor(task.tool).maxTasksPerPrincipal > 0) run.slots.push(this.slots.principalTicket(task.principal, task.taskId));
    // A task cancelled through another replica (or any other way) stops its upstream call here.
    run.stopWatching = this.store.watch(task.taskId, (changed) => {
      if (!isTerminal(changed.status) || run.ended) return;
      this.endRun(run, changed.status as RunOutcome, `the task was ${changed.status}`);
      void this.store.unlease(task.taskId).catch(() => undefined);
    });
    return run;
  }

  /** Whether the task's upstream call runs in this process. */
  runsHere(taskId: string): boolean {
    return this.runs.has(taskId);
  }

  /**
   * The task an id names, read once (with its outcome when `withOutcome`). Unknown and expired ids are
   * invalid params, with the messages of the spec; a task an upstream runs itself only when `allowNative`. For a
   * `reader`, another principal's task, and a task of a tool the reader may no longer use, are answered exactly
   * like an unknown id: the rules hide that tool, so they hide what it did too.
   */
  async find(taskId: unknown, options: { withOutcome?: boolean; allowNative?: boolean; reader?: TaskReader } = {}): Promise<TaskRecord> {
    if (typeof taskId !== 'string' || taskId === '') throw new GatewayError('invalid_params', 'params.taskId must be a non-empty string');
    const task = await this.store.get(taskId, { outcome: options.withOutcome === true }).catch(unavailable);
    const reader = options.reader;
    if (task !== undefined && reader !== undefined && !this.readable(task, reader)) throw new GatewayError('invalid_params', NOT_FOUND);
    if (task?.native === true && options.allowNative !== true) {
      throw new GatewayError('invalid_params', `Task ${taskId} is run by upstream '${task.upstream}' itself; use its 2026-07-28 tasks methods`);
    }
    if (task !== undefined) return task;
    const expired = await this.store.expired(taskId).catch(unavailable);
    throw new GatewayError('invalid_params', expired ? EXPIRED : NOT_FOUND);
  }

  /** Whether `reader` may see the task: its own, and of a tool it may still use (a refusal of the tool is audited). */
  private readable(task: TaskRecord, reader: TaskReader): boolean {
    if (reader.principal !== undefined && task.principal !== reader.principal) return false;
    if (reader.mayUse(task.tool)) return true;
    this.events.emit('access.denied', { principal: reader.principal, kind: 'tools', name: task.tool, taskId: task.taskId });
    return false;
  }

  /** One page of a principal's tasks, newest first; without those of tools `mayUse` denies (the page may come out short). */
  async list(principal: string, cursor: unknown, mayUse: (tool: string) => boolean = () => true): Promise<TaskPage> {
    if (cursor !== undefined && typeof cursor !== 'string') throw new GatewayError('invalid_params', 'Invalid cursor');
    try {
      const page = await this.store.list(principal, cursor === undefined ? { limit: LIST_PAGE_SIZE } : { cursor, limit: LIST_PAGE_SIZE });
      return { ...page, tasks: page.tasks.filter((task) => mayUse(task.tool)) };
    } catch (error) {
      if (error instanceof InvalidCursorError) throw new GatewayError('invalid_params', 'Invalid cursor');
      throw storeUnavailable(error);
    }
  }

  /**
   * Deletes an ended task and its outcome before its TTL, which frees its bytes in the stored-results budgets; a
   * task still running is refused (cancel it first), as is one that is gone.
   */
  async delete(task: TaskRecord): Promise<void> {
    const verdict = await this.store.delete(task.taskId, countedPrincipal(task.principal, this.callers.authenticated)).catch(unavailable);
    if (verdict === 'not_found') throw new GatewayError('invalid_params', NOT_FOUND);
    if (verdict === 'not_terminal') throw new GatewayError('invalid_params', `Cannot delete task: it is still ${task.status === 'input_required' ? 'waiting for input' : 'running'}; cancel it first`);
    this.events.emit('task.deleted', taskFacts(task));
  }

  /**
   * Cancels a task that is not terminal: `cancelled` in the store before this resolves, then its call is stopped.
   * Resolves with the store's answer (not ok when it was terminal already).
   */
  async cancel(task: TaskRecord): Promise<{ ok: true; task: TaskRecord } | { ok: false; task: TaskRecord | undefined }> {
    const changed = await this.store.transition(task.taskId, { to: 'cancelled', message: 'The task was cancelled by request.' }).catch(unavailable);
    const run = this.runs.get(task.taskId);
    if (run !== undefined) this.endRun(run, 'cancelled', 'the task was cancelled');
    void this.store.unlease(task.taskId).catch(() => undefined);
    if (!changed.ok) return { ok: false, task: changed.reason === 'not_found' ? undefined : changed.task };
    const ended = changed.task;
    this.events.emit('task.ended', { ...taskFacts(ended), status: 'cancelled', reason: 'cancelled', durationMs: taskAgeMs(ended), era: ended.era });
    return { ok: true, task: ended };
  }

  /**
   * Cancels any principal's task for an operator (the dashboard), recorded exactly as a client's cancel is, and
   * audited with who asked (`admin`: their principal, or `anonymous` without auth). Unknown, expired and
   * upstream-run tasks are refused as `find` refuses them; a terminal one answers not ok.
   */
  async cancelAsAdmin(taskId: string, admin: string): Promise<{ ok: true; task: TaskRecord } | { ok: false; task: TaskRecord | undefined }> {
    const cancelled = await this.cancel(await this.find(taskId));
    if (cancelled.ok) this.logger.info({ audit: 'task.cancelled.admin', task: taskId, principal: cancelled.task.principal, by: admin }, 'task cancelled by an administrator');
    return cancelled;
  }

  /**
   * Routes the client's answers to the input requests the task's upstream call waits on; unknown or already
   * answered keys are ignored. The store reflects what is still outstanding before this resolves, so a read right
   * after sees it. For a call running on another replica, the answers go there.
   */
  async answer(task: TaskRecord, answers: JsonObject): Promise<void> {
    if (this.runs.has(task.taskId)) await this.answerHere(task.taskId, answers);
    else if (!isTerminal(task.status)) await this.peers.ask(undefined, 'task.update', { taskId: task.taskId, answers });
  }

  /**
   * The task's client can be reached now (it opened a stream to wait on the task): the input requests that found
   * no way to it are put to it again, on whichever replica runs the call.
   */
  async reachable(task: TaskRecord): Promise<void> {
    const run = this.runs.get(task.taskId);
    if (run !== undefined) this.redeliver(run);
    // Any task not yet ended, not only one that was input_required when read: a question the upstream asks between
    // that read and the client's stream being in place found no way to the client, and would wait for the next one.
    else if (!isTerminal(task.status)) await this.peers.ask(undefined, 'task.reachable', { taskId: task.taskId });
  }

  /**
   * Resolves with the task once `done` holds for it (read again after subscribing: a change in between is not
   * missed), or undefined when `signal` aborts first.
   */
  waitFor(taskId: string, done: (task: TaskRecord) => boolean, signal: AbortSignal): Promise<TaskRecord | undefined> {
    return new Promise<TaskRecord | undefined>((resolve, reject) => {
      // A terminal state heard while this replica's own write of the task's end is in flight is held: the write's
      // answer follows at once, with the outcome (local-ends.ts). It counts only if that write did not end the task.
      let held: TaskRecord | undefined;
      const settle = (task: TaskRecord | undefined, error?: unknown): void => {
        stopWatching();
        stopLocal();
        signal.removeEventListener('abort', onAbort);
        if (error === undefined) resolve(task);
        else reject(error);
      };
      const onAbort = (): void => settle(undefined);
      const seen = (task: TaskRecord): void => {
        if (isTerminal(task.status) && this.localEnds.isWriting(taskId)) held = task;
        else if (done(task)) settle(task);
      };
      const stopWatching = this.store.watch(taskId, seen);
      const stopLocal = this.localEnds.listen(taskId, (ended) => {
        const task = ended ?? held;
        held = undefined;
        if (task !== undefined && done(task)) settle(task);
      });
      if (signal.aborted) return settle(undefined);
      signal.addEventListener('abort', onAbort, { once: true });
      this.store.get(taskId).then(
        (task) => (task === undefined ? settle(undefined, new GatewayError('invalid_params', NOT_FOUND)) : seen(task)),
        (error: unknown) => settle(undefined, storeUnavailable(error)),
      );
    });
  }

  /**
   * Records a task a 2026-07-28 upstream runs itself, so that any replica routes its methods there. The record
   * shows it running on that upstream (`working`) until a tasks/get or tasks/cancel answer passing through says it
   * ended (recordNativeEnd); the store expires it with the task's TTL whatever its status, since the gateway may
   * never hear the end. Nothing of the gateway runs it: no lease, no slot, no drain. It belongs to `owner` when the
   * gateway authenticates, else to no client. `era`: the revision whose upstream created it.
   */
  async recordNative(era: Era, taskId: string, exposedName: string, upstream: Upstream, retentionMs: number, owner: string | undefined): Promise<void> {
    if ((await this.store.get(taskId).catch(unavailable)) !== undefined) {
      // Native ids are the upstream's own; the gateway cannot route two tasks with one id.
      throw new GatewayError('internal', `Upstream '${upstream.name}' returned task id '${taskId}', which another task already uses`);
    }
    const message = `Runs on upstream '${upstream.name}'`;
    const task = await this.store
      .create({ taskId, principal: owner ?? NATIVE_TASKS_PRINCIPAL, era, tool: exposedName, upstream: upstream.name, retentionMs, pollMs: 0, message, native: true })
      .catch(unavailable);
    this.events.emit('task.created', { ...taskFacts(task), era, queued: false, native: true });
  }

  /**
   * An upstream's own task ended, as an answer of that upstream passing through says (`status`): its record
   * becomes terminal once, and the end is announced like any other (whichever replica saw it first).
   */
  async recordNativeEnd(taskId: string, status: 'completed' | 'failed' | 'cancelled'): Promise<void> {
    const changed = await this.store.transition(taskId, { to: status }).catch(unavailable);
    if (!changed.ok || changed.task.native !== true) return;
    this.events.emit('task.ended', { ...taskFacts(changed.task), status, durationMs: taskAgeMs(changed.task), era: changed.task.era });
  }

  /** Resolves once the task is terminal (read again after subscribing: a change in between is not missed). */
  async untilTerminal(taskId: string): Promise<TaskRecord> {
    // Never aborted: waitFor resolves only with the task.
    return (await this.waitFor(taskId, (task) => isTerminal(task.status), new AbortController().signal)) as TaskRecord;
  }

  /**
   * The task once terminal, with its outcome, refused as `find` refuses it (`reader`). When its run ended here the
   * outcome comes from the run (the store took it before anyone was told); otherwise it is read from the store.
   */
  async untilResult(taskId: string, reader?: TaskReader): Promise<TaskRecord> {
    const ended = await this.untilTerminal(taskId);
    if (ended.outcome === undefined) return this.find(taskId, { withOutcome: true, ...(reader === undefined ? {} : { reader }) });
    if (reader !== undefined && !this.readable(ended, reader)) throw new GatewayError('invalid_params', NOT_FOUND);
    return ended;
  }

  /**
   * Starts the timers: lease renewal of this replica's runs, and failing (or running again) the tasks of replicas
   * that stopped renewing theirs; and hears when slots free anywhere.
   */
  start(): void {
    this.slots.listen();
    this.leases.start();
  }

  /**
   * Gives running tasks up to `timeoutMs` to finish (SIGTERM: the replica no longer takes requests). Resolves
   * when none is left or the time is up; close() then fails what remains.
   */
  async drain(timeoutMs: number): Promise<void> {
    if (this.runs.size === 0 || timeoutMs <= 0) return;
    this.logger.info({ running: this.runs.size, timeoutMs }, 'draining running tasks');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((resolve) => (this.drained = resolve)),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timer);
    this.drained = undefined;
  }

  /**
   * Gives the runs on `upstream` (removed or replaced by a config reload) up to `timeoutMs` to finish; those still
   * running then fail with `message`. Resolves with how many were failed so.
   */
  async drainUpstream(upstream: Upstream, timeoutMs: number, message: string): Promise<number> {
    const runs = [...this.runs.values()].filter((run) => run.upstream === upstream);
    if (runs.length === 0) return 0;
    this.logger.info({ upstream: upstream.name, running: runs.length, timeoutMs }, 'draining the tasks of an upstream the config no longer has');
    let timer: NodeJS.Timeout | undefined;
    // endRun aborts a run's signal, whichever way it ends.
    const ended = runs.map((run) => new Promise<void>((resolve) => (runSignal(run).aborted ? resolve() : runSignal(run).addEventListener('abort', () => resolve(), { once: true }))));
    await Promise.race([Promise.all(ended), new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
    const left = runs.filter((run) => !run.ended);
    await Promise.all(
      left.map(async (run) => {
        this.endRun(run, 'failed', message);
        await this.recordEnd({ task: run.task, change: failedWith(message), reason: 'upstream removed' });
      }),
    );
    return left.length;
  }

  /** Stops every local run (gateway shutdown); their tasks fail with a message saying why. */
  async close(): Promise<void> {
    this.leases.stop();
    clearTimeout(this.flushTimer);
    if (this.pendingEnds.size > 0) await this.flushPendingEnds();
    clearTimeout(this.flushTimer);
    await Promise.all(
      [...this.runs.values()].map(async (run) => {
        this.endRun(run, 'failed', 'the gateway shut down');
        const changed = await this.store.transition(run.task.taskId, failedWith('The gateway shut down while the task was running')).catch(() => undefined);
        if (changed?.ok === true) this.events.emit('task.ended', { ...taskFacts(run.task), status: 'failed', reason: 'drained', durationMs: taskAgeMs(run.task) });
        await this.store.unlease(run.task.taskId).catch(() => undefined);
      }),
    );
  }

  // ---- running ----

  /**
   * Runs the upstream call of a task (after its concurrency slots) and records how it ended. The wait for the
   * call's answer is a reaction on its promise, not an async frame: it lasts as long as the tool does (hours), and
   * a frame suspended on it per task in flight is a generator and its registers (issue 23).
   */
  private execute(run: LocalRun, upstream: Upstream, queue: boolean, start: () => Promise<UpstreamCall | undefined>): Promise<void> {
    const failed = (error: unknown): Promise<void> => this.callEnded(run, { error: toJsonRpcError(error) });
    return this.startCall(run, upstream, queue, start).then(
      (call) => call?.outcome.then((outcome) => this.callEnded(run, outcome), failed),
      failed,
    );
  }

  /** Starts the task's upstream call once its slots are free; undefined when the run ended first. */
  private async startCall(run: LocalRun, upstream: Upstream, queue: boolean, start: () => Promise<UpstreamCall | undefined>): Promise<UpstreamCall | undefined> {
    const policy = this.policyFor(run.task.tool);
    const limits = { name: upstream.name, taskConcurrency: upstream.config.taskConcurrency };
    const inLine = performance.now();
    if (queue && !(await this.slots.take({ task: run.task, slots: run.slots, get ended() { return run.ended; }, get signal() { return runSignal(run); } }, limits, policy))) return undefined; // cancelled while queued
    const waitedMs = performance.now() - inLine;
    const call = await start();
    if (call === undefined || run.ended) {
      call?.cancel('the task ended before the call started');
      return undefined;
    }
    run.call = call;
    this.events.emit('task.started', { ...taskFacts(run.task), attempt: run.scope.attempt, waitedMs });
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
    const ended = boundedEnd({ to: failed ? 'failed' : 'completed', message, outcome }, run.task.upstream, this.config.maxResultBytes);
    const change = { ...ended, chargeTo: countedPrincipal(run.task.principal, this.callers.authenticated) };
    this.endRun(run, change.to as RunOutcome, undefined, { keepSlots: true });
    const recorded = this.recordEnd({ task: run.task, change, reason: change.to === 'failed' && !failed ? 'maxResultBytes' : undefined });
    // The slots go back once the terminal write is on its way (one connection keeps the order): the write that
    // a waiting tasks/result answers after does not queue behind a release (a script, and a message to every replica).
    this.releaseSlots(run);
    await recorded;
  }

  /**
   * Writes a task's terminal status (and drops its lease), and announces the end. When the store is away the
   * change is kept and written once it is back (`kept`), the lease renewed meanwhile: an upstream result is never
   * lost to a store outage.
   */
  private async recordEnd(end: PendingEnd, kept = false): Promise<void> {
    const { task, change, reason } = end;
    const taskId = task.taskId;
    try {
      this.localEnds.begin(taskId);
      const changed = await this.store.transition(taskId, change);
      // The store has it: this replica's waiters take the outcome from here, not from a read after the event.
      this.localEnds.settle(taskId, changed.ok ? withOutcomeOf(changed.task, change) : undefined);
      this.pendingEnds.delete(taskId);
      // After the answers of the waiters just woken (they go out in this tick's promise reactions): nobody waits on it.
      setImmediate(() => void this.store.unlease(taskId).catch(() => undefined));
      if (!changed.ok) return; // already terminal: whatever ended it announced it
      const ended = { ...taskFacts(task), status: change.to as RunOutcome, durationMs: taskAgeMs(task) };
      this.events.emit('task.ended', { ...ended, ...(reason === undefined ? {} : { reason }), ...(kept ? { kept } : {}) });
    } catch (error) {
      this.localEnds.settle(taskId, undefined);
      if (!this.pendingEnds.has(taskId)) this.logger.warn({ task: taskId, err: error }, 'the task store is unavailable: the task outcome is kept and written when it is back');
      this.pendingEnds.set(taskId, end);
      this.flushTimer ??= setTimeout(() => {
        this.flushTimer = undefined;
        void this.flushPendingEnds();
      }, PENDING_RETRY_MS);
    }
  }

  private async flushPendingEnds(): Promise<void> {
    for (const [taskId, end] of [...this.pendingEnds]) {
      await this.recordEnd(end, true);
      if (this.pendingEnds.has(taskId)) return; // still away; recordEnd scheduled the next try
    }
  }

  private async deadlinePassed(run: LocalRun, maxRunMs: number): Promise<void> {
    if (run.ended) return;
    const message = `The tool call exceeded its maximum run time of ${maxRunMs} ms (maxRunMs) and was cancelled`;
    this.endRun(run, 'failed', 'maxRunMs exceeded');
    await this.recordEnd({ task: run.task, change: failedWith(message), reason: 'maxRunMs' });
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
    if (this.runs.size === 0) this.drained?.();
  }

  /** Slots held and places in line go back (the principal's count included: the task is ending). */
  private releaseSlots(run: LocalRun): void {
    for (const slot of run.slots.splice(0)) this.slots.release(slot);
  }

  /** Progress goes to the caller with its own token until the task ends, and into the task's status message. */
  private relayNotification(run: LocalRun, message: JsonRpcNotification): void {
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

  /**
   * The upstream runs the call as its own task: its status message becomes this task's. Its `input_required`
   * is not copied: this task is `input_required` while the upstream's questions wait here (ask).
   */
  private upstreamStatus(run: LocalRun, message: string): void {
    if (run.ended || message === run.upstreamStatusMessage) return;
    run.upstreamStatusMessage = message;
    this.recordStatus(run, message);
  }

  /** A new status message of a running task, in the store and announced (once the store took it). */
  private recordStatus(run: LocalRun, message: string): void {
    const status = run.status;
    void this.store.transition(run.task.taskId, { to: status, message }).then(
      (changed) => {
        if (changed.ok) this.events.emit('task.status', { ...taskFacts(run.task), status, message });
      },
      () => undefined,
    );
  }

  /**
   * The upstream asks the client something during the task: the question becomes one of the task's keyed input
   * requests (the task is `input_required` until every one is answered), and goes to the client now where the
   * caller can put it there; otherwise the client reads it from the task and answers through `answer`.
   */
  private ask(run: LocalRun, request: InputRequest, signal: AbortSignal): Promise<Outcome> {
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

  /** Puts one open input request to the client through the caller; kept for later when it cannot reach it now. */
  private deliver(run: LocalRun, key: string, request: InputRequest, signal: AbortSignal): void {
    void run.caller.deliver(request, signal)?.then((outcome) => {
      if (outcome !== undefined) run.inputs?.settle(key, outcome);
      else if (!signal.aborted && run.inputs?.isOpen(key) === true) (run.undelivered ??= new Map()).set(key, { request, signal });
    });
  }

  private redeliver(run: LocalRun): void {
    const undelivered = run.undelivered;
    if (undelivered === undefined) return;
    for (const [key, { request, signal }] of [...undelivered]) {
      undelivered.delete(key);
      this.deliver(run, key, request, signal);
    }
  }

  /** Settles the run's waiting input requests the answers name; the store shows what is left before this resolves. */
  private async answerHere(taskId: string, answers: JsonObject): Promise<void> {
    const run = this.runs.get(taskId);
    if (run === undefined || run.ended) return;
    if (run.inputs !== undefined && run.inputs.answer(answers) > 0) await run.inputSync;
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
      await this.store
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

  // ---- leases and recovery ----

  /** The runs as the leases see them: what to renew, and how to run a lost task's call again here. */
  private leasedRuns(): LeasedRuns {
    return {
      heldCount: () => this.runs.size + this.pendingEnds.size,
      holds: (taskId) => this.holds(taskId),
      renewSlots: () => this.slots.renew([...this.runs.values()].flatMap((run) => run.slots)),
      policyFor: (exposedName) => this.policyFor(exposedName),
      runAgain: async (task, upstream) => {
        // Still the principal's task: counted again (its old ticket expired with the lost replica's leases).
        if (this.policyFor(task.tool).maxTasksPerPrincipal > 0) await this.slots.reclaimPrincipal(task.principal, task.taskId);
        const { caller, identity, bytes } = await this.recovery.resume(task);
        try {
          this.runToolCall(task, upstream, caller, task.call.params, identity, bytes?.charge);
        } finally {
          bytes?.release(); // the run holds its own
        }
      },
    };
  }

  /** Whether this replica runs the task, or keeps its outcome for the store: its lease is ours. */
  private holds(taskId: string): boolean {
    return this.runs.has(taskId) || this.pendingEnds.has(taskId);
  }

  /** Whether a task under `policy` may have to be started by another replica (its call is then kept). */
  private mayStartElsewhere(policy: TaskPolicy, upstream: Upstream): boolean {
    return policy.retry.onLoss || policy.concurrency > 0 || upstream.config.taskConcurrency > 0;
  }
}

/** The task as a terminal change made it, with the outcome the change carried (the transition's answer has none). */
function withOutcomeOf(task: TaskRecord, change: TaskChange): TaskRecord {
  return change.outcome === undefined ? task : { ...task, outcome: change.outcome };
}

/** A store failure as the client meets it: "the task store is unavailable", never the Redis client's own words. */
function unavailable(error: unknown): never {
  throw storeUnavailable(error);
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
