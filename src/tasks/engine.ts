// The task core as the gateway builds and runs it: one place that makes its parts, each with one job, and hands
// them to whoever needs that job (each caller depends on the narrowest part it uses):
//   policies  task-policies.ts      every tool's task policy, replaced by a config reload
//   queries   task-queries.ts       find, list, wait for a state: reads any replica answers alike
//   runs      task-runs.ts          open (task-admission.ts), run, deadlines, ends, cancel, drains (with
//                                   run-relay.ts for what a run's call sends its client, end-writes.ts for ends
//                                   the store takes later)
//   records   task-records.ts       deletes, and the records of tasks upstreams run themselves
//   peerLink  task-peer-messages.ts what other replicas ask of these runs, and what this replica asks of them
//   calls     call-plan.ts          what becomes of a tool call (plain, task, background, held, keyed), once for
//                                   every revision
// Leases and recovery of lost tasks are leases.ts; slots are slots.ts. The engine itself is the lifecycle only:
// start, reconfigure, readiness, drain and close.
import type { ReplicasConfig, TasksConfig } from '../config/types.js';
import { NO_EVENTS, type GatewayEvents } from '../events.js';
import type { ActingCallers } from './acting-callers.js';
import type { Logger } from '../log.js';
import type { TaskStore } from '../store/task-store.js';
import type { Upstream } from '../upstream/life/upstream.js';
import { EndWrites } from './end-writes.js';
import { SLOT_LEASES, TaskLeases, type LeaseHealth } from './leases.js';
import { LocalEnds } from './local-ends.js';
import { RunRelay } from './run-relay.js';
import { TaskSlots } from './slots.js';
import { TaskPeerLink, type TaskPeers } from './task-peer-messages.js';
import { TaskPolicies } from './task-policies.js';
import { TaskQueries } from './task-queries.js';
import { TaskRecords } from './task-records.js';
import type { TaskCreators } from './task-admission.js';
import { TaskRuns, type RecoveryDeps } from './task-runs.js';
import { Approvals } from './approvals.js';
import { CallPlans } from './call-plan.js';
import type { UserConnections } from '../consent/ports.js';

export type { RecoveryDeps } from './task-runs.js';

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
  callers: TaskCreators;
  /** Where the task's life is announced (src/events.ts): created, started, status, input, ended, the run's scope. */
  events?: GatewayEvents;
  /** Keeps the callers of calls another replica may run, sealed (none: kept calls carry no caller). */
  acting?: ActingCallers;
  /**
   * Per-user connections to upstreams that act as each user at their own account (issue 41): calls of callers
   * without one are answered with a consent request, and tasks wait for it. None: no upstream needs one.
   */
  consent?: UserConnections;
}

export class TaskEngine {
  readonly policies: TaskPolicies;
  readonly queries: TaskQueries;
  readonly runs: TaskRuns;
  readonly records: TaskRecords;
  readonly peerLink: TaskPeerLink;
  /** Calls held for approval: what approvers list and decide. */
  readonly approvals: Approvals;
  /** What becomes of a tool call: the steps of its plan (call-plan.ts). */
  readonly calls: CallPlans;
  /** Per-user connections (issue 41), for the revisions' answers to a caller without one; none: no upstream needs one. */
  readonly consent: UserConnections | undefined;
  private readonly slots: TaskSlots;
  private readonly endWrites: EndWrites;
  private readonly leases: TaskLeases;
  private readonly maxRunningTasks: number;

  constructor(deps: TaskEngineDeps) {
    const { store, logger, replica, peers, recovery, callers } = deps;
    const events = deps.events ?? NO_EVENTS;
    this.maxRunningTasks = replica.maxRunningTasks;
    this.consent = deps.consent;
    this.policies = new TaskPolicies(deps.config);
    // Ends written here, told to this replica's waiters with their outcome once the store has them.
    const localEnds = new LocalEnds();
    // Slot tickets carry leases of their own, longer than the replica's heartbeat (see SLOT_LEASES).
    this.slots = new TaskSlots({ store, logger, leaseMs: replica.leaseMs * SLOT_LEASES, replicaId: () => peers.id, authenticated: callers.authenticated, events });
    this.endWrites = new EndWrites({ store, logger, events, localEnds });
    this.queries = new TaskQueries({ store, localEnds, events });
    this.records = new TaskRecords({ store, authenticated: callers.authenticated, events });
    const relay = new RunRelay({ store, logger, events });
    this.approvals = new Approvals({ store, policies: this.policies, queries: this.queries, endWrites: this.endWrites, events, logger });
    this.runs = new TaskRuns({
      store,
      policies: this.policies,
      logger,
      replica,
      callers,
      events,
      slots: this.slots,
      endWrites: this.endWrites,
      relay,
      // Called only once a task opens, after the leases exist.
      leases: { reserve: (taskId) => this.leases.reserve(taskId), release: (taskId) => this.leases.release(taskId), leaseMs: replica.leaseMs },
      queries: this.queries,
      recovery,
      approvals: this.approvals,
      consent: deps.consent,
      ...(deps.acting === undefined ? {} : { acting: deps.acting }),
    });
    this.calls = new CallPlans({ runs: this.runs, queries: this.queries, policies: this.policies, logger, consent: deps.consent });
    this.peerLink = new TaskPeerLink({ peers, runs: this.runs, relay, endWrites: this.endWrites, slots: this.slots, policies: this.policies });
    this.leases = new TaskLeases({ store, logger, leaseMs: replica.leaseMs, peers, runs: this.peerLink.leasedRuns(), losses: recovery, events });
  }

  /** A config reload's task policy: tasks created from now on get it (running ones keep the policy they started with). */
  reconfigure(config: TasksConfig): void {
    this.policies.reconfigure(config);
  }

  /** How lease renewal fares, and how many tasks run here: for readiness. */
  health(): { leases: LeaseHealth; running: number; maxRunningTasks: number } {
    return { leases: this.leases.health(), running: this.runs.count, maxRunningTasks: this.maxRunningTasks };
  }

  /**
   * Starts the timers: lease renewal of this replica's runs, and failing (or running again) the tasks of replicas
   * that stopped renewing theirs; and hears when slots free anywhere.
   */
  start(): void {
    this.slots.listen();
    this.leases.start();
    this.approvals.start();
  }

  /**
   * SIGTERM: the drain begins. Runs whose call reached the upstream go on; the others no longer start here (close()
   * hands them over), and this replica no longer takes over the tasks of lost ones (the replicas that stay do).
   */
  beginDrain(): void {
    this.leases.stopSweeping();
    this.runs.beginDrain();
  }

  /** Runs whose call reached the upstream: what a drain waits for (idle()). */
  get busy(): number {
    return this.runs.busy;
  }

  /** Resolves once no run is busy. */
  idle(): Promise<void> {
    return this.runs.idle();
  }

  /** beginDrain(), then up to `timeoutMs` for the busy runs to end; close() then hands over or fails what remains. */
  async drain(timeoutMs: number): Promise<void> {
    this.beginDrain();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.idle(), new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }

  /** Gives the runs on an upstream a config reload removed up to `timeoutMs`, then fails the rest (TaskRuns.drainUpstream). */
  drainUpstream(upstream: Upstream, timeoutMs: number, message: string): Promise<number> {
    return this.runs.drainUpstream(upstream, timeoutMs, message);
  }

  /**
   * Shutdown: stops renewing leases (the last heartbeat settled), hands over or fails every local run, writes the
   * ends the store still owes if it can, and then gives up this replica's liveness: what it handed over is taken by
   * another replica's next sweep, which it asks for. In that order, so no end written here races a take-over.
   */
  async close(): Promise<void> {
    await this.leases.stop();
    this.approvals.stop();
    const handedOver = await this.runs.close();
    await this.endWrites.close();
    await this.leases.handOver(handedOver > 0);
  }
}
