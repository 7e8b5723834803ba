// What the Redis store announces (src/events.ts): how long its operations take, which took too long, and when the
// connection went away and came back. The memory store has nothing to announce.
import type { GatewayEvents } from '../events.js';
import type { RedisClient } from './redis-connection.js';
import type { RunScript } from './redis/scripts.js';

/** A script slower than this is announced as `store.slow` (a healthy Redis answers in well under a millisecond). */
export const SLOW_OPERATION_MS = 100;

/**
 * The scripts, timed: each call is a `store.operation` (only while someone listens) and, past SLOW_OPERATION_MS, a
 * `store.slow`. Script names are fixed, so they make bounded labels.
 */
export function timedScripts(run: RunScript, events: GatewayEvents): RunScript {
  return async (name, ...args) => {
    const started = performance.now();
    try {
      return await run(name, ...args);
    } finally {
      const durationMs = performance.now() - started;
      if (events.listened('store.operation')) events.emit('store.operation', { operation: name, durationMs });
      if (durationMs >= SLOW_OPERATION_MS) events.emit('store.slow', { operation: name, durationMs });
    }
  };
}

/**
 * Announces an outage once, at the first connection error, and the end of it once the connection is ready again
 * (with how long it lasted). ioredis reconnects on its own; this only watches.
 */
export function watchConnection(redis: RedisClient, events: GatewayEvents): void {
  let downSince: number | undefined;
  redis.on('error', (error: Error) => {
    if (downSince !== undefined) return;
    downSince = Date.now();
    events.emit('store.unavailable', { error: error.message });
  });
  redis.on('ready', () => {
    if (downSince === undefined) return;
    events.emit('store.back', { outageMs: Date.now() - downSince });
    downSince = undefined;
  });
}
