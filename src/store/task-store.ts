// The task store: one interface, two implementations (in memory and on Redis) that one behavioural test suite runs
// against. Each concern is a small interface of its own, a property of the store (store.tasks, store.leases, ...),
// declared with its types beside it; what stays here is what belongs to the store as a whole. The record model
// (tasks.ts) and the list cursors are re-exported: every layer above reads them from here.
import type { Approvals } from './approvals.js';
import type { ReplicaBus } from './bus.js';
import type { DeliveryQueue } from './delivery-queue.js';
import type { Leases } from './leases.js';
import type { RateWindows } from './rates.js';
import type { ClientSessions } from './sessions.js';
import type { Slots } from './slots.js';
import type { CreateOnceResult, DeleteResult, KeyRetirement, NewTask, StoredBytes, TaskChange, TaskFilter, TaskPage, TaskRecord, TaskTransition, TransitionResult } from './tasks.js';
import type { UpstreamSessions } from './upstream-sessions.js';

export * from './tasks.js';
export { CursorCodec, InvalidCursorError } from './cursors.js';

export interface TaskStore {
  readonly kind: 'memory' | 'redis';
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
  /** Stores a new task in `working`. Resolves only once any replica's `get` would find it. */
  create(task: NewTask): Promise<TaskRecord>;
  /**
   * Stores a new task whose id an idempotency key gave (tasks/idempotency.ts), deciding in the same atomic step
   * whether the key was used before: when the id is taken, nothing is written, and the answer is the task there
   * (without its outcome) if it is `task.principal`'s and was made for the same `digest` (tool and arguments), else
   * a conflict. The digest is kept in the task's record. When no task has the id but its keyed task was deleted or
   * expired (retired), nothing is written either: a task id is never reused for another call.
   */
  createOnce(task: NewTask, digest: string): Promise<CreateOnceResult>;
  /** Whether the keyed task of `taskId` was deleted or expired (and the store still remembers it); see createOnce. */
  retired(taskId: string): Promise<KeyRetirement | undefined>;
  /**
   * The task, with its outcome only when `outcome: true` and its stored call only when `call: true`: both can be
   * large (a call carries the client's arguments), most readers (polling, listing, events) need only the status,
   * and only what runs a task again needs its call. A task's call goes when the task ends.
   */
  get(taskId: string, options?: { outcome?: boolean; call?: boolean }): Promise<TaskRecord | undefined>;
  /** Whether `taskId` named a task that has expired (remembered for EXPIRED_MEMORY_MS), as opposed to none. */
  expired(taskId: string): Promise<boolean>;
  /**
   * Atomically checks that the task is not terminal, applies the change and emits the event. Staying in the same
   * non-terminal status updates only the message. Terminal tasks expire `retentionMs` after creation, and never sooner
   * than the store's result grace period after they ended; non-terminal tasks never expire. The task in the
   * result comes without its outcome.
   */
  transition(taskId: string, change: TaskChange): Promise<TransitionResult>;
  /**
   * Bytes of tasks the principal holds in the store, and all principals together (storedTaskBytes). Creating a task
   * charges TASK_OVERHEAD_BYTES and its stored call (and approval hold) to its ledger (chargeTo, else its principal)
   * and to the total until the earliest its record can expire (created + retentionMs); its terminal transition
   * replaces that charge with TASK_OVERHEAD_BYTES and its outcome until the task expires; deleting it releases it. An
   * expired charge is dropped by the next read (at most STORED_TRIM_PER_CALL per ledger and call). On Redis the
   * principal's ledger and the total are separate atomic steps after the create or transition (Cluster slots): a
   * replica that dies between them leaves that one charge unmade (never made twice).
   */
  storedBytes(principal: string): Promise<StoredBytes>;
  /**
   * Deletes an ended task and its outcome at once (before its TTL), releasing its stored bytes from the ledger of
   * `chargedTo` (unless said, the one it was charged to: its chargedTo, else its principal). A keyed task's id stays
   * retired (see retired) as long as it would have after expiring.
   */
  delete(taskId: string, chargedTo?: string): Promise<DeleteResult>;
  /** The principal's tasks (without outcomes), newest first. Throws InvalidCursorError for a cursor this store did not issue. */
  list(principal: string, page: { cursor?: string; limit: number }): Promise<TaskPage>;
  /**
   * Every principal's tasks (without outcomes), newest first, for operators (the dashboard): one index of all
   * tasks, entries of expired ones dropped as they are met (and swept a few at a time as tasks are created). At
   * most LIST_ALL_SCAN entries are read per call: with a filter, a page may come out short and still carry a
   * cursor. Throws InvalidCursorError for a cursor this store's listAll did not issue.
   */
  listAll(page: { cursor?: string; limit: number } & TaskFilter): Promise<TaskPage>;
  /** The task's last TIMELINE_LENGTH status changes, oldest first, creation included; [] for an unknown task. */
  timeline(taskId: string): Promise<TaskTransition[]>;
  /**
   * Calls `listener` with the task (without its outcome) after every change, made on any replica, until the
   * returned function is called.
   */
  watch(taskId: string, listener: (task: TaskRecord) => void): () => void;
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
