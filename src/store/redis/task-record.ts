// A task record as the Redis store keeps it: a hash of text fields, read whole by the scripts (HGETALL, as a flat
// array) or in part by the store (HMGET of the summary fields).
import { TASK_STATUSES, type ApprovalHold, type Era, type TaskRecord, type TaskStatus } from '../task-store.js';

/** Every record field but the large ones (outcome, stored call); taskId first (its absence means no record). */
export const SUMMARY_FIELDS = ['taskId', 'principal', 'era', 'tool', 'upstream', 'status', 'message', 'createdMs', 'createdUs', 'updatedMs', 'retentionMs', 'pollMs', 'openRequests', 'native', 'attempt', 'queued', 'approval', 'idempotency', 'chargedTo'] as const;

/** What a read asks HMGET for: the summary, then the large fields wanted (lists built once: polling reads a lot). */
const READ_FIELDS = {
  summary: SUMMARY_FIELDS,
  outcome: [...SUMMARY_FIELDS, 'outcome'],
  call: [...SUMMARY_FIELDS, 'call'],
  both: [...SUMMARY_FIELDS, 'outcome', 'call'],
} as const;

export function readFields(options: { outcome?: boolean; call?: boolean }): readonly string[] {
  if (options.outcome === true) return options.call === true ? READ_FIELDS.both : READ_FIELDS.outcome;
  return options.call === true ? READ_FIELDS.call : READ_FIELDS.summary;
}

/** A record from a HMGET reply of `fields` (SUMMARY_FIELDS first, as readFields gives them). */
export function summaryFromHmget(values: readonly (string | null | undefined)[], fields: readonly string[] = SUMMARY_FIELDS): TaskRecord | undefined {
  if (values[0] === null || values[0] === undefined) return undefined;
  const record: Record<string, string> = {};
  for (let i = 0; i < fields.length; i++) {
    const value = values[i];
    if (value !== null && value !== undefined) record[fields[i] as string] = value;
  }
  return parseTask(record);
}

/**
 * The eras records written before eras were revision ids carry ('legacy', 'modern'), read as those revisions' ids.
 * Only for records of the release before this change: it may go one release later. Any other era is read as it is
 * (one no revision serves is an error where it is used).
 */
const ERAS_BEFORE_REVISION_IDS: ReadonlyMap<string, Era> = new Map([
  ['legacy', '2025-11-25'],
  ['modern', '2026-07-28'],
]);

/** A record from a HGETALL reply (flat array, as Lua returns it, or an object, as ioredis returns it). */
export function parseTask(input: string[] | Record<string, string>): TaskRecord {
  let fields: Record<string, string>;
  if (Array.isArray(input)) {
    fields = {};
    for (let i = 0; i + 1 < input.length; i += 2) fields[input[i] as string] = input[i + 1] as string;
  } else fields = input; // only read
  const status = fields.status as TaskStatus;
  if (!(TASK_STATUSES as readonly string[]).includes(status) || fields.taskId === undefined) throw new Error('not a task record');
  const task: TaskRecord = {
    taskId: fields.taskId,
    principal: fields.principal ?? '',
    era: ERAS_BEFORE_REVISION_IDS.get(fields.era ?? '') ?? fields.era ?? '',
    tool: fields.tool ?? '',
    upstream: fields.upstream ?? '',
    status,
    createdMs: Number(fields.createdMs),
    createdUs: Number(fields.createdUs),
    updatedMs: Number(fields.updatedMs),
    retentionMs: Number(fields.retentionMs),
    pollMs: Number(fields.pollMs),
  };
  if (fields.message !== undefined) task.message = fields.message;
  if (fields.native === '1') task.native = true;
  if (fields.attempt !== undefined) task.attempt = Number(fields.attempt);
  if (fields.queued === '1') task.queued = true;
  if (fields.approval !== undefined) task.approval = parseApproval(fields.approval);
  if (fields.idempotency !== undefined) task.idempotency = fields.idempotency;
  if (fields.chargedTo !== undefined) task.chargedTo = fields.chargedTo;
  if (fields.call !== undefined) task.call = JSON.parse(fields.call) as TaskRecord['call'];
  if (fields.openRequests !== undefined) task.openRequests = JSON.parse(fields.openRequests) as TaskRecord['openRequests'];
  if (fields.outcome !== undefined) task.outcome = JSON.parse(fields.outcome) as TaskRecord['outcome'];
  return task;
}

/**
 * A hold as the record keeps it (JSON). Lua's cjson writes an empty list as an object: lists are read as lists
 * whatever it wrote.
 */
function parseApproval(text: string): ApprovalHold {
  const raw = JSON.parse(text) as ApprovalHold;
  return { ...raw, approvers: Array.isArray(raw.approvers) ? raw.approvers : [], scopes: Array.isArray(raw.scopes) ? raw.scopes : [] };
}
