// What an upstream's answers must match: the id of a request the gateway sent, once, and the kind of result the
// request asked for. An answer that breaks this is a violation (violations.ts: logged once a minute, counted each
// time); where the call it concerns is known, that call fails at once with -32603 naming the upstream and the
// violation, rather than waiting for an answer that will not come or passing on one it did not ask for.
import { upstreamViolation, GatewayError } from '../../errors.js';
import { asObject, type JsonObject, type JsonRpcErrorObject, type JsonRpcResponse, type Outcome, type RequestId } from '../../jsonrpc.js';
import { META_CLIENT_CAPABILITIES, TASKS_EXTENSION } from '../../mcp.js';

/**
 * How many recent ids a connection remembers: answered calls (a second answer to one is a duplicate) and the
 * upstream's own requests (its notifications/cancelled for one of them is its right, even after it was answered).
 * An id older than this is forgotten: a second answer to it reads as a late one, taken quietly.
 */
export const RECENT_IDS = 1024;

/** The kinds of answer violations, as logged (`violation`) and put in the error's `data.violation`. */
export const UNASKED_TASK = 'a task the gateway did not ask for';
export const WRONG_ID = 'a response with a wrong id';
export const DUPLICATE_RESPONSE = 'a duplicate response';
export const UNSOLICITED_RESPONSE = 'an unsolicited response';
export const CANCELLED_OWN_REQUEST = "notifications/cancelled for the gateway's own request";

/** A set of the last RECENT_IDS ids added: the oldest goes when a new one comes. */
export class RecentIds {
  private readonly ids = new Set<RequestId>();

  constructor(private readonly bound = RECENT_IDS) {}

  add(id: RequestId): void {
    this.ids.delete(id);
    this.ids.add(id);
    if (this.ids.size > this.bound) this.ids.delete(this.ids.values().next().value as RequestId);
  }

  has(id: RequestId): boolean {
    return this.ids.has(id);
  }

  get size(): number {
    return this.ids.size;
  }
}

/**
 * Whether a request asked the upstream to run it as a task: a 2025-11-25 task-augmented request (`params.task`),
 * or a 2026-07-28 one whose envelope declares the Tasks extension (the upstream may then answer with a task).
 */
export function asksForTask(params: JsonObject | undefined): boolean {
  if (params?.task !== undefined) return true;
  const capabilities = asObject(asObject(params?._meta)?.[META_CLIENT_CAPABILITIES]);
  return asObject(capabilities?.extensions)?.[TASKS_EXTENSION] !== undefined;
}

/**
 * The task id of a create-task result in some revision, or undefined for any other result: each revision's
 * upstream adapter knows its own shape (the registry, src/protocol/revisions.ts, asks them all).
 */
export type CreatedTaskId = (result: JsonObject) => string | undefined;

/** The sentence a call failed by an unasked task is told (after "Upstream '<name>' broke the protocol: "). */
export function unaskedTaskText(method: string, taskId: string): string {
  return `it answered ${method} with a task (${JSON.stringify(taskId.slice(0, 80))}) the gateway did not ask for`;
}

/**
 * The sentence a call is told whose answer came with another id: on its own stream (`onItsStream`), or on a
 * channel all calls share where it was the only call waiting (the id then is one the gateway never sent).
 */
export function wrongIdText(id: unknown, onItsStream: boolean): string {
  const shown = JSON.stringify(id)?.slice(0, 80) ?? String(id);
  return onItsStream
    ? `it answered this call's stream with id ${shown}, never with the call's own`
    : `it answered with id ${shown}, which the gateway never sent (taken for this call's answer)`;
}

/** The sentence a call is told whose request the upstream claimed to cancel. */
export function cancelledText(method: string): string {
  return `it sent notifications/cancelled for the gateway's ${method} request (only the sender of a request may cancel it)`;
}

/** What the answer check reads of a pending call. */
export interface AwaitedAnswer {
  readonly method: string;
  /** Whether the request asked for a task (asksForTask): else a CreateTaskResult is no answer to it. */
  readonly askedTask: boolean;
  /** An answer with another id came on this call's own stream: what the call is told if its stream ends unanswered. */
  strayAnswer?: RequestId;
}

/** The connection as the answer check sees it. */
export interface AnswerPort<Call extends AwaitedAnswer> {
  readonly upstreamName: string;
  /** The calls waiting for an answer, by the id the gateway sent. */
  readonly pending: ReadonlyMap<RequestId, Call>;
  /** Whether the gateway sent a request with this id on the connection (answered, pending or given up on). */
  sent(id: RequestId): boolean;
  /** Takes the call off the pending ones and settles it with `outcome`. */
  settle(id: RequestId, outcome: Outcome): void;
  /** Logs (rate-limited) and counts a violation. */
  violation(kind: string, details: Record<string, unknown>): void;
  /** Whether a result is a create-task result, and its task id. */
  createdTaskId: CreatedTaskId;
}

/**
 * Matches the upstream's answers and cancellations to the calls of one connection (see the top of this file).
 * Holds the recent ids it needs (RECENT_IDS each); the calls stay the connection's.
 */
export class AnswerCheck<Call extends AwaitedAnswer> {
  /** Ids of calls the upstream answered, and of the upstream's own requests. */
  private readonly answered = new RecentIds();
  private readonly upstreamRequests = new RecentIds();

  constructor(private readonly port: AnswerPort<Call>) {}

  /** The upstream sent a request of its own with this id. */
  upstreamRequest(id: RequestId): void {
    this.upstreamRequests.add(id);
  }

  /**
   * An answer from the upstream. One to a pending call settles it, unless it is a task the call did not ask for.
   * One that came on another pending call's own stream (Streamable HTTP) is a wrong-id answer to that call, which
   * fails if its stream then ends without its own answer. Otherwise: a late answer to a call the gateway gave up on
   * (cancelled, timed out: taken quietly), a duplicate, or an id the gateway never sent (see onSharedChannel).
   */
  answer(message: JsonRpcResponse, relatedTo: RequestId | undefined): void {
    const { port } = this;
    const id = message.id as RequestId;
    const call = port.pending.get(id);
    if (call !== undefined) {
      this.answered.add(id);
      const taskId = call.askedTask || !('result' in message) ? undefined : port.createdTaskId(message.result);
      if (taskId === undefined) {
        port.settle(id, 'result' in message ? { result: message.result } : { error: message.error });
        return;
      }
      port.violation(UNASKED_TASK, { method: call.method, failedCall: id });
      port.settle(id, { error: this.error(UNASKED_TASK, unaskedTaskText(call.method, taskId)) });
      return;
    }
    const stream = relatedTo === undefined ? undefined : port.pending.get(relatedTo);
    if (stream !== undefined) {
      stream.strayAnswer = id;
      port.violation(WRONG_ID, { id, onStreamOf: relatedTo });
    } else if (this.answered.has(id)) {
      port.violation(DUPLICATE_RESPONSE, { id });
    } else if (port.sent(id)) {
      return; // a late answer to a call that was cancelled or timed out: the upstream may cross a cancel
    } else if (relatedTo === undefined) {
      this.onSharedChannel(id);
    } else {
      port.violation(UNSOLICITED_RESPONSE, { id });
    }
  }

  /**
   * An answer with an id the gateway never sent, on a channel all calls share (stdio, HTTP+SSE), where nothing
   * says which call it answers. Taken as a call's only where that is safe: the call whose id it spells as text
   * (`"3"` for 3), or, with exactly one call waiting, that call when the id is a number (the gateway numbers its
   * calls: a number it never sent is a garbled answer; a string id matching no call is a message of the upstream's
   * own making: unsolicited). An upstream that sends unsolicited numbered answers can still fail a call sent just
   * before one: that call fails naming the violation. With several calls waiting, none is failed.
   */
  private onSharedChannel(id: RequestId): void {
    const { port } = this;
    const spelled = [...port.pending.keys()].find((pending) => String(pending) === String(id));
    const [only] = port.pending.size === 1 && typeof id === 'number' ? port.pending.keys() : [];
    const call = spelled ?? only;
    if (call === undefined) {
      if (port.pending.size === 0 || typeof id !== 'number') port.violation(UNSOLICITED_RESPONSE, { id });
      else port.violation(WRONG_ID, { id, pendingCalls: port.pending.size, failedCall: null });
      return;
    }
    port.violation(WRONG_ID, { id, failedCall: call });
    port.settle(call, { error: this.error(WRONG_ID, wrongIdText(id, false)) });
  }

  /**
   * The upstream's notifications/cancelled for `requestId`, which is not one of its requests running now. A
   * request's sender alone may cancel it: naming one of the upstream's own (already answered) it needs nothing;
   * naming a call the gateway sent, that call fails at once (the upstream says it will not answer it).
   */
  cancelled(requestId: RequestId): void {
    const call = this.port.pending.get(requestId);
    if (call === undefined || this.upstreamRequests.has(requestId)) return;
    this.port.violation(CANCELLED_OWN_REQUEST, { method: call.method, failedCall: requestId });
    this.port.settle(requestId, { error: this.error(CANCELLED_OWN_REQUEST, cancelledText(call.method)) });
  }

  /** What a call whose own stream ended without its answer is told: the stray answer that came instead, if one did. */
  lost(id: RequestId, reason: string): JsonRpcErrorObject {
    const stray = this.port.pending.get(id)?.strayAnswer;
    if (stray !== undefined) return this.error(WRONG_ID, wrongIdText(stray, true));
    const upstream = this.port.upstreamName;
    return new GatewayError('upstream_unavailable', `Upstream '${upstream}' lost the call: ${reason}`, { upstream }).toJsonRpc();
  }

  private error(kind: string, what: string): JsonRpcErrorObject {
    return upstreamViolation(this.port.upstreamName, kind, what).toJsonRpc();
  }
}
