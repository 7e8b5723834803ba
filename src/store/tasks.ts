// Task records (store.tasks): what the store keeps of a task, and how it changes. The record model here is what
// every layer above the store reads (task-store.ts re-exports it); the implementations keep records in
// memory/tasks.ts and redis/tasks.ts. A task's outcome is stored once, exactly as the upstream gave it; each era
// derives its own wire status from it when serializing.
import { randomBytes } from 'node:crypto';
import { InternalError } from '../errors.js';
import type { JsonObject, Outcome } from '../jsonrpc.js';
import type { RevisionId } from '../mcp.js';

export const TASK_STATUSES = ['working', 'input_required', 'completed', 'failed', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

const TERMINAL_STATUSES: ReadonlySet<TaskStatus> = new Set(['completed', 'failed', 'cancelled']);

export function isTerminal(status: TaskStatus): boolean {
  return TERMINAL_STATUSES.has(status);
}

/**
 * A task's era: the id of the protocol revision that created it (its registry id, src/protocol/revisions.ts), so
 * that a recovered or lost task goes back to that revision. Stored as written; an era no revision served here has
 * is an error where it is used (the composition root), never read as some default.
 */
export type Era = RevisionId;

export interface TaskRecord {
  taskId: string;
  /** Who owns the task: an opaque string (`session:<id>` until authentication, then the authenticated subject). */
  principal: string;
  /** The protocol revision that created it, by id. */
  era: Era;
  /** Exposed tool name, as the client called it. */
  tool: string;
  upstream: string;
  status: TaskStatus;
  message?: string;
  /** Epoch milliseconds. */
  createdMs: number;
  /** Creation time in microseconds: orders listings, so tasks created within one millisecond keep their order. */
  createdUs: number;
  updatedMs: number;
  retentionMs: number;
  pollMs: number;
  /**
   * Requests the upstream is waiting on the client to answer, keyed by input key (unique for the task's life):
   * `{ method, params }` each. Present only while the task is `input_required`.
   */
  openRequests?: JsonObject;
  /** The upstream's answer (result or JSON-RPC error), set with the terminal transition that carries it. */
  outcome?: Outcome;
  /**
   * The upstream runs this task itself (a 2026-07-28 upstream's own task): the record only says where, so that
   * every replica routes the task's methods there.
   */
  native?: boolean;
  /** The upstream call, kept when policy lets another replica run it again if this one is lost. */
  call?: StoredCall;
  /** Which upstream execution of the call this is (1 for the first; retries after a lost replica count up). */
  attempt?: number;
  /** Waiting in line for a concurrency slot: the upstream has not seen the call yet. */
  queued?: boolean;
  /** The call is (or was) held for a person's approval before the upstream may see it (tasks/approvals.ts). */
  approval?: ApprovalHold;
  /** Made under an idempotency key (createOnce): the digest of the call the key was first used for. */
  idempotency?: string;
  /**
   * Whose stored-bytes ledger the task is charged to, when not its principal's (without authentication every client
   * is counted together): its creation, its end and its deletion charge and release that ledger.
   */
  chargedTo?: string;
}

/** How a held call's approval stands: waiting, or how it was decided. */
export type ApprovalState = 'pending' | 'approved' | 'denied' | 'expired';

/** A call held for approval, as its task keeps it: whom it waits for, until when, what was asked, and the decision. */
export interface ApprovalHold {
  /** Who may decide, as the rule said when the call was held (principal globs, and scopes): what the caller is told. */
  approvers: string[];
  scopes: string[];
  /** Epoch ms: past it, only expiry decides. */
  deadlineMs: number;
  /** SHA-256 of the tool and arguments the upstream gets (tasks/approvals.ts): the run checks it before it calls. */
  digest: string;
  state: ApprovalState;
  decidedBy?: string;
  comment?: string;
  decidedMs?: number;
}

/** Enough to start a task's upstream call again on any replica. */
export interface StoredCall {
  /** `tools/call` params as the upstream gets them (its own tool name). */
  params: JsonObject;
  /** Who the gateway is to the upstream for it: the client's session, or the identity used for 2026-07-28 clients. */
  identity: { sessionId: string; protocolVersion: string; capabilities: JsonObject; clientInfo?: JsonObject };
  /** Whom the call acts for at the upstream, sealed (tasks/acting-callers.ts); absent without a sealing key or a caller. */
  caller?: string;
}

export type NewTask = Pick<TaskRecord, 'taskId' | 'principal' | 'era' | 'tool' | 'upstream' | 'retentionMs' | 'pollMs'> & {
  message?: string;
  /** Whose stored-bytes ledger it is charged to, when not its principal's (kept in the record: TaskRecord.chargedTo). */
  chargeTo?: string;
  native?: boolean;
  call?: StoredCall;
  /** Held for approval from the start (pending), and so `queued`: the upstream has not seen the call. */
  approval?: ApprovalHold;
};

export interface TaskChange {
  to: TaskStatus;
  /** Replaces the status message; `null` clears it; absent keeps it. */
  message?: string | null;
  /** Replaces the outstanding input requests; `null` clears them; absent keeps them. A terminal status clears them. */
  openRequests?: JsonObject | null;
  outcome?: Outcome;
  /** Records a new upstream execution of the task's call (a retry after its replica was lost). */
  attempt?: number;
  /** Sets or clears the `queued` mark. */
  queued?: boolean;
  /**
   * Whose stored-bytes ledger a terminal change is charged to: the one the task was created for (its chargedTo, else
   * its principal) unless said (the gateway counts every client together without authentication, as it does
   * unfinished tasks).
   */
  chargeTo?: string;
}

/** The change that fails a task for a reason of the gateway's own: the message is its status message and its error. */
export function failedWith(message: string): TaskChange {
  return { to: 'failed', message, outcome: { error: { code: InternalError, message } } };
}

export type TransitionResult =
  | { ok: true; task: TaskRecord }
  /** Unknown or expired id. */
  | { ok: false; reason: 'not_found' }
  /** The task is already terminal, and terminal is forever. */
  | { ok: false; reason: 'terminal'; task: TaskRecord };

export interface TaskPage {
  tasks: TaskRecord[];
  nextCursor?: string;
}

/** What an operator's listing of every task keeps: tasks in any of `statuses` (all when absent), of `tool` (exact). */
export interface TaskFilter {
  statuses?: readonly TaskStatus[];
  tool?: string;
}

/** One entry of a task's timeline: a status it reached, when (epoch ms), and its status message then. */
export interface TaskTransition {
  status: TaskStatus;
  atMs: number;
  message?: string;
}

/**
 * Entries a task's timeline keeps (the oldest go first). A status change makes an entry; a message alone does
 * not (progress rewrites it every second and would push the history out).
 */
export const TIMELINE_LENGTH = 50;

/**
 * Index entries listAll reads at most per call, matching or not: a filter that matches little answers a short page
 * (with a cursor to go on) instead of reading the whole index.
 */
export const LIST_ALL_SCAN = 1_000;

/**
 * Bytes of tasks held in the store, as the stored-bytes ledgers count them (storedTaskBytes): a principal's and all
 * principals' together, each with when its oldest charge expires (absent when nothing is charged).
 */
export interface StoredBytes {
  principal: number;
  total: number;
  principalFreesAtMs?: number;
  totalFreesAtMs?: number;
}

/**
 * What createOnce did: made the task; found the task the same key made before (same principal, same call); or found
 * the id taken by another call (the key was used for other arguments, or another record holds the id).
 */
export type CreateOnceResult =
  | { outcome: 'created'; task: TaskRecord }
  | { outcome: 'existing'; task: TaskRecord }
  | { outcome: 'conflict' }
  /** The key's task was deleted or expired: its id serves no new task while the store remembers it (KeyRetirement). */
  | { outcome: 'retired'; reason: KeyRetirement };

/**
 * Why an id a key gives names no task and may not name a new one: its keyed task was deleted (a tombstone), or
 * expired (the expired-marker); each lasts as long as an expired id is remembered (EXPIRED_MEMORY_MS) after the
 * task's TTL.
 */
export type KeyRetirement = 'deleted' | 'expired';

/** What deleting a task did: gone, no such task (or expired), or not deleted because it has not ended. */
export type DeleteResult = 'deleted' | 'not_found' | 'not_terminal';

/** Expired ledger entries one storedBytes call trims at most, per ledger (the rest go on later calls). */
export const STORED_TRIM_PER_CALL = 1_000;

/** The bytes an outcome is charged for: its JSON, as the store keeps it. */
export function outcomeBytes(outcome: Outcome): number {
  return Buffer.byteLength(JSON.stringify(outcome));
}

/**
 * What every task costs the store besides its call or its outcome, in bytes: its record's fields, its timeline, its
 * expired-marker, its two listing entries and its two ledger entries (plus the idempotency digest of a keyed task).
 * Measured on Redis 7 with MEMORY USAGE over every key a task leaves: 1,550 bytes for a tiny finished keyed task
 * whose record is a listpack, 2,130 once a field passes 64 bytes and the record becomes a hash table (a result
 * of ~100 bytes); longer names, a status message and the timeline's entries add the rest (docs/limits.md).
 */
export const TASK_OVERHEAD_BYTES = 3 * 1024;

/** Whose stored-bytes ledger a task is charged to. */
export function ledgerOf(task: Pick<TaskRecord, 'principal' | 'chargedTo'>): string {
  return task.chargedTo ?? task.principal;
}

/**
 * The bytes a task is charged in the stored-bytes ledgers: TASK_OVERHEAD_BYTES and what it keeps besides, its
 * stored call (JSON) while it is unfinished, its outcome (JSON) once it has ended.
 */
export function storedTaskBytes(kept: { callJson?: string; outcomeJson?: string }): number {
  return TASK_OVERHEAD_BYTES + Buffer.byteLength(kept.callJson ?? '') + Buffer.byteLength(kept.outcomeJson ?? '');
}

export interface TaskRecords {
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
   * result comes without its outcome. `applied`, when given, is called once with the result, whatever it is, as soon
   * as the change is stored and before the bookkeeping that follows it (the stored-bytes charge of an end), so always
   * before the returned promise resolves: a waiter told from there is answered a round trip sooner.
   */
  transition(taskId: string, change: TaskChange, applied?: (result: TransitionResult) => void): Promise<TransitionResult>;
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
}

/** The record without its outcome (nor stored call), as events, listings and transition results carry it. */
export function withoutOutcome(task: TaskRecord): TaskRecord {
  const { outcome: _outcome, call: _call, ...rest } = task;
  return rest;
}

/** 128 random bits, URL-safe: without authentication the id itself is the bearer of a task. */
export function newTaskId(): string {
  return randomBytes(16).toString('base64url');
}

/** How long an expired task's id is remembered, so a late poll is told "expired" rather than "not found". */
export const EXPIRED_MEMORY_MS = 24 * 60 * 60 * 1000;

/** How long a task that ended after its TTL ran out stays readable, so the client can still fetch the result. */
export const DEFAULT_RESULT_GRACE_MS = 60_000;

/** When a task that reached a terminal status at `endedAt` may be deleted. */
export function terminalExpiry(task: Pick<TaskRecord, 'createdMs' | 'retentionMs'>, endedAt: number, graceMs: number): number {
  return Math.max(task.createdMs + task.retentionMs, endedAt + graceMs);
}

/**
 * A task's position in its principal's listing: creation time in microseconds (fixed width, so lexical order is
 * chronological), then id, which breaks ties.
 */
export function listingKey(task: Pick<TaskRecord, 'createdUs' | 'taskId'>): string {
  return `${String(task.createdUs).padStart(18, '0')}:${task.taskId}`;
}

/** Whom listAll's cursors are bound to: no principal is this (principals are `key:`, `oauth:`, `session:`, …). */
export const ALL_TASKS_CURSOR = '\u0000all-tasks';

/** Whether a task passes `filter`. */
export function matchesFilter(task: Pick<TaskRecord, 'status' | 'tool'>, filter: TaskFilter): boolean {
  return (filter.statuses === undefined || filter.statuses.includes(task.status)) && (filter.tool === undefined || task.tool === filter.tool);
}
