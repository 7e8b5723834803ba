// The gateway as a client of upstreams that speak 2026-07-28: every request is its own POST carrying the envelope and the
// MCP headers; the answer is JSON or an SSE stream of notifications ending with the response.
import { request, type Agent, type Dispatcher } from 'undici';
import { GatewayError, sendFailure, upstreamMessageTooLarge, upstreamViolation, InternalError, MethodNotFound, RequestCancelled } from '../../../errors.js';
import { asObject, encodeMessage, isNotification, validateMessage, type JsonObject, type JsonRpcErrorObject, type JsonRpcNotification, type Outcome } from '../../../jsonrpc.js';
import { NO_EVENTS, type GatewayEvents } from '../../../events.js';
import type { Logger } from '../../../log.js';
import { mcpNameField, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION, paramHeaders } from '../../../mcp.js';
import { codec, inputRequestsOf, retryParams, STATELESS_VERSION } from '../codec.js';
import * as answers from '../../../upstream/peer/answers.js';
import { staticCredentials, type CredentialSource, type PassThroughOptions } from '../../../upstream/peer/adapter.js';
import { refusalMessage } from '../../../upstream/transports/http-refusal.js';
import { upstreamDispatcher } from '../../../upstream/transports/http-agent.js';
import type { Outbound, OutboundDispatchOptions } from '../../../upstream/transports/outbound.js';
import { readBodyStart } from '../../../upstream/transports/body-reader.js';
import type { CallContext, UpstreamCall } from '../../../upstream/peer/connection.js';
import { warnViolation } from '../../../upstream/transports/violations.js';
import { MessageTooLargeError } from '../../../upstream/transports/oversized.js';
import { decodePayload, describeUnanswered, readHttpPayload } from '../../../upstream/transports/payload.js';
import { recordOutcome, traceFields, upstreamRequestInfo, withTraceMeta } from '../../../upstream/peer/request-scope.js';
import { readSse } from '../../../upstream/transports/sse-reader.js';
import { holdReadable } from '../../../upstream/transports/transport.js';

/**
 * How one request goes out: the pass-through options of the contract (adapter.ts), whose `tool` gives the
 * `Mcp-Param-*` headers its schema asks for and whose `clientFlow` stops the answer being read while the client's
 * stream is full.
 */
export interface StatelessRequestOptions extends PassThroughOptions {
  /** What the request authenticates with; none: the upstream's configured headers. */
  credentials?: CredentialSource | undefined;
}

/** Header values outside visible ASCII (or that look like the sentinel) travel base64-wrapped (SEP-2243). */
export function encodeHeaderValue(value: string): string {
  const plain = /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(value) && !value.startsWith('=?base64?');
  return plain ? value : `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=`;
}

export interface StatelessUpstreamClientOptions {
  upstreamName: string;
  url: string;
  headers: Readonly<Record<string, string>>;
  agent: Agent;
  logger: Logger;
  clientInfo: JsonObject;
  /** Largest message taken from the upstream (a JSON body, one SSE event); past it the request fails, alone. */
  maxMessageBytes: number;
  /** Where each request is announced (`upstream.request`); its subscribers' trace context goes with it. */
  events?: GatewayEvents | undefined;
  /** What a task the upstream created looks like, in every revision the gateway speaks; none: in this one. */
  createdTaskId?: answers.CreatedTaskId | undefined;
}

export class StatelessUpstreamClient {
  private nextId = 1;
  readonly upstreamName: string;
  private readonly url: string;
  /**
   * The upstream's pool, through which every request gets its credential (its options' own, else the configured
   * headers), the refresh after a 401 and its trace context (outbound.ts).
   */
  private readonly dispatcher: Dispatcher;
  private readonly logger: Logger;
  private readonly clientInfo: JsonObject;
  private readonly maxMessageBytes: number;
  private readonly events: GatewayEvents;
  readonly createdTaskId: answers.CreatedTaskId;

  constructor(options: StatelessUpstreamClientOptions) {
    this.upstreamName = options.upstreamName;
    this.url = options.url;
    this.dispatcher = upstreamDispatcher(options.agent, staticCredentials(options.headers));
    this.logger = options.logger;
    this.clientInfo = options.clientInfo;
    this.maxMessageBytes = options.maxMessageBytes;
    this.events = options.events ?? NO_EVENTS;
    this.createdTaskId = options.createdTaskId ?? ((result) => codec.createdTask(result)?.taskId);
  }

  /** The envelope of requests the gateway makes for itself (discovery, catalog, listen). */
  ownEnvelope(): JsonObject {
    return { [META_PROTOCOL_VERSION]: STATELESS_VERSION, [META_CLIENT_CAPABILITIES]: {}, [META_CLIENT_INFO]: this.clientInfo };
  }

  /** `params` must already carry `_meta` with an envelope (the client's, or ownEnvelope()). */
  request(method: string, params: JsonObject, options: StatelessRequestOptions = {}): Promise<Outcome> {
    // Without a subscriber (tracing off) the request goes straight out: no scope, nothing added to it.
    if (!this.events.wrapped('upstream.request')) return this.deliver(method, params, options, undefined);
    const info = upstreamRequestInfo(this.upstreamName, method, params);
    return this.events.scope('upstream.request', info, async () => {
      const fields = traceFields(info.carrier);
      const outcome = await this.deliver(method, withTraceMeta(params, fields), options, fields);
      recordOutcome(info, outcome);
      return outcome;
    });
  }

  private async deliver(method: string, params: JsonObject, options: StatelessRequestOptions, traceHeaders: Record<string, string> | undefined): Promise<Outcome> {
    // A timer of its own, not AbortSignal.timeout: composed with AbortSignal.any, that signal is held weakly on
    // Node 20 and never fires once garbage-collected, so the deadline would silently go.
    const deadline = new AbortController();
    const timer = options.timeoutMs
      ? setTimeout(() => deadline.abort(new DOMException(`No answer within ${options.timeoutMs} ms`, 'TimeoutError')), options.timeoutMs)
      : undefined;
    try {
      const signal = options.signal === undefined ? deadline.signal : AbortSignal.any([options.signal, deadline.signal]);
      return await this.send(method, params, options, signal, traceHeaders);
    } finally {
      clearTimeout(timer);
    }
  }

  private async send(method: string, params: JsonObject, options: StatelessRequestOptions, signal: AbortSignal, traceHeaders: Record<string, string> | undefined): Promise<Outcome> {
    const id = this.nextId++;
    let response;
    try {
      const body = encodeMessage({ jsonrpc: '2.0', id, method, params });
      const outbound: Outbound | undefined = options.credentials === undefined && traceHeaders === undefined ? undefined : { credentials: options.credentials, traceHeaders };
      const sent: Omit<OutboundDispatchOptions, 'origin' | 'path'> & { dispatcher: Dispatcher; signal: AbortSignal } = {
        method: 'POST',
        dispatcher: this.dispatcher,
        signal,
        headers: this.requestHeaders(method, params, options.tool),
        body,
        outbound,
      };
      response = await request(this.url, sent);
    } catch (error) {
      return { error: this.failure(error, method, options).toJsonRpc() };
    }
    if (response.statusCode === 401 || response.statusCode === 403) {
      const refusal = refusalMessage(response.statusCode, response.headers['www-authenticate'], await readBodyStart(response.body, 300));
      return { error: new GatewayError('upstream_unavailable', `Upstream '${this.upstreamName}' refused ${method}: ${refusal}`, { upstream: this.upstreamName }).toJsonRpc() };
    }
    const contentType = String(response.headers['content-type'] ?? '');
    // Notifications before the answer are relayed as they come, whatever the framing; the answer ends the call.
    const answer = new StatelessAnswer(this, method, id, params);
    let outcome: Outcome | undefined;
    const take = (items: unknown[]): void => {
      for (const item of items) {
        const refused = refusalOf(item);
        const message = refused === undefined ? validateMessage(item) : 'refused';
        if (refused !== undefined) {
          // JSON-RPC's id null: a server that could not take the request at all (an SDK v1 server asked
          // server/discover answers HTTP 400 so). Each POST carries one request: this is its answer, no violation.
          this.logger.debug({ method, status: response.statusCode, error: refused }, 'the upstream refused the request (an error with id null)');
          outcome ??= { error: refused };
        } else if (typeof message === 'string') warnViolation(this.logger, 'an invalid JSON-RPC message', { problem: message }, this.events);
        else if (isNotification(message)) {
          const cancelled = outcome === undefined ? answer.notification(message) : undefined;
          if (cancelled === undefined) options.onNotification?.(message);
          else {
            outcome = cancelled;
            response.body.destroy(); // the upstream will not answer: the call fails now, not when the stream ends
          }
        } else if ('id' in message && ('result' in message || 'error' in message)) {
          const taken = answer.response(message.id, 'result' in message ? { result: message.result } : { error: message.error }, outcome !== undefined);
          outcome ??= taken;
        }
      }
    };
    try {
      if (contentType.includes('text/event-stream')) {
        let firstData: string | undefined;
        const read = await readSse(
          response.body,
          (event) => {
            firstData ??= event.data;
            take(decodePayload(event.data, this.logger));
            // What the client has not taken yet waits here: stop reading until it drains.
            const flow = options.clientFlow?.();
            if (flow?.full) holdReadable(response.body, flow.drained());
          },
          { maxEventBytes: this.maxMessageBytes },
        );
        if (outcome !== undefined) return outcome;
        if (read.oversized !== undefined) throw new MessageTooLargeError(this.maxMessageBytes, read.oversized.head);
        if (answer.stray !== undefined) return { error: answer.strayError() };
        if (read.error !== undefined) throw read.error;
        const what = firstData === undefined ? 'no events' : `first event's data began ${JSON.stringify(firstData.slice(0, 120))}`;
        throw new UnansweredError(this.upstreamName, method, `the stream ended without one: HTTP ${response.statusCode}, Content-Type '${contentType}', ${what}`);
      }
      const payload = await readHttpPayload(response.body, contentType, response.headers['content-length'], this.maxMessageBytes, this.logger);
      take(payload.items);
      if (outcome !== undefined) return outcome;
      if (answer.stray !== undefined) return { error: answer.strayError() };
      warnViolation(this.logger, 'a body without the JSON-RPC response', { method, status: response.statusCode, contentType, start: payload.start }, this.events);
      throw new UnansweredError(this.upstreamName, method, describeUnanswered(response.statusCode, contentType, payload.start));
    } catch (error) {
      return { error: this.failure(error, method, options).toJsonRpc() };
    }
  }

  /**
   * A call whose InputRequiredResults the gateway resolves itself: each round's questions go to `context.ask`
   * (a client without MRTR, or a task's input requests), and the call is retried with the answers until it completes.
   */
  callResolvingInput(method: string, params: JsonObject, context: CallContext, options: StatelessRequestOptions = {}): UpstreamCall {
    const abort = new AbortController();
    const outcome = (async (): Promise<Outcome> => {
      let current = params;
      for (let round = 0; round < 100; round++) {
        const answer = await this.request(method, current, { ...options, onNotification: (m) => context.notify(m), clientFlow: () => context.flow, signal: abort.signal });
        const questions = 'error' in answer ? undefined : inputRequestsOf(answer.result);
        if ('error' in answer || questions === undefined) return answer;
        // Keys are the upstream's: collected as entries, since assigning `__proto__` to an object would not add a key.
        const answered = await Promise.all(
          Object.entries(questions).map(async ([key, value]): Promise<[string, JsonObject] | undefined> => {
            const input = asObject(value) ?? {};
            const asked: { method: string; params?: JsonObject } = { method: String(input.method) };
            const askedParams = asObject(input.params);
            if (askedParams !== undefined) asked.params = askedParams;
            const reply = await context.ask(asked, abort.signal);
            return 'result' in reply ? [key, reply.result] : undefined;
          }),
        );
        const responses: JsonObject = Object.fromEntries(answered.filter((entry) => entry !== undefined));
        if (abort.signal.aborted) return { error: { code: RequestCancelled, message: 'Request cancelled' } };
        current = retryParams(params, responses, answer.result);
      }
      return { error: { code: InternalError, message: `Upstream '${this.upstreamName}' kept asking for input (100 rounds)` } };
    })();
    return { upstreamId: 0, outcome, cancel: (reason) => abort.abort(new Error(reason)) };
  }

  /**
   * Keeps a subscriptions/listen stream open for the gateway (list changes), reopening it after drops, until
   * `signal` aborts. An upstream that answers -32601 does not offer listen streams: it is not asked again (the
   * caller starts a new listen when the upstream reconnects), and the log says so once.
   */
  async listen(filter: JsonObject, onNotification: (message: JsonRpcNotification) => void, signal: AbortSignal): Promise<void> {
    let failures = 0;
    while (!signal.aborted) {
      const started = Date.now();
      const outcome = await this.request('subscriptions/listen', { notifications: filter, _meta: this.ownEnvelope() }, { onNotification, signal });
      if (signal.aborted) return;
      if ('error' in outcome && outcome.error.code === MethodNotFound) {
        this.logger.info({ code: outcome.error.code, reason: outcome.error.message }, 'upstream does not offer subscriptions/listen: its list changes are not followed until it reconnects');
        return;
      }
      failures = Date.now() - started > 10_000 ? 0 : failures + 1;
      const delay = Math.min(30_000, 500 * 2 ** Math.min(failures, 6));
      this.logger.debug({ delay }, 'upstream listen stream ended; reopening');
      await new Promise((resolve) => setTimeout(resolve, delay).unref());
    }
  }

  private requestHeaders(method: string, params: JsonObject, tool: JsonObject | undefined): Record<string, string> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': STATELESS_VERSION,
      'mcp-method': method,
    };
    const field = mcpNameField(method);
    const name = field === undefined ? undefined : params[field];
    if (typeof name === 'string') headers['mcp-name'] = encodeHeaderValue(name);
    const args = asObject(params.arguments);
    for (const { property, header } of paramHeaders(tool)) {
      const value = args?.[property];
      if (value !== undefined && value !== null) headers[header] = encodeHeaderValue(String(value));
    }
    return headers;
  }

  /** Logs (rate-limited) and counts a violation of this upstream. */
  violation(kind: string, details: Record<string, unknown>): void {
    warnViolation(this.logger, kind, details, this.events);
  }

  private failure(error: unknown, method: string, options: StatelessRequestOptions): GatewayError {
    if (options.signal?.aborted) return new GatewayError('upstream_unavailable', 'Request cancelled');
    if (error instanceof MessageTooLargeError) {
      warnViolation(this.logger, 'a message larger than maxMessageBytes', { maxMessageBytes: error.limit, method, head: error.head.slice(0, 200) }, this.events);
      return upstreamMessageTooLarge(this.upstreamName, error.limit);
    }
    if (error instanceof UnansweredError) {
      return new GatewayError('upstream_unavailable', error.message, { upstream: this.upstreamName });
    }
    if (error instanceof Error && error.name === 'TimeoutError') {
      return new GatewayError('upstream_timeout', `Upstream '${this.upstreamName}' did not answer ${method} within ${options.timeoutMs} ms`, { upstream: this.upstreamName });
    }
    return sendFailure(this.upstreamName, error);
  }
}

/** An upstream answer that held no JSON-RPC response to the request: the call fails, saying what came instead. */
class UnansweredError extends Error {
  constructor(upstream: string, method: string, what: string) {
    super(`Upstream '${upstream}' answered ${method} without a JSON-RPC response (${what})`);
    this.name = 'UnansweredError';
  }
}

/** The error of a JSON-RPC error response with id null (the server could not take the request), if `item` is one. */
function refusalOf(item: unknown): JsonRpcErrorObject | undefined {
  const value = asObject(item);
  const error = asObject(value?.error);
  if (value?.jsonrpc !== '2.0' || value.id !== null || 'method' in value || typeof error?.code !== 'number' || typeof error.message !== 'string') return undefined;
  return error as unknown as JsonRpcErrorObject;
}

/**
 * The answers of one 2026-07-28 POST checked as answers.ts says: its one request's id, once, a task only if the
 * request asked for one; the upstream's notifications/cancelled for it fails it at once. The POST is the request's
 * own stream, so an answer with another id is the request's wrong-id answer.
 */
class StatelessAnswer {
  /** The id of an answer with another id, if one came. */
  stray: unknown;

  constructor(
    private readonly client: StatelessUpstreamClient,
    private readonly method: string,
    private readonly id: number,
    private readonly params: JsonObject,
  ) {}

  /** The outcome a notification settles the request with (the upstream cancelled it), if any. */
  notification(message: JsonRpcNotification): Outcome | undefined {
    if (message.method !== 'notifications/cancelled' || message.params?.requestId !== this.id) return undefined;
    this.client.violation(answers.CANCELLED_OWN_REQUEST, { method: this.method, failedCall: this.id });
    return { error: this.error(answers.CANCELLED_OWN_REQUEST, answers.cancelledText(this.method)) };
  }

  /** The outcome an answer settles the request with, if it does (the first with the request's id). */
  response(id: unknown, outcome: Outcome, settled: boolean): Outcome | undefined {
    if (id !== this.id) {
      // After the answer, another is nobody's; before it, it is the request's answer with a wrong id.
      if (settled) this.client.violation(answers.UNSOLICITED_RESPONSE, { id, method: this.method });
      else {
        this.stray = id;
        this.client.violation(answers.WRONG_ID, { id, method: this.method });
      }
      return undefined;
    }
    if (settled) {
      this.client.violation(answers.DUPLICATE_RESPONSE, { id, method: this.method });
      return undefined;
    }
    const taskId = 'result' in outcome && !answers.asksForTask(this.params) ? this.client.createdTaskId(outcome.result) : undefined;
    if (taskId === undefined) return outcome;
    this.client.violation(answers.UNASKED_TASK, { method: this.method, failedCall: this.id });
    return { error: this.error(answers.UNASKED_TASK, answers.unaskedTaskText(this.method, taskId)) };
  }

  strayError(): JsonRpcErrorObject {
    return this.error(answers.WRONG_ID, answers.wrongIdText(this.stray, true));
  }

  private error(kind: string, what: string): JsonRpcErrorObject {
    return upstreamViolation(this.client.upstreamName, kind, what).toJsonRpc();
  }
}
