// Reading an upstream's catalog again because a client named something it did not list. The gateway forwards
// only listed names, so a tool the upstream added since its last list (before or without `list_changed`) would
// be refused; one refresh on such a miss lets it through. Misses are the client's to make, as many as it likes,
// so the refreshes they cause are bounded: one in flight per upstream, which every miss meanwhile waits for,
// and none started sooner than MISS_REFRESH_INTERVAL_MS after the last one began.
import type { ListAsker, Upstream } from '../upstream/life/upstream.js';

/** The least time between two catalog refreshes of one upstream that clients' misses cause. */
export const MISS_REFRESH_INTERVAL_MS = 2_000;

export class ListedRefresh {
  private readonly running = new WeakMap<Upstream, Promise<void>>();
  private readonly lastStarted = new WeakMap<Upstream, number>();

  constructor(private readonly intervalMs = MISS_REFRESH_INTERVAL_MS) {}

  /**
   * Resolves once the upstream's catalog is as fresh as this bound allows: after the refresh in flight, after a
   * new one, or at once when one began within the interval (or the upstream is not up to be asked). Never
   * rejects: a failed refresh leaves the catalog as it was, and the name unknown. `asker`: whose own connection
   * may be read (a per-principal upstream lists over the asker's child).
   */
  after(upstream: Upstream, asker?: ListAsker): Promise<void> {
    // Nothing is known until the asker's own child answers: started (or its failure thrown) as its call would be,
    // which the child pool already does once at a time per principal.
    if (asker !== undefined && upstream.awaitsFirstChild) return upstream.refreshListed(asker);
    const running = this.running.get(upstream);
    if (running !== undefined) return running;
    const last = this.lastStarted.get(upstream);
    const now = Date.now();
    if (upstream.state !== 'ready' || (last !== undefined && now - last < this.intervalMs)) return Promise.resolve();
    this.lastStarted.set(upstream, now);
    const refresh = upstream
      .refreshListed(asker)
      .catch(() => undefined) // the upstream logs its own failed refresh
      .finally(() => this.running.delete(upstream));
    this.running.set(upstream, refresh);
    return refresh;
  }
}
