// Leases and recovery. This replica renews the lease of every task it runs (or whose outcome it keeps for the
// store), and sweeps for tasks whose replica stopped renewing: each is taken over where that is safe (run again
// if its policy allows, or back in line if it was only waiting for a slot), else failed as lost. Nothing stays
// running forever, and each loss leads to at most one more execution.
import type { TaskPolicy } from '../config/types.js';
import type { Logger } from '../log.js';
import { failedWith, isTerminal, type StoredCall, type TaskRecord, type TaskStore } from '../store/task-store.js';
import type { Upstream } from '../upstream/upstream.js';
import type { Peers } from './peers.js';

/** How long a sweep waits for a task's owner to say it still holds it. */
const OWNER_CHECK_MS = 500;

export interface LeasePeerMessages {
  /** Which of these tasks the replica still runs (or keeps the outcome of): asked before declaring them lost. */
  'task.held': { body: { taskIds: string[] }; answer: { held: string[] } };
}

/** The other replicas, as the sweep needs them (the gateway's ReplicaLink). */
export type LeasePeers = Peers<LeasePeerMessages>;

/** What the sweep needs from the engine whose runs it leases. */
export interface LeasedRuns {
  /** Tasks this replica holds leases for: those it runs, and those whose outcome it keeps for the store. */
  heldIds(): string[];
  holds(taskId: string): boolean;
  /** Renews the concurrency slots the runs hold or wait in line with. */
  renewSlots(): void;
  policyFor(exposedName: string): TaskPolicy;
  /** Runs a lost task's call again here, for whoever created it. */
  runAgain(task: TaskRecord & { call: StoredCall }, upstream: Upstream): Promise<void>;
}

/** What the gateway supplies for lost tasks. */
export interface LossHandling {
  upstream(name: string): Upstream | undefined;
  /** A task this replica failed because its own replica was lost (its creator may want to hear of it). */
  lost(task: TaskRecord): void;
}

export class TaskLeases {
  private heartbeat: NodeJS.Timeout | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  /** The store failed a heartbeat or sweep and has not answered since. */
  private storeDown = false;
  /** When the store answered again after it was down (epoch ms). */
  private storeBackAt = 0;

  constructor(
    private readonly store: TaskStore,
    private readonly logger: Logger,
    private readonly leaseMs: number,
    private readonly peers: LeasePeers,
    private readonly runs: LeasedRuns,
    private readonly losses: LossHandling,
  ) {
    peers.on('task.held', async (body) => ({ held: body.taskIds.filter((id) => runs.holds(id)) }));
  }

  /** Leases new tasks for this replica (if it dies from here on, another one ends them). */
  lease(taskIds: string[]): Promise<void> {
    return this.store.lease(taskIds, this.peers.id, this.leaseMs);
  }

  /** Starts renewing this replica's leases and sweeping for lost tasks. */
  start(): void {
    this.heartbeat = setInterval(() => {
      // Tasks whose outcome waits for the store stay leased: nobody may declare them lost.
      this.runs.renewSlots();
      this.store.lease(this.runs.heldIds(), this.peers.id, this.leaseMs, { renew: true }).then(
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

  stop(): void {
    clearInterval(this.heartbeat);
    clearInterval(this.sweeper);
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
      this.logger.warn({ audit: 'task.lost', task: taskId, principal: changed.task.principal, owner }, 'task failed: its replica stopped');
      // The replica that told the task's creator about its changes is gone: the last change is told from here.
      this.losses.lost(changed.task);
    }
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
      if (owner === this.peers.id) {
        for (const id of taskIds) if (this.runs.holds(id)) held.add(id);
      } else {
        const answer = await this.peers.ask(owner, 'task.held', { taskIds }, undefined, OWNER_CHECK_MS).catch(() => undefined);
        for (const id of answer?.held ?? []) held.add(id);
      }
      if (held.size > 0) await this.store.lease([...held], owner, this.leaseMs).catch(() => undefined);
      for (const taskId of taskIds) if (!held.has(taskId)) lost.push({ taskId, owner });
    }
    return lost;
  }

  /**
   * Takes over a lost task here instead of failing it, when that is safe: a task that was still waiting in line
   * for a slot (the upstream never saw it) joins the line again here; a running one runs again when its policy
   * allows (`retry.onLoss`) and attempts are left. Exactly one replica takes each orphan, so each loss leads to
   * at most one more execution.
   */
  private async takeOverLost(taskId: string, owner: string): Promise<boolean> {
    const task = await this.store.get(taskId, { call: true }).catch(() => undefined);
    if (task === undefined || isTerminal(task.status) || task.call === undefined) return false;
    const policy = this.runs.policyFor(task.tool);
    const waiting = task.queued === true;
    const attempt = (task.attempt ?? 1) + (waiting ? 0 : 1);
    const upstream = this.losses.upstream(task.upstream);
    if (upstream === undefined || (!waiting && (!policy.retry.onLoss || attempt > policy.retry.maxAttempts))) return false;
    await this.lease([taskId]).catch(() => undefined);
    const changed = await this.store
      .transition(taskId, {
        to: 'working',
        attempt,
        openRequests: null,
        message: waiting
          ? `Waiting for a slot on another replica: replica ${owner} stopped while the task waited in line`
          : `Running the call again (attempt ${attempt} of ${policy.retry.maxAttempts}): replica ${owner} stopped while running it`,
      })
      .catch(() => undefined);
    if (changed?.ok !== true) {
      await this.store.unlease(taskId).catch(() => undefined);
      return changed !== undefined; // ended meanwhile: nothing to fail; store away: it fails below
    }
    const { principal } = task;
    if (waiting) this.logger.warn({ audit: 'task.requeued', task: taskId, principal, owner }, 'queued task taken over: its replica stopped');
    else this.logger.warn({ audit: 'task.retried', task: taskId, principal, owner, attempt }, 'task re-run: its replica stopped');
    await this.runs.runAgain({ ...changed.task, call: task.call }, upstream);
    return true;
  }
}
