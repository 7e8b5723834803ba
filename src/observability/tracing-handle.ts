import type { FastifyPluginAsync } from 'fastify';

/** What the gateway holds of running tracing. */
export interface Tracing {
  /** Registered on the front before anything else, so an incoming `traceparent` header parents the MCP spans. */
  readonly instrumentation: FastifyPluginAsync;
  /** Stops listening, exports what is buffered and shuts the SDK down. */
  close(): Promise<void>;
}
