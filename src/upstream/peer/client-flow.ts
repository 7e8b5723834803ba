// The seam between a client's stream and the upstream side of its calls: how much the stream can still take, and
// which messages it can shed by itself when it is full.
import { asObject, type JsonObject } from '../../jsonrpc.js';

/**
 * How much the client's side of a call (the stream its messages go to) can still take. A client that does not read
 * must not make the gateway hold the upstream's output for it: while `full`, the upstream side stops reading what
 * the call's upstream sends, until `drained()`; where it cannot stop without stalling other clients (one stdout
 * for all), the call fails instead. What the stream sheds by itself (shedsWhenFull) never needs either.
 */
export interface ClientFlow {
  /** The stream holds more than its bound for a client that has not taken it. */
  readonly full: boolean;
  /** Resolves once the stream is below its bound again, or gone. Never rejects. */
  drained(): Promise<void>;
  /** The bound reached, as the configuration names it, for the error of a call that cannot wait. */
  readonly bound: string;
}

const LOG_NOTIFICATION = 'notifications/message';

/** The method of a notification (a message with a method and no id); undefined for requests and responses. */
export function notificationMethod(message: unknown): string | undefined {
  const method = (message as { method?: unknown }).method;
  return typeof method === 'string' && (message as { id?: unknown }).id === undefined ? method : undefined;
}

/** Log notifications: the one kind a full stream drops whoever sent it (counted, and the client told). */
export function isLogNotification(method: string | undefined): boolean {
  return method === LOG_NOTIFICATION;
}

/**
 * The task a task-status notification names, as its revision's codec reads it (every revision's upstream adapter,
 * asked in the registry's order: src/protocol/revisions.ts, handed down by the composition root).
 */
export type NotifiedTaskId = (params: JsonObject) => string | undefined;

/**
 * Notifications whose latest says all that an earlier one with the same key said: progress of one call (its
 * token), a task's status, a list change, a resource update. While one waits on a stream, a newer one takes its
 * place. Undefined for everything else.
 */
export function coalescingKey(message: unknown, notifiedTaskId: NotifiedTaskId): string | undefined {
  const method = notificationMethod(message);
  if (method === undefined) return undefined;
  const params = asObject((message as { params?: unknown }).params);
  switch (method) {
    case 'notifications/progress':
      return params?.progressToken === undefined ? undefined : `progress:${JSON.stringify(params.progressToken)}`;
    case 'notifications/tasks/status':
    case 'notifications/tasks': {
      const taskId = params === undefined ? undefined : notifiedTaskId(params);
      return taskId === undefined ? undefined : `task:${taskId}`;
    }
    case 'notifications/resources/updated':
      return typeof params?.uri === 'string' ? `updated:${params.uri}` : undefined;
    default:
      return method.endsWith('/list_changed') ? method : undefined;
  }
}

/** Whether a full stream takes the message without growing past its bound: it coalesces or drops it. */
export function shedsWhenFull(message: unknown, notifiedTaskId: NotifiedTaskId): boolean {
  return isLogNotification(notificationMethod(message)) || coalescingKey(message, notifiedTaskId) !== undefined;
}
