// Upstream protocol violations, said loudly but not endlessly: a server that breaks the protocol on every
// message would otherwise fill the log with one line per message. Every one is counted all the same
// (`upstream.violation`, taskgate_upstream_violations_total): the log is rate-limited, the count is not.
import type { GatewayEvents } from '../../events.js';
import type { Logger } from '../../log.js';

/** Each kind of violation of one upstream is logged at most once per this interval. */
const INTERVAL_MS = 60_000;

const lastLogged = new Map<string, { at: number; unlogged: number }>();

/**
 * The event seam of each upstream's logger. The readers every transport shares (payload.ts, transport.ts) are
 * handed only the logger; registering the upstream's logger once (countViolations) lets what they find be counted
 * without threading the seam through each of them.
 */
const seams = new WeakMap<Logger, GatewayEvents>();

/** From now on, violations warned about on `logger` (exactly this one, not its children) are announced on `events`. */
export function countViolations(logger: Logger, events: GatewayEvents | undefined): Logger {
  if (events !== undefined) seams.set(logger, events);
  return logger;
}

/**
 * Warns that an upstream broke the protocol (`kind`: what, in a few words), naming the upstream (the logger's
 * `upstream` binding) and, for repeats, how many went unlogged since the last warning. Each occurrence is also
 * announced (`upstream.violation`), logged or not, on `events` or the seam registered for the logger.
 */
export function warnViolation(logger: Logger, kind: string, details: Record<string, unknown> = {}, events = seams.get(logger)): void {
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
