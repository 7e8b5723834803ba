// Spans for the event seam's scopes, named and attributed as the OpenTelemetry semantic conventions for MCP say:
// a SERVER span per client request and a CLIENT span per upstream request, `{mcp.method.name} {target}`; a task's
// run is a trace of its own, linked to the request that created it.
import {
  context,
  createContextKey,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Link,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import type { GatewayEvents, GatewayScopeMap, Outcome } from '../events.js';
import { TracingLinks } from './tracing-links.js';

/** taskgate's own attributes, next to the conventions'. */
export const ATTR_UPSTREAM = 'taskgate.upstream';
export const ATTR_TASK_ID = 'taskgate.task.id';
export const ATTR_TASK_ATTEMPT = 'taskgate.task.attempt';
export const ATTR_TASK_STATUS = 'taskgate.task.status';

/** The task whose run is the active context: upstream requests made for it carry its id. */
const RUNNING_TASK = createContextKey('taskgate task');

type Ending = { outcome?: Outcome; errorCode?: number; errorMessage?: string };

/** Subscribes the tracer to the seam; the returned function unsubscribes. */
export function subscribeTracing(events: GatewayEvents, tracer: Tracer): () => void {
  const links = new TracingLinks();
  const stops = [
    // Emitted synchronously inside the creating request: the active span is that request's.
    events.on('task.created', ({ taskId }) => {
      const span = trace.getActiveSpan();
      if (span === undefined) return;
      span.setAttribute(ATTR_TASK_ID, taskId);
      links.remember(taskId, span.spanContext());
    }),
    events.on('task.ended', ({ taskId }) => links.forget(taskId)),
    events.around('mcp.request', (info, next) => {
      const ambient = context.active();
      // The conventions: a context the client put in params._meta parents the span; the transport's (the HTTP
      // request's span) is then linked. Without one, the HTTP request's span is the parent.
      const fromMeta = info.carrier === undefined ? undefined : propagation.extract(ROOT_CONTEXT, info.carrier);
      const metaParent = fromMeta === undefined ? undefined : trace.getSpanContext(fromMeta);
      const httpSpan = trace.getSpanContext(ambient);
      const parent = metaParent !== undefined && fromMeta !== undefined ? fromMeta : ambient;
      const spanLinks: Link[] = metaParent !== undefined && httpSpan !== undefined ? [{ context: httpSpan }] : [];
      const span = tracer.startSpan(spanName(info.method, info.target), { kind: SpanKind.SERVER, attributes: requestAttributes(info), links: spanLinks }, parent);
      return ended(span, () => requestEndAttributes(info), info, context.with(trace.setSpan(ambient, span), next));
    }),
    events.around('upstream.request', (info, next) => {
      const active = context.active();
      const attributes: Attributes = { 'mcp.method.name': info.method, [ATTR_UPSTREAM]: info.upstream };
      if (info.tool !== undefined) Object.assign(attributes, { 'gen_ai.tool.name': info.tool, 'gen_ai.operation.name': 'execute_tool' });
      const taskId = info.taskId ?? (active.getValue(RUNNING_TASK) as string | undefined);
      if (taskId !== undefined) attributes[ATTR_TASK_ID] = taskId;
      const span = tracer.startSpan(spanName(info.method, info.tool), { kind: SpanKind.CLIENT, attributes }, active);
      const inner = trace.setSpan(active, span);
      // The upstream's server span becomes this span's child: its context goes in _meta (and HTTP headers).
      propagation.inject(inner, info.carrier);
      return ended(span, () => ({}), info, context.with(inner, next));
    }),
    events.around('task.run', (info, next) => {
      const created = links.take(info.taskId);
      const span = tracer.startSpan(`task.run ${info.tool}`, {
        root: true,
        kind: SpanKind.INTERNAL,
        links: created === undefined ? [] : [{ context: created }],
        attributes: { [ATTR_TASK_ID]: info.taskId, 'gen_ai.tool.name': info.tool, [ATTR_UPSTREAM]: info.upstream, [ATTR_TASK_ATTEMPT]: info.attempt },
      });
      const inner = trace.setSpan(ROOT_CONTEXT, span).setValue(RUNNING_TASK, info.taskId);
      const work = context.with(inner, next);
      return work.then(
        (value) => {
          if (info.outcome !== undefined) span.setAttribute(ATTR_TASK_STATUS, info.outcome);
          if (info.outcome === 'failed') span.setStatus({ code: SpanStatusCode.ERROR, message: 'the task failed' });
          span.end();
          return value;
        },
        (error: unknown) => failed(span, error),
      );
    }),
  ];
  return () => {
    for (const stop of stops) stop();
  };
}

/** `{mcp.method.name} {target}` for tools and prompts; resource URIs stay out of names (unbounded cardinality). */
function spanName(method: string, target: string | undefined): string {
  return target !== undefined && (method === 'tools/call' || method === 'prompts/get') ? `${method} ${target}` : method;
}

function requestAttributes(info: GatewayScopeMap['mcp.request']): Attributes {
  const attributes: Attributes = {
    'mcp.method.name': info.method,
    'mcp.protocol.version': info.protocolVersion,
    'network.protocol.name': 'http',
    'network.transport': 'tcp',
  };
  if (info.sessionId !== undefined) attributes['mcp.session.id'] = info.sessionId;
  if (info.requestId !== undefined && info.requestId !== null) attributes['jsonrpc.request.id'] = String(info.requestId);
  if (info.target !== undefined) {
    if (info.method === 'tools/call') Object.assign(attributes, { 'gen_ai.tool.name': info.target, 'gen_ai.operation.name': 'execute_tool' });
    else if (info.method === 'prompts/get') attributes['gen_ai.prompt.name'] = info.target;
    else if (info.method.startsWith('resources/')) attributes['mcp.resource.uri'] = info.target;
  }
  return attributes;
}

/** What the core learned while answering: the upstream that served it, the task it created or named. */
function requestEndAttributes(info: GatewayScopeMap['mcp.request']): Attributes {
  const attributes: Attributes = {};
  if (info.upstream !== undefined) attributes[ATTR_UPSTREAM] = info.upstream;
  if (info.taskId !== undefined) attributes[ATTR_TASK_ID] = info.taskId;
  return attributes;
}

/** Ends `span` when `work` settles, with the outcome the core wrote into the scope's info. */
function ended<T>(span: Span, endAttributes: () => Attributes, info: Ending, work: Promise<T>): Promise<T> {
  return work.then(
    (value) => {
      span.setAttributes(endAttributes());
      const errorType = errorTypeOf(info);
      if (errorType !== undefined) {
        span.setAttribute('error.type', errorType);
        if (info.errorCode !== undefined) span.setAttribute('rpc.response.status_code', String(info.errorCode));
        span.setStatus(info.errorMessage === undefined ? { code: SpanStatusCode.ERROR } : { code: SpanStatusCode.ERROR, message: info.errorMessage });
      }
      span.end();
      return value;
    },
    (error: unknown) => failed(span, error),
  );
}

/** The conventions' `error.type`: the JSON-RPC code, `tool_error` for a tool result with isError. */
function errorTypeOf(info: Ending): string | undefined {
  if (info.errorCode !== undefined) return String(info.errorCode);
  if (info.outcome === 'error') return 'tool_error';
  if (info.outcome === 'cancelled') return 'cancelled';
  return undefined;
}

function failed(span: Span, error: unknown): never {
  const exception = error instanceof Error ? error : new Error(String(error));
  span.recordException(exception);
  span.setAttribute('error.type', exception.name === 'Error' ? '_OTHER' : exception.name);
  span.setStatus({ code: SpanStatusCode.ERROR, message: exception.message });
  span.end();
  throw error;
}
