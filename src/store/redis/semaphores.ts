// Slot semaphores on Redis: each semaphore's keys share one hash tag (one Cluster slot), and only acquire-slot.lua,
// release-slot.lua, renew-slots.lua and slot-holders.lua change or read them. The embedded store's twin is
// memory/semaphores.ts.
import { slotKeyList, type RedisKeys } from '../redis-keys.js';
import type { SlotGrant, Slots } from '../slots.js';
import { batches } from '../task-store.js';
import type { RunScript } from './scripts.js';

/** An idle semaphore's keys go this many lease periods after its last acquire or renewal. */
const SLOT_KEY_LEASES = 10;

export class RedisSemaphores implements Slots {
  constructor(
    private readonly run: RunScript,
    private readonly keys: RedisKeys,
  ) {}

  async acquire(key: string, ticket: string, owner: string, limit: number, leaseMs: number, options: { queue?: boolean } = {}): Promise<SlotGrant> {
    const [granted, ahead] = (await this.run(
      'acquire-slot',
      ...slotKeyList(this.keys.slot(key)),
      ticket,
      owner,
      String(limit),
      String(leaseMs),
      options.queue === false ? 'once' : 'queue',
      this.keys.topic('slots'),
      JSON.stringify({ key }),
      String(leaseMs * SLOT_KEY_LEASES),
    )) as [number, number?];
    return granted === 1 ? { granted: true } : { granted: false, ahead: ahead ?? 0 };
  }

  async release(key: string, ticket: string): Promise<void> {
    await this.run('release-slot', ...slotKeyList(this.keys.slot(key)), ticket, this.keys.topic('slots'), JSON.stringify({ key }));
  }

  async renew(entries: readonly { key: string; ticket: string }[], leaseMs: number): Promise<void> {
    // Scripts per semaphore (each semaphore's keys live in their own Cluster slot), its tickets batch by batch.
    const byKey = new Map<string, string[]>();
    for (const { key, ticket } of entries) {
      const tickets = byKey.get(key);
      if (tickets === undefined) byKey.set(key, [ticket]);
      else tickets.push(ticket);
    }
    await Promise.all(
      [...byKey].map(async ([key, tickets]) => {
        const keys = slotKeyList(this.keys.slot(key));
        for (const batch of batches(tickets)) await this.run('renew-slots', ...keys, String(leaseMs), String(leaseMs * SLOT_KEY_LEASES), ...batch);
      }),
    );
  }

  async holders(key: string): Promise<string[]> {
    return (await this.run('slot-holders', this.keys.slot(key).holders)) as string[];
  }
}
