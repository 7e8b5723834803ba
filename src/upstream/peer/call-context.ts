// What a call the gateway forwards carries besides its request: where the upstream's related messages go, and the
// task an upstream runs for it.
import type { JsonObject, JsonRpcNotification, Outcome, RequestId } from '../../jsonrpc.js';
import type { ClientFlow } from './client-flow.js';

/** The client-side half of a call the gateway forwards: where the upstream's related messages go. */
export interface CallContext {
  /** The client session the call runs for. */
  readonly sessionId: string;
  /** Delivers a notification to the client, on this call's stream. */
  notify(message: JsonRpcNotification): void;
  /** Asks the client (elicitation, sampling, roots) on this call's stream; resolves with the client's answer. */
  ask(request: { method: string; params?: JsonObject }, signal: AbortSignal): Promise<Outcome>;
  /** The upstream runs the call as its own task and says how it goes (its task's status message); optional. */
  status?(message: string): void;
  /** The room on the client's stream; none: the call's messages are never held back (a task, a JSON answer). */
  readonly flow?: ClientFlow | undefined;
}

/**
 * A 2025-11-25 task the upstream runs for a call of this connection. Its messages keep reaching the call's
 * context after the call that created it was answered: progress with that call's token, requests and
 * notifications marked with the task's id, and its status notifications.
 */
export interface FollowedTask {
  context: CallContext;
  /** The token progress comes with (the creating call's id), and the client's own token for it. */
  progress: { token: RequestId; clientToken: unknown } | undefined;
  /** The upstream said how the task goes (its status notification). */
  status(notification: JsonObject): void;
}
