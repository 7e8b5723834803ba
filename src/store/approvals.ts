// Calls held for approval (store.approvals): deciding a hold, and the index of pending holds that listings and the
// expiry sweep read. The hold itself lives in its task's record (TaskRecord.approval); the implementations are
// memory/approvals.ts and redis/approvals.ts.
import type { ApprovalState, TaskRecord } from './tasks.js';

/** A decision on a held call: who (absent for expiry), why, and the task's status message from then on. */
export interface ApprovalDecision {
  state: Exclude<ApprovalState, 'pending'>;
  by?: string;
  comment?: string;
  message: string;
  /** The digest of the call the approver was shown: a hold bound to another call is not decided ('changed'). */
  digest?: string;
}

/**
 * What deciding did: the task, decided; or why not: no such task, no hold on it, decided already, ended already,
 * held for another call than the one the approver was shown, not due yet (expiry before the deadline) or past its
 * deadline (approve or deny after it: only expiry decides).
 */
export type DecideResult =
  | { ok: true; task: TaskRecord }
  | { ok: false; reason: 'not_found' }
  | { ok: false; reason: 'not_held' | 'decided' | 'terminal' | 'changed' | 'not_due' | 'expired'; task: TaskRecord };

/**
 * A pending hold as the approvals index keeps it, beside its task's record: what deciding who may see it needs
 * (who asked, for which tool, whom it waits for, until when), and never the call, which can be megabytes. Listings
 * filter on these entries and read the calls of the page they return only; the expiry sweep reads ids and deadlines.
 */
export interface PendingHold {
  taskId: string;
  /** Who asked for the call. */
  principal: string;
  tool: string;
  approvers: string[];
  scopes: string[];
  deadlineMs: number;
}

/** A place in the pending index (deadline, then task id): a scan goes on after it. */
export type HoldPosition = Pick<PendingHold, 'deadlineMs' | 'taskId'>;

/** Index entries one pending or due call reads at most. */
export const HOLDS_PER_READ = 500;

/** The index entry of a held task (undefined for a task that holds nothing). */
export function pendingHoldOf(task: Pick<TaskRecord, 'taskId' | 'principal' | 'tool' | 'approval'>): PendingHold | undefined {
  const approval = task.approval;
  if (approval === undefined) return undefined;
  return { taskId: task.taskId, principal: task.principal, tool: task.tool, approvers: [...approval.approvers], scopes: [...approval.scopes], deadlineMs: approval.deadlineMs };
}

/** Whether a hold's place comes after `position` (deadline, then task id by bytes, as Redis orders equal scores). */
export function holdAfter(hold: HoldPosition, position: HoldPosition): boolean {
  if (hold.deadlineMs !== position.deadlineMs) return hold.deadlineMs > position.deadlineMs;
  return Buffer.compare(Buffer.from(hold.taskId), Buffer.from(position.taskId)) > 0;
}

/**
 * What reserving a place among a principal's pending holds said: reserved (or held already), or refused with how
 * many the principal holds.
 */
export type HoldReservation = { reserved: true } | { reserved: false; pending: number };

export interface Approvals {
  /**
   * Decides a call held for approval, in one atomic step: only a pending hold of a task that has not ended, and
   * only once (two replicas deciding at once: exactly one gets ok), and only the call the approver was shown
   * (`decision.digest`, when given, is the hold's). Expiry only once its deadline passed (store time); approval or
   * denial only before it. The task keeps its status; its message becomes `decision.message`,
   * and the change is published like any other (watchers see the decision).
   */
  decide(taskId: string, decision: ApprovalDecision): Promise<DecideResult>;
  /**
   * Reserves a place for a new hold among `principal`'s pending ones (before its task is stored): refused when the
   * principal holds `cap` pending holds already (0: no cap). A place is freed when its hold leaves the index
   * (unindex: decided, ended) or, if its task was never stored, once `deadlineMs` has passed.
   */
  reserve(principal: string, taskId: string, deadlineMs: number, cap: number): Promise<HoldReservation>;
  /**
   * Lists a pending hold in the index (idempotent): after its task is stored, and again by a replica that takes the
   * task over (a replica lost between the two writes leaves a hold that listings and the sweep would miss).
   */
  index(hold: PendingHold): Promise<void>;
  /** Takes a hold out of the index and its principal's count (idempotent): decided, ended, or gone. */
  unindex(taskId: string): Promise<void>;
  /**
   * The index's entries after `after` (or from the start), soonest deadline first (then by task id), at most
   * `limit` (HOLDS_PER_READ). Entries only, never the records: an entry may outlive its hold (decided elsewhere,
   * task gone) until the reader checks the record and unindexes it.
   */
  pending(page: { after?: HoldPosition; limit: number }): Promise<PendingHold[]>;
  /** Ids of indexed holds whose deadline is at or before `nowMs`, soonest first, at most `limit` (HOLDS_PER_READ). */
  due(nowMs: number, limit: number): Promise<string[]>;
}
