// Opening a task: whether this replica has room for it (replicas.maxRunningTasks) and its principal may create it
// (rate limit, stored-results budgets, maxTasksPerPrincipal), then its id leased (reserved) to this replica and only
// then its record stored, before anyone hears of it (durable before visible). The lease comes first because the two
// live in different Redis Cluster slots (no one step holds both): a replica that dies between them leaves a leased
// id with no record, which the orphan sweep drops, never a record nobody leased, which no sweep would find and no
// TTL would remove (issue 39: 85 tasks `working` for ever after one kill). The run starts at once (task-runs.ts);
// until it does, the task holds its place among this replica's running tasks here.
import type { ReplicasConfig, TaskPolicy } from '../config/types.js';
import { taskTiming } from '../config/policy.js';
import { GatewayError, storeUnavailable } from '../errors.js';
import type { GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import { failedWith, isTerminal, newTaskId, type Era, type NewTask, type StoredCall, type TaskRecord, type TaskStore } from '../store/task-store.js';
import type { ActingCallers } from './acting-callers.js';
import type { ActingFor } from '../upstream/peer/adapter.js';
import type { Upstream } from '../upstream/life/upstream.js';
import { keyedTaskId, keyRetired, keyReused, type IdempotentCreation, type Opened } from './idempotency.js';
import { countedPrincipal } from '../principals.js';
import type { RateLimiter } from './rate-limits.js';
import type { TaskSlots } from './slots.js';
import { checkStoredBudgets } from './stored-results.js';
import { taskAgeMs, taskFacts } from './task-facts.js';
import type { TaskPolicies } from './task-policies.js';
import { newHold, reserveHold, waitingMessage } from './held-calls.js';

/** When a client refused at replicas.maxRunningTasks is told to try again (Retry-After): tasks end all the time. */
const REPLICA_FULL_RETRY_MS = 1000;
/** At most one warning per this interval about tasks refused at replicas.maxRunningTasks. */
const FULL_WARNING_INTERVAL_MS = 60_000;
/**
 * How many lease periods a keyed call waits for the replica that holds its key's id to store the task (or, if that
 * replica died creating it, for the sweep to drop its reservation: within 7/6 of a lease period after its last
 * heartbeat, plus asking it), before it is refused for now.
 */
const KEY_HOLDER_WAIT_LEASES = 3;

/** Who creates tasks: authenticated principals (each counted on its own, rate-limited), or one anonymous principal. */
export interface TaskCreators {
  authenticated: boolean;
  rateLimiter?: RateLimiter;
}

/** A task about to be opened: whose, of which era, for which tool on which upstream, with its kept call. */
export interface TaskOpening {
  principal: string;
  era: Era;
  exposedName: string;
  upstream: Upstream;
  /** The retention the client asked for (clamped by policy); undefined: the policy's. */
  requestedTtl?: unknown;
  /** The call, kept where another replica may have to start it. */
  call?: StoredCall | undefined;
  /** Whom the upstream sees the call from (sealed with a kept call). */
  actingFor?: ActingFor | undefined;
}

export interface TaskAdmissionDeps {
  store: TaskStore;
  policies: TaskPolicies;
  logger: Logger;
  /** How many tasks this replica runs at once at most (0: no limit). */
  replica: Pick<ReplicasConfig, 'maxRunningTasks'>;
  callers: TaskCreators;
  events: GatewayEvents;
  slots: TaskSlots;
  /** This replica's leases (leases.ts): a new task's id is reserved before its record is written. */
  leases: TaskReservations;
  /** How many tasks run here now. */
  running(): number;
  /** Seals a kept call's caller for another replica (none: kept calls carry no caller). */
  acting?: ActingCallers;
}

/** Reserving the ids of tasks about to be created here (TaskLeases.reserve, release), and the lease period. */
export interface TaskReservations {
  /** Leases the id to this replica unless a replica holds it already (false then). */
  reserve(taskId: string): Promise<boolean>;
  /** Gives a reservation back (only while this replica holds it). */
  release(taskId: string): Promise<void>;
  leaseMs: number;
}

export class TaskAdmission {
  /** Tasks opened here whose run has not started yet: they already count against replicas.maxRunningTasks. */
  private readonly opening = new Set<string>();
  /** Tasks refused at replicas.maxRunningTasks since the last warning, and when that was. */
  private refusedFull = { count: 0, warnedAt: 0 };

  constructor(private readonly deps: TaskAdmissionDeps) {}

  /**
   * Checks this replica's room and the principal's limit, and stores a new task: leased, then durable before anyone
   * hears of it, so that if this replica dies from here on, another one ends it. `call` is kept where another
   * replica may have to start it. The caller runs the task at once (run, runToolCall): its place among this
   * replica's running tasks is held from here until then.
   */
  async open(
    opening: TaskOpening,
    /** The id an idempotency key gave, and the call's digest (openOnce): the store then decides whether it is new. */
    keyed?: { taskId: string; digest: string },
  ): Promise<TaskRecord> {
    const { principal, era, exposedName, upstream, requestedTtl, call, actingFor } = opening;
    const { store, policies, callers, slots, events } = this.deps;
    const policy = policies.policyFor(exposedName);
    const taskId = keyed?.taskId ?? newTaskId();
    this.holdRoom(taskId, principal);
    try {
      await callers.rateLimiter?.taskCreation(principal);
      await checkStoredBudgets(store, policies.config, countedPrincipal(principal, callers.authenticated), events, { together: !callers.authenticated });
      await slots.claimPrincipal(principal, taskId, policy);
      const { retentionMs, pollMs } = taskTiming(policy, requestedTtl);
      // A call held for approval is kept (any replica may run it once approved), bound to its arguments.
      if (policy.approval !== undefined && call === undefined) throw new GatewayError('internal', `Tool '${exposedName}' needs approval, but its call cannot be held`);
      const approval = policy.approval === undefined || call === undefined ? undefined : newHold(policy.approval, call.params);
      // A place among the principal's pending holds first (tasks.maxPendingApprovalsPerPrincipal); it frees itself
      // at the hold's deadline if the task is never stored.
      if (approval !== undefined) await reserveHold(store, events, principal, taskId, approval, policies.config.maxPendingApprovalsPerPrincipal);
      const input: NewTask = {
        taskId,
        principal,
        // Its stored bytes count where its unfinished-task limit does (every client together without auth).
        chargeTo: countedPrincipal(principal, callers.authenticated),
        era,
        tool: exposedName,
        upstream: upstream.name,
        retentionMs,
        pollMs,
        // The call is kept only where another replica may have to start it: it can be large, and it is the
        // client's data. That is where policy allows a re-run, where the task may wait in line for a slot, or
        // where it waits for approval.
        ...(call !== undefined && mayStartElsewhere(policy, upstream) ? { call: this.deps.acting?.keep(taskId, call, actingFor) ?? call } : {}),
        ...(approval === undefined ? {} : { approval, message: waitingMessage(approval) }),
      };
      const task = await this.leasedAndCreated(input, keyed).catch((error: unknown) => {
        // The key's task holds the same ticket (same principal, same id) while it runs: it keeps it.
        if (error instanceof KeyTaken) {
          if (policy.maxTasksPerPrincipal > 0 && error.task !== undefined && isTerminal(error.task.status)) slots.release(slots.principalTicket(principal, taskId));
          throw error;
        }
        if (policy.maxTasksPerPrincipal > 0) slots.release(slots.principalTicket(principal, taskId));
        throw error instanceof GatewayError ? error : storeUnavailable(error);
      });
      const queued = policy.concurrency > 0 || upstream.config.taskConcurrency > 0;
      events.emit('task.created', { ...taskFacts(task), era, queued });
      return task;
    } catch (error) {
      this.opening.delete(taskId);
      throw error;
    }
  }

  /**
   * open() for a call that carries an idempotency key (tasks/idempotency.ts): the task the key made before, as it
   * is now, when there is one (nothing is checked, claimed or run again for it); else a new task whose id the key
   * gives. Calls racing with one key, on any replicas, make one task: the store's createOnce decides. A key used
   * before for another call (tool or arguments) is -32602.
   */
  async openOnce(once: IdempotentCreation, opening: TaskOpening): Promise<Opened> {
    const { taskId, task: held } = await this.keyed(once, opening.principal);
    if (held !== undefined) return { task: held, existing: true };
    try {
      return { task: await this.open(opening, { taskId, digest: once.digest }), existing: false };
    } catch (error) {
      if (!(error instanceof KeyTaken)) throw error;
      if (error.task === undefined) throw keyReused();
      return { task: error.task, existing: true };
    }
  }

  /**
   * The id `once`'s key gives `principal`'s task, and the task the key made, if it still exists (-32602 when it was
   * made for another call). For a call that becomes a task only later (after taskAfterMs): asked before the
   * upstream is, so that a retry does not call it again.
   */
  async keyed(once: IdempotentCreation, principal: string): Promise<{ taskId: string; task: TaskRecord | undefined }> {
    const { store } = this.deps;
    const taskId = keyedTaskId(await store.signingSecret().catch((error: unknown) => Promise.reject(storeUnavailable(error))), principal, once.key);
    const task = await store.tasks.get(taskId).catch((error: unknown) => Promise.reject(storeUnavailable(error)));
    if (task !== undefined && (task.principal !== principal || task.idempotency !== once.digest)) throw keyReused();
    // Asked before the upstream is (a call that becomes a task later): a retired key runs nothing.
    const retired = task === undefined ? await store.tasks.retired(taskId).catch((error: unknown) => Promise.reject(storeUnavailable(error))) : undefined;
    if (retired !== undefined) throw keyRetired(retired);
    return { taskId, task };
  }

  /** The run of an opened task started: the place open() held is the run's now. */
  started(taskId: string): void {
    this.opening.delete(taskId);
  }

  /** Whether a task is being opened here (its id reserved, its run not started): the sweep asks before taking it. */
  isOpening(taskId: string): boolean {
    return this.opening.has(taskId);
  }

  /**
   * Reserves the new task's id for this replica, then stores the task (createOnce under a key): the order that
   * leaves nothing unleased if this replica dies in between (see the top of this file). A reservation whose task was
   * not created here is given back. Under a key, an id another replica holds is that replica's: its task is being
   * created or runs there (or it died creating it, and the sweep drops its reservation): the call waits for the
   * task to appear (KeyTaken) or the id to come free, never taking the lease of the replica that runs it.
   */
  private async leasedAndCreated(input: NewTask, keyed: { taskId: string; digest: string } | undefined): Promise<TaskRecord> {
    const { store, leases } = this.deps;
    await this.reserve(input.taskId, keyed?.digest, input.principal);
    try {
      return await createTask(store, input, keyed?.digest);
    } catch (error) {
      if (error instanceof KeyTaken && error.task !== undefined && !isTerminal(error.task.status) && error.task.native !== true) {
        // Reserved here, so nobody leased it: a record an earlier release stored and never leased (its replica died
        // in between). Nothing runs it and nothing would end it: it ends here, and the key's caller hears so.
        throw new KeyTaken(await this.endUnleased(error.task));
      }
      await leases.release(input.taskId).catch(() => undefined);
      throw error;
    }
  }

  /** Reserves `taskId` here; under a key (`digest`), waits while another replica holds it (see leasedAndCreated). */
  private async reserve(taskId: string, digest: string | undefined, principal: string): Promise<void> {
    const { store, leases } = this.deps;
    if (await leases.reserve(taskId)) return;
    // A fresh id is 128 random bits: nobody else can hold it.
    if (digest === undefined) throw new GatewayError('internal', `The new task id ${taskId} is leased already`);
    const checkEvery = Math.max(50, Math.floor(leases.leaseMs / 6));
    const giveUpAt = Date.now() + KEY_HOLDER_WAIT_LEASES * leases.leaseMs;
    for (;;) {
      let changed: () => void = () => undefined;
      const stored = new Promise<void>((resolve) => (changed = resolve));
      const unwatch = store.tasks.watch(taskId, () => changed());
      try {
        const task = await store.tasks.get(taskId);
        if (task !== undefined) throw new KeyTaken(task.principal === principal && task.idempotency === digest ? task : undefined);
        if (Date.now() >= giveUpAt) {
          throw new GatewayError('key_busy', 'Another gateway replica holds the task of this idempotency key but has not stored it yet; try again shortly', { retryAfterMs: leases.leaseMs });
        }
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([stored, new Promise<void>((resolve) => (timer = setTimeout(resolve, checkEvery)))]);
        clearTimeout(timer);
      } finally {
        unwatch();
      }
      if (await leases.reserve(taskId)) return;
    }
  }

  /** Fails a keyed task this replica reserved but found stored and unfinished (nobody runs it), and lets it go. */
  private async endUnleased(task: TaskRecord): Promise<TaskRecord> {
    const message = 'The gateway lost the call: the replica that created the task stopped before it started it';
    const changed = await this.deps.store.tasks.transition(task.taskId, failedWith(message));
    await this.deps.leases.release(task.taskId).catch(() => undefined);
    if (!changed.ok) return changed.reason === 'terminal' ? changed.task : task;
    this.deps.events.emit('task.ended', { ...taskFacts(changed.task), status: 'failed', reason: 'lost', durationMs: taskAgeMs(changed.task) });
    return changed.task;
  }

  /**
   * Holds a place for a new task among this replica's running tasks, or refuses it when replicas.maxRunningTasks
   * are running (or being opened) here: a temporary refusal, which another replica (or a moment later) may take.
   * Tasks taken over from a lost replica are not refused: they are not new, and what a replica can lose is bounded.
   */
  private holdRoom(taskId: string, principal: string): void {
    const max = this.deps.replica.maxRunningTasks;
    const running = this.deps.running() + this.opening.size;
    if (max > 0 && running >= max) {
      const now = Date.now();
      this.refusedFull.count++;
      this.deps.events.emit('rate.limited', { principal, limit: 'maxRunningTasks', retryAfterMs: REPLICA_FULL_RETRY_MS });
      if (now - this.refusedFull.warnedAt >= FULL_WARNING_INTERVAL_MS) {
        this.deps.logger.warn({ running, maxRunningTasks: max, refused: this.refusedFull.count }, 'new tasks refused: this replica runs replicas.maxRunningTasks tasks');
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
}

/** Another call with the same idempotency key made the task first (its task), or made one for other arguments (none). */
class KeyTaken extends Error {
  constructor(readonly task: TaskRecord | undefined) {
    super('the idempotency key has a task already');
  }
}

/** Stores the new task; under a key (`digest`), the store decides atomically whether the key made one already (KeyTaken). */
async function createTask(store: TaskStore, input: NewTask, digest: string | undefined): Promise<TaskRecord> {
  if (digest === undefined) return store.tasks.create(input);
  const created = await store.tasks.createOnce(input, digest);
  if (created.outcome === 'created') return created.task;
  if (created.outcome === 'retired') throw keyRetired(created.reason);
  throw new KeyTaken(created.outcome === 'existing' ? created.task : undefined);
}

/** Whether a task under `policy` may have to be started by another replica (its call is then kept). */
function mayStartElsewhere(policy: TaskPolicy, upstream: Upstream): boolean {
  // A task that waits for its user's connection (issue 41) is taken over by another replica if this one goes.
  const consent = upstream.config.transport !== 'stdio' && upstream.config.auth?.authorizationCode !== undefined;
  return policy.retry.onLoss || policy.concurrency > 0 || upstream.config.taskConcurrency > 0 || policy.approval !== undefined || consent;
}
