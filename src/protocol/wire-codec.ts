// The contract every protocol revision's codec implements (src/protocol/rev*/codec.ts exports one `codec`), as
// the MCP TypeScript SDK v2 has one WireCodec per revision: what routers, task adapters and the request scope
// need said in a revision's own field names, asked in the gateway's. A revision's other wire shapes (2026's
// retry fields, 2025's requested ttl) stay helpers of its codec; this interface is what both share. Nothing
// outside the codecs names a revision's wire fields (`npm run lint` checks it: eslint.config.js).
import type { TaskMode } from '../config/types.js';
import type { JsonObject } from '../jsonrpc.js';
import type { TaskRecord } from '../store/task-store.js';
import type { RevisionId } from '../mcp.js';

/** A task an upstream created itself, as its create-task result names it. */
export interface CreatedTask {
  taskId: string;
  /** How long the upstream keeps it, in milliseconds, when it said so. */
  retentionMs: number | undefined;
}

export interface WireCodec {
  /** The revision this codec speaks, by its registry id: also the era the tasks it creates are stored with. */
  readonly revision: RevisionId;
  /**
   * Every method the revision defines, requests and notifications, in either direction: the methods metrics name
   * as they are (the union over every codec: MCP_METHODS in revisions.ts).
   */
  readonly methods: readonly string[];
  /**
   * The revision's own wire field names, which nothing outside its codec may name: `npm run lint` reads them from
   * here (eslint.config.js, from every revision folder's codec.ts).
   */
  readonly wireFields: readonly string[];
  /** The task id a tasks/* request names, as sent (unchecked: the task engine says whether it is a task). */
  taskIdOf(params: JsonObject): unknown;
  /** What tasks/get answers for `task` (read with its outcome where the revision inlines it). */
  taskResult(task: TaskRecord): JsonObject;
  /**
   * What a tools/call answers that the gateway made a task; `immediateResponse` (tasks.immediateResponse) is
   * carried where the revision has a place for it.
   */
  createTaskResult(task: TaskRecord, immediateResponse: string | undefined): JsonObject;
  /** What tasks/cancel answers once `task` is cancelled (or, where the revision allows it, was already terminal). */
  cancelResult(task: TaskRecord): JsonObject;
  /**
   * A tool as the revision's clients list it, given the task mode the gateway runs it under; `mode` undefined:
   * the client speaks no tasks, and sees no task support at all.
   */
  toolView(tool: JsonObject, mode: TaskMode | undefined): JsonObject;
  /** A result of `method` as the revision's client gets it (fields the revision requires added). */
  clientResult(method: string, result: JsonObject): JsonObject;
  /** The task an upstream's own create-task result created; undefined for any other result. */
  createdTask(result: JsonObject): CreatedTask | undefined;
}
