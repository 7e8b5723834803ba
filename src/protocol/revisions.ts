// The protocol revisions the gateway serves clients in: the one list that knows there is more than one. The
// composition root serves each entry (its router, task methods and front) and the MCP endpoint asks them in this
// order which one a message belongs to; a request refused before its message is read is answered by the revision
// its headers name, else by the last entry. A new revision is a folder under src/protocol/ with a revision.ts
// (ProtocolRevision: protocol/revision.ts) and one line here (docs/architecture.md, "Where to add…").
import { rev2025_11_25 } from './rev2025-11-25/revision.js';
import { rev2026_07_28 } from './rev2026-07-28/revision.js';
import type { ProtocolRevision } from './revision.js';
import type { TaskRecord } from '../store/task-store.js';

export const REVISIONS: readonly ProtocolRevision[] = [
  // Stateless: it claims only what is plainly its own, so it is asked first.
  rev2026_07_28,
  // Sessions: initialize and session traffic, everything the above declined.
  rev2025_11_25,
];

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
