// The revisions the gateway speaks to its upstreams, as the one list that knows there is more than one (the
// client side's is revisions.ts, in the same order: stateless first). The composition root hands it to every
// Upstream (src/upstream/adapter.ts: the contract), which asks each entry whether it may speak to the upstream
// as configured and connects the sides that may. A new revision adds its `upstream/` folder and one line here.
import { sessionUpstreamAdapter } from './rev2025-11-25/upstream/side.js';
import { statelessUpstreamAdapter } from './rev2026-07-28/upstream/side.js';
import type { JsonObject } from '../jsonrpc.js';
import { createdTaskIdIn, notifiedTaskIdIn, type UpstreamAdapter } from '../upstream/adapter.js';

export const UPSTREAM_ADAPTERS: readonly UpstreamAdapter[] = [
  // Stateless: discovery first, so an upstream speaking both is known to before its sessions open.
  statelessUpstreamAdapter,
  // Sessions: the initialize handshake; a neutral call goes here when both revisions list its name.
  sessionUpstreamAdapter,
];

/** The task a task-status notification names, in whichever revision the gateway speaks. */
export function notifiedTaskId(params: JsonObject): string | undefined {
  return notifiedTaskIdIn(UPSTREAM_ADAPTERS, params);
}

/** The task id of a create-task result in any revision the gateway speaks, or undefined for any other result. */
export function createdTaskId(result: JsonObject): string | undefined {
  return createdTaskIdIn(UPSTREAM_ADAPTERS, result);
}
