// Upstream protocol violations, said loudly but not endlessly: a server that breaks the protocol on every
// message would otherwise fill the log with one line per message. Every one is counted all the same
// (`upstream.violation`, taskgate_upstream_violations_total): the log is rate-limited, the count is not.
import type { GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';

/** Each kind of violation of one upstream is logged at most once per this interval. */
const INTERVAL_MS = 60_000;

const lastLogged = new Map<string, { at: number; unlogged: number }>();

/**
 * Warns that an upstream broke the protocol (`kind`: what, in a few words), naming the upstream (the logger's
 * `upstream` binding) and, for repeats, how many went unlogged since the last warning. With `events`, each
 * occurrence is also announced (`upstream.violation`), logged or not.
 */
export function warnViolation(logger: Logger, kind: string, details: Record<string, unknown> = {}, events?: GatewayEvents): void {
  const upstream = logger.bindings().upstream as string | undefined;
  events?.emit('upstream.violation', { ...(upstream === undefined ? {} : { upstream }), what: kind });
  const key = `${String(upstream ?? '')}\0${kind}`;
  const now = Date.now();
  const seen = lastLogged.get(key);
  if (seen !== undefined && now - seen.at < INTERVAL_MS) {
    seen.unlogged++;
    return;
  }
  logger.warn({ ...details, violation: kind, ...(seen?.unlogged ? { unloggedSinceLast: seen.unlogged } : {}) }, `upstream protocol violation: ${kind}`);
  lastLogged.set(key, { at: now, unlogged: 0 });
}
