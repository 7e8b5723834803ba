// The OpenTelemetry SDK, loaded only when tracing is on (tracing.ts imports this file dynamically). The exporter,
// batch processor, sampler and resource read their standard OTEL_* variables themselves.
import { FastifyOtelInstrumentation } from '@fastify/otel';
import { diag, DiagLogLevel, type DiagLogger } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { FastifyPluginAsync } from 'fastify';
import type { GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import { VERSION } from '../version.js';
import type { Tracing } from './tracing-handle.js';
import { subscribeTracing } from './tracing-spans.js';

/** Probes and scrapes say nothing about MCP traffic: no HTTP spans for them. */
const UNTRACED_PATHS = new Set(['/healthz', '/readyz', '/metrics']);
/**
 * The browser side of per-user consent (issue 41): a span's `url.path` is the request's URL with its query, and these
 * carry what no trace may hold (an authorization code and its state on the callbacks, a connect link's id).
 */
const SECRET_BEARING_PATHS = /^\/(oauth\/|connect\/)/;

export function untraced(url: string): boolean {
  const path = url.split('?')[0] ?? url;
  return UNTRACED_PATHS.has(path) || SECRET_BEARING_PATHS.test(path);
}

export function startTracingSdk(events: GatewayEvents, logger: Logger): Tracing {
  // The SDK's own troubles (an unreachable collector, a refused export) go to the gateway's log, not to stderr.
  diag.setLogger(diagLogger(logger.child({ component: 'tracing' })), { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (envDetector) win over the gateway's own defaults.
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': 'taskgate', 'service.version': VERSION }))
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] });
  // Global context manager (AsyncLocalStorage) and W3C propagator: spans nest across awaits, headers are read.
  provider.register();
  const unsubscribe = subscribeTracing(events, provider.getTracer('taskgate', VERSION));

  const http = new FastifyOtelInstrumentation({
    // The request span only: the MCP span (tracing-spans.ts) says what the handler did, and every span per call
    // costs the call (the bench's --observability row).
    instrumentHooks: false,
    instrumentHandler: false,
    ignorePaths: ({ url }) => untraced(url),
  });
  http.setTracerProvider(provider);
  const instrumentation: FastifyPluginAsync = async (app) => {
    await app.register(http.plugin());
  };
  // Not encapsulated: the HTTP hooks must reach every route of the front.
  Object.assign(instrumentation, { [Symbol.for('skip-override')]: true });

  logger.info({ service: resource.attributes['service.name'] }, 'tracing on: spans go to the OTLP endpoint');
  return {
    instrumentation,
    async close() {
      unsubscribe();
      http.disable();
      await provider.shutdown().catch((error: unknown) => logger.warn({ err: error }, 'could not export the last spans'));
    },
  };
}

function diagLogger(logger: Logger): DiagLogger {
  return {
    error: (message, ...args) => logger.warn({ args }, message),
    warn: (message, ...args) => logger.warn({ args }, message),
    info: (message, ...args) => logger.debug({ args }, message),
    debug: () => undefined,
    verbose: () => undefined,
  };
}
