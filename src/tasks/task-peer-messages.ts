// What the task core answers to other replicas and asks of them. A task's call runs on one replica, but its client
// may come back on any: answers to its input requests, and word that the client can be reached again, go to the
// replica that runs it; this replica acts on those for runs it holds and declines the rest (another replica takes
// them up). The leases (leases.ts) ask the same question of every replica before declaring a task lost: which
// tasks it still holds, running or with an outcome waiting for the store. Cancellation needs no message: the
// replica that runs the task watches its record.
import type { JsonObject } from '../jsonrpc.js';
import { isTerminal, type TaskRecord } from '../store/task-store.js';
import type { EndWrites } from './end-writes.js';
import type { LeasedRuns, LeasePeerMessages } from './leases.js';
import type { Peers } from './peers.js';
import type { RunRelay } from './run-relay.js';
import type { TaskSlots } from './slots.js';
import type { TaskPolicies } from './task-policies.js';
import type { TaskRuns } from './task-runs.js';

/** The messages the task core exchanges with other replicas: their bodies and answers. */
export interface TaskPeerMessages extends LeasePeerMessages {
  /** A client's answers to input requests of a task whose call runs on whichever replica takes this up. */
  'task.update': { body: { taskId: string; answers: JsonObject }; answer: { ok: true } };
  /** The task's client can be reached now: its input requests that found no way to it are put again. */
  'task.reachable': { body: { taskId: string }; answer: { ok: true } };
}

/** The other replicas, as the task core needs them (the gateway's ReplicaLink). */
export type TaskPeers = Peers<TaskPeerMessages>;

export interface TaskPeerLinkDeps {
  peers: TaskPeers;
  runs: Pick<TaskRuns, 'get' | 'count' | 'heldSlots' | 'runAgain' | 'isOpening'>;
  relay: Pick<RunRelay, 'answer' | 'redeliver'>;
  endWrites: Pick<EndWrites, 'holds' | 'count'>;
  slots: Pick<TaskSlots, 'renew'>;
  policies: Pick<TaskPolicies, 'policyFor'>;
}

export class TaskPeerLink {
  constructor(private readonly deps: TaskPeerLinkDeps) {
    const { peers, runs, relay } = deps;
    peers.on('task.update', async (body, peer) => {
      const run = runs.get(body.taskId);
      if (run === undefined || run.ended) return undefined;
      peer.accept();
      await relay.answer(run, body.answers);
      return { ok: true };
    });
    peers.on('task.reachable', async (body, peer) => {
      const run = runs.get(body.taskId);
      if (run === undefined || run.ended) return undefined;
      peer.accept();
      relay.redeliver(run);
      return { ok: true };
    });
  }

  /**
   * Routes the client's answers to the input requests the task's upstream call waits on; unknown or already
   * answered keys are ignored. The store reflects what is still outstanding before this resolves, so a read right
   * after sees it. For a call running on another replica, the answers go there.
   */
  async answer(task: TaskRecord, answers: JsonObject): Promise<void> {
    const run = this.deps.runs.get(task.taskId);
    if (run !== undefined) await this.deps.relay.answer(run, answers);
    else if (!isTerminal(task.status)) await this.deps.peers.ask(undefined, 'task.update', { taskId: task.taskId, answers });
  }

  /**
   * The task's client can be reached now (it opened a stream to wait on the task): the input requests that found
   * no way to it are put to it again, on whichever replica runs the call.
   */
  async reachable(task: TaskRecord): Promise<void> {
    const run = this.deps.runs.get(task.taskId);
    if (run !== undefined) this.deps.relay.redeliver(run);
    // Any task not yet ended, not only one that was input_required when read: a question the upstream asks between
    // that read and the client's stream being in place found no way to the client, and would wait for the next one.
    else if (!isTerminal(task.status)) await this.deps.peers.ask(undefined, 'task.reachable', { taskId: task.taskId });
  }

  /** Whether this replica runs the task, or keeps its outcome for the store: its lease is ours. */
  holds(taskId: string): boolean {
    // A task being opened holds its id's lease already (reserved before its record is written).
    return this.deps.runs.get(taskId) !== undefined || this.deps.runs.isOpening(taskId) || this.deps.endWrites.holds(taskId);
  }

  /** The runs as the leases see them: what to renew, what to answer other replicas, how to run a lost task again. */
  leasedRuns(): LeasedRuns {
    const { runs, endWrites, slots, policies } = this.deps;
    return {
      heldCount: () => runs.count + endWrites.count,
      holds: (taskId) => this.holds(taskId),
      renewSlots: () => slots.renew(runs.heldSlots()),
      policyFor: (exposedName) => policies.policyFor(exposedName),
      runAgain: (task, upstream) => runs.runAgain(task, upstream),
    };
  }
}
