// Task records of the embedded store: the same contract as the Redis scripts (create.lua, transition.lua, delete.lua)
// and listings (redis/listing.ts) in one process. Nothing survives a restart.
import { EventEmitter } from 'node:events';
import { pendingHoldOf, type PendingHold } from '../approvals.js';
import type { CursorCodec } from '../cursors.js';
import {
  ALL_TASKS_CURSOR,
  DEFAULT_RESULT_GRACE_MS,
  EXPIRED_MEMORY_MS,
  isTerminal,
  ledgerOf,
  LIST_ALL_SCAN,
  listingKey,
  matchesFilter,
  storedTaskBytes,
  terminalExpiry,
  TIMELINE_LENGTH,
  withoutOutcome,
  type CreateOnceResult,
  type DeleteResult,
  type KeyRetirement,
  type NewTask,
  type StoredBytes,
  type TaskChange,
  type TaskFilter,
  type TaskPage,
  type TaskRecord,
  type TaskRecords,
  type TaskTransition,
  type TransitionResult,
} from '../tasks.js';
import type { MemoryHolds } from './approvals.js';
import { StoredBytesLedgers } from './stored-bytes.js';

interface Entry {
  task: TaskRecord;
  /** Epoch ms after which the task is gone; undefined while it is not terminal. */
  expiresAt: number | undefined;
  /** Its status changes, oldest first, at most TIMELINE_LENGTH. */
  timeline: TaskTransition[];
}

export interface MemoryTasksOptions {
  /** The store's clock. */
  now: () => number;
  /** Signs list cursors with the store's secret. */
  cursors: CursorCodec;
  /** The index of pending holds, which a task held from its creation joins. */
  holds: MemoryHolds;
  resultGraceMs?: number;
}

export class MemoryTasks implements TaskRecords {
  private readonly entries = new Map<string, Entry>();
  /** Per principal, listing keys in creation order (appends keep it sorted: the clock only moves forward). */
  private readonly index = new Map<string, string[]>();
  /** Every task's listing key, in creation order (for operators); expired ones go as they are met and on sweeps. */
  private readonly all: string[] = [];
  private readonly events = new EventEmitter();
  /** Bytes of finished tasks' outcomes, per principal and in total, until each task expires or is deleted. */
  private readonly stored = new StoredBytesLedgers();
  private lastCreatedUs = 0;
  /** Ids of expired tasks, until when they are remembered. */
  private readonly expiredIds = new Map<string, number>();
  /** Ids of deleted keyed tasks, until when they stay retired (as long as they would have once expired). */
  private readonly deletedIds = new Map<string, number>();

  constructor(private readonly options: MemoryTasksOptions) {
    this.events.setMaxListeners(0);
  }

  async create(input: NewTask): Promise<TaskRecord> {
    if (this.live(input.taskId) !== undefined) throw new Error(`task ${input.taskId} already exists`);
    return this.insert(input, undefined);
  }

  async createOnce(input: NewTask, digest: string): Promise<CreateOnceResult> {
    const held = this.live(input.taskId);
    if (held === undefined) {
      // Decided within this one turn (no await): racing calls see one outcome.
      const retired = this.retiredNow(input.taskId);
      return retired === undefined ? { outcome: 'created', task: this.insert(input, digest) } : { outcome: 'retired', reason: retired };
    }
    if (held.task.principal !== input.principal || held.task.idempotency !== digest) return { outcome: 'conflict' };
    return { outcome: 'existing', task: copy(withoutOutcome(held.task)) };
  }

  private insert(input: NewTask, idempotency: string | undefined): TaskRecord {
    const now = this.options.now();
    // Strictly increasing within the process, so listing order is creation order.
    this.lastCreatedUs = Math.max(this.lastCreatedUs + 1, Math.floor((performance.timeOrigin + performance.now()) * 1000));
    const { chargeTo, ...fields } = input;
    const task: TaskRecord = { ...fields, status: 'working', createdMs: now, createdUs: this.lastCreatedUs, updatedMs: now, ...(idempotency === undefined ? {} : { idempotency }) };
    if (task.message === undefined) delete task.message;
    if (task.native !== true) delete task.native;
    if (task.call === undefined) delete task.call;
    if (chargeTo !== undefined && chargeTo !== task.principal) task.chargedTo = chargeTo;
    // An upstream's own task may never be heard of again: it expires with its TTL from creation, running or not.
    const expiresAt = task.native === true ? now + task.retentionMs : undefined;
    this.entries.set(task.taskId, { task, expiresAt, timeline: [transitionOf(task)] });
    const keys = this.index.get(task.principal) ?? [];
    const key = listingKey(task);
    insertSorted(keys, key);
    this.index.set(task.principal, keys);
    insertSorted(this.all, key);
    if (task.approval !== undefined) {
      // Held from the start: the upstream has not seen the call.
      task.queued = true;
      this.options.holds.index(pendingHoldOf(task) as PendingHold);
    }
    // Charged until the earliest it can expire (its end charges it anew), as the Redis store does.
    const kept = `${task.call === undefined ? '' : JSON.stringify(task.call)}${task.approval === undefined ? '' : JSON.stringify(task.approval)}`;
    this.stored.charge(ledgerOf(task), task.taskId, storedTaskBytes({ callJson: kept }), now + task.retentionMs);
    return copy(withoutOutcome(task));
  }

  async get(taskId: string, options: { outcome?: boolean; call?: boolean } = {}): Promise<TaskRecord | undefined> {
    const entry = this.live(taskId);
    if (entry === undefined) return undefined;
    const { outcome, call, ...record } = entry.task;
    // Copied only what is asked for: a stored call can be megabytes of arguments.
    return copy({ ...record, ...(options.outcome === true && outcome !== undefined ? { outcome } : {}), ...(options.call === true && call !== undefined ? { call } : {}) });
  }

  async retired(taskId: string): Promise<KeyRetirement | undefined> {
    return this.live(taskId) === undefined ? this.retiredNow(taskId) : undefined;
  }

  /** Why a key's id that names no task now is retired, if it is (see TaskRecords.retired). */
  private retiredNow(taskId: string): KeyRetirement | undefined {
    const now = this.options.now();
    if ((this.deletedIds.get(taskId) ?? 0) > now) return 'deleted';
    return (this.expiredIds.get(taskId) ?? 0) > now ? 'expired' : undefined;
  }

  async expired(taskId: string): Promise<boolean> {
    if (this.live(taskId) !== undefined) return false;
    const until = this.expiredIds.get(taskId);
    return until !== undefined && until > this.options.now();
  }

  async transition(taskId: string, change: TaskChange, applied?: (result: TransitionResult) => void): Promise<TransitionResult> {
    const result = this.applyChange(taskId, change);
    applied?.(result);
    return result;
  }

  private applyChange(taskId: string, change: TaskChange): TransitionResult {
    const entry = this.live(taskId);
    if (entry === undefined) return { ok: false, reason: 'not_found' };
    if (isTerminal(entry.task.status)) return { ok: false, reason: 'terminal', task: copy(withoutOutcome(entry.task)) };
    const now = this.options.now();
    const task = entry.task;
    const statusChanged = task.status !== change.to;
    task.status = change.to;
    task.updatedMs = now;
    if (change.message === null) delete task.message;
    else if (change.message !== undefined) task.message = change.message;
    if (change.openRequests === null || isTerminal(change.to)) delete task.openRequests;
    else if (change.openRequests !== undefined) task.openRequests = change.openRequests;
    if (change.outcome !== undefined) task.outcome = change.outcome;
    if (change.attempt !== undefined) task.attempt = change.attempt;
    if (change.queued === true) task.queued = true;
    else if (change.queued === false || isTerminal(change.to)) delete task.queued;
    if (isTerminal(change.to)) {
      entry.expiresAt = terminalExpiry(task, now, this.options.resultGraceMs ?? DEFAULT_RESULT_GRACE_MS);
      // Kept only to run the task again, which an ended task never is: its arguments are not held for its TTL.
      delete task.call;
      // Replaces its creation's charge.
      this.stored.charge(change.chargeTo ?? ledgerOf(task), taskId, storedTaskBytes(task.outcome === undefined ? {} : { outcomeJson: JSON.stringify(task.outcome) }), entry.expiresAt);
    }
    if (statusChanged) {
      entry.timeline.push(transitionOf(task));
      if (entry.timeline.length > TIMELINE_LENGTH) entry.timeline.shift();
    }
    const summary = copy(withoutOutcome(task));
    this.events.emit(taskId, summary);
    return { ok: true, task: copy(summary) };
  }

  async storedBytes(principal: string): Promise<StoredBytes> {
    return this.stored.read(principal, this.options.now());
  }

  async delete(taskId: string, chargedTo?: string): Promise<DeleteResult> {
    const entry = this.live(taskId);
    if (entry === undefined) return 'not_found';
    if (!isTerminal(entry.task.status)) return 'not_terminal';
    // Its listing entries go as listings meet them, as an expired task's do.
    this.entries.delete(taskId);
    // A keyed task's id stays retired as long as it would have once expired (create.lua's tombstone).
    if (entry.task.idempotency !== undefined) this.deletedIds.set(taskId, (entry.expiresAt ?? this.options.now()) + EXPIRED_MEMORY_MS);
    this.stored.release(chargedTo ?? ledgerOf(entry.task), taskId);
    return 'deleted';
  }

  async list(principal: string, page: { cursor?: string; limit: number }): Promise<TaskPage> {
    const keys = this.index.get(principal) ?? [];
    let end = keys.length; // exclusive: walk backwards from here, newest first
    if (page.cursor !== undefined) {
      const after = this.options.cursors.decode(principal, page.cursor);
      end = lowerBound(keys, after);
    }
    const tasks: TaskRecord[] = [];
    let i = end - 1;
    for (; i >= 0 && tasks.length < page.limit; i--) {
      const key = keys[i] as string;
      const entry = this.listed(key);
      if (entry === undefined) keys.splice(i, 1); // expired: forget its index entry too
      else tasks.push(copy(withoutOutcome(entry.task)));
    }
    const last = tasks.at(-1);
    const more = i >= 0;
    return more && last !== undefined ? { tasks, nextCursor: this.options.cursors.encode(principal, listingKey(last)) } : { tasks };
  }

  async listAll(page: { cursor?: string; limit: number } & TaskFilter): Promise<TaskPage> {
    const keys = this.all;
    const end = page.cursor === undefined ? keys.length : lowerBound(keys, this.options.cursors.decode(ALL_TASKS_CURSOR, page.cursor));
    const tasks: TaskRecord[] = [];
    let i = end - 1;
    let scanned = 0;
    let lastKey: string | undefined;
    for (; i >= 0 && tasks.length < page.limit && scanned < LIST_ALL_SCAN; i--, scanned++) {
      const key = keys[i] as string;
      lastKey = key; // a cursor is an exclusive bound: it works whether or not its entry is still there
      const entry = this.listed(key);
      if (entry === undefined) keys.splice(i, 1); // expired: forget its index entry too
      else if (matchesFilter(entry.task, page)) tasks.push(copy(withoutOutcome(entry.task)));
    }
    // Going on from the last entry read (matching or not): a page cut short by the scan bound resumes after it.
    return i >= 0 && lastKey !== undefined ? { tasks, nextCursor: this.options.cursors.encode(ALL_TASKS_CURSOR, lastKey) } : { tasks };
  }

  async timeline(taskId: string): Promise<TaskTransition[]> {
    return structuredClone(this.live(taskId)?.timeline ?? []);
  }

  watch(taskId: string, listener: (task: TaskRecord) => void): () => void {
    this.events.on(taskId, listener);
    return () => this.events.off(taskId, listener);
  }

  /** The live task (its record kept, not copied), or undefined: an expired one is forgotten here, its id remembered. */
  live(taskId: string): Entry | undefined {
    const entry = this.entries.get(taskId);
    if (entry?.expiresAt !== undefined && entry.expiresAt <= this.options.now()) {
      this.entries.delete(taskId);
      this.expiredIds.set(taskId, entry.expiresAt + EXPIRED_MEMORY_MS);
      return undefined;
    }
    return entry;
  }

  /**
   * The live task a listing key names, if that key is still its own: an idempotency key makes the same id again
   * once its task has gone, and the gone task's entry must not list the new one twice.
   */
  private listed(key: string): Entry | undefined {
    const entry = this.live(key.slice(key.indexOf(':') + 1));
    return entry !== undefined && listingKey(entry.task) === key ? entry : undefined;
  }

  /** Tells the task's watchers of a change made outside transition (an approval decided). */
  announce(task: TaskRecord): void {
    this.events.emit(task.taskId, task);
  }

  /** Forgets what expired: tasks (their ids remembered), index entries, ledger charges, remembered ids. */
  sweep(): void {
    for (const taskId of [...this.entries.keys()]) this.live(taskId);
    // Compacted in place, in one pass: the index can hold every task of the process.
    let kept = 0;
    for (const key of this.all) if (this.entries.has(key.slice(key.indexOf(':') + 1))) this.all[kept++] = key;
    this.all.length = kept;
    const now = this.options.now();
    this.stored.sweep(now);
    for (const [taskId, until] of this.expiredIds) if (until <= now) this.expiredIds.delete(taskId);
    for (const [taskId, until] of this.deletedIds) if (until <= now) this.deletedIds.delete(taskId);
  }

  close(): void {
    this.events.removeAllListeners();
  }
}

function copy(task: TaskRecord): TaskRecord {
  return structuredClone(task);
}

/** A task's status now, as a timeline entry. */
function transitionOf(task: TaskRecord): TaskTransition {
  return task.message === undefined ? { status: task.status, atMs: task.updatedMs } : { status: task.status, atMs: task.updatedMs, message: task.message };
}

/** Inserts `key` in order, even if the wall clock stepped back (appends are the common case). */
function insertSorted(keys: string[], key: string): void {
  let at = keys.length;
  while (at > 0 && (keys[at - 1] as string) > key) at--;
  keys.splice(at, 0, key);
}

/** Index of the first key >= `key` in a sorted array. */
function lowerBound(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((keys[mid] as string) < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
