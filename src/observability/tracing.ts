// OpenTelemetry traces, opt-in through the standard OTEL_* variables (tracing-config.ts). A subscriber of the
// event seam like the others: the core never calls it. Every OpenTelemetry package is loaded with import() only
// when tracing is on, so a gateway without OTEL_* starts without them.
import type { GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import { tracingEnabled, unsupportedProtocol } from './tracing-config.js';
import type { Tracing } from './tracing-handle.js';

export type { Tracing } from './tracing-handle.js';

/** Starts tracing when the environment asks for it; undefined (and nothing loaded) when it does not. */
export async function startTracing(events: GatewayEvents, logger: Logger, env: NodeJS.ProcessEnv = process.env): Promise<Tracing | undefined> {
  if (!tracingEnabled(env)) return undefined;
  const unsupported = unsupportedProtocol(env);
  if (unsupported !== undefined) logger.warn(unsupported);
  const { startTracingSdk } = await import('./tracing-sdk.js');
  return startTracingSdk(events, logger);
}
