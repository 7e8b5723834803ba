// The task store: one interface, two implementations (in memory and on Redis) that one behavioural test suite runs
// against. Each concern is a small interface of its own, a property of the store (store.tasks, store.leases, ...),
// declared with its types beside it; what stays here is what belongs to the store as a whole. The record model
// (tasks.ts) and the list cursors are re-exported: every layer above reads them from here.
import type { Approvals } from './approvals.js';
import type { ReplicaBus } from './bus.js';
import type { Connections } from './connections.js';
import type { DeliveryQueue } from './delivery-queue.js';
import type { Leases } from './leases.js';
import type { RateWindows } from './rates.js';
import type { ClientSessions } from './sessions.js';
import type { Slots } from './slots.js';
import type { TaskRecords } from './tasks.js';
import type { UpstreamSessions } from './upstream-sessions.js';

export * from './tasks.js';
export { CursorCodec, InvalidCursorError } from './cursors.js';

export interface TaskStore {
  readonly kind: 'memory' | 'redis';
  /** Task records: create, read, change, list, watch (tasks.ts). */
  readonly tasks: TaskRecords;
  /** Webhook deliveries waiting for their endpoints, shared by every replica (delivery-queue.ts). */
  readonly deliveries: DeliveryQueue;
  /** Messages between replicas (bus.ts). */
  readonly bus: ReplicaBus;
  /** Client sessions every replica serves (sessions.ts). */
  readonly sessions: ClientSessions;
  /** Concurrency slots shared by every replica (slots.ts). */
  readonly slots: Slots;
  /** Rate windows counted across replicas (rates.ts). */
  readonly rates: RateWindows;
  /** Who runs which task, and which replicas are alive (leases.ts). */
  readonly leases: Leases;
  /** Upstream sessions replicas opened, for ending those of a replica that died (upstream-sessions.ts). */
  readonly upstreamSessions: UpstreamSessions;
  /** Calls held for approval: decisions, and the index of pending holds (approvals.ts). */
  readonly approvals: Approvals;
  /** Per-user connections to upstreams: sealed tokens, consent links and flows, client registrations, refresh locks (connections.ts). */
  readonly connections: Connections;
  /**
   * A secret shared by every replica using this store, for signing what the gateway hands to clients and must
   * recognise later on any replica (list cursors, the state a 2026-07-28 retry resumes from).
   */
  signingSecret(): Promise<Buffer>;
  /** Resolves when the store answers; rejects with a reason otherwise. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Ids per store script call. Operations over many tasks (lease renewal, slot renewal, orphan recovery) reach the
 * store in calls of at most this many ids, however many tasks a replica holds: a Redis script holds the server
 * for its whole run, and a call's arguments are spread onto the caller's stack (67k ids overflowed it).
 */
export const IDS_PER_SCRIPT_CALL = 1_000;

/** `items` in consecutive slices of at most `size` (IDS_PER_SCRIPT_CALL unless told). */
export function* batches<T>(items: readonly T[], size: number = IDS_PER_SCRIPT_CALL): Generator<T[]> {
  for (let start = 0; start < items.length; start += size) yield items.slice(start, start + size);
}
