// Opening a task: whether this replica has room for it (replicas.maxRunningTasks) and its principal may create it
// (rate limit, stored-results budgets, maxTasksPerPrincipal), then its record stored and leased to this replica
// before anyone hears of it (durable before visible). The run starts at once (task-runs.ts); until it does, the
// task holds its place among this replica's running tasks here.
import type { ReplicasConfig, TaskPolicy } from '../config/types.js';
import { taskTiming } from '../config/policy.js';
import { GatewayError, storeUnavailable } from '../errors.js';
import type { GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import { isTerminal, newTaskId, type Era, type NewTask, type StoredCall, type TaskRecord, type TaskStore } from '../store/task-store.js';
import type { ActingCallers } from './acting-callers.js';
import type { ActingFor } from '../upstream/adapter.js';
import type { Upstream } from '../upstream/upstream.js';
import { keyedTaskId, keyReused, type IdempotentCreation, type Opened } from './idempotency.js';
import { countedPrincipal } from './principals.js';
import type { RateLimiter } from './rate-limits.js';
import type { TaskSlots } from './slots.js';
import { checkStoredBudgets } from './stored-results.js';
import { taskFacts } from './task-facts.js';
import type { TaskPolicies } from './task-policies.js';
import { newHold, waitingMessage } from './approvals.js';

/** When a client refused at replicas.maxRunningTasks is told to try again (Retry-After): tasks end all the time. */
const REPLICA_FULL_RETRY_MS = 1000;
/** At most one warning per this interval about tasks refused at replicas.maxRunningTasks. */
const FULL_WARNING_INTERVAL_MS = 60_000;

/** Who creates tasks: authenticated principals (each counted on its own, rate-limited), or one anonymous principal. */
export interface TaskCreators {
  authenticated: boolean;
  rateLimiter?: RateLimiter;
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
  /** Leases a new task to this replica (leases.ts). */
  lease(taskIds: string[]): Promise<void>;
  /** How many tasks run here now. */
  running(): number;
  /** Seals a kept call's caller for another replica (none: kept calls carry no caller). */
  acting?: ActingCallers;
}

export class TaskAdmission {
  /** Tasks opened here whose run has not started yet: they already count against replicas.maxRunningTasks. */
  private readonly opening = new Set<string>();
  /** Tasks refused at replicas.maxRunningTasks since the last warning, and when that was. */
  private refusedFull = { count: 0, warnedAt: 0 };

  constructor(private readonly deps: TaskAdmissionDeps) {}

  /**
   * Checks this replica's room and the principal's limit, and stores a new task: durable before anyone hears of
   * it, and leased, so that if this replica dies from here on, another one ends it. `call` is kept where another
   * replica may have to start it. The caller runs the task at once (run, runToolCall): its place among this
   * replica's running tasks is held from here until then.
   */
  async open(
    principal: string,
    era: Era,
    exposedName: string,
    upstream: Upstream,
    requestedTtl: unknown,
    call: StoredCall | undefined,
    actingFor?: ActingFor,
    /** The id an idempotency key gave, and the call's digest (openOnce): the store then decides whether it is new. */
    keyed?: { taskId: string; digest: string },
  ): Promise<TaskRecord> {
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
      const task = await createTask(
        store,
        // The call is kept only where another replica may have to start it: it can be large, and it is the
        // client's data. That is where policy allows a re-run, where the task may wait in line for a slot, or
        // where it waits for approval.
        {
          taskId,
          principal,
          // Its stored bytes count where its unfinished-task limit does (every client together without auth).
          chargeTo: countedPrincipal(principal, callers.authenticated),
          era,
          tool: exposedName,
          upstream: upstream.name,
          retentionMs,
          pollMs,
          ...(call !== undefined && mayStartElsewhere(policy, upstream) ? { call: this.deps.acting?.keep(taskId, call, actingFor) ?? call } : {}),
          ...(approval === undefined ? {} : { approval, message: waitingMessage(approval) }),
        },
        keyed?.digest,
      )
        .catch((error: unknown) => {
          // The key's task holds the same ticket (same principal, same id) while it runs: it keeps it.
          if (error instanceof KeyTaken) {
            if (policy.maxTasksPerPrincipal > 0 && error.task !== undefined && isTerminal(error.task.status)) slots.release(slots.principalTicket(principal, taskId));
            throw error;
          }
          if (policy.maxTasksPerPrincipal > 0) slots.release(slots.principalTicket(principal, taskId));
          throw storeUnavailable(error);
        });
      await this.deps.lease([task.taskId]).catch((error: unknown) => {
        this.deps.logger.warn({ task: task.taskId, err: error }, 'could not lease the new task');
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
  async openOnce(
    once: IdempotentCreation,
    principal: string,
    era: Era,
    exposedName: string,
    upstream: Upstream,
    requestedTtl: unknown,
    call: StoredCall | undefined,
    actingFor?: ActingFor,
  ): Promise<Opened> {
    const { taskId, task: held } = await this.keyed(once, principal);
    if (held !== undefined) return { task: held, existing: true };
    try {
      return { task: await this.open(principal, era, exposedName, upstream, requestedTtl, call, actingFor, { taskId, digest: once.digest }), existing: false };
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
    const task = await store.get(taskId).catch((error: unknown) => Promise.reject(storeUnavailable(error)));
    if (task !== undefined && (task.principal !== principal || task.idempotency !== once.digest)) throw keyReused();
    return { taskId, task };
  }

  /** The run of an opened task started: the place open() held is the run's now. */
  started(taskId: string): void {
    this.opening.delete(taskId);
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
  if (digest === undefined) return store.create(input);
  const created = await store.createOnce(input, digest);
  if (created.outcome === 'created') return created.task;
  throw new KeyTaken(created.outcome === 'existing' ? created.task : undefined);
}

/** Whether a task under `policy` may have to be started by another replica (its call is then kept). */
function mayStartElsewhere(policy: TaskPolicy, upstream: Upstream): boolean {
  return policy.retry.onLoss || policy.concurrency > 0 || upstream.config.taskConcurrency > 0 || policy.approval !== undefined;
}
