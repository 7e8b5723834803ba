// Limits on running tasks, counted in the store across every replica: a semaphore per tool (`concurrency`), per
// upstream (`taskConcurrency`) and per principal (`maxTasksPerPrincipal`, which never queues; without
// authentication all clients are one principal for it). Tickets are task ids, leased like tasks, so a dead
// replica's slots free themselves.
import { EventEmitter } from 'node:events';
import type { TaskPolicy } from '../config/types.js';
import { GatewayError, storeUnavailable } from '../errors.js';
import type { GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import type { TaskRecord, TaskStore } from '../store/task-store.js';
import { countedPrincipal } from '../principals.js';
import { taskFacts } from './task-facts.js';

/** A ticket in one of the store's semaphores. */
export interface SlotTicket {
  key: string;
  ticket: string;
}

/** Semaphore names: one per limit and what it limits. */
const principalSlot = (principal: string): string => `principal:${principal}`;
const toolSlot = (tool: string): string => `tool:${tool}`;
const upstreamSlot = (upstream: string): string => `upstream:${upstream}`;

/** What a run waiting for slots needs to say: its task, where its tickets go, and whether it still wants them. */
export interface SlotWaiter {
  task: TaskRecord;
  slots: SlotTicket[];
  readonly ended: boolean;
  signal: AbortSignal;
  /** Told when it starts waiting in line (true), and when it leaves the line with a slot (false). */
  inLine?(waiting: boolean): void;
  /** Set once it should wait no longer (a drain): take() then gives up instead of waiting for a slot to free. */
  readonly stopWaiting?: boolean;
}

export interface TaskSlotsDeps {
  store: Pick<TaskStore, 'slots' | 'bus' | 'tasks'>;
  logger: Logger;
  leaseMs: number;
  replicaId: () => string;
  /** Whether principals are authenticated; without, every client's tasks count against one principal. */
  authenticated: boolean;
  /** Told when a task starts or stops waiting in line, and when a principal's limit refuses one. */
  events: GatewayEvents;
}

export class TaskSlots {
  /** Wakes runs waiting in a semaphore's line when a slot of it frees, on any replica (by semaphore key). */
  private readonly freed = new EventEmitter();
  private readonly store: Pick<TaskStore, 'slots' | 'bus' | 'tasks'>;
  private readonly logger: Logger;
  private readonly leaseMs: number;
  private readonly replicaId: () => string;
  private readonly authenticated: boolean;
  private readonly events: GatewayEvents;

  constructor(deps: TaskSlotsDeps) {
    ({ store: this.store, logger: this.logger, leaseMs: this.leaseMs, replicaId: this.replicaId, authenticated: this.authenticated, events: this.events } = deps);
    this.freed.setMaxListeners(0);
  }

  /** The ticket a task holds in its principal's semaphore (`maxTasksPerPrincipal`). */
  principalTicket(principal: string, taskId: string): SlotTicket {
    return { key: principalSlot(countedPrincipal(principal, this.authenticated)), ticket: taskId };
  }

  /** Listens for slots freed anywhere (without it, waiting runs retry on a timer). */
  listen(): void {
    void this.store.bus
      .subscribe('slots', (message) => this.freed.emit(String(message.key)))
      .catch((error: unknown) => this.logger.warn({ err: error }, 'not told when task slots free; waiting runs retry on a timer'));
  }

  /** Counts a new task against its principal's limit, across every replica; refuses it when the limit is reached. */
  async claimPrincipal(principal: string, taskId: string, policy: TaskPolicy): Promise<void> {
    if (policy.maxTasksPerPrincipal <= 0) return;
    const { key } = this.principalTicket(principal, taskId);
    const grant = await this.store.slots
      .acquire(key, taskId, this.replicaId(), policy.maxTasksPerPrincipal, this.leaseMs, { queue: false })
      .catch((error: unknown) => {
        throw storeUnavailable(error);
      });
    if (!grant.granted) {
      this.events.emit('rate.limited', { principal, limit: 'maxTasksPerPrincipal' });
      const holder = this.authenticated ? 'this client already has' : 'clients without authentication (counted together) already have';
      throw new GatewayError(
        'too_many_tasks',
        `Too many unfinished tasks: ${holder} ${grant.ahead} (maxTasksPerPrincipal: ${policy.maxTasksPerPrincipal}); wait for some to finish or cancel them`,
      );
    }
  }

  /** Counts a task taken over from a lost replica again (its old ticket expired with that replica's leases). */
  async reclaimPrincipal(principal: string, taskId: string): Promise<void> {
    const { key } = this.principalTicket(principal, taskId);
    await this.store.slots.acquire(key, taskId, this.replicaId(), Number.MAX_SAFE_INTEGER, this.leaseMs, { queue: false }).catch(() => undefined);
  }

  release(slot: SlotTicket): void {
    void this.store.slots.release(slot.key, slot.ticket).catch(() => undefined);
  }

  /** Renews the tickets' leases (heartbeat); rejects when the store did not take it. */
  async renew(slots: SlotTicket[]): Promise<void> {
    if (slots.length > 0) await this.store.slots.renew(slots, this.leaseMs);
  }

  /**
   * Waits, in order across every replica, for a slot under the tool's `concurrency` and the upstream's
   * `taskConcurrency`; a queued task stays `working` with a status message saying what it waits for. False when
   * the run ended while waiting.
   */
  async take(run: SlotWaiter, upstream: { name: string; taskConcurrency: number }, policy: TaskPolicy): Promise<boolean> {
    const tool = run.task.tool;
    // A task taken over from a lost replica may carry the mark already: it is cleared before the call starts.
    let queued = run.task.queued === true;
    /** Whether this run was announced as waiting in line (once, whichever line it waits in first). */
    let waiting = false;
    const limits: [string, number, string][] = [
      [toolSlot(tool), policy.concurrency, `tool '${tool}' runs at most ${policy.concurrency} at once`],
      [upstreamSlot(upstream.name), upstream.taskConcurrency, `upstream '${upstream.name}' runs at most ${upstream.taskConcurrency} tasks at once`],
    ];
    for (const [key, limit, what] of limits) {
      if (limit <= 0) continue; // unlimited
      const slot = { key, ticket: run.task.taskId };
      run.slots.push(slot);
      let shown: number | undefined;
      for (;;) {
        if (run.ended) return false;
        const grant = await this.store.slots.acquire(key, slot.ticket, this.replicaId(), limit, this.leaseMs).catch(() => undefined);
        if (run.ended) return false; // the run's end gives the slot back
        if (grant?.granted === true) break;
        if (grant !== undefined && grant.ahead !== shown) {
          if (!waiting) this.events.emit('task.status', { ...taskFacts(run.task), status: 'working', queued: true });
          waiting = true;
          shown = grant.ahead;
          queued = true;
          void this.store.tasks
            .transition(run.task.taskId, { to: 'working', queued: true, message: `Queued behind ${grant.ahead} running or waiting task(s): ${what}` })
            .catch(() => undefined);
        }
        run.inLine?.(true);
        if (run.stopWaiting === true) return false; // marked queued (if it waited before): another replica starts it
        await this.untilFreed(key, run.signal);
      }
    }
    run.inLine?.(false);
    // Cleared before the call starts: a task still marked queued never reached the upstream.
    if (queued) {
      await this.store.tasks.transition(run.task.taskId, { to: 'working', queued: false, message: null }).catch(() => undefined);
      if (waiting) this.events.emit('task.status', { ...taskFacts(run.task), status: 'working', queued: false });
    }
    return true;
  }

  /**
   * Until a slot of `key` frees on any replica, or half a lease period passes (a holder that died frees its slot
   * without telling; the store also ends up away and back), or the run ends.
   */
  private untilFreed(key: string, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.freed.off(key, done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(50, this.leaseMs / 2));
      this.freed.on(key, done);
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
