// How upstreams join and leave the live list, at start and on config reload, without anyone waiting for them. A new
// (or changed) upstream connects in the background, outside every list and route; when its first attempt ends
// (connected, or not reachable yet and retried like any down upstream) it joins the live list in its configured
// place, taking over from the upstream of the same name it replaces, unless its names collide with the others'
// (then it is refused, stopped, and the collision logged). A newer config that changes or removes it abandons it
// (stopped at once: a child stuck in initialize is killed). Only names known from catalogs collide, so a collision
// is found when the newcomer's catalog is, never earlier; what the running upstreams' catalogs already show
// refuses a reload before anything applies (ConfigReloader).
import type { JsonObject, JsonRpcNotification, JsonRpcRequest, Outcome } from '../jsonrpc.js';
import type { UpstreamConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import type { MessageOrigin, Upstream, UpstreamMessageSink } from '../upstream/life/upstream.js';
import { MergedCatalog } from './merged-catalog.js';

/** A reload the upstreams' names refuse: nothing changed. */
export class UpstreamConflict extends Error {
  readonly code = 'CONFIG';
}

/** How a join ended: in the live list, refused for colliding names (with the collisions), or abandoned. */
export type JoinOutcome = { admitted: Upstream } | { refused: string[] } | { abandoned: true };

export interface JoinOptions {
  /** The live list the catalog reads, changed in place. */
  live: Upstream[];
  /** The upstreams of the configuration in force, in its order (and with its selections). */
  configs(): readonly UpstreamConfig[];
  create(config: UpstreamConfig, sink: UpstreamMessageSink): Upstream;
  sink: UpstreamMessageSink;
  /** It is in the live list now; `replaced` (same name) left it. */
  admitted(upstream: Upstream, replaced: Upstream | undefined): void;
  /** It was refused and is being stopped: `problems` are the collisions it would have brought. */
  refused(upstream: Upstream, problems: string[]): void;
  logger: Logger;
}

interface Joiner {
  upstream: Upstream;
  gate: GatedSink;
}

export class UpstreamJoins {
  private readonly joining = new Map<string, Joiner>();
  /** Why an upstream of the running config is in no list (its names collided), for readiness and the dashboard. */
  private readonly refusedStatus = new Map<string, JsonObject>();
  /** Joiners being stopped (abandoned or refused): shutdown waits for them. */
  private readonly stopping = new Set<Promise<void>>();

  constructor(private readonly options: JoinOptions) {}

  /** Starts connecting `config`'s upstream; it joins the live list when its first attempt ends. */
  join(config: UpstreamConfig): Promise<JoinOutcome> {
    this.abandon(config.name);
    this.refusedStatus.delete(config.name);
    const gate = new GatedSink(this.options.sink);
    const upstream = this.options.create(config, gate);
    const joiner: Joiner = { upstream, gate };
    this.joining.set(config.name, joiner);
    return upstream.start().then(() => this.settle(joiner), (error: unknown) => {
      this.options.logger.error({ upstream: config.name, err: error }, 'starting an upstream failed');
      return this.settle(joiner);
    });
  }

  /** Stops the upstream of that name that is still joining, if one is: a newer config changed or removed it. */
  abandon(name: string, why = 'a newer configuration changed or removed it'): void {
    this.refusedStatus.delete(name);
    const joiner = this.joining.get(name);
    if (joiner === undefined) return;
    this.joining.delete(name);
    this.options.logger.info({ upstream: name }, `upstream still connecting stopped: ${why}`);
    this.stop(joiner.upstream);
  }

  /** The upstream of that name that is still joining. */
  find(name: string): Upstream | undefined {
    return this.joining.get(name)?.upstream;
  }

  /** Upstreams of the running config in no list yet: connecting (state 'starting'), or refused. */
  status(): JsonObject[] {
    return [...[...this.joining.values()].map(({ upstream }) => upstream.status()), ...this.refusedStatus.values()];
  }

  /** Names of the upstreams still connecting. */
  starting(): string[] {
    return [...this.joining.keys()];
  }

  /** Stops every upstream still joining and waits until they (and those being stopped) are gone. */
  async close(): Promise<void> {
    for (const name of [...this.joining.keys()]) this.abandon(name, 'the gateway is shutting down');
    await Promise.all(this.stopping);
  }

  private settle(joiner: Joiner): JoinOutcome {
    const { upstream } = joiner;
    if (this.joining.get(upstream.name) !== joiner) return { abandoned: true };
    this.joining.delete(upstream.name);
    const { live } = this.options;
    const order = this.options.configs().map((config) => config.name);
    const candidate = [...live.filter((u) => u.name !== upstream.name), upstream].sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name));
    // Only what it brings: a collision among the others was reported when it arose.
    const known = new Set(this.collisions(live));
    const problems = this.collisions(candidate).filter((problem) => !known.has(problem));
    if (problems.length > 0) {
      this.refusedStatus.set(upstream.name, { name: upstream.name, transport: upstream.config.transport, state: 'refused', error: problems.join('; ') });
      this.options.refused(upstream, problems);
      this.stop(upstream);
      return { refused: problems };
    }
    const replaced = live.find((u) => u.name === upstream.name);
    live.splice(0, live.length, ...candidate);
    joiner.gate.open();
    this.options.admitted(upstream, replaced);
    return { admitted: upstream };
  }

  private collisions(list: readonly Upstream[]): string[] {
    return new MergedCatalog(list, this.options.configs()).collisions();
  }

  private stop(upstream: Upstream): void {
    const stopped = upstream
      .close()
      .catch((error: unknown) => this.options.logger.warn({ upstream: upstream.name, err: error }, 'stopping an upstream failed'))
      .finally(() => this.stopping.delete(stopped));
    this.stopping.add(stopped);
  }
}

/**
 * What a new upstream sends before it joins goes on, except that its catalog or lists "changed": it is in no list
 * yet, and clients hear of it once it is (the join tells them; later reconnects tell them themselves).
 */
class GatedSink implements UpstreamMessageSink {
  private admitted = false;

  constructor(private readonly sink: UpstreamMessageSink) {}

  open(): void {
    this.admitted = true;
  }

  notification(upstream: Upstream, message: JsonRpcNotification, origin: MessageOrigin): void {
    // Its lists are in no merged list yet: clients hear of them when it joins.
    if (!this.admitted && message.method.endsWith('/list_changed')) return;
    this.sink.notification(upstream, message, origin);
  }

  request(upstream: Upstream, message: JsonRpcRequest, origin: MessageOrigin, signal: AbortSignal): Promise<Outcome> {
    return this.sink.request(upstream, message, origin, signal);
  }

  catalogChanged(upstream: Upstream, reconnected: boolean): void {
    if (this.admitted) this.sink.catalogChanged(upstream, reconnected);
  }
}
