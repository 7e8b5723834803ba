import type { TaskPolicy, TasksConfig } from '../config/types.js';
import { resolvePolicy } from '../config/policy.js';
import { GatewayError, storeUnavailable, toJsonRpcError } from '../errors.js';
import type { EventStream } from '../http/event-stream.js';
import { InternalError, RequestCancelled, type JsonObject, type JsonRpcNotification, type Outcome } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import type { ClientSession } from '../gateway/session.js';
import { InvalidCursorError, isTerminal, newTaskId, type StoredCall, type TaskChange, type TaskRecord, type TaskStore } from '../store/task-store.js';
import type { CallContext, UpstreamCall } from '../upstream/connection.js';
import type { SessionIdentity, Upstream } from '../upstream/upstream.js';
import { createTaskResult, legacyTask, taskPayload, withRelatedTask } from '../protocol/rev2025-11-25/codec.js';
import { ACK, detailedTask } from '../protocol/rev2026-07-28/codec.js';
import { clientInputRequest, inputKey, type InputRequest, type ModernExchange } from '../protocol/rev2026-07-28/exchange.js';
import type { ReplicaLink } from '../gateway/replicas.js';
import { EventEmitter } from 'node:events';

const LIST_PAGE_SIZE = 50;
/** How often a kept terminal change is retried while the store is away. */
const PENDING_RETRY_MS = 1000;
/** How long a replica whose leases ran out gets to say it is alive and still running them. */
const OWNER_CHECK_MS = 500;
/** Progress updates the task's status message at most this often (each update is a store write). */
const STATUS_MESSAGE_INTERVAL_MS = 1000;
const NOT_FOUND = 'Failed to retrieve task: Task not found';
const EXPIRED = 'Failed to retrieve task: Task has expired';

/** A task whose upstream call runs in this process. */
interface LocalRun {
  task: TaskRecord;
  /** The legacy session that created the task; undefined for tasks of modern clients. */
  session: ClientSession | undefined;
  call: UpstreamCall | undefined;
  deadline: NodeJS.Timeout | undefined;
  /** Set once the task reached a terminal status through the engine (cancel, deadline): ignore the call's end. */
  ended: boolean;
  status: 'working' | 'input_required';
  outstandingInputs: number;
  /** Open tasks/result streams for this task: where input requests go first. */
  resultStreams: Set<EventStream>;
  lastMessageAt: number;
  /** Aborted when the run ends: stops waiting for a concurrency slot. */
  abort: AbortController;
  /** Store semaphore tickets the run holds or waits in line with (limits across replicas); renewed by the heartbeat. */
  slots: SlotTicket[];
  /** Modern era: input requests the upstream waits on, by key, until tasks/update answers them. */
  inputs: Map<string, { request: InputRequest; settle(outcome: Outcome): void }>;
  nextInputKey: number;
  /** Serialises writes of `inputs` to the store, so the last write always reflects the latest state. */
  inputSync: Promise<unknown>;
  /** Stops following the task's changes made elsewhere. */
  stopWatching: () => void;
  /** The last status message of the upstream's own task (when the upstream runs the call as one), as recorded. */
  upstreamStatusMessage: string | undefined;
}

/**
 * Runs tool calls as durable tasks for 2025-11-25 sessions: creates them in the store before answering, runs the
 * upstream call detached from the client's HTTP request, records every transition, and serves tasks/*.
 */
export class TaskEngine {
  private readonly runs = new Map<string, LocalRun>();
  /** Wakes runs waiting in a semaphore's line when a slot of it frees, on any replica (by semaphore key). */
  private readonly slotFreed = new EventEmitter();
  /** Other replicas, for answers that belong to runs they hold. */
  private replicas: ReplicaLink | undefined;
  /** What re-running a lost task's call needs (set by start). */
  private recovery: RecoveryDeps | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  /** Terminal changes the store could not take yet, by task: written when it is back. */
  private readonly pendingEnds = new Map<string, TaskChange>();
  private flushTimer: NodeJS.Timeout | undefined;
  /** The store failed a heartbeat or sweep and has not answered since. */
  private storeDown = false;
  /** When the store answered again after it was down (epoch ms). */
  private storeBackAt = 0;
  /** Set while draining: called when the last run ends. */
  private drained: (() => void) | undefined;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: TaskStore,
    private readonly config: TasksConfig,
    private readonly logger: Logger,
    private readonly immediateResponse: string | undefined,
    private readonly leaseMs: number,
  ) {}

  policyFor(exposedToolName: string): TaskPolicy {
    return resolvePolicy(this.config, exposedToolName);
  }

  /** Stores the task, starts the upstream call, and answers with the 2025-11-25 CreateTaskResult. */
  async create(
    session: ClientSession,
    exposedName: string,
    upstream: Upstream,
    params: JsonObject,
    requestedTtl: unknown,
  ): Promise<Outcome> {
    const policy = this.policyFor(exposedName);
    const task = await this.open(principalOf(session), 'legacy', exposedName, upstream, policy, requestedTtl, storedCall(params, session));
    this.logger.info({ audit: 'task.created', task: task.taskId, tool: exposedName, upstream: upstream.name, session: session.sessionId }, 'task created');
    this.runLegacy(task, session, upstream, policy, params);
    return { result: createTaskResult(task, this.immediateResponse) };
  }

  /** Runs a 2025-era task's call here: its session hears of every change, and answers its questions. */
  private runLegacy(task: TaskRecord, session: ClientSession | undefined, upstream: Upstream, policy: TaskPolicy, params: JsonObject, identity: SessionIdentity | undefined = session): void {
    const run = this.newRun(task, session);
    if (session !== undefined) {
      session.activeTasks++;
      // notifications/tasks/status on every change, to the session that created the task, until it is terminal.
      const stopWatching = this.store.watch(task.taskId, (changed) => {
        session.deliver({ jsonrpc: '2.0', method: 'notifications/tasks/status', params: legacyTask(changed) }, { taskId: task.taskId });
        if (isTerminal(changed.status)) stopWatching();
      });
    }
    const context: CallContext = {
      sessionId: identity?.sessionId ?? task.taskId,
      notify: (message) => this.relayNotification(run, message),
      ask: (request, signal) => this.askClient(run, request, signal),
      status: (update) => this.upstreamStatus(run, update),
    };
    void this.execute(run, upstream, policy, true, async () => {
      if (run.ended || identity === undefined) return undefined; // cancelled while queued: the upstream never hears of it
      return upstream.callFor(identity, 'tools/call', params, context, 0, { asTask: true });
    });
  }

  /**
   * A task for a modern client (Tasks extension). `exchange` is the upstream call: already running when the
   * gateway waited `taskAfterMs` for it first (the task adopts it), else `start` starts it once a slot is free.
   * From now on the upstream's questions are the task's input requests. Resolves with the stored task, which is
   * readable on every replica by then.
   */
  async createModern(
    principal: string,
    exposedName: string,
    upstream: Upstream,
    exchange: ModernExchange,
    start: (() => Promise<UpstreamCall | undefined>) | undefined,
  ): Promise<TaskRecord> {
    const policy = this.policyFor(exposedName);
    const replay = exchange.replay === undefined ? undefined : storedCall(exchange.replay.params, exchange.replay.identity);
    const task = await this.open(principal, 'modern', exposedName, upstream, policy, undefined, replay);
    this.logger.info({ audit: 'task.created', task: task.taskId, tool: exposedName, upstream: upstream.name, era: 'modern' }, 'task created');
    const run = this.newRun(task, undefined);
    exchange.adopt((request, signal) => this.askModern(run, request, signal), run.abort.signal, (update) => this.upstreamStatus(run, update));
    const running = exchange.call;
    // A call that already runs holds no queue position to wait for: it is counted from here on.
    void this.execute(run, upstream, policy, running === undefined, async () => running ?? (await start?.()));
    return task;
  }

  /** Checks the principal's limit and stores a new task (durable before anyone hears of it). */
  private async open(
    principal: string,
    era: 'legacy' | 'modern',
    exposedName: string,
    upstream: Upstream,
    policy: TaskPolicy,
    requestedTtl: unknown,
    call: StoredCall | undefined,
  ): Promise<TaskRecord> {
    const taskId = newTaskId();
    // Counted across every replica: a semaphore that never queues, held by the task until it ends.
    if (policy.maxTasksPerPrincipal > 0) {
      const grant = await this.store
        .acquireSlot(principalSlot(principal), taskId, this.replicaId, policy.maxTasksPerPrincipal, this.leaseMs, { queue: false })
        .catch((error: unknown) => {
          throw storeUnavailable(error);
        });
      if (!grant.granted) {
        throw new GatewayError(
          'too_many_tasks',
          `Too many unfinished tasks: this client already has ${grant.ahead} (maxTasksPerPrincipal: ${policy.maxTasksPerPrincipal}); wait for some to finish or cancel them`,
        );
      }
    }
    const ttlMs = typeof requestedTtl === 'number' && Number.isFinite(requestedTtl) && requestedTtl > 0
      ? Math.min(Math.floor(requestedTtl), policy.maxTtlMs)
      : Math.min(policy.ttlMs, policy.maxTtlMs);
    const task = await this.store
      // The call is kept only where another replica may have to start it: it can be large, and it is the
      // client's data. That is where policy allows a re-run, or where the task may wait in line for a slot.
      .create({ taskId, principal, era, tool: exposedName, upstream: upstream.name, ttlMs, pollIntervalMs: policy.pollIntervalMs, ...(call !== undefined && this.mayStartElsewhere(policy, upstream) ? { call } : {}) })
      .catch((error: unknown) => {
        if (policy.maxTasksPerPrincipal > 0) void this.store.releaseSlot(principalSlot(principal), taskId).catch(() => undefined);
        throw storeUnavailable(error);
      });
    // Leased before anyone hears of the task: if this replica dies from here on, another one ends the task.
    await this.store.lease([task.taskId], this.replicaId, this.leaseMs).catch((error: unknown) => {
      this.logger.warn({ task: task.taskId, err: error }, 'could not lease the new task');
    });
    return task;
  }

  private get replicaId(): string {
    return this.replicas?.id ?? 'local';
  }

  private newRun(task: TaskRecord, session: ClientSession | undefined): LocalRun {
    const run: LocalRun = {
      task,
      session,
      call: undefined,
      deadline: undefined,
      ended: false,
      status: 'working',
      outstandingInputs: 0,
      resultStreams: new Set(),
      lastMessageAt: 0,
      abort: new AbortController(),
      slots: [],
      inputs: new Map(),
      nextInputKey: 1,
      inputSync: Promise.resolve(),
      stopWatching: () => undefined,
      upstreamStatusMessage: undefined,
    };
    this.runs.set(task.taskId, run);
    if (this.policyFor(task.tool).maxTasksPerPrincipal > 0) run.slots.push({ key: principalSlot(task.principal), ticket: task.taskId });
    // A task cancelled through another replica (or any other way) stops its upstream call here.
    run.stopWatching = this.store.watch(task.taskId, (changed) => {
      if (!isTerminal(changed.status) || run.ended) return;
      this.endRun(run, `the task was ${changed.status}`);
      void this.store.unlease(task.taskId).catch(() => undefined);
    });
    return run;
  }

  async get(taskId: unknown): Promise<Outcome> {
    const task = await this.find(taskId);
    return { result: legacyTask(task) };
  }

  /** Blocks until the task is terminal, then answers exactly what the upstream answered. */
  async result(taskId: unknown, stream: EventStream | undefined, session?: ClientSession): Promise<Outcome> {
    const initial = await this.find(taskId, true);
    const run = this.runs.get(initial.taskId);
    if (stream !== undefined) run?.resultStreams.add(stream);
    // The call runs on another replica: its requests for the client are to come here.
    const release = run === undefined && stream !== undefined && !isTerminal(initial.status) ? session?.holdResultStream(initial.taskId, stream) : undefined;
    try {
      // Events carry no outcome: once the task is terminal, read it whole.
      const task = isTerminal(initial.status) ? initial : await this.find((await this.untilTerminal(initial.taskId)).taskId, true);
      this.logger.info({ audit: 'task.retrieved', task: task.taskId }, 'task result retrieved');
      if (task.outcome !== undefined) return taskPayload({ ...task, outcome: task.outcome });
      return { error: { code: InternalError, message: `Task ${task.taskId} was ${task.status}${task.statusMessage ? `: ${task.statusMessage}` : ''}` } };
    } finally {
      if (stream !== undefined) run?.resultStreams.delete(stream);
      release?.();
    }
  }

  async list(session: ClientSession, cursor: unknown): Promise<Outcome> {
    if (cursor !== undefined && typeof cursor !== 'string') throw new GatewayError('invalid_params', 'Invalid cursor');
    try {
      const page = await this.store.list(principalOf(session), cursor === undefined ? { limit: LIST_PAGE_SIZE } : { cursor, limit: LIST_PAGE_SIZE });
      const result: JsonObject = { tasks: page.tasks.map(legacyTask) };
      if (page.nextCursor !== undefined) result.nextCursor = page.nextCursor;
      return { result };
    } catch (error) {
      if (error instanceof InvalidCursorError) throw new GatewayError('invalid_params', 'Invalid cursor');
      throw storeUnavailable(error);
    }
  }

  /** Cancels a non-terminal task: it is `cancelled` in the store before this answers, then the call is stopped. */
  async cancel(taskId: unknown): Promise<Outcome> {
    const task = await this.find(taskId);
    if (isTerminal(task.status)) throw new GatewayError('invalid_params', `Cannot cancel task: it is already ${task.status}`);
    const changed = await this.store.transition(task.taskId, { to: 'cancelled', statusMessage: 'The task was cancelled by request.' }).catch(unavailable);
    if (!changed.ok) {
      if (changed.reason === 'not_found') throw new GatewayError('invalid_params', NOT_FOUND);
      throw new GatewayError('invalid_params', `Cannot cancel task: it is already ${changed.task.status}`);
    }
    const run = this.runs.get(task.taskId);
    if (run !== undefined) this.endRun(run, 'the task was cancelled');
    void this.store.unlease(task.taskId).catch(() => undefined);
    this.logger.info({ audit: 'task.cancelled', task: task.taskId }, 'task cancelled');
    return { result: legacyTask(changed.task) };
  }

  // ---- modern era (Tasks extension) ----

  /**
   * Records a task a 2026-07-28 upstream runs itself, so that any replica routes its methods there. The record
   * is terminal from the start (the gateway tracks no status for it) and expires with the task's TTL.
   */
  async recordNative(taskId: string, exposedName: string, upstream: Upstream, ttlMs: number): Promise<void> {
    if ((await this.store.get(taskId).catch(unavailable)) !== undefined) {
      // Native ids are the upstream's own; the gateway cannot route two tasks with one id.
      throw new GatewayError('internal', `Upstream '${upstream.name}' returned task id '${taskId}', which another task already uses`);
    }
    await this.store
      .create({ taskId, principal: MODERN_PRINCIPAL_NATIVE, era: 'modern', tool: exposedName, upstream: upstream.name, ttlMs, pollIntervalMs: 0, native: true })
      .catch(unavailable);
    await this.store.transition(taskId, { to: 'completed', statusMessage: `Runs on upstream '${upstream.name}'` }).catch(unavailable);
  }

  /**
   * The task a modern tasks/* request names, read once: a native record (the caller routes it to its upstream)
   * or the gateway's own task, with its outcome when `withOutcome` (tasks/get inlines it).
   */
  findModern(taskId: unknown, withOutcome: boolean): Promise<TaskRecord> {
    return this.find(taskId, withOutcome, true);
  }

  /** The DetailedTask: result, error or outstanding input requests inlined (`task` read with its outcome). */
  getModern(task: TaskRecord): Outcome {
    return { result: { resultType: 'complete', ...detailedTask(task) } };
  }

  /**
   * Routes each answer to the upstream request waiting on it; unknown or already answered keys are ignored. The
   * store reflects what is still outstanding before this acknowledges, so a tasks/get right after sees it.
   */
  async updateModern(task: TaskRecord, inputResponses: unknown): Promise<Outcome> {
    if (typeof inputResponses !== 'object' || inputResponses === null || Array.isArray(inputResponses)) {
      throw new GatewayError('invalid_params', 'tasks/update: params.inputResponses must be an object');
    }
    const responses = inputResponses as JsonObject;
    if (this.runs.has(task.taskId)) await this.answerInputs(task.taskId, responses);
    else if (!isTerminal(task.status)) {
      // The upstream call runs on another replica: the answers go there (whichever holds the run answers).
      await this.replicas?.ask(undefined, 'task.update', { taskId: task.taskId, inputResponses: responses });
    }
    return { result: { ...ACK } };
  }

  /**
   * Joins the replicas: serves tasks/update answers another replica received for a task running here, renews
   * the leases of this replica's runs, and fails the tasks of replicas that stopped renewing theirs.
   */
  start(replicas: ReplicaLink, recovery: RecoveryDeps): void {
    this.replicas = replicas;
    this.recovery = recovery;
    replicas.on('task.update', async (body, peer) => {
      const taskId = String(body.taskId);
      const run = this.runs.get(taskId);
      if (run === undefined || run.ended) return undefined;
      peer.accept();
      await this.answerInputs(taskId, (body.inputResponses ?? {}) as JsonObject);
      return { ok: true };
    });
    void this.store
      .subscribe('slots', (message) => this.slotFreed.emit(String(message.key)))
      .catch((error: unknown) => this.logger.warn({ err: error }, 'not told when task slots free; waiting runs retry on a timer'));
    replicas.on('task.held', async (body) => {
      const ids = Array.isArray(body.taskIds) ? (body.taskIds as unknown[]).map(String) : [];
      return { held: ids.filter((id) => this.holds(id)) };
    });
    this.heartbeat = setInterval(() => {
      // Tasks whose outcome waits for the store stay leased: nobody may declare them lost.
      const ids = [...this.runs.keys(), ...this.pendingEnds.keys()];
      const slots = [...this.runs.values()].flatMap((run) => run.slots);
      if (slots.length > 0) void this.store.renewSlots(slots, this.leaseMs).catch(() => undefined);
      this.store.lease(ids, replicas.id, this.leaseMs, { renew: true }).then(
        () => this.storeAnswered(),
        (error: unknown) => {
          this.storeDown = true;
          this.logger.warn({ err: error }, 'could not renew task leases');
        },
      );
    }, Math.max(50, Math.floor(this.leaseMs / 3)));
    this.heartbeat.unref();
    this.sweeper = setInterval(() => void this.recoverOrphans(), Math.max(50, Math.floor(this.leaseMs / 2)));
    this.sweeper.unref();
  }

  /** Whether this replica runs the task, or keeps its outcome for the store: its lease is ours to renew. */
  private holds(taskId: string): boolean {
    return this.runs.has(taskId) || this.pendingEnds.has(taskId);
  }

  private storeAnswered(): void {
    if (!this.storeDown) return;
    this.storeDown = false;
    this.storeBackAt = Date.now();
  }

  /** Fails (or runs again) the tasks whose replica stopped renewing their leases: nothing stays running forever. */
  private async recoverOrphans(): Promise<void> {
    // Leases run out in store time while the store is away, for live replicas too: once it is back, every
    // replica gets one lease period to renew (and write what it kept) before anyone is declared lost.
    if (this.storeDown) {
      await this.store.ping().then(() => this.storeAnswered(), () => undefined);
      return;
    }
    if (Date.now() - this.storeBackAt < this.leaseMs) return;
    let orphans: { taskId: string; owner: string }[];
    try {
      orphans = await this.store.takeOrphans(100);
    } catch {
      this.storeDown = true;
      return; // the store is away; readiness says so, and the leases wait
    }
    const lost = await this.stillHeld(orphans);
    for (const { taskId, owner } of lost) {
      if (await this.takeOverLost(taskId, owner)) continue;
      const message = `The gateway lost the call: replica ${owner} stopped while running it (no lease renewal for ${this.leaseMs} ms)`;
      const changed = await this.store
        .transition(taskId, failedWith(message))
        .catch(() => undefined);
      if (!changed?.ok) continue;
      this.logger.warn({ audit: 'task.lost', task: taskId, owner }, 'task failed: its replica stopped');
      // The replica that told the session about its task's changes is gone: the last change is told from here.
      if (changed.task.era === 'legacy') void this.tellSession(changed.task);
    }
  }

  private async tellSession(task: TaskRecord): Promise<void> {
    const sessionId = sessionOfPrincipal(task.principal);
    const session = sessionId === undefined ? undefined : await this.recovery?.session(sessionId).catch(() => undefined);
    session?.deliver({ jsonrpc: '2.0', method: 'notifications/tasks/status', params: legacyTask(task) }, { taskId: task.taskId });
  }

  /**
   * Hands back the orphans whose owner turns out to be alive and running them (its heartbeats came late, say
   * after a store outage: its connection came back later than ours), and returns the rest: truly lost.
   */
  private async stillHeld(orphans: { taskId: string; owner: string }[]): Promise<{ taskId: string; owner: string }[]> {
    const byOwner = new Map<string, string[]>();
    for (const { taskId, owner } of orphans) byOwner.set(owner, [...(byOwner.get(owner) ?? []), taskId]);
    const lost: { taskId: string; owner: string }[] = [];
    for (const [owner, taskIds] of byOwner) {
      const held = new Set<string>();
      if (owner === this.replicaId) {
        for (const id of taskIds) if (this.holds(id)) held.add(id);
      } else {
        const answer = await this.replicas?.ask(owner, 'task.held', { taskIds }, undefined, OWNER_CHECK_MS).catch(() => undefined);
        if (Array.isArray(answer?.held)) for (const id of answer.held as unknown[]) held.add(String(id));
      }
      if (held.size > 0) await this.store.lease([...held], owner, this.leaseMs).catch(() => undefined);
      for (const taskId of taskIds) if (!held.has(taskId)) lost.push({ taskId, owner });
    }
    return lost;
  }

  /** Whether a task under `policy` may have to be started by another replica (its call is then kept). */
  private mayStartElsewhere(policy: TaskPolicy, upstream: Upstream): boolean {
    return policy.retry.onLoss || policy.concurrency > 0 || upstream.config.taskConcurrency > 0;
  }

  /**
   * Takes over a lost task here instead of failing it, when that is safe: a task that was still waiting in line
   * for a slot (the upstream never saw it) joins the line again here; a running one runs again when its policy
   * allows (`retry.onLoss`) and attempts are left. Exactly one replica takes each orphan, so each loss leads to
   * at most one more execution.
   */
  private async takeOverLost(taskId: string, owner: string): Promise<boolean> {
    const task = await this.store.get(taskId, { outcome: true }).catch(() => undefined);
    if (task === undefined || isTerminal(task.status) || task.call === undefined) return false;
    const policy = this.policyFor(task.tool);
    const waiting = task.queued === true;
    const attempt = (task.attempt ?? 1) + (waiting ? 0 : 1);
    const upstream = this.recovery?.upstream(task.upstream);
    if (upstream === undefined || (!waiting && (!policy.retry.onLoss || attempt > policy.retry.maxAttempts))) return false;
    await this.store.lease([taskId], this.replicaId, this.leaseMs).catch(() => undefined);
    const changed = await this.store
      .transition(taskId, {
        to: 'working',
        attempt,
        inputRequests: null,
        statusMessage: waiting
          ? `Waiting for a slot on another replica: replica ${owner} stopped while the task waited in line`
          : `Running the call again (attempt ${attempt} of ${policy.retry.maxAttempts}): replica ${owner} stopped while running it`,
      })
      .catch(() => undefined);
    if (changed?.ok !== true) {
      await this.store.unlease(taskId).catch(() => undefined);
      return changed !== undefined; // ended meanwhile: nothing to fail; store away: it fails below
    }
    if (waiting) this.logger.warn({ audit: 'task.requeued', task: taskId, owner }, 'queued task taken over: its replica stopped');
    else this.logger.warn({ audit: 'task.retried', task: taskId, owner, attempt }, 'task re-run: its replica stopped');
    if (policy.maxTasksPerPrincipal > 0) {
      // Still the principal's task: counted again (its old ticket expired with the lost replica's leases).
      await this.store.acquireSlot(principalSlot(task.principal), taskId, this.replicaId, Number.MAX_SAFE_INTEGER, this.leaseMs, { queue: false }).catch(() => undefined);
    }
    const { params, identity } = task.call;
    const call: SessionIdentity = { clientInfo: undefined, ...identity };
    if (task.era === 'legacy') {
      const session = await this.recovery?.session(identity.sessionId).catch(() => undefined);
      this.runLegacy(changed.task, session, upstream, policy, params, session ?? call);
    } else {
      const run = this.newRun(changed.task, undefined);
      const context: CallContext = {
        sessionId: call.sessionId,
        notify: () => undefined,
        ask: (request, signal) => this.askModern(run, request, signal),
        status: (update) => this.upstreamStatus(run, update),
      };
      void this.execute(run, upstream, policy, true, async () => (run.ended ? undefined : upstream.callFor(call, 'tools/call', params, context, 0, { asTask: true })));
    }
    return true;
  }

  /** Settles the run's waiting input requests the answers name; the store shows what is left before this resolves. */
  private async answerInputs(taskId: string, inputResponses: JsonObject): Promise<void> {
    const run = this.runs.get(taskId);
    if (run === undefined || run.ended) return;
    let answered = 0;
    for (const [key, response] of Object.entries(inputResponses)) {
      const input = run.inputs.get(key);
      if (input === undefined || typeof response !== 'object' || response === null || Array.isArray(response)) continue;
      run.inputs.delete(key);
      input.settle({ result: response as JsonObject });
      answered++;
    }
    if (answered > 0) await this.syncInputs(run);
  }

  /** Acknowledges, terminal or not; a running task is recorded `cancelled` first, then its call is stopped. */
  async cancelModern(task: TaskRecord): Promise<Outcome> {
    if (!isTerminal(task.status)) {
      const changed = await this.store
        .transition(task.taskId, { to: 'cancelled', statusMessage: 'The task was cancelled by request.' })
        .catch((error: unknown) => {
          throw storeUnavailable(error);
        });
      const run = this.runs.get(task.taskId);
      if (run !== undefined) this.endRun(run, 'the task was cancelled');
      void this.store.unlease(task.taskId).catch(() => undefined);
      if (changed.ok) this.logger.info({ audit: 'task.cancelled', task: task.taskId, era: 'modern' }, 'task cancelled');
    }
    return { result: { ...ACK } };
  }

  /** The upstream asks during a modern task: the question becomes one of the task's keyed input requests. */
  private askModern(run: LocalRun, request: InputRequest, signal: AbortSignal): Promise<Outcome> {
    if (run.ended) return Promise.resolve({ error: { code: RequestCancelled, message: 'The task has ended' } });
    const key = inputKey(request.method, run.nextInputKey++);
    return new Promise<Outcome>((resolve) => {
      const onAbort = (): void => {
        if (run.inputs.delete(key)) void this.syncInputs(run);
        resolve({ error: { code: RequestCancelled, message: 'Request cancelled' } });
      };
      signal.addEventListener('abort', onAbort, { once: true });
      run.inputs.set(key, {
        request: clientInputRequest(request),
        settle: (outcome) => {
          signal.removeEventListener('abort', onAbort);
          resolve(outcome);
        },
      });
      void this.syncInputs(run);
    });
  }

  /** Writes the run's outstanding input requests (and the status they imply) to the store, in order. */
  private syncInputs(run: LocalRun): Promise<unknown> {
    run.inputSync = run.inputSync.then(async () => {
      if (run.ended) return;
      const inputRequests: JsonObject = {};
      for (const [key, input] of run.inputs) inputRequests[key] = input.request;
      const waiting = run.inputs.size > 0;
      run.status = waiting ? 'input_required' : 'working';
      await this.store
        .transition(run.task.taskId, waiting
          ? { to: 'input_required', inputRequests, statusMessage: `Waiting for the client to answer ${run.inputs.size} input request(s)` }
          : { to: 'working', inputRequests: null, statusMessage: null })
        .catch((error: unknown) => this.logger.error({ task: run.task.taskId, err: error }, 'could not record input requests'));
    });
    return run.inputSync;
  }

  /** Stops every local run (gateway shutdown); their tasks fail with a message saying why. */
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

  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    clearInterval(this.sweeper);
    clearTimeout(this.flushTimer);
    if (this.pendingEnds.size > 0) await this.flushPendingEnds();
    clearTimeout(this.flushTimer);
    await Promise.all(
      [...this.runs.values()].map(async (run) => {
        this.endRun(run, 'the gateway shut down');
        await this.store.transition(run.task.taskId, failedWith('The gateway shut down while the task was running')).catch(() => undefined);
        await this.store.unlease(run.task.taskId).catch(() => undefined);
      }),
    );
  }

  /** Runs the upstream call of a task (after its concurrency slots) and records how it ended. */
  private async execute(run: LocalRun, upstream: Upstream, policy: TaskPolicy, queue: boolean, start: () => Promise<UpstreamCall | undefined>): Promise<void> {
    const taskId = run.task.taskId;
    let outcome: Outcome;
    try {
      if (queue && !(await this.takeSlots(run, upstream, policy))) return; // cancelled while queued
      const call = await start();
      if (call === undefined || run.ended) {
        call?.cancel('the task ended before the call started');
        return;
      }
      run.call = call;
      if (policy.maxRunMs > 0) {
        run.deadline = setTimeout(() => void this.deadlinePassed(run, policy.maxRunMs), policy.maxRunMs);
      }
      outcome = await call.outcome;
    } catch (error) {
      outcome = { error: toJsonRpcError(error) };
    }
    if (run.ended) return;
    this.endRun(run, undefined);
    const failed = 'error' in outcome || outcome.result.isError === true;
    const statusMessage = 'error' in outcome ? outcome.error.message : failed ? toolErrorText(outcome.result) : null;
    const changed = await this.recordEnd(taskId, { to: failed ? 'failed' : 'completed', statusMessage, outcome });
    if (changed) this.logger.info({ audit: failed ? 'task.failed' : 'task.completed', task: taskId }, `task ${failed ? 'failed' : 'completed'}`);
  }

  /**
   * Writes a task's terminal status (and drops its lease). When the store is away the change is kept and
   * written once it is back, the lease renewed meanwhile: an upstream result is never lost to a store outage.
   * Resolves whether this change ended the task (false when it was already terminal, or is still pending).
   */
  private async recordEnd(taskId: string, change: TaskChange): Promise<boolean> {
    try {
      const changed = await this.store.transition(taskId, change);
      this.pendingEnds.delete(taskId);
      void this.store.unlease(taskId).catch(() => undefined);
      return changed.ok;
    } catch (error) {
      if (!this.pendingEnds.has(taskId)) this.logger.warn({ task: taskId, err: error }, 'the task store is unavailable: the task outcome is kept and written when it is back');
      this.pendingEnds.set(taskId, change);
      this.flushTimer ??= setTimeout(() => {
        this.flushTimer = undefined;
        void this.flushPendingEnds();
      }, PENDING_RETRY_MS);
      return false;
    }
  }

  private async flushPendingEnds(): Promise<void> {
    for (const [taskId, change] of [...this.pendingEnds]) {
      if (await this.recordEnd(taskId, change)) this.logger.info({ audit: `task.${change.to}`, task: taskId }, 'kept task outcome written');
      if (this.pendingEnds.has(taskId)) return; // still away; recordEnd scheduled the next try
    }
  }

  /**
   * Waits, in order across every replica, for a slot under the tool's `concurrency` and the upstream's
   * `taskConcurrency`; a queued task stays `working` with a status message saying what it waits for. False when
   * the run ended while waiting.
   */
  private async takeSlots(run: LocalRun, upstream: Upstream, policy: TaskPolicy): Promise<boolean> {
    const tool = run.task.tool;
    const perUpstream = upstream.config.taskConcurrency;
    // A task taken over from a lost replica may carry the mark already: it is cleared before the call starts.
    let queued = run.task.queued === true;
    const limits: [string, number, string][] = [
      [toolSlot(tool), policy.concurrency, `tool '${tool}' runs at most ${policy.concurrency} at once`],
      [upstreamSlot(upstream.name), perUpstream, `upstream '${upstream.name}' runs at most ${perUpstream} tasks at once`],
    ];
    for (const [key, limit, what] of limits) {
      if (limit <= 0) continue; // unlimited
      const slot = { key, ticket: run.task.taskId };
      run.slots.push(slot);
      let shown: number | undefined;
      for (;;) {
        if (run.ended) return false;
        const grant = await this.store.acquireSlot(key, slot.ticket, this.replicaId, limit, this.leaseMs).catch(() => undefined);
        if (run.ended) return false; // endRun gives the slot back
        if (grant?.granted === true) break;
        if (grant !== undefined && grant.ahead !== shown) {
          shown = grant.ahead;
          queued = true;
          void this.store
            .transition(run.task.taskId, { to: 'working', queued: true, statusMessage: `Queued behind ${grant.ahead} running or waiting task(s): ${what}` })
            .catch(() => undefined);
        }
        await this.untilSlotFreed(key, run.abort.signal);
      }
    }
    // Cleared before the call starts: a task still marked queued never reached the upstream.
    if (queued) await this.store.transition(run.task.taskId, { to: 'working', queued: false, statusMessage: null }).catch(() => undefined);
    return true;
  }

  /**
   * Until a slot of `key` frees on any replica, or half a lease period passes (a holder that died frees its slot
   * without telling; the store also ends up away and back), or the run ends.
   */
  private untilSlotFreed(key: string, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.slotFreed.off(key, done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(50, this.leaseMs / 2));
      this.slotFreed.on(key, done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  private async deadlinePassed(run: LocalRun, maxRunMs: number): Promise<void> {
    if (run.ended) return;
    const message = `The tool call exceeded its maximum run time of ${maxRunMs} ms (maxRunMs) and was cancelled`;
    this.endRun(run, 'maxRunMs exceeded');
    await this.recordEnd(run.task.taskId, failedWith(message));
  }

  /** Marks the run over; with a reason, also cancels its upstream call. */
  private endRun(run: LocalRun, cancelReason: string | undefined): void {
    if (run.ended) return;
    run.ended = true;
    run.stopWatching();
    if (run.session !== undefined) run.session.activeTasks--;
    run.abort.abort(new Error(cancelReason ?? 'the task ended'));
    // Slots held and places in line go back (the principal's count included: the task is ending).
    for (const { key, ticket } of run.slots.splice(0)) void this.store.releaseSlot(key, ticket).catch(() => undefined);
    clearTimeout(run.deadline);
    for (const input of run.inputs.values()) input.settle({ error: { code: RequestCancelled, message: 'The task has ended' } });
    run.inputs.clear();
    if (cancelReason !== undefined) run.call?.cancel(cancelReason);
    this.runs.delete(run.task.taskId);
    if (this.runs.size === 0) this.drained?.();
  }

  /** Progress goes to the client with its own token until the task ends, and into the task's status message. */
  private relayNotification(run: LocalRun, message: JsonRpcNotification): void {
    if (run.ended) return;
    run.session?.deliver(message, { taskId: run.task.taskId });
    if (message.method !== 'notifications/progress') return;
    const now = Date.now();
    if (now - run.lastMessageAt < STATUS_MESSAGE_INTERVAL_MS) return;
    run.lastMessageAt = now;
    const p = message.params ?? {};
    const text = typeof p.message === 'string' ? p.message : typeof p.total === 'number' ? `${String(p.progress)}/${p.total}` : `progress ${String(p.progress)}`;
    void this.store.transition(run.task.taskId, { to: run.status, statusMessage: text }).catch(() => undefined);
  }

  /**
   * The upstream runs the call as its own task: its status message becomes this task's. Its `input_required`
   * is not copied: this task is `input_required` while the upstream's questions wait here (askClient, askModern).
   */
  private upstreamStatus(run: LocalRun, update: { status: string; statusMessage: string | undefined }): void {
    if (run.ended || update.statusMessage === undefined || update.statusMessage === run.upstreamStatusMessage) return;
    run.upstreamStatusMessage = update.statusMessage;
    void this.store.transition(run.task.taskId, { to: run.status, statusMessage: update.statusMessage }).catch(() => undefined);
  }

  /**
   * The upstream asks the client something during the task: the task is `input_required` until every such
   * request is answered; the request carries the related-task marker and goes on the task's tasks/result
   * stream when one is open, else on the session's GET stream.
   */
  private async askClient(run: LocalRun, request: { method: string; params?: JsonObject }, signal: AbortSignal): Promise<Outcome> {
    const taskId = run.task.taskId;
    run.outstandingInputs++;
    if (run.outstandingInputs === 1 && !run.ended) {
      run.status = 'input_required';
      await this.store.transition(taskId, { to: 'input_required', statusMessage: `Waiting for the client to answer ${request.method}` }).catch(() => undefined);
    }
    const stream = [...run.resultStreams].find((s) => !s.finished);
    try {
      if (run.session === undefined) return { error: { code: InternalError, message: 'The task has no client session to ask' } };
      return await run.session.ask({ method: request.method, params: withRelatedTask(request.params, taskId) }, signal, { stream, taskId });
    } finally {
      run.outstandingInputs--;
      if (run.outstandingInputs === 0 && !run.ended) {
        run.status = 'working';
        await this.store.transition(taskId, { to: 'working', statusMessage: null }).catch(() => undefined);
      }
    }
  }

  private async find(taskId: unknown, withOutcome = false, allowNative = false): Promise<TaskRecord> {
    if (typeof taskId !== 'string' || taskId === '') throw new GatewayError('invalid_params', 'params.taskId must be a non-empty string');
    const task = await this.store.get(taskId, { outcome: withOutcome }).catch(unavailable);
    if (task?.native === true && !allowNative) {
      throw new GatewayError('invalid_params', `Task ${taskId} is run by upstream '${task.upstream}' itself; use its 2026-07-28 tasks methods`);
    }
    if (task !== undefined) return task;
    const expired = await this.store.expired(taskId).catch(unavailable);
    throw new GatewayError('invalid_params', expired ? EXPIRED : NOT_FOUND);
  }

  private untilTerminal(taskId: string): Promise<TaskRecord> {
    return new Promise<TaskRecord>((resolve, reject) => {
      const stop = this.store.watch(taskId, (task) => {
        if (!isTerminal(task.status)) return;
        stop();
        resolve(task);
      });
      // Read again after subscribing: a transition between the first read and the subscription is not missed.
      this.store.get(taskId).then(
        (task) => {
          if (task === undefined) {
            stop();
            reject(new GatewayError('invalid_params', NOT_FOUND));
          } else if (isTerminal(task.status)) {
            stop();
            resolve(task);
          }
        },
        (error: unknown) => {
          stop();
          reject(storeUnavailable(error));
        },
      );
    });
  }
}

/** A store failure as the client meets it: "the task store is unavailable", never the Redis client's own words. */
function unavailable(error: unknown): never {
  throw storeUnavailable(error);
}

/** A task failed by the gateway itself: the message is its status message and its error. */
function failedWith(message: string): TaskChange {
  return { to: 'failed', statusMessage: message, outcome: { error: { code: InternalError, message } } };
}

/** The call as the task record keeps it, for another replica to run again (JSON has no `undefined` clientInfo). */
function storedCall(params: JsonObject, identity: SessionIdentity): StoredCall {
  const { sessionId, protocolVersion, capabilities, clientInfo } = identity;
  return { params, identity: clientInfo === undefined ? { sessionId, protocolVersion, capabilities } : { sessionId, protocolVersion, capabilities, clientInfo } };
}

/** A ticket in one of the store's semaphores. */
interface SlotTicket {
  key: string;
  ticket: string;
}

/** Semaphore names: one per limit and what it limits. */
const principalSlot = (principal: string): string => `principal:${principal}`;
const toolSlot = (tool: string): string => `tool:${tool}`;
const upstreamSlot = (upstream: string): string => `upstream:${upstream}`;

/** What the engine needs to run a lost task's call again. */
export interface RecoveryDeps {
  upstream(name: string): Upstream | undefined;
  /** This replica's view of a legacy session (undefined when it ended). */
  session(sessionId: string): Promise<ClientSession | undefined>;
}

/** Owner of native-task routing records (never listed: no client is this principal). */
const MODERN_PRINCIPAL_NATIVE = 'gateway:native-tasks';

/** Until authentication exists, a task belongs to the session that created it (for listing). */
export function principalOf(session: ClientSession): string {
  return `${SESSION_PRINCIPAL}${session.sessionId}`;
}

/** The session a principal names, if it names one. */
function sessionOfPrincipal(principal: string): string | undefined {
  return principal.startsWith(SESSION_PRINCIPAL) ? principal.slice(SESSION_PRINCIPAL.length) : undefined;
}

const SESSION_PRINCIPAL = 'session:';

function toolErrorText(result: JsonObject): string {
  const content = Array.isArray(result.content) ? (result.content as { type?: string; text?: string }[]) : [];
  const text = content.filter((c) => c.type === 'text' && typeof c.text === 'string').map((c) => c.text).join(' ').trim();
  return text === '' ? 'The tool reported an error' : text.slice(0, 500);
}
