// The budgets on finished tasks' results (tasks.maxStoredBytesPerPrincipal, tasks.maxStoredBytes,
// tasks.maxResultBytes). A result is kept until its task's TTL (invariant 4), so a full budget refuses new tasks
// rather than dropping results a client was promised; what refuses is the store's ledger, read as a task opens.
import type { TasksConfig } from '../config/types.js';
import { resultTooLarge, storedResultsFull, storeUnavailable } from '../errors.js';
import type { GatewayEvents } from '../events.js';
import type { Outcome } from '../jsonrpc.js';
import { outcomeBytes, type TaskChange, type TaskStore } from '../store/task-store.js';

export type StoredResultsConfig = Pick<TasksConfig, 'maxStoredBytesPerPrincipal' | 'maxStoredBytes' | 'maxResultBytes'>;

/**
 * Refuses a new task of `principal` (without authentication: every client, `together`) while its finished results, or everyone's, fill their budget (a budget of 0 is
 * off). Tasks already running may still end and store their results: the overshoot is at most maxResultBytes for
 * each task the principal (or the store) was running when the budget filled.
 */
export async function checkStoredBudgets(
  store: TaskStore,
  config: StoredResultsConfig,
  principal: string,
  events: GatewayEvents,
  options: { together?: boolean } = {},
): Promise<void> {
  if (config.maxStoredBytesPerPrincipal <= 0 && config.maxStoredBytes <= 0) return;
  const stored = await store.tasks.storedBytes(principal).catch((error: unknown) => {
    throw storeUnavailable(error);
  });
  const now = Date.now();
  if (config.maxStoredBytesPerPrincipal > 0 && stored.principal >= config.maxStoredBytesPerPrincipal) {
    const error = storedResultsFull('tasks.maxStoredBytesPerPrincipal', stored.principal, config.maxStoredBytesPerPrincipal, stored.principalFreesAtMs ?? now, now, options.together === true);
    events.emit('rate.limited', { principal, limit: 'maxStoredBytesPerPrincipal', retryAfterMs: (error.data as { retryAfterMs: number }).retryAfterMs });
    throw error;
  }
  if (config.maxStoredBytes > 0 && stored.total >= config.maxStoredBytes) {
    const error = storedResultsFull('tasks.maxStoredBytes', stored.total, config.maxStoredBytes, stored.totalFreesAtMs ?? now, now);
    events.emit('rate.limited', { principal, limit: 'maxStoredBytes', retryAfterMs: (error.data as { retryAfterMs: number }).retryAfterMs });
    throw error;
  }
}

/**
 * A terminal change as it may be stored: one whose outcome is larger than maxResultBytes becomes a failure that
 * says so (the result itself is dropped here, never stored).
 */
export function boundedEnd(change: TaskChange, upstream: string, maxResultBytes: number): TaskChange {
  const outcome: Outcome | undefined = change.outcome;
  if (outcome === undefined) return change;
  const bytes = outcomeBytes(outcome);
  if (bytes <= maxResultBytes) return change;
  const error = resultTooLarge(upstream, bytes, maxResultBytes);
  return { to: 'failed', message: error.message, outcome: { error: error.toJsonRpc() } };
}
