// The protocol revisions the gateway speaks: the one list that knows there is more than one, and the one line a new
// revision adds (docs/architecture.md, "Where to add…"). Each entry is its folder's revision.ts (ProtocolRevision:
// protocol/revision.ts), which brings its codec (the wire) and its upstream adapter (the gateway as a client) with
// it; every other list of revisions is derived here, and the composition root hands each to the layer below that
// needs it (metrics get the methods, every Upstream the adapters, streams the task-status reader).
// The MCP endpoint asks the entries in this order which one a message belongs to; a request refused before its
// message is read is answered by the revision its headers name, else by the last entry. The upstream side asks the
// adapters in the same order.
import type { RevisionId } from '../mcp.js';
import { rev2025_11_25 } from './rev2025-11-25/revision.js';
import { rev2026_07_28 } from './rev2026-07-28/revision.js';
import type { ProtocolRevision } from './revision.js';
import type { WireCodec } from './wire-codec.js';
import type { JsonObject } from '../jsonrpc.js';
import type { TaskRecord } from '../store/task-store.js';
import { createdTaskIdIn, notifiedTaskIdIn, type UpstreamAdapter } from '../upstream/peer/adapter.js';

export const REVISIONS: readonly ProtocolRevision[] = [
  // Stateless: it claims only what is plainly its own, so it is asked first (and its upstream side discovers first,
  // so an upstream speaking both is known to before its sessions open).
  rev2026_07_28,
  // Sessions: initialize and session traffic, everything the above declined (a neutral upstream call goes here
  // when both revisions list its name).
  rev2025_11_25,
];

/** Every version the gateway speaks, newest first: what `server/discover` and -32022 list. */
export const SUPPORTED_VERSIONS: readonly string[] = REVISIONS.flatMap((revision) => revision.versions);

/** Every revision's codec, in the registry's order. */
export const WIRE_CODECS: readonly WireCodec[] = REVISIONS.map((revision) => revision.codec);

/** The ids of the revisions the gateway speaks: the eras a task may be stored with. */
export const REVISION_IDS: readonly RevisionId[] = REVISIONS.map((revision) => revision.id);

/** The revisions the gateway may speak to its upstreams, in the registry's order; every Upstream gets this list. */
export const UPSTREAM_ADAPTERS: readonly UpstreamAdapter[] = REVISIONS.map((revision) => revision.upstream);

/**
 * Every method MCP defines in the revisions the gateway speaks, either direction (requests and notifications):
 * what metrics may name as is; anything else a client sends is just "other" there.
 */
export const MCP_METHODS: ReadonlySet<string> = new Set(WIRE_CODECS.flatMap((codec) => codec.methods));

/** Every revision's wire field names, which only that revision's codec may name (eslint.config.js reads each codec's). */
export const WIRE_FIELDS: readonly string[] = [...new Set(WIRE_CODECS.flatMap((codec) => codec.wireFields))];

/** The task a task-status notification names, in whichever revision the gateway speaks. */
export function notifiedTaskId(params: JsonObject): string | undefined {
  return notifiedTaskIdIn(UPSTREAM_ADAPTERS, params);
}

/** The task id of a create-task result in any revision the gateway speaks, or undefined for any other result. */
export function createdTaskId(result: JsonObject): string | undefined {
  return createdTaskIdIn(UPSTREAM_ADAPTERS, result);
}

/**
 * The one of `served` whose revision created `task`: the revision whose id is the task's era. Any other era (a
 * record of a later release, or damaged) is an error naming the task and its era, never read as some revision.
 */
export function creatorOf<T extends { revision: Pick<ProtocolRevision, 'id'> }>(served: readonly T[], task: Pick<TaskRecord, 'taskId' | 'era'>): T {
  const created = served.find(({ revision }) => revision.id === task.era);
  if (created !== undefined) return created;
  const known = served.map(({ revision }) => `'${revision.id}'`).join(', ');
  throw new Error(`task ${task.taskId} was created in protocol revision '${task.era}', which this gateway does not serve (it serves ${known})`);
}
