// Waiting in tests: for an event the gateway announces, bounded only against hangs (a hang fails the test instead
// of stalling the suite; the bound asserts nothing about time).
import type { GatewayEventMap, GatewayEventName, GatewayEvents } from '../../src/events.js';

export const HANG_MS = 60_000;

/** Rejects when `promise` has not settled within `ms`. */
export function bounded<T>(promise: Promise<T>, what: string, ms = HANG_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`hung waiting for ${what}`)), ms)));
  return Promise.race([promise, hang]).finally(() => clearTimeout(timer));
}

/** The next `name` event for which `matches` holds. */
export function nextEvent<K extends GatewayEventName>(events: GatewayEvents, name: K, matches: (payload: GatewayEventMap[K]) => boolean = () => true): Promise<GatewayEventMap[K]> {
  return new Promise((resolve) => {
    const stop = events.on(name, (payload) => {
      if (!matches(payload)) return;
      stop();
      resolve(payload);
    });
  });
}
