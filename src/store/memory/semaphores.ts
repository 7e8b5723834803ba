// Slot semaphores for the embedded store: the same contract as the Redis store's slot scripts (acquire-slot.lua,
// release-slot.lua, renew-slots.lua, slot-holders.lua) in one process. Each ticket holds a lease; a semaphore
// with no tickets left is dropped.
import type { SlotGrant } from '../slots.js';

/** A slot ticket's lease: its replica, and its deadline (epoch ms; run out when <= now). */
interface Lease {
  owner: string;
  deadline: number;
}

/** A slot semaphore: tickets with their leases. */
interface Semaphore {
  holders: Map<string, Lease>;
  /** In line, in order of arrival (a Map keeps insertion order). */
  queue: Map<string, Lease>;
}

export class Semaphores {
  private readonly byKey = new Map<string, Semaphore>();

  /** The acquire decision; `dropped`: tickets whose lease ran out were dropped (waiters should hear of it). */
  acquire(key: string, ticket: string, lease: Lease, limit: number, queue: boolean, now: number): { grant: SlotGrant; dropped: boolean } {
    const semaphore = this.byKey.get(key) ?? { holders: new Map(), queue: new Map() };
    const dropped = dropExpired(semaphore, now);
    const grant = takeSlot(semaphore, ticket, lease, limit, queue);
    this.keep(key, semaphore);
    return { grant, dropped };
  }

  /** Whether the ticket held a slot or waited in line (and is gone now). */
  release(key: string, ticket: string): boolean {
    const semaphore = this.byKey.get(key);
    if (semaphore === undefined) return false;
    const removed = semaphore.holders.delete(ticket) || semaphore.queue.delete(ticket);
    this.keep(key, semaphore);
    return removed;
  }

  /** Extends a ticket's lease to `deadline` if it has not run out at `now` (an expired ticket is not revived). */
  renew(key: string, ticket: string, now: number, deadline: number): void {
    const semaphore = this.byKey.get(key);
    const lease = semaphore?.holders.get(ticket) ?? semaphore?.queue.get(ticket);
    if (lease !== undefined && lease.deadline > now) lease.deadline = deadline;
  }

  holders(key: string, now: number): string[] {
    return [...(this.byKey.get(key)?.holders ?? [])].filter(([, lease]) => lease.deadline > now).map(([ticket]) => ticket);
  }

  /** Drops expired tickets everywhere, then empty semaphores (no `slots` message: waiters also retry on a timer). */
  sweep(now: number): void {
    for (const [key, semaphore] of this.byKey) {
      dropExpired(semaphore, now);
      this.keep(key, semaphore);
    }
  }

  /** Keeps `semaphore` under `key` while it has tickets; an empty one is dropped. */
  private keep(key: string, semaphore: Semaphore): void {
    if (semaphore.holders.size + semaphore.queue.size === 0) this.byKey.delete(key);
    else this.byKey.set(key, semaphore);
  }
}

/** Drops the holders and waiters whose lease ran out; whether any were. */
function dropExpired(semaphore: Semaphore, now: number): boolean {
  let dropped = false;
  for (const tickets of [semaphore.holders, semaphore.queue]) {
    for (const [ticket, lease] of tickets) {
      if (lease.deadline > now) continue;
      tickets.delete(ticket);
      dropped = true;
    }
  }
  return dropped;
}

/** The acquire decision, applied to `semaphore` (expired tickets already dropped). */
function takeSlot(semaphore: Semaphore, ticket: string, lease: Lease, limit: number, queue: boolean): SlotGrant {
  if (semaphore.holders.has(ticket)) {
    semaphore.holders.set(ticket, lease);
    return { granted: true };
  }
  const queued = semaphore.queue.has(ticket);
  const position = queued ? [...semaphore.queue.keys()].indexOf(ticket) : semaphore.queue.size;
  if (position < limit - semaphore.holders.size) {
    semaphore.queue.delete(ticket);
    semaphore.holders.set(ticket, lease);
    return { granted: true };
  }
  if (queued || queue) semaphore.queue.set(ticket, lease); // an entry already in line keeps its place
  return { granted: false, ahead: semaphore.holders.size + position };
}
