// Requests the gateway accepts though they bend their revision (src/events.ts `request.lenient`), said in the log
// once per client name and kind: enough for an operator to learn which client does it, without a line per request
// (a client polling a task would write one every second). Every such request is counted in
// taskgate_lenient_requests_total all the same.

import type { GatewayEvents } from '../events.js';

/** Where the lines go (the gateway's pino logger fits). */
export interface LeniencyLogger {
  info(fields: object, message: string): void;
}

/**
 * Client names remembered as already logged. Names come from clients, unchecked: past this many, the set starts
 * again (a name may then be logged a second time) rather than grow with whatever names clients make up.
 */
export const MAX_REMEMBERED_CLIENTS = 1_000;

/** Longest client name written to the log; the rest is cut (the name is the client's, of any length). */
const MAX_NAME_CHARS = 100;

const WHAT: Record<string, string> = {
  missing_mcp_name: 'a 2026-07-28 tasks request without the Mcp-Name header accepted (logged once per client name)',
};

/** Subscribes the log to `request.lenient`; returns what unsubscribes it. */
export function subscribeLeniencyLog(events: GatewayEvents, log: LeniencyLogger, maxRemembered = MAX_REMEMBERED_CLIENTS): () => void {
  const seen = new Set<string>();
  return events.on('request.lenient', (e) => {
    const client = (e.client ?? '').slice(0, MAX_NAME_CHARS);
    const key = `${e.kind}\0${client}`;
    if (seen.has(key)) return;
    if (seen.size >= maxRemembered) seen.clear();
    seen.add(key);
    log.info({ lenient: e.kind, method: e.method, client: e.client === undefined ? null : client }, WHAT[e.kind] ?? `request accepted leniently: ${e.kind}`);
  });
}
