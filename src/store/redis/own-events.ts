// On one Redis server a script's PUBLISH reaches the subscription before the script's reply reaches the caller; on
// a Redis Cluster the event crosses the cluster bus and may come after. There a write returns only once its own
// event is back, so a watcher added after a write never hears that write late: what a caller has been told and
// what watchers hear stay in one order, as on one server.

/**
 * How long a write waits for its event: a cluster bus hop takes about a millisecond; past this the subscription is
 * down, and the resync after it reconnects tells watchers instead.
 */
const OWN_EVENT_WAIT_MS = 500;
/** Events remembered as arrived before their write's reply (the bus may be quicker than the reply). */
const ARRIVED_REMEMBERED = 256;

/** Matches the events a write published (its reply carries the same fields) with their arrival. */
export class OwnEvents {
  private readonly awaited = new Map<string, (() => void)[]>();
  private readonly early = new Set<string>();

  /** Resolves once the event with `fields` has arrived (or OWN_EVENT_WAIT_MS passed). */
  async back(fields: readonly string[]): Promise<void> {
    const key = JSON.stringify(fields);
    if (this.early.delete(key)) return;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        const left = (this.awaited.get(key) ?? []).filter((other) => other !== done);
        if (left.length > 0) this.awaited.set(key, left);
        else this.awaited.delete(key);
        resolve();
      };
      const timer = setTimeout(done, OWN_EVENT_WAIT_MS);
      this.awaited.set(key, [...(this.awaited.get(key) ?? []), done]);
    });
  }

  /** An event came in on the subscription (after its watchers heard it). */
  arrived(payload: string): void {
    let key: string;
    try {
      key = JSON.stringify(JSON.parse(payload));
    } catch {
      return;
    }
    const waiting = this.awaited.get(key);
    if (waiting?.[0] !== undefined) {
      waiting[0]();
      return;
    }
    // Its write's reply may still be on its way, or it is another replica's: remembered, a bounded few.
    this.early.add(key);
    if (this.early.size > ARRIVED_REMEMBERED) this.early.delete(this.early.values().next().value as string);
  }
}
