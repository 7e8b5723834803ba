// Concurrency slots of the embedded store: its semaphores (semaphores.ts) on the store's clock, telling waiters on
// its bus as the Redis scripts tell them on theirs.
import type { ReplicaBus } from '../bus.js';
import type { SlotGrant, Slots } from '../slots.js';
import { inTurns } from './in-turns.js';
import { Semaphores } from './semaphores.js';

export class MemorySlots implements Slots {
  private readonly semaphores = new Semaphores();

  constructor(
    private readonly bus: ReplicaBus,
    private readonly now: () => number,
  ) {}

  async acquire(key: string, ticket: string, owner: string, limit: number, leaseMs: number, options: { queue?: boolean } = {}): Promise<SlotGrant> {
    const now = this.now();
    const { grant, dropped } = this.semaphores.acquire(key, ticket, { owner, deadline: now + leaseMs }, limit, options.queue !== false, now);
    // Told once the semaphore is settled: a waiter's handler may acquire at once (this store calls it synchronously).
    if (dropped) await this.bus.publish('slots', { key });
    return grant;
  }

  async release(key: string, ticket: string): Promise<void> {
    if (this.semaphores.release(key, ticket)) await this.bus.publish('slots', { key });
  }

  async renew(entries: readonly { key: string; ticket: string }[], leaseMs: number): Promise<void> {
    await inTurns(entries, (batch) => {
      const now = this.now();
      for (const { key, ticket } of batch) this.semaphores.renew(key, ticket, now, now + leaseMs);
    });
  }

  async holders(key: string): Promise<string[]> {
    return this.semaphores.holders(key, this.now());
  }

  /** Drops the tickets whose leases ran out. */
  sweep(): void {
    this.semaphores.sweep(this.now());
  }
}
