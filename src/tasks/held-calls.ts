// A call held for a person's approval, as its task opens (task-admission.ts): the hold, bound to the digest of the
// call as the upstream would get it, its place among its principal's pending holds, and the status message that says
// whom it waits for. What approvers list and decide, and the wait of a run for the decision, are approvals.ts.
import type { ApprovalPolicy } from '../config/types.js';
import { GatewayError, storeUnavailable } from '../errors.js';
import type { GatewayEvents } from '../events.js';
import type { JsonObject } from '../jsonrpc.js';
import type { ApprovalHold, TaskStore } from '../store/task-store.js';
import { approvalDigest } from './call-digest.js';

/** The hold a call under `policy` opens with: pending until `timeoutMs` from now, bound to `params`. */
export function newHold(policy: ApprovalPolicy, params: JsonObject, now = Date.now()): ApprovalHold {
  return { approvers: [...policy.approvers], scopes: [...policy.scopes], deadlineMs: now + policy.timeoutMs, digest: approvalDigest(params), state: 'pending' };
}

/** The status message of a held task: whom it waits for, until when. */
export function waitingMessage(hold: Pick<ApprovalHold, 'approvers' | 'scopes' | 'deadlineMs'>): string {
  const who = [...hold.approvers, ...hold.scopes.map((scope) => `scope ${scope}`)].join(', ');
  return `Waiting for approval by ${who} until ${new Date(hold.deadlineMs).toISOString()}; the tool has not been called`;
}

/**
 * Reserves a place for a new hold among `principal`'s pending ones, before its task is stored: refused (the
 * principal's own calls wait for decisions) past `cap` (tasks.maxPendingApprovalsPerPrincipal; 0: none).
 */
export async function reserveHold(store: Pick<TaskStore, 'approvals'>, events: GatewayEvents, principal: string, taskId: string, hold: Pick<ApprovalHold, 'deadlineMs'>, cap: number): Promise<void> {
  const reservation = await store.approvals.reserve(principal, taskId, hold.deadlineMs, cap).catch((error: unknown) => {
    throw storeUnavailable(error);
  });
  if (!reservation.reserved) {
    events.emit('rate.limited', { principal, limit: 'maxPendingApprovalsPerPrincipal' });
    throw new GatewayError(
      'too_many_tasks',
      `Too many calls waiting for approval: you have ${reservation.pending} (tasks.maxPendingApprovalsPerPrincipal: ${cap}); wait for decisions or cancel some`,
    );
  }
}
