// Applies a validated configuration to the running gateway (config reload). What is bound at start stays as it
// runs and is logged as needing a restart; upstreams are swapped (upstream-swap.ts), or keep running when only
// what they expose changed (the catalog's selections); policy, access rules, credentials and limits are handed
// to the parts that hold them, for the next request. Clients are told when the merged lists may look different.
import { diffConfigs, type ConfigDiff } from '../config/diff.js';
import type { AuthConfig, GatewayConfig, TasksConfig, UpstreamConfig } from '../config/types.js';
import type { GatewayEvents } from '../events.js';
import type { JsonObject } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import type { TaskEngine } from '../tasks/engine.js';
import type { Upstream, UpstreamMessageSink } from '../upstream/upstream.js';
import { prepareUpstreams, UpstreamConflict } from './upstream-swap.js';

type ListKind = 'tools' | 'prompts' | 'resources';

/** The parts whose settings a reload changes, each through its own small method. */
export interface ReloadableParts {
  /** The live upstream list the catalog reads (changed in place, at once). */
  upstreams: Upstream[];
  /** Takes each upstream's selection (what it exposes, under which names) from the config in force. */
  catalog: { reselect(upstreams: readonly UpstreamConfig[]): void };
  createUpstream(config: UpstreamConfig, sink: UpstreamMessageSink): Upstream;
  upstreamSink: UpstreamMessageSink & { listsChanged(kinds: readonly ListKind[]): void };
  tasks: Pick<TaskEngine, 'reconfigure' | 'drainUpstream'>;
  taskTools: { reconfigure(config: TasksConfig['taskTools']): void };
  lists: { reconfigure(pageSize: number, ownTools: readonly JsonObject[]): void };
  ownTools(config: TasksConfig['taskTools']): readonly JsonObject[];
  /** The protocol revisions served: each takes the settings it holds (access rules, task answers, MRTR). */
  revisions: readonly { reconfigure(config: GatewayConfig, live: ConfigDiff['live']): void }[];
  authenticator: { reconfigure(auth: AuthConfig): void } | undefined;
  rateLimiter: { reconfigure(limits: AuthConfig['rateLimits']): void } | undefined;
}

export interface ReloadResult {
  /** What changed and applies now, in words. */
  changes: string[];
  /** What differs but keeps its running value until a restart, in words. */
  restart: string[];
}

export class ConfigReloader {
  private running: GatewayConfig;
  /** One reload at a time, in the order asked. */
  private queue: Promise<unknown> = Promise.resolve();
  /** Upstreams draining after a reload: shutdown waits for (and cuts short) them. */
  private readonly retiring = new Set<Promise<void>>();

  constructor(
    config: GatewayConfig,
    private readonly parts: ReloadableParts,
    private readonly events: GatewayEvents,
    private readonly logger: Logger,
  ) {
    this.running = config;
  }

  /** The configuration in force. */
  get config(): GatewayConfig {
    return this.running;
  }

  /**
   * Applies `next` (validated by the loader). Rejects with UpstreamConflict, nothing changed, when upstream names
   * would collide.
   */
  reload(next: GatewayConfig): Promise<ReloadResult> {
    const applied = this.queue.then(() => this.apply(next));
    this.queue = applied.catch(() => undefined);
    return applied;
  }

  /** Waits for the upstreams a reload retired to drain and close. */
  async settled(): Promise<void> {
    await Promise.all(this.retiring);
  }

  private async apply(next: GatewayConfig): Promise<ReloadResult> {
    const diff = diffConfigs(this.running, next);
    const { parts } = this;
    let swapped;
    try {
      swapped = await prepareUpstreams({ live: parts.upstreams, next: next.upstreams, changes: diff.upstreams, sink: parts.upstreamSink, create: parts.createUpstream });
    } catch (error) {
      if (!(error instanceof UpstreamConflict)) throw error;
      this.logger.error({ source: next.source, err: error }, `config reload refused, the running config stays: ${error.message}`);
      this.events.emit('config.rejected', { source: next.source, error: error.message });
      throw error;
    }
    // From here nothing can refuse: every part takes its settings in the same tick as the new upstream list.
    parts.upstreams.splice(0, parts.upstreams.length, ...swapped.list);
    parts.catalog.reselect(diff.effective.upstreams);
    swapped.admit();
    this.reconfigure(diff);
    this.running = diff.effective;

    for (const setting of diff.restart) this.logger.warn({ source: next.source, setting }, `config reload: ${setting}; the running value is kept`);
    this.logger.info({ source: next.source, changes: diff.changes, restart: diff.restart }, diff.changes.length > 0 ? 'config reloaded' : 'config reloaded: nothing to apply');
    this.events.emit('config.reloaded', { source: next.source, changes: diff.changes });
    const reselected = parts.upstreams.filter((u) => diff.upstreams.reselected.some((config) => config.name === u.name));
    const kinds = this.listsTouched(diff, [...swapped.started, ...swapped.retired, ...reselected]);
    if (kinds.length > 0) parts.upstreamSink.listsChanged(kinds);
    for (const upstream of swapped.retired) this.retire(upstream, diff.upstreams.removed.includes(upstream.name) ? 'removed from' : 'replaced (its settings changed) in');
    return { changes: diff.changes, restart: diff.restart };
  }

  private reconfigure(diff: ConfigDiff): void {
    const { parts } = this;
    const config = diff.effective;
    if (diff.live.tasks) parts.tasks.reconfigure(config.tasks);
    if (diff.live.taskTools) parts.taskTools.reconfigure(config.tasks.taskTools);
    if (diff.live.taskTools || diff.live.lists) parts.lists.reconfigure(config.lists.pageSize, parts.ownTools(config.tasks.taskTools));
    if (config.auth !== undefined) {
      if (diff.live.credentials) parts.authenticator?.reconfigure(config.auth);
      if (diff.live.rateLimits) parts.rateLimiter?.reconfigure(config.auth.rateLimits);
    }
    for (const revision of parts.revisions) revision.reconfigure(config, diff.live);
    // The root logger's level; loggers already handed to upstreams keep theirs until they are replaced.
    if (diff.live.log) this.logger.level = config.log.level;
  }

  /**
   * Which merged lists may look different now: tools also carry task policy, and access rules filter them all.
   * `swapped`: upstreams that joined, left or now expose something else.
   */
  private listsTouched(diff: ConfigDiff, swapped: readonly Upstream[]): ListKind[] {
    const upstreams = swapped.length > 0 || diff.upstreams.reordered;
    const offered = (capability: string): boolean => swapped.some((u) => u.capabilities[capability] !== undefined);
    const kinds: ListKind[] = [];
    if (upstreams || diff.live.access || diff.live.tasks || diff.live.taskTools) kinds.push('tools');
    if (diff.live.access || (upstreams && offered('prompts'))) kinds.push('prompts');
    if (diff.live.access || (upstreams && offered('resources'))) kinds.push('resources');
    return kinds;
  }

  /** Out of every list already; its running tasks get replicas.drainTimeoutMs, then it is closed. */
  private retire(upstream: Upstream, how: string): void {
    const timeoutMs = this.running.replicas.drainTimeoutMs;
    const message = `Upstream '${upstream.name}' was ${how} the gateway's configuration (config reload) and the task did not finish within replicas.drainTimeoutMs (${timeoutMs} ms)`;
    const done = this.parts.tasks
      .drainUpstream(upstream, timeoutMs, message)
      .then((failed) => {
        if (failed > 0) this.logger.warn({ upstream: upstream.name, failed }, 'tasks of a retired upstream outlasted the drain and failed');
        return upstream.close();
      })
      .catch((error: unknown) => this.logger.warn({ upstream: upstream.name, err: error }, 'closing a retired upstream failed'))
      .finally(() => this.retiring.delete(done));
    this.retiring.add(done);
  }
}
