// Leases and recovery. The tasks a replica runs (or whose outcome it keeps for the store) are leased to it, and
// live as long as it does: the replica heartbeats (one store write, however many tasks it holds), and sweeps for
// replicas that stopped: each of their tasks is taken over where that is safe (run again if its policy allows, or
// back in line if it was only waiting for a slot), else failed as lost. Nothing stays running forever, and each
// loss leads to at most one more execution. A sweep settles a dead replica's tasks in bounded batches
// (IDS_PER_SCRIPT_CALL) until none is left. A replica that shuts down hands over what others can carry on by giving
// up its liveness at once and asking them to sweep now (handOver). Slot tickets still carry a lease each (their
// semaphores live in other Cluster slots than the replicas' liveness), renewed once per lease period for three.
import type { TaskPolicy } from '../config/types.js';
import { NO_EVENTS, type GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import { failedWith, IDS_PER_SCRIPT_CALL, isTerminal, type StoredCall, type TaskRecord, type TaskStore } from '../store/task-store.js';
import { eachAtMost, endDeadUpstreamSessions, OWNER_CHECK_MS, RECOVERY_CONCURRENCY } from './dead-replica-sessions.js';
import type { Upstream } from '../upstream/life/upstream.js';
import type { Peers } from './peers.js';
import { taskAgeMs, taskFacts } from './task-facts.js';

/** Heartbeats per lease period: a replica survives missing all but the last of them. */
const BEATS_PER_LEASE = 3;
/** Slot tickets are leased for this many lease periods and renewed once per period (each ticket is a write). */
export const SLOT_LEASES = 3;
/** Orphans taken per store call; a sweep takes batch after batch while there are more. */
const ORPHANS_PER_TAKE = IDS_PER_SCRIPT_CALL;

export interface LeasePeerMessages {
  /** Which of these tasks the replica still runs (or keeps the outcome of): asked before declaring them lost. */
  'task.held': { body: { taskIds: string[] }; answer: { held: string[] } };
  /** Whether the replica is alive: asked before ending the upstream sessions it recorded, once it looks dead. */
  'replica.alive': { body: Record<string, never>; answer: { alive: true } };
  /**
   * Told by a replica that shuts down and handed its tasks over (gave up its liveness): sweep now, rather than at
   * the next tick. A sweep only ever takes what the store says is orphaned, so this can only make one come sooner.
   */
  'replicas.sweep': { body: Record<string, never>; answer: never };
}

/** The other replicas, as the sweep needs them (the gateway's ReplicaLink). */
export type LeasePeers = Peers<LeasePeerMessages>;

/** What the sweep needs from the runs it leases (TaskPeerLink.leasedRuns builds it). */
export interface LeasedRuns {
  /** How many tasks this replica holds: those it runs, and those whose outcome it keeps for the store. */
  heldCount(): number;
  holds(taskId: string): boolean;
  /**
   * Renews the concurrency slots the runs hold or wait in line with (leased for SLOT_LEASES × leaseMs); rejects
   * when the store did not take it.
   */
  renewSlots(): Promise<void>;
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

export interface TaskLeasesDeps {
  store: Pick<TaskStore, 'leases' | 'upstreamSessions' | 'tasks' | 'ping'>;
  logger: Logger;
  /** How long a replica may go without a heartbeat (replicas.leaseMs). */
  leaseMs: number;
  peers: LeasePeers;
  /** The runs this replica holds. */
  runs: LeasedRuns;
  losses: LossHandling;
  /** Told of every lost task taken over or failed here. */
  events?: GatewayEvents;
}

/** How this replica's lease renewal fares, for readiness: a replica that cannot renew is about to lose its tasks. */
export type LeaseHealth = {
  ok: boolean;
  /** Tasks leased here at the last heartbeat (tasks run here, kept outcomes, orphans being settled). */
  held: number;
  /** How long the last successful round took. */
  lastRenewalMs?: number;
  /** Why renewals fail, since when; present only while they do. */
  error?: string;
};

/** One heartbeat: how many tasks this replica held, how long it took, and why it failed if it did. */
export interface RenewalRound {
  ids: number;
  ms: number;
  error?: string;
}

export class TaskLeases {
  private heartbeat: NodeJS.Timeout | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  private stopped = false;
  /** The store failed a heartbeat or sweep and has not answered since. */
  private storeDown = false;
  /** When the store answered again after it was down (epoch ms). */
  private storeBackAt = 0;
  /** A heartbeat or a sweep is under way: the timer's next tick does not start another one beside it. */
  private renewing = false;
  /** Heartbeats since the slot tickets were last renewed (they are renewed once per lease period). */
  private beatsSinceSlots = 0;
  private sweeping = false;
  /** Asked to sweep while a sweep was under way: one more follows it. */
  private sweepAgain = false;
  /** Heartbeats and sweeps under way: stop() waits for them, so none writes this replica's liveness after it. */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Orphans this replica took and has not settled yet: they are this replica's, alive as long as it is. */
  private readonly recovering = new Set<string>();
  /** Of those, the ones the store could not settle yet (by id: their lost owner), tried again by the next sweep. */
  private readonly unsettled = new Map<string, string>();
  private lastRound: RenewalRound = { ids: 0, ms: 0 };
  /** Set while renewals fail: since when, and the last error. */
  private renewalFailure: { since: number; message: string } | undefined;

  private readonly store: Pick<TaskStore, 'leases' | 'upstreamSessions' | 'tasks' | 'ping'>;
  private readonly logger: Logger;
  private readonly leaseMs: number;
  private readonly peers: LeasePeers;
  private readonly runs: LeasedRuns;
  private readonly losses: LossHandling;
  private readonly events: GatewayEvents;

  constructor(deps: TaskLeasesDeps) {
    ({ store: this.store, logger: this.logger, leaseMs: this.leaseMs, peers: this.peers, runs: this.runs, losses: this.losses } = deps);
    this.events = deps.events ?? NO_EVENTS;
    this.peers.on('task.held', async (body) => ({ held: body.taskIds.filter((id) => this.holds(id)) }));
    this.peers.on('replica.alive', async () => ({ alive: true }));
    this.peers.on('replicas.sweep', async () => {
      if (!this.stopped) this.tracked(this.recoverOrphans({ queue: true }));
      return undefined;
    });
  }

  /** Leases tasks to this replica (if it dies from here on, another one ends them). */
  lease(taskIds: string[]): Promise<void> {
    return this.store.leases.assign(taskIds, this.peers.id, this.leaseMs);
  }

  /**
   * Reserves the id of a task this replica is about to create, before its record exists (store.leases.reserve): false
   * when a replica holds it already (a keyed task created or run elsewhere, or left by a dead replica).
   */
  reserve(taskId: string): Promise<boolean> {
    return this.store.leases.reserve(taskId, this.peers.id, this.leaseMs);
  }

  /** Gives back a reservation whose task was not created here (only while this replica still holds it). */
  release(taskId: string): Promise<void> {
    return this.store.leases.release(taskId, this.peers.id);
  }

  /**
   * Starts heartbeating (every leaseMs / 3) and sweeping for lost tasks (every leaseMs / 6: a sweep that finds
   * nobody dead is one store call, so sweeping often is cheap): a dead replica's tasks are taken between leaseMs
   * and 7/6 × leaseMs after its last heartbeat.
   */
  start(): void {
    this.stopped = false;
    // At once: what this replica recorded while starting (its upstream sessions) made it alive for one lease only.
    this.tracked(this.renew());
    this.heartbeat = setInterval(() => this.tracked(this.renew()), Math.max(50, Math.floor(this.leaseMs / BEATS_PER_LEASE)));
    this.heartbeat.unref();
    this.sweeper = setInterval(() => this.tracked(this.recoverOrphans()), Math.max(50, Math.floor(this.leaseMs / 6)));
    this.sweeper.unref();
  }

  /**
   * No more sweeps from this replica (it drains for shutdown): tasks of dead replicas are left to the replicas
   * that stay, rather than taken over here only to be handed over again. Heartbeats go on.
   */
  stopSweeping(): void {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  /** Stops heartbeating and sweeping; resolves once the heartbeat or sweep under way (if any) has settled. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.heartbeat);
    clearInterval(this.sweeper);
    await Promise.allSettled([...this.inFlight]);
  }

  /**
   * Shutdown, once stop() resolved and this replica's runs ended or were left for others (TaskRuns.close): gives up
   * this replica's liveness, so that what it still leases (the tasks it hands over, orphans it took and could not
   * settle) are orphans at once, and asks the other replicas to sweep now: they take them over within one sweep
   * instead of leaseMs after the last heartbeat. From here on it answers "not held" for all of them.
   */
  async handOver(tellPeers: boolean): Promise<void> {
    this.recovering.clear();
    this.unsettled.clear();
    try {
      await this.store.leases.expire(this.peers.id);
    } catch (error) {
      // Not lost: they are orphans once the last heartbeat's lease runs out.
      this.logger.warn({ err: error }, 'could not give up this replica\'s liveness: other replicas take its tasks over once its lease runs out');
      return;
    }
    if (tellPeers) await this.peers.tell?.(undefined, 'replicas.sweep', {}).catch(() => undefined);
  }

  /** Whether renewals succeed, for readiness. */
  health(): LeaseHealth {
    const failure = this.renewalFailure;
    if (failure === undefined) return { ok: true, held: this.lastRound.ids, lastRenewalMs: Math.round(this.lastRound.ms) };
    return { ok: false, held: this.lastRound.ids, error: `task lease renewals fail since ${new Date(failure.since).toISOString()}: ${failure.message}` };
  }

  /**
   * Says this replica is alive for another leaseMs (which keeps every task it holds), and renews its slot tickets
   * once per lease period (the timer beats every leaseMs / 3). Undefined when a beat is already under way.
   */
  async renew(): Promise<RenewalRound | undefined> {
    if (this.renewing) return undefined;
    this.renewing = true;
    const held = this.runs.heldCount() + this.recovering.size;
    const started = performance.now();
    const slotsDue = this.beatsSinceSlots === 0;
    try {
      // Both settle before the beat ends (a beat never overlaps the next), then either failure fails it.
      const settled = await Promise.allSettled([slotsDue ? this.runs.renewSlots() : undefined, this.store.leases.heartbeat(this.peers.id, this.leaseMs)]);
      for (const outcome of settled) if (outcome.status === 'rejected') throw outcome.reason;
      this.beatsSinceSlots = (this.beatsSinceSlots + 1) % BEATS_PER_LEASE;
      this.lastRound = { ids: held, ms: performance.now() - started };
      if (this.renewalFailure !== undefined) this.logger.info({ held }, 'task lease renewals succeed again');
      this.renewalFailure = undefined;
      this.storeAnswered();
      return this.lastRound;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.storeDown = true;
      // The slot tickets are renewed on the next beat that succeeds.
      this.beatsSinceSlots = 0;
      if (this.renewalFailure === undefined) this.logger.warn({ err: error, held }, 'could not renew task leases');
      this.renewalFailure = { since: this.renewalFailure?.since ?? Date.now(), message };
      return { ids: held, ms: performance.now() - started, error: message };
    } finally {
      this.renewing = false;
    }
  }

  private holds(taskId: string): boolean {
    return this.runs.holds(taskId) || this.recovering.has(taskId);
  }

  private storeAnswered(): void {
    if (!this.storeDown) return;
    this.storeDown = false;
    this.storeBackAt = Date.now();
  }

  /**
   * Fails (or runs again) the tasks of replicas that stopped heartbeating: nothing stays running forever.
   * One sweep takes batch after batch until no orphan is left, so a dead replica's tasks are all settled by the
   * first sweep that sees them (each batch bounded, several replicas may sweep at once: each orphan goes to one).
   */
  private async recoverOrphans(options: { queue?: boolean } = {}): Promise<void> {
    if (this.sweeping) {
      // A timer's tick finds one under way and leaves it; a peer's call for one (replicas.sweep) is answered after it.
      if (options.queue === true) this.sweepAgain = true;
      return;
    }
    // Liveness runs out in store time while the store is away, for live replicas too: once it is back, every
    // replica gets two lease periods to heartbeat (and write what it kept) before anyone is declared lost. One is
    // not enough with short leases: a live replica beats only after its own reconnect backoff (up to 500 ms, later
    // than ours) and its next heartbeat (leaseMs / 3), and a loaded machine schedules both late.
    if (this.storeDown) {
      await this.store.ping().then(() => this.storeAnswered(), () => undefined);
      return;
    }
    if (Date.now() - this.storeBackAt < 2 * this.leaseMs) return;
    this.sweeping = true;
    const started = Date.now();
    let taken = 0;
    let batchCount = 0;
    try {
      // What an earlier sweep took but could not settle (the store failed it) goes first.
      const retry = [...this.unsettled].map(([taskId, owner]) => ({ taskId, owner }));
      this.unsettled.clear();
      await eachAtMost(RECOVERY_CONCURRENCY, retry, (orphan) => this.recover(orphan));
      while (!this.stopped) {
        let orphans: { taskId: string; owner: string }[];
        try {
          orphans = await this.store.leases.takeOrphans(ORPHANS_PER_TAKE, this.peers.id, this.leaseMs);
        } catch {
          this.storeDown = true;
          return; // the store is away; readiness says so, and the leases wait
        }
        if (orphans.length === 0) return;
        taken += orphans.length;
        batchCount++;
        // Ours until settled: they live as long as this replica does, and are "held" if anyone asks.
        for (const { taskId } of orphans) this.recovering.add(taskId);
        const lost = await this.stillHeld(orphans);
        await eachAtMost(RECOVERY_CONCURRENCY, lost, (orphan) => this.recover(orphan));
        if (orphans.length < ORPHANS_PER_TAKE) return;
      }
    } finally {
      if (taken > 0) this.logger.info({ orphans: taken, batches: batchCount, ms: Date.now() - started }, 'orphaned tasks settled');
      // After the tasks: a dead replica's calls are settled before the upstream sessions they ran on are ended.
      const sessionsOf = { store: this.store, peers: this.peers, losses: this.losses, logger: this.logger, leaseMs: this.leaseMs };
      if (!this.storeDown && !this.stopped && !(await endDeadUpstreamSessions(sessionsOf))) this.storeDown = true;
      this.sweeping = false;
    }
    if (this.sweepAgain && !this.stopped) {
      this.sweepAgain = false;
      await this.recoverOrphans();
    }
  }

  /** Keeps `work` (a heartbeat or a sweep) among those stop() waits for until it settles. */
  private tracked(work: Promise<unknown>): void {
    this.inFlight.add(work);
    const settled = (): void => void this.inFlight.delete(work);
    work.then(settled, settled);
  }

  /**
   * Settles one lost task: taken over where that is safe, else failed as lost. A task the store could not settle
   * stays leased here and is tried again by the next sweep (or, if this replica dies too, by whichever replica
   * takes its tasks).
   */
  private async recover({ taskId, owner }: { taskId: string; owner: string }): Promise<void> {
    let settled = false;
    try {
      const takenOver = await this.takeOverLost(taskId, owner).catch((error: unknown) => {
        this.logger.error({ err: error, task: taskId }, 'could not take over a lost task; failing it');
        return false;
      });
      if (takenOver) {
        settled = true;
        return;
      }
      const message = `The gateway lost the call: replica ${owner} stopped while running it (no heartbeat for ${this.leaseMs} ms)`;
      const changed = await this.store.tasks.transition(taskId, failedWith(message)).catch(() => undefined);
      if (changed === undefined) return;
      settled = true;
      await this.store.leases.release(taskId).catch(() => undefined);
      if (!changed.ok) return; // ended meanwhile, or expired: nothing to fail
      const lost = changed.task;
      this.events.emit('task.recovered', { ...taskFacts(lost), action: 'lost', previousOwner: owner });
      this.events.emit('task.ended', { ...taskFacts(lost), status: 'failed', reason: 'lost', durationMs: taskAgeMs(lost) });
      // The replica that told the task's creator about its changes is gone: the last change is told from here.
      this.losses.lost(changed.task);
    } finally {
      if (settled) this.recovering.delete(taskId);
      else this.unsettled.set(taskId, owner);
    }
  }

  /**
   * Hands back the orphans whose owner turns out to be alive and running them (its heartbeats came late, say
   * after a store outage: its connection came back later than ours), and returns the rest: truly lost.
   */
  private async stillHeld(orphans: { taskId: string; owner: string }[]): Promise<{ taskId: string; owner: string }[]> {
    const byOwner = new Map<string, string[]>();
    for (const { taskId, owner } of orphans) {
      const taskIds = byOwner.get(owner);
      if (taskIds === undefined) byOwner.set(owner, [taskId]);
      else taskIds.push(taskId);
    }
    const lost: { taskId: string; owner: string }[] = [];
    for (const [owner, taskIds] of byOwner) {
      const held = new Set<string>();
      if (owner === this.peers.id) {
        for (const id of taskIds) if (this.runs.holds(id)) held.add(id);
      } else {
        const answer = await this.peers.ask(owner, 'task.held', { taskIds }, undefined, OWNER_CHECK_MS).catch(() => undefined);
        for (const id of answer?.held ?? []) held.add(id);
      }
      if (held.size > 0) {
        await this.store.leases.assign([...held], owner, this.leaseMs).catch(() => undefined);
        for (const id of held) this.recovering.delete(id);
      }
      for (const taskId of taskIds) if (!held.has(taskId)) lost.push({ taskId, owner });
    }
    return lost;
  }

  /**
   * Takes over a lost task here instead of failing it, when that is safe: a task that was still waiting in line
   * for a slot (the upstream never saw it) joins the line again here; a running one runs again when its policy
   * allows (`retry.onLoss`) and attempts are left. Exactly one replica takes each orphan, so each loss leads to
   * at most one more execution. True when there is nothing left to fail (taken over, or ended meanwhile).
   */
  private async takeOverLost(taskId: string, owner: string): Promise<boolean> {
    const task = await this.store.tasks.get(taskId, { call: true }).catch(() => undefined);
    if (task === undefined || isTerminal(task.status) || task.call === undefined) return false;
    const policy = this.runs.policyFor(task.tool);
    const waiting = task.queued === true;
    const attempt = (task.attempt ?? 1) + (waiting ? 0 : 1);
    const upstream = this.losses.upstream(task.upstream);
    if (upstream === undefined || (!waiting && (!policy.retry.onLoss || attempt > policy.retry.maxAttempts))) return false;
    // A call held for approval goes on waiting here, its status message (whom it waits for) unchanged.
    const held = waiting && task.approval !== undefined;
    const changed = await this.store.tasks
      .transition(taskId, {
        to: 'working',
        attempt,
        openRequests: null,
        ...(held ? {} : {
          message: waiting
            ? `Waiting for a slot on another replica: replica ${owner} stopped while the task waited in line`
            : `Running the call again (attempt ${attempt} of ${policy.retry.maxAttempts}): replica ${owner} stopped while running it`,
        }),
      })
      .catch(() => undefined);
    if (changed === undefined) return false; // store away: failing it is tried next, else the next sweep tries again
    if (!changed.ok) {
      await this.store.leases.release(taskId).catch(() => undefined);
      return true; // ended meanwhile: nothing to fail
    }
    const facts = taskFacts(task);
    if (waiting) this.events.emit('task.recovered', { ...facts, action: 'requeued', previousOwner: owner });
    else this.events.emit('task.recovered', { ...facts, action: 'retried', previousOwner: owner, attempt });
    // Its lease stays this replica's (taken with the orphan): from here on the run holds it.
    await this.runs.runAgain({ ...changed.task, call: task.call }, upstream);
    return true;
  }
}
