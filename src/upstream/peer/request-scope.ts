// The `upstream.request` scope (src/events.ts) as both upstream clients emit it: what the request is, the
// trace context its subscribers hand back, and how it ended.
import { RequestCancelled } from '../../errors.js';
import type { GatewayScopeMap, Outcome as ScopeOutcome } from '../../events.js';
import { asObject, type JsonObject, type Outcome } from '../../jsonrpc.js';

export type UpstreamRequestInfo = GatewayScopeMap['upstream.request'];

/** Only these carrier fields travel upstream: whatever else a propagator adds (baggage) is the client's, not theirs. */
const TRACE_FIELDS = ['traceparent', 'tracestate'] as const;

export function upstreamRequestInfo(upstream: string, method: string, params: JsonObject | undefined): UpstreamRequestInfo {
  const info: UpstreamRequestInfo = { upstream, method, carrier: {} };
  if (method === 'tools/call' && typeof params?.name === 'string') info.tool = params.name;
  return info;
}

/** The carrier's trace-context fields, or undefined when the subscribers added none (tracing off). */
export function traceFields(carrier: Record<string, string>): Record<string, string> | undefined {
  let fields: Record<string, string> | undefined;
  for (const key of TRACE_FIELDS) {
    const value = carrier[key];
    if (typeof value === 'string') (fields ??= {})[key] = value;
  }
  return fields;
}

/**
 * `params` with the trace fields in its `_meta` (the MCP semantic conventions' place for them); the client's own
 * `_meta` keys stay, except a traceparent or tracestate of its own, which the gateway's span replaces.
 */
export function withTraceMeta(params: JsonObject, fields: Record<string, string> | undefined): JsonObject;
export function withTraceMeta(params: JsonObject | undefined, fields: Record<string, string> | undefined): JsonObject | undefined;
export function withTraceMeta(params: JsonObject | undefined, fields: Record<string, string> | undefined): JsonObject | undefined {
  if (fields === undefined) return params;
  return { ...params, _meta: { ...asObject(params?._meta), ...fields } };
}

/** Writes how the request ended into its scope's info (before the scope settles, as the seam asks). */
export function recordOutcome(info: { outcome?: ScopeOutcome; errorCode?: number; errorMessage?: string }, outcome: Outcome): void {
  if ('error' in outcome) {
    info.outcome = outcome.error.code === RequestCancelled ? 'cancelled' : 'error';
    info.errorCode = outcome.error.code;
    info.errorMessage = outcome.error.message;
  } else info.outcome = outcome.result.isError === true ? 'error' : 'ok';
}
