// The upstreams' part of a config reload. Added and changed upstreams connect before anything changes (not
// reachable yet: retried in the background, as at start), and their names are checked with those that stay: a
// collision refuses the whole reload. Only then does the live list change at once, so a request sees either the
// old set or the new one. Removed and replaced upstreams leave the lists and routes right away; their running
// tasks get replicas.drainTimeoutMs to finish before the upstream is closed.
import type { JsonRpcNotification, JsonRpcRequest, Outcome } from '../jsonrpc.js';
import type { UpstreamConfig } from '../config/types.js';
import type { UpstreamChanges } from '../config/diff.js';
import type { MessageOrigin, Upstream, UpstreamMessageSink } from '../upstream/upstream.js';
import { MergedCatalog } from './merged-catalog.js';

/** A reload the upstreams' names refuse: nothing changed. */
export class UpstreamConflict extends Error {
  readonly code = 'CONFIG';
}

export interface PreparedUpstreams {
  /** The live list to be, in the new config's order. */
  list: Upstream[];
  /** Connected for this reload (added, or replacing a changed one). */
  started: Upstream[];
  /** Leave with this reload: removed, or replaced by a changed one. */
  retired: Upstream[];
  /** Lets the started ones tell clients about their catalogs from now on. */
  admit(): void;
}

/**
 * Connects what the reload adds or changes and checks the names of the whole new set; throws UpstreamConflict
 * (the new connections closed again) when two upstreams would expose one name.
 */
export async function prepareUpstreams(options: {
  live: readonly Upstream[];
  next: readonly UpstreamConfig[];
  changes: UpstreamChanges;
  sink: UpstreamMessageSink;
  create: (config: UpstreamConfig, sink: UpstreamMessageSink) => Upstream;
}): Promise<PreparedUpstreams> {
  const { live, next, changes } = options;
  const gate = new GatedSink(options.sink);
  const started = [...changes.added, ...changes.changed].map((config) => options.create(config, gate));
  await Promise.all(started.map((u) => u.start()));
  const list = next.map((config) => started.find((u) => u.name === config.name) ?? (live.find((u) => u.name === config.name) as Upstream));
  const collisions = new MergedCatalog(list, next).collisions(); // with the new selections of the upstreams that stay
  if (collisions.length > 0) {
    await Promise.all(started.map((u) => u.close()));
    throw new UpstreamConflict(`upstream names collide:\n  ${collisions.join('\n  ')}`);
  }
  return { list, started, retired: live.filter((u) => !list.includes(u)), admit: () => gate.open() };
}

/**
 * What a new upstream sends before the reload admits it goes on, except that its catalog "changed": it is in
 * no list yet, and clients hear of it once it is (the reload tells them; later reconnects tell them themselves).
 */
class GatedSink implements UpstreamMessageSink {
  private admitted = false;

  constructor(private readonly sink: UpstreamMessageSink) {}

  open(): void {
    this.admitted = true;
  }

  notification(upstream: Upstream, message: JsonRpcNotification, origin: MessageOrigin): void {
    this.sink.notification(upstream, message, origin);
  }

  request(upstream: Upstream, message: JsonRpcRequest, origin: MessageOrigin, signal: AbortSignal): Promise<Outcome> {
    return this.sink.request(upstream, message, origin, signal);
  }

  catalogChanged(upstream: Upstream, reconnected: boolean): void {
    if (this.admitted) this.sink.catalogChanged(upstream, reconnected);
  }
}
