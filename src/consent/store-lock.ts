// One replica does a thing while the others wait for what it did (issue 41): a token refresh per expiry, a dynamic
// client registration per server. The store's lock (store.connections.lock) decides who does it; the others poll
// the store with a small backoff for the outcome, or for the lock to free (its holder died or gave up), bounded by
// the caller's deadline. Each attempt has an owner of its own, so two calls on one replica do not share a lock.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Connections } from '../store/connections.js';

const FIRST_WAIT_MS = 20;
const LONGEST_WAIT_MS = 400;

export interface LockedWork<T> {
  connections: Connections;
  name: string;
  /** This replica's id: owners are `<replica>:<random>`, which says in the store who holds a lock. */
  replicaId: string;
  ttlMs: number;
  signal: AbortSignal;
  /** What the lock is taken for: runs only while holding it. */
  work: () => Promise<T>;
  /** While another owner holds the lock: what it produced, once it did (undefined: not yet). May reject. */
  settled: () => Promise<T | undefined>;
  /** The error when `signal` aborts first. */
  timedOut: () => Error;
}

export async function underStoreLock<T>(locked: LockedWork<T>): Promise<T> {
  const { connections, name, signal } = locked;
  let wait = FIRST_WAIT_MS;
  for (;;) {
    if (signal.aborted) throw locked.timedOut();
    const owner = `${locked.replicaId}:${randomUUID()}`;
    if (await connections.lock(name, owner, locked.ttlMs)) {
      try {
        return await locked.work();
      } finally {
        // Its TTL frees it anyway: a failed unlock must not lose what the work produced.
        await connections.unlock(name, owner).catch(() => undefined);
      }
    }
    try {
      await sleep(wait, undefined, { signal });
    } catch {
      throw locked.timedOut();
    }
    wait = Math.min(wait * 2, LONGEST_WAIT_MS);
    const done = await locked.settled();
    if (done !== undefined) return done;
  }
}
