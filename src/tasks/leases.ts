// Leases and recovery. The tasks a replica runs (or whose outcome it keeps for the store) are leased to it, and
// live as long as it does: the replica heartbeats (one store write, however many tasks it holds), and sweeps for
// replicas that stopped: each of their tasks is taken over where that is safe (run again if its policy allows, or
// back in line if it was only waiting for a slot), else failed as lost. Nothing stays running forever, and each
// loss leads to at most one more execution. A sweep settles a dead replica's tasks in bounded batches
// (IDS_PER_SCRIPT_CALL) until none is left. Slot tickets still carry a lease each (their semaphores live in other
// Cluster slots than the replicas' liveness), renewed once per lease period for three.
import type { TaskPolicy } from '../config/types.js';
import { NO_EVENTS, type GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import { failedWith, IDS_PER_SCRIPT_CALL, isTerminal, type StoredCall, type TaskRecord, type TaskStore } from '../store/task-store.js';
import { UPSTREAM_SESSIONS_PER_TAKE, type DeadUpstreamSession } from '../store/upstream-sessions.js';
import type { Upstream } from '../upstream/life/upstream.js';
import type { Peers } from './peers.js';
import { taskAgeMs, taskFacts } from './task-facts.js';

/** How long a sweep waits for a task's owner to say it still holds it. */
const OWNER_CHECK_MS = 500;
/** Heartbeats per lease period: a replica survives missing all but the last of them. */
const BEATS_PER_LEASE = 3;
/** Slot tickets are leased for this many lease periods and renewed once per period (each ticket is a write). */
export const SLOT_LEASES = 3;
/** Orphans taken per store call; a sweep takes batch after batch while there are more. */
const ORPHANS_PER_TAKE = IDS_PER_SCRIPT_CALL;
/** Lost tasks settled at once during a sweep (store round trips in flight). */
const RECOVERY_CONCURRENCY = 64;

export interface LeasePeerMessages {
  /** Which of these tasks the replica still runs (or keeps the outcome of): asked before declaring them lost. */
  'task.held': { body: { taskIds: string[] }; answer: { held: string[] } };
  /** Whether the replica is alive: asked before ending the upstream sessions it recorded, once it looks dead. */
  'replica.alive': { body: Record<string, never>; answer: { alive: true } };
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
    void this.renew();
    this.heartbeat = setInterval(() => void this.renew(), Math.max(50, Math.floor(this.leaseMs / BEATS_PER_LEASE)));
    this.heartbeat.unref();
    this.sweeper = setInterval(() => void this.recoverOrphans(), Math.max(50, Math.floor(this.leaseMs / 6)));
    this.sweeper.unref();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.heartbeat);
    clearInterval(this.sweeper);
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
  private async recoverOrphans(): Promise<void> {
    if (this.sweeping) return;
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
      if (!this.storeDown && !this.stopped) await this.endDeadUpstreamSessions();
      this.sweeping = false;
    }
  }

  /**
   * Ends the upstream sessions that dead replicas left open (recorded in the store as they opened them), batch
   * after batch: otherwise the upstream keeps each to its own expiry, if it has one. Each record goes to one
   * sweeping replica, which sends the DELETE through its own configuration of that upstream (one no longer
   * configured here cannot be reached, and its sessions are dropped).
   */
  private async endDeadUpstreamSessions(): Promise<void> {
    for (;;) {
      let taken: DeadUpstreamSession[];
      try {
        taken = await this.store.upstreamSessions.takeDead(UPSTREAM_SESSIONS_PER_TAKE);
      } catch {
        this.storeDown = true;
        return;
      }
      if (taken.length === 0) return;
      const lost = await this.stillAlive(taken);
      let ended = 0;
      await eachAtMost(RECOVERY_CONCURRENCY, lost, async ({ upstream, sessionId, protocolVersion }) => {
        if (await this.losses.upstream(upstream)?.endOrphanSession(sessionId, protocolVersion)) ended++;
      });
      const replicas = [...new Set(lost.map(({ replica }) => replica))];
      if (lost.length > 0) this.logger.info({ sessions: lost.length, ended, replicas }, 'ended the upstream sessions of lost replicas');
      if (taken.length < UPSTREAM_SESSIONS_PER_TAKE) return;
    }
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
   * Hands back the upstream sessions of replicas that answer (alive after all: their heartbeats came late), and
   * returns the rest, whose replicas are gone.
   */
  private async stillAlive<T extends { replica: string; upstream: string; sessionId: string; protocolVersion?: string }>(taken: T[]): Promise<T[]> {
    const lost: T[] = [];
    for (const replica of new Set(taken.map((session) => session.replica))) {
      const sessions = taken.filter((session) => session.replica === replica);
      const alive =
        replica === this.peers.id ||
        (await this.peers.exists?.(replica).catch(() => false)) === true ||
        (await this.peers.ask(replica, 'replica.alive', {}, undefined, OWNER_CHECK_MS).catch(() => undefined)) !== undefined;
      if (!alive) {
        lost.push(...sessions);
        continue;
      }
      for (const { upstream, sessionId, protocolVersion } of sessions) {
        const record = protocolVersion === undefined ? { upstream, sessionId } : { upstream, sessionId, protocolVersion };
        await this.store.upstreamSessions.record(replica, record, this.leaseMs).catch(() => undefined);
      }
    }
    return lost;
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

/** Runs `work` over `items`, at most `limit` at once. */
async function eachAtMost<T>(limit: number, items: readonly T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await work(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
