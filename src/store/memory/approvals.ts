// Calls held for approval in the embedded store, twin of redis/approvals.ts: decisions on the hold its task's record
// keeps, and the index of pending holds: each hold's small entry (who asked, tool, approvers, deadline) in deadline
// order, which listings filter on without touching any record (nor its call), and each principal's places (what
// tasks.maxPendingApprovalsPerPrincipal counts).
import { HOLDS_PER_READ, holdAfter, type ApprovalDecision, type Approvals, type DecideResult, type HoldPosition, type HoldReservation, type PendingHold } from '../approvals.js';
import { isTerminal, withoutOutcome, type TaskRecord } from '../tasks.js';

/** What deciding needs of the store's records: a live task's record (kept, not copied), and telling its watchers. */
export interface HeldRecords {
  live(taskId: string): { task: TaskRecord } | undefined;
  /** Tells the task's watchers of its change (`task` is theirs: a copy without its outcome). */
  announce(task: TaskRecord): void;
}

export class MemoryApprovals implements Approvals {
  constructor(
    private readonly holds: MemoryHolds,
    private readonly records: HeldRecords,
    private readonly now: () => number,
  ) {}

  async decide(taskId: string, decision: ApprovalDecision): Promise<DecideResult> {
    const entry = this.records.live(taskId);
    if (entry === undefined) {
      this.holds.unindex(taskId);
      return { ok: false, reason: 'not_found' };
    }
    const task = entry.task;
    const approval = task.approval;
    const answer = (reason: Exclude<DecideResult, { ok: true } | { reason: 'not_found' }>['reason']): DecideResult => {
      if (reason !== 'not_due' && reason !== 'expired' && reason !== 'changed') this.holds.unindex(taskId);
      return { ok: false, reason, task: structuredClone(withoutOutcome(task)) };
    };
    if (isTerminal(task.status)) return answer('terminal');
    if (approval === undefined) return answer('not_held');
    if (approval.state !== 'pending') return answer('decided');
    if (decision.digest !== undefined && decision.digest !== '' && decision.digest !== approval.digest) return answer('changed');
    const now = this.now();
    const due = now >= approval.deadlineMs;
    if (decision.state === 'expired' && !due) return answer('not_due');
    if (decision.state !== 'expired' && due) return answer('expired');
    task.approval = {
      ...approval,
      state: decision.state,
      decidedMs: now,
      ...(decision.by === undefined ? {} : { decidedBy: decision.by }),
      ...(decision.comment === undefined ? {} : { comment: decision.comment }),
    };
    task.message = decision.message;
    task.updatedMs = now;
    this.holds.unindex(taskId);
    const summary = structuredClone(withoutOutcome(task));
    this.records.announce(summary);
    return { ok: true, task: structuredClone(summary) };
  }

  async reserve(principal: string, taskId: string, deadlineMs: number, cap: number): Promise<HoldReservation> {
    return this.holds.reserve(principal, taskId, deadlineMs, cap, this.now());
  }

  async index(hold: PendingHold): Promise<void> {
    if (this.records.live(hold.taskId) !== undefined) this.holds.index(hold);
  }

  async unindex(taskId: string): Promise<void> {
    this.holds.unindex(taskId);
  }

  async pending(page: { after?: HoldPosition; limit: number }): Promise<PendingHold[]> {
    return this.holds.pending(page);
  }

  async due(nowMs: number, limit: number): Promise<string[]> {
    return this.holds.due(nowMs, limit);
  }
}


export class MemoryHolds {
  /** Indexed holds, soonest deadline first (then by task id, as Redis orders equal scores). */
  private readonly ordered: PendingHold[] = [];
  private readonly byTask = new Map<string, PendingHold>();
  /** Each principal's places: task id -> deadline (reserved before the task is stored, kept while indexed). */
  private readonly places = new Map<string, Map<string, number>>();

  reserve(principal: string, taskId: string, deadlineMs: number, cap: number, now: number): HoldReservation {
    const places = this.placesOf(principal);
    for (const [id, deadline] of places) if (deadline < now) places.delete(id);
    if (places.has(taskId)) return { reserved: true };
    if (cap > 0 && places.size >= cap) return { reserved: false, pending: places.size };
    places.set(taskId, deadlineMs);
    return { reserved: true };
  }

  index(hold: PendingHold): void {
    this.remove(hold.taskId);
    const entry = { ...hold, approvers: [...hold.approvers], scopes: [...hold.scopes] };
    this.ordered.splice(this.firstAfter(entry), 0, entry);
    this.byTask.set(hold.taskId, entry);
    this.placesOf(hold.principal).set(hold.taskId, hold.deadlineMs);
  }

  unindex(taskId: string): void {
    const hold = this.remove(taskId);
    if (hold === undefined) return;
    const places = this.places.get(hold.principal);
    places?.delete(taskId);
    if (places?.size === 0) this.places.delete(hold.principal);
  }

  pending(page: { after?: HoldPosition; limit: number }): PendingHold[] {
    const from = page.after === undefined ? 0 : this.firstAfter(page.after);
    return this.ordered.slice(from, from + Math.max(0, Math.min(page.limit, HOLDS_PER_READ))).map((hold) => ({ ...hold, approvers: [...hold.approvers], scopes: [...hold.scopes] }));
  }

  due(nowMs: number, limit: number): string[] {
    const ids: string[] = [];
    for (const hold of this.ordered) {
      if (hold.deadlineMs > nowMs || ids.length >= Math.min(limit, HOLDS_PER_READ)) break;
      ids.push(hold.taskId);
    }
    return ids;
  }

  private remove(taskId: string): PendingHold | undefined {
    const hold = this.byTask.get(taskId);
    if (hold === undefined) return undefined;
    this.byTask.delete(taskId);
    this.ordered.splice(this.ordered.indexOf(hold), 1);
    return hold;
  }

  private placesOf(principal: string): Map<string, number> {
    let places = this.places.get(principal);
    if (places === undefined) this.places.set(principal, (places = new Map()));
    return places;
  }

  /** Index of the first hold after `position` (binary search). */
  private firstAfter(position: HoldPosition): number {
    let lo = 0;
    let hi = this.ordered.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (holdAfter(this.ordered[mid] as PendingHold, position)) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
}
