// One upstream call made on behalf of 2026-07-28 clients, across the several HTTP requests MRTR needs: the upstream
// asks the client something, the gateway answers the client's request with an InputRequiredResult and parks the
// call; the client's retry (carrying `inputResponses` and the signed `requestState`) resumes it. A call may also
// be handed to the task engine, which then takes the upstream's questions as task input requests.
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { GatewayError, MethodNotFound, MissingRequiredClientCapability, RequestCancelled } from '../../errors.js';
import { withoutMeta, type JsonObject, type JsonRpcNotification, type Outcome } from '../../jsonrpc.js';
import type { CallContext, ClientFlow, UpstreamCall } from '../../upstream/peer/connection.js';
import { INPUT_REQUEST_CAPABILITY } from '../../mcp.js';
import type { InflightCharge } from '../../tasks/inflight-bytes.js';
import type { ToolCallRequest } from '../../tasks/call-plan.js';
import { canonicalDigest } from '../../tasks/call-digest.js';
import { PendingInputs, type InputRequest } from '../../tasks/pending-inputs.js';
import { withoutRetryFields } from './codec.js';

/** Input requests arriving this close together are answered in one InputRequiredResult. */
const GATHER_MS = 25;

export type ExchangeEvent =
  | { kind: 'outcome'; outcome: Outcome }
  /** The upstream's questions to the client, keyed by input key. */
  | { kind: 'input'; questions: JsonObject }
  | { kind: 'missing_capability'; capability: string; method: string }
  | { kind: 'timeout' };

/** What the task engine supplies when it takes a call over. */
export type TaskAsk = (request: InputRequest, signal: AbortSignal) => Promise<Outcome>;
export type TaskStatus = NonNullable<CallContext['status']>;

/** What the task engine supplies when it takes a call over (tasks/local-run.ts RunHandle). */
export interface TaskRun {
  ask: TaskAsk;
  status: TaskStatus;
  notify(message: JsonRpcNotification): void;
  signal: AbortSignal;
}

export class StatelessExchange {
  readonly id = randomUUID();
  call: UpstreamCall | undefined;
  /** The tool call, should it become a task (its key then makes it once; another replica may run it again). */
  request: ToolCallRequest | undefined;
  /** Notifications go to the HTTP response currently waiting on this call (none while parked). */
  notifySink: ((message: JsonRpcNotification) => void) | undefined;
  /** The room on that response's stream: while it is full, the upstream's output for the call is not read on. */
  sinkFlow: (() => ClientFlow | undefined) | undefined;
  /** Questions the upstream waits on. */
  private readonly pending = new PendingInputs();
  private outcome: Outcome | undefined;
  private missing: { capability: string; method: string } | undefined;
  private wake: (() => void) | undefined;
  /** The task that adopted the call, once one did. */
  private task: TaskRun | undefined;
  /** Rounds answered so far: part of each requestState, so every round's state differs. */
  round = 0;
  /** The authenticated principal whose call this is: only its retry resumes it. */
  owner: string | undefined;
  /** The digest of the params the call was made with (`paramsDigest`): only a retry with the same params resumes it. */
  digest = '';
  /**
   * The bytes of the request that carried the call's arguments: held while the upstream call runs (parked for a
   * retry too, past the request's answer), and by the task that adopts it.
   */
  charge: InflightCharge | undefined;

  constructor(
    readonly sessionId: string,
    private readonly capabilities: JsonObject,
  ) {}

  /** The context the upstream connection relates this call's notifications and requests to. */
  context(): CallContext {
    // Read when a message arrives: the response waiting on the call changes from round to round, and a task has none.
    const flow = (): ClientFlow | undefined => (this.task === undefined ? this.sinkFlow?.() : undefined);
    return {
      sessionId: this.sessionId,
      notify: (message) => (this.task !== undefined ? this.task.notify(message) : this.notifySink?.(message)),
      ask: (request, signal) => this.ask(request, signal),
      // Only a task has a status to show: until the engine adopts the call, the upstream task's status goes nowhere.
      status: (statusMessage) => this.task?.status(statusMessage),
      get flow() {
        return flow();
      },
    };
  }

  start(call: UpstreamCall): void {
    this.call = call;
    const release = this.charge?.hold();
    void call.outcome.then((outcome) => {
      release?.();
      this.outcome = outcome;
      this.wake?.();
    });
  }

  get settled(): boolean {
    return this.outcome !== undefined;
  }

  /** Input requests still waiting for an answer, keyed. */
  outstanding(): JsonObject {
    return this.pending.outstanding();
  }

  /**
   * Waits for what the client must be told next: the upstream's answer, the questions it is waiting on, a
   * question the client cannot answer, or (with a window) that the window passed.
   */
  async next(windowMs: number | undefined): Promise<ExchangeEvent> {
    let timer: NodeJS.Timeout | undefined;
    try {
      for (;;) {
        if (this.outcome !== undefined) return { kind: 'outcome', outcome: this.outcome };
        if (this.missing !== undefined) return { kind: 'missing_capability', ...this.missing };
        if (this.pending.size > 0) {
          // Questions an upstream asks together (several concurrent requests) go out in one result.
          await new Promise((resolve) => setTimeout(resolve, GATHER_MS));
          if (this.outcome !== undefined) continue;
          if (this.pending.size > 0) return { kind: 'input', questions: this.outstanding() };
          continue;
        }
        const woken = new Promise<'woken'>((resolve) => (this.wake = () => resolve('woken')));
        const waits: Promise<'woken' | 'timeout'>[] = [woken];
        if (windowMs !== undefined) {
          clearTimeout(timer);
          waits.push(new Promise((resolve) => (timer = setTimeout(() => resolve('timeout'), windowMs))));
        }
        if ((await Promise.race(waits)) === 'timeout') {
          if (this.outcome === undefined && this.pending.size === 0 && this.missing === undefined) return { kind: 'timeout' };
        }
      }
    } finally {
      clearTimeout(timer);
      this.wake = undefined;
    }
  }

  /**
   * Answers outstanding questions from a retry's answers, keyed by input key; keys the call is not waiting on are
   * ignored. Returns how many were answered.
   */
  answer(answers: JsonObject): number {
    const answered = this.pending.answer(answers);
    if (answered > 0) this.round++;
    return answered;
  }

  /**
   * The task engine takes the call over: later questions become task input requests, and questions already
   * waiting are handed to it as well.
   */
  adopt(task: TaskRun): void {
    this.task = task;
    this.notifySink = undefined;
    this.sinkFlow = undefined;
    for (const input of this.pending.takeAll()) void task.ask(input.request, task.signal).then((outcome) => input.settle(outcome));
  }

  /**
   * Stops the upstream call and answers the questions it was waiting on, so nothing of it stays behind: the
   * upstream's requests would otherwise wait (and be counted as running) until the upstream gave up on them.
   */
  cancel(reason: string): void {
    this.call?.cancel(reason);
    this.pending.settleAll({ error: { code: RequestCancelled, message: `Request cancelled: ${reason}` } });
  }

  private ask(request: InputRequest, signal: AbortSignal): Promise<Outcome> {
    if (this.task !== undefined) return this.task.ask(request, signal);
    const capability = INPUT_REQUEST_CAPABILITY.get(request.method);
    if (capability === undefined) {
      return Promise.resolve({ error: { code: MethodNotFound, message: `taskgate cannot relay ${request.method} to a 2026-07-28 client` } });
    }
    if (this.capabilities[capability] === undefined) {
      // Roots are context a server may ask for at any time (right after connecting, too, and on stdio the gateway
      // cannot tell whether a call asked): refused to the upstream, as a session's client would, not failing the call.
      if (request.method === 'roots/list') {
        return Promise.resolve({ error: { code: MethodNotFound, message: `Client does not support ${request.method} (no '${capability}' capability)` } });
      }
      this.missing = { capability, method: request.method };
      this.wake?.();
      return Promise.resolve({ error: { code: MissingRequiredClientCapability, message: `The client did not declare the '${capability}' capability` } });
    }
    const { answer } = this.pending.ask(request, signal);
    this.wake?.();
    return answer;
  }
}

/** What a requestState binds: the parked call, the round, what was called, and until when it may resume. */
interface RequestStatePayload {
  /** Parked exchange id. */
  x: string;
  /** Round. */
  r: number;
  /** Method and name (tool or prompt name, or resource URI). */
  m: string;
  n: string;
  /** Digest of the request's params (`paramsDigest`): a retry with other arguments is another request. */
  p: string;
  /** Expiry, epoch ms. */
  e: number;
  /** The replica holding the parked call. */
  o: string;
}

/** Signs and checks `requestState`: any replica sharing the store's secret recognises it; nothing can forge it. */
export class RequestStateCodec {
  constructor(private readonly secret: Buffer) {}

  encode(payload: RequestStatePayload): string {
    const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
    return `${body}.${this.sign(body)}`;
  }

  /**
   * The payload, or an invalid-params error for state that was tampered with, is stale, or belongs to another
   * request: another method or name, or other params (`digest`, the retry's `paramsDigest`). The spec asks a server
   * to bind the state to "a digest of its salient parameters" and reject a retry that does not match: the answers
   * it carries were given to questions about the parked call's arguments, and must not resume it for others.
   */
  decode(state: unknown, method: string, name: string, digest: string, now = Date.now()): RequestStatePayload {
    const invalid = (why: string): GatewayError => new GatewayError('invalid_params', `Invalid requestState: ${why}`);
    if (typeof state !== 'string') throw invalid('it must be a string');
    const [body, signature, extra] = state.split('.');
    if (body === undefined || signature === undefined || extra !== undefined) throw invalid('it is malformed');
    const expected = Buffer.from(this.sign(body));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw invalid('it was not issued by this gateway or was modified');
    const payload = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as RequestStatePayload;
    if (payload.m !== method || payload.n !== name) throw invalid('it was issued for a different request');
    if (payload.p !== digest) throw invalid('it was issued for the same request with other params; retry it with the params it was sent with, or send the new request without requestState');
    if (payload.e < now) throw invalid('it has expired');
    return payload;
  }

  private sign(body: string): string {
    return createHmac('sha256', this.secret).update('requestState\0').update(body).digest('base64url');
  }
}

/**
 * What identifies a request's params across its retries: a SHA-256 of their canonical JSON (keys sorted), without
 * `_meta` (a retry may carry another progress token) and the retry's own fields (inputResponses, requestState).
 */
export function paramsDigest(params: JsonObject): string {
  const salient = withoutRetryFields(withoutMeta(params));
  return canonicalDigest(salient);
}

/** Calls waiting for a client's retry; one that is never resumed is cancelled upstream after `parkTimeoutMs`. */
export class ParkedExchanges {
  private readonly parked = new Map<string, { exchange: StatelessExchange; timer: NodeJS.Timeout }>();

  constructor(private parkTimeoutMs: number) {}

  /** A config reload's mrtr.parkTimeoutMs, for exchanges parked from now on. */
  reconfigure(parkTimeoutMs: number): void {
    this.parkTimeoutMs = parkTimeoutMs;
  }

  park(exchange: StatelessExchange): void {
    this.unpark(exchange.id, exchange.owner);
    const timer = setTimeout(() => {
      this.parked.delete(exchange.id);
      exchange.cancel(`the client did not answer its input requests within ${this.parkTimeoutMs} ms`);
    }, this.parkTimeoutMs);
    timer.unref();
    this.parked.set(exchange.id, { exchange, timer });
  }

  /**
   * Takes a parked call back (the retry resumes it); undefined when unknown, expired, on another replica, or
   * another principal's (which leaves it parked for its own).
   */
  unpark(id: string, owner: string | undefined): StatelessExchange | undefined {
    const entry = this.parked.get(id);
    if (entry === undefined || entry.exchange.owner !== owner) return undefined;
    clearTimeout(entry.timer);
    this.parked.delete(id);
    return entry.exchange;
  }

  get size(): number {
    return this.parked.size;
  }

  close(): void {
    for (const { exchange, timer } of this.parked.values()) {
      clearTimeout(timer);
      exchange.cancel('the gateway shut down');
    }
    this.parked.clear();
  }

  deadline(): number {
    return Date.now() + this.parkTimeoutMs;
  }
}
