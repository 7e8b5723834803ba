// Concurrency slots (store.slots): FIFO semaphores shared by every replica, which the task core's slot keeper
// (tasks/slots.ts) queues tasks on. Redis keeps each semaphore in one Cluster slot (redis/semaphores.ts); the
// embedded store in a map (memory/slots.ts).

/** The answer to acquire: a slot, or how many hold one or wait in line before the ticket. */
export type SlotGrant = { granted: true } | { granted: false; ahead: number };

export interface Slots {
  /**
   * A FIFO semaphore of `limit` slots named `key`, shared by every replica. `ticket` (unique, e.g. a task id) joins
   * the line on its first call and keeps its place on later calls; it is granted a slot when fewer than `limit`
   * tickets hold one and no more than (limit - holders - 1) unexpired tickets queued before it wait (strict FIFO:
   * the first `free` tickets in line may be granted). A granted ticket holds its slot until release, or until
   * its lease (`leaseMs`, store time) runs out without renewal (its replica died). Queued tickets carry a lease too,
   * so a dead replica's waiters never block the line. `queue: false` never joins the line: granted or refused at
   * once (for counting limits such as unfinished tasks per principal); it does not jump the line either, and a
   * ticket already in line keeps its place. Re-acquiring a held ticket answers granted (idempotent) and refreshes
   * its lease. `ahead` is the number of holders plus tickets in line before it. `owner` (the replica) is kept with
   * the ticket for debugging. A `limit` of 0 or less grants nothing: an unlimited key needs no semaphore.
   * Expired holders and waiters are dropped by the next acquire of `key`, which then publishes `{ key }` on the
   * bus topic `slots` as release does, so the waiters behind them need not wait for their retry timer.
   */
  acquire(key: string, ticket: string, owner: string, limit: number, leaseMs: number, options?: { queue?: boolean }): Promise<SlotGrant>;
  /**
   * Gives the slot back (or leaves the line); no-op when the ticket holds nothing. Tells waiters: publishes
   * `{ key }` on the bus topic `slots` (only when it removed something).
   */
  release(key: string, ticket: string): Promise<void>;
  /**
   * Extends the leases of held and queued tickets that still exist (heartbeat); an expired ticket is not revived.
   * Any number of tickets: they go to the store IDS_PER_SCRIPT_CALL at a time.
   */
  renew(entries: readonly { key: string; ticket: string }[], leaseMs: number): Promise<void>;
  /** Tickets holding a slot of `key` now (expired ones excluded); for tests, metrics and /readyz-style reporting. */
  holders(key: string): Promise<string[]>;
}
