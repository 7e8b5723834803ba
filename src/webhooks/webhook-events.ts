// Which facts of the gateway's event seam (src/events.ts) are webhook events, and what each carries besides its task.
// Each fact is emitted once, on the replica where it happened: that replica queues its deliveries. A task's status
// announcements repeat while it stays `input_required` (new input requests, messages): `task.input_required` is sent
// each time it enters that status, not for every repeat.
import type { WebhookEventType } from '../config/types.js';
import type { ConnectionFacts, GatewayEvents, TaskFacts } from '../events.js';
import type { JsonObject } from '../jsonrpc.js';

/** What an event is about: a task (task and approval events), or a user's connection to an upstream (issue 41). */
export type WebhookFacts = TaskFacts | (ConnectionFacts & { taskId?: undefined; tool?: undefined });

export interface WebhookEvent {
  type: WebhookEventType;
  facts: WebhookFacts;
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
    // A user's connections: who, which upstream, which authorization server; never a token.
    ...connectionEvents(events, listener),
  ];
  return () => {
    for (const stop of stops) stop();
  };
}

/** The connection events (issue 41) as webhook events: about a principal and an upstream, no task. */
function connectionEvents(events: GatewayEvents, listener: (event: WebhookEvent) => void): (() => void)[] {
  const emit = (type: WebhookEventType, facts: ConnectionFacts, details: JsonObject): void => {
    const about: ConnectionFacts = { principal: facts.principal, upstream: facts.upstream, ...(facts.issuer !== undefined && { issuer: facts.issuer }) };
    listener({ type, facts: about, atMs: Date.now(), details, ended: false });
  };
  return [
    events.on('connection.created', (e) => emit('connection.created', e, { scopes: [...e.scopes] })),
    events.on('connection.refreshed', (e) => emit('connection.refreshed', e, { rotated: e.rotated })),
    events.on('connection.revoked', (e) => emit('connection.revoked', e, { by: e.by, revokedAtServer: e.revokedAtServer })),
    events.on('connection.failed', (e) => emit('connection.failed', e, { reason: e.reason, step: e.step })),
  ];
}
