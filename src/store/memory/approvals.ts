// The memory store's index of pending holds, twin of the Redis one (redis/approvals.ts): each hold's small entry
// (who asked, tool, approvers, deadline) in deadline order, which listings filter on without touching any record
// (nor its call), and each principal's places (what tasks.maxPendingApprovalsPerPrincipal counts).
import { HOLDS_PER_READ, holdAfter, type HoldPosition, type HoldReservation, type PendingHold } from '../approvals.js';

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
