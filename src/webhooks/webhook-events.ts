// Which facts of the gateway's event seam (src/events.ts) are webhook events, and what each carries besides its task.
// Each fact is emitted once, on the replica where it happened: that replica queues its deliveries. A task's status
// announcements repeat while it stays `input_required` (new input requests, messages): `task.input_required` is sent
// each time it enters that status, not for every repeat.
import type { WebhookEventType } from '../config/types.js';
import type { GatewayEvents, TaskFacts } from '../events.js';
import type { JsonObject } from '../jsonrpc.js';

export interface WebhookEvent {
  type: WebhookEventType;
  facts: TaskFacts;
  /** When it happened (epoch ms, this replica's clock). */
  atMs: number;
  /** What the fact says beyond its task (an approval's approvers and deadline, its decision). */
  details: JsonObject;
  /** The task ended: its result may go with it (`includeResult`). */
  ended: boolean;
}

/** Tasks remembered as `input_required` (so repeats are not sent again); past it the oldest are forgotten. */
const INPUT_REQUIRED_REMEMBERED = 10_000;

/** Calls `listener` for every webhook event this replica sees; returns what unsubscribes it. */
export function subscribeWebhookEvents(events: GatewayEvents, listener: (event: WebhookEvent) => void): () => void {
  /** Tasks whose last announced status was input_required, in the order they entered it. */
  const waitingForInput = new Set<string>();
  const emit = (type: WebhookEventType, facts: TaskFacts, details: JsonObject = {}, ended = false): void =>
    listener({ type, facts: { taskId: facts.taskId, principal: facts.principal, tool: facts.tool, upstream: facts.upstream }, atMs: Date.now(), details, ended });
  const stops = [
    events.on('task.created', (e) => emit('task.created', e)),
    events.on('task.status', (e) => {
      if (e.status !== 'input_required') {
        waitingForInput.delete(e.taskId);
        return;
      }
      if (waitingForInput.has(e.taskId)) return;
      waitingForInput.add(e.taskId);
      if (waitingForInput.size > INPUT_REQUIRED_REMEMBERED) waitingForInput.delete(waitingForInput.values().next().value as string);
      emit('task.input_required', e);
    }),
    events.on('task.ended', (e) => {
      waitingForInput.delete(e.taskId);
      emit(`task.${e.status}`, e, e.reason === undefined ? {} : { reason: e.reason }, true);
    }),
    events.on('approval.requested', (e) => emit('approval.requested', e, { approvers: [...e.approvers], deadline: new Date(e.deadline).toISOString() })),
    events.on('approval.decided', (e) => {
      const details: JsonObject = { decision: e.decision, waitedMs: e.waitedMs };
      if (e.decidedBy !== undefined) details.decidedBy = e.decidedBy;
      if (e.comment !== undefined) details.comment = e.comment;
      emit('approval.decided', e, details);
    }),
  ];
  return () => {
    for (const stop of stops) stop();
  };
}
