// What a request may take once its principal is known: the bytes of its body, charged against the in-flight
// budgets before the body is read (tasks/inflight-bytes.ts), and the SSE streams a principal holds open on this
// replica (`sessions.maxStreamsPerPrincipal`).
import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { GatewayError, retryAfterHeaders } from '../errors.js';
import type { GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import { InflightBudgetFull, type Charge, type InflightBytes, type InflightCharge } from '../tasks/inflight-bytes.js';
import { ANONYMOUS_PRINCIPAL, type Caller } from '../principals.js';
import { callerOf } from './credentials-guard.js';
import { discardBody, type Refusal, type RequestHeaders } from './replies.js';
import { RateLimitedWarning } from './warnings.js';

/** Streams free when clients close them, which cannot be foreseen: refused clients try again after this. */
const STREAM_RETRY_AFTER_MS = 5_000;

/**
 * Whom a request's bytes and streams are counted against: its authenticated principal, or without `auth` one
 * anonymous principal for every client. Anonymous clients cannot be told apart (an address is shared behind NAT
 * and proxies, and one client has many), and a principal per session would let a client multiply its budget by
 * opening sessions; so without `auth` the per-principal bounds are what all clients share.
 */
export function admissionPrincipal(caller: Caller | undefined): string {
  return caller?.principal ?? ANONYMOUS_PRINCIPAL;
}

interface BodyCharge {
  charge: Charge;
  /** The request's own hold: given back when its handler is done, or with its response if no handler ran. */
  release: () => void;
  handling: boolean;
  /** Charged the largest body accepted, its length not being declared: lowered once it is read. */
  estimated: boolean;
}

export interface AdmissionDeps {
  inflight: InflightBytes;
  /** listen.maxBodyBytes: a chunked body is charged this much until it is read. */
  maxBodyBytes: number;
  /** sessions.maxStreamsPerPrincipal (0 = unlimited). */
  maxStreamsPerPrincipal: number;
  logger: Logger;
  /** Where refusals are announced (rate.limited). */
  events: GatewayEvents;
  /** The error edge that answers a request refused unread: the revision its headers name (mcp-endpoint.ts: refusalFor). */
  refusalFor(headers: RequestHeaders): Refusal;
}

export class Admission {
  private readonly bodies = new WeakMap<FastifyRequest, BodyCharge>();
  private readonly streams = new Map<string, number>();
  private readonly warnings = { bytes: new Map<string, RateLimitedWarning>(), streams: new RateLimitedWarning() };
  private readonly inflight: InflightBytes;
  private readonly maxBodyBytes: number;
  private readonly maxStreamsPerPrincipal: number;
  private readonly logger: Logger;
  private readonly events: GatewayEvents;
  private readonly refusalFor: (headers: RequestHeaders) => Refusal;

  constructor(deps: AdmissionDeps) {
    this.refusalFor = deps.refusalFor;
    this.inflight = deps.inflight;
    this.maxBodyBytes = deps.maxBodyBytes;
    this.maxStreamsPerPrincipal = deps.maxStreamsPerPrincipal;
    this.logger = deps.logger;
    this.events = deps.events;
  }

  /**
   * The MCP endpoint's request hook: charges the body before it is read, and refuses the request unread (drained,
   * not reset) when a budget cannot take it. What it returns is the reply it sent, or undefined to go on.
   */
  readonly admit = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    try {
      this.chargeBody(request, reply.raw, admissionPrincipal(callerOf(request)));
      return undefined;
    } catch (error) {
      if (!(error instanceof InflightBudgetFull)) throw error;
      await discardBody(request);
      // No message has been read: the revision the headers name answers, without a request id.
      const { status, body } = this.refusalFor(request.headers)(null, error);
      return reply.code(status).headers(retryAfterHeaders(body.error.data)).type('application/json').send(JSON.stringify(body));
    }
  };

  /**
   * Charges the body a request is about to send to `principal`, before it is read (its Content-Length, or the
   * largest body accepted when it is chunked); throws InflightBudgetFull when a budget cannot take it. A body
   * larger than listen.maxBodyBytes is not charged: it is refused with 413 unread.
   */
  chargeBody(request: FastifyRequest, response: ServerResponse, principal: string): void {
    const length = request.headers['content-length'];
    const chunked = length === undefined && request.headers['transfer-encoding'] !== undefined;
    const declared = chunked ? this.maxBodyBytes : Number(length ?? 0);
    if (!Number.isSafeInteger(declared) || declared <= 0 || declared > this.maxBodyBytes) return;
    let admitted: ReturnType<InflightBytes['admit']>;
    try {
      admitted = this.inflight.admit(principal, declared);
    } catch (error) {
      if (error instanceof InflightBudgetFull) this.refusedBytes(error, principal);
      throw error;
    }
    const { charge, release } = admitted;
    const body: BodyCharge = { charge, release, handling: false, estimated: chunked };
    this.bodies.set(request, body);
    response.once('close', () => {
      if (!body.handling) release();
    });
  }

  /** The body was read: a chunked one's charge comes down to its size. */
  bodyRead(request: FastifyRequest, text: string): void {
    const body = this.bodies.get(request);
    if (body?.estimated === true) body.charge.shrinkTo(Buffer.byteLength(text));
  }

  /**
   * Runs a request's handler with its charge, which holders beyond the handler (a task, a parked call) hold
   * themselves; the request's own hold goes when the handler is done.
   */
  async handling<T>(request: FastifyRequest, handle: (charge: InflightCharge | undefined) => Promise<T>): Promise<T> {
    const body = this.bodies.get(request);
    if (body === undefined) return handle(undefined);
    body.handling = true;
    try {
      return await handle(body.charge);
    } finally {
      body.release();
    }
  }

  /**
   * Counts an SSE stream `principal` opens on `response` (until it closes); throws too_many_streams when the
   * principal holds `sessions.maxStreamsPerPrincipal` here already. Counted per replica: a stream is this
   * replica's socket and buffer, and counting in the store would cost a round trip on every streamed answer.
   */
  openStream(principal: string, response: ServerResponse): void {
    if (response.destroyed) return; // the client is gone: nothing will stream
    const open = this.streams.get(principal) ?? 0;
    const limit = this.maxStreamsPerPrincipal;
    if (limit > 0 && open >= limit) {
      this.warnings.streams.warn(this.logger, { principal, maxStreamsPerPrincipal: limit }, 'streams refused: sessions.maxStreamsPerPrincipal are open');
      this.events.emit('rate.limited', { principal, limit: 'maxStreamsPerPrincipal', retryAfterMs: STREAM_RETRY_AFTER_MS });
      throw new GatewayError(
        'too_many_streams',
        `Too many open streams: '${principal}' holds ${open} on this gateway replica (sessions.maxStreamsPerPrincipal: ${limit}); close one (a GET or listen stream, or wait for a streamed answer to end) and retry`,
        { retryAfterMs: STREAM_RETRY_AFTER_MS },
      );
    }
    this.streams.set(principal, open + 1);
    response.once('close', () => {
      const left = (this.streams.get(principal) ?? 1) - 1;
      if (left > 0) this.streams.set(principal, left);
      else this.streams.delete(principal);
    });
  }

  private refusedBytes(error: InflightBudgetFull, principal: string): void {
    const { budget, retryAfterMs } = error.data as { budget: string; retryAfterMs: number };
    let warning = this.warnings.bytes.get(budget);
    if (warning === undefined) this.warnings.bytes.set(budget, (warning = new RateLimitedWarning()));
    warning.warn(this.logger, { principal, budget }, `requests refused: ${budget} is full`);
    // The bound's own name (maxInflightBytes, maxInflightBytesPerPrincipal), as the other limits are named.
    this.events.emit('rate.limited', { principal, limit: budget.slice(budget.lastIndexOf('.') + 1), retryAfterMs });
  }
}
