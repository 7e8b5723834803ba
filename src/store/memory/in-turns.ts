import { setImmediate as nextTurn } from 'node:timers/promises';
import { batches } from '../task-store.js';

/**
 * Applies `apply` to `items` batch by batch (IDS_PER_SCRIPT_CALL), yielding to the event loop between batches as
 * the Redis store's calls do: requests are still served while a replica renews 100k leases.
 */
export async function inTurns<T>(items: readonly T[], apply: (batch: T[]) => void): Promise<void> {
  let first = true;
  for (const batch of batches(items)) {
    if (!first) await nextTurn();
    first = false;
    apply(batch);
  }
}
