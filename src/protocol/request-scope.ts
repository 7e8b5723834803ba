// The `mcp.request` scope (src/events.ts) as both revisions' routers emit it around each client request: what it
// asks for, then how it ended, which upstream served it and which task it created or named.
import { RequestCancelled } from '../errors.js';
import type { GatewayEvents, GatewayScopeMap } from '../events.js';
import { asObject, type JsonObject, type JsonRpcRequest, type Outcome } from '../jsonrpc.js';
import type { GatewayCatalog } from './ports.js';
import type { WireCodec } from './wire-codec.js';

export type McpRequestInfo = GatewayScopeMap['mcp.request'];

/** What the scope of a router's requests needs: where they are announced, who serves them, and its revision's codec. */
export interface RequestScope {
  events: GatewayEvents;
  catalog: GatewayCatalog;
  codec: WireCodec;
}

/**
 * Runs `answer` inside the `mcp.request` scope; `outcomeOf` reads the outcome from what it resolves (undefined:
 * no response is owed, the client cancelled). Without a subscriber it is a direct call, and no info is built.
 */
export function inRequestScope<T>(
  scope: RequestScope,
  describe: () => McpRequestInfo,
  outcomeOf: (answer: T) => Outcome | undefined,
  answer: () => Promise<T>,
): Promise<T> {
  const { events } = scope;
  if (!events.wrapped('mcp.request')) return answer();
  const info = describe();
  return events.scope('mcp.request', info, async () => {
    const answered = await answer();
    recordRequestOutcome(info, outcomeOf(answered), scope);
    return answered;
  });
}

/** What a request asks for; `codec` (its revision's) reads the task id a tasks/* request names. */
export function requestInfo(request: JsonRpcRequest, session: { sessionId?: string | undefined; protocolVersion: string }, codec: WireCodec): McpRequestInfo {
  const params = request.params ?? {};
  const info: McpRequestInfo = { method: request.method, protocolVersion: session.protocolVersion, requestId: request.id };
  if (session.sessionId !== undefined) info.sessionId = session.sessionId;
  const target = targetOf(request.method, params);
  if (target !== undefined) info.target = target;
  const taskId = request.method.startsWith('tasks/') ? codec.taskIdOf(params) : undefined;
  if (typeof taskId === 'string') info.taskId = taskId;
  const carrier = traceContextOf(asObject(params._meta));
  if (carrier !== undefined) info.carrier = carrier;
  return info;
}

/** The tool, prompt or resource a request names, as the client named it. */
function targetOf(method: string, params: JsonObject): string | undefined {
  if (method === 'tools/call' || method === 'prompts/get') return typeof params.name === 'string' ? params.name : undefined;
  if (method.startsWith('resources/') && typeof params.uri === 'string') return params.uri;
  return undefined;
}

/** The W3C trace-context fields a client sent in `_meta` (the MCP semantic conventions' place for them). */
function traceContextOf(meta: JsonObject | undefined): Record<string, string> | undefined {
  if (typeof meta?.traceparent !== 'string') return undefined;
  const carrier: Record<string, string> = { traceparent: meta.traceparent };
  if (typeof meta.tracestate === 'string') carrier.tracestate = meta.tracestate;
  return carrier;
}

function recordRequestOutcome(info: McpRequestInfo, outcome: Outcome | undefined, { catalog, codec }: RequestScope): void {
  const upstream = upstreamOf(info, catalog);
  if (upstream !== undefined) info.upstream = upstream;
  if (outcome === undefined) {
    info.outcome = 'cancelled';
    return;
  }
  if ('error' in outcome) {
    info.outcome = outcome.error.code === RequestCancelled ? 'cancelled' : 'error';
    info.errorCode = outcome.error.code;
    info.errorMessage = outcome.error.message;
    return;
  }
  info.outcome = outcome.result.isError === true ? 'error' : 'ok';
  // A task creation, in the shape of the router's revision.
  const created = codec.createdTask(outcome.result);
  if (created !== undefined) info.taskId = created.taskId;
}

/** The upstream that serves what the request names (none for the gateway's own tools and methods). */
function upstreamOf(info: McpRequestInfo, catalog: GatewayCatalog): string | undefined {
  const target = info.target;
  if (target === undefined) return undefined;
  if (info.method === 'tools/call') return catalog.route('tools', target)?.upstream.name;
  if (info.method === 'prompts/get') return catalog.route('prompts', target)?.upstream.name;
  return catalog.routeUri(target)?.name;
}
