// Applies a validated configuration to the running gateway (config reload), and keeps the set of upstreams. A reload
// applies in one synchronous step, the moment the file validates: credentials, access rules, rate limits, admins,
// task policy, webhooks and every other setting that needs no upstream connection, and the upstreams that leave (out of
// every list and route at once; their running tasks drain). Added and changed upstreams join in the background
// (upstream-swap.ts): no reload waits for an upstream or for another reload, and the newest file wins (an
// upstream of a superseded file still connecting is stopped). What is bound at start stays as it runs and is
// logged as needing a restart. Clients are told when the merged lists may look different.
import { diffConfigs, type ConfigDiff } from '../config/diff.js';
import type { AuthConfig, GatewayConfig, TasksConfig, UpstreamConfig } from '../config/types.js';
import type { GatewayEvents } from '../events.js';
import type { JsonObject } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import type { TaskEngine } from '../tasks/engine.js';
import type { Upstream, UpstreamMessageSink } from '../upstream/life/upstream.js';
import type { FirstAttempt } from './first-attempts.js';
import { MergedCatalog } from './merged-catalog.js';
import { UpstreamConflict, UpstreamJoins } from './upstream-swap.js';

type ListKind = 'tools' | 'prompts' | 'resources';

/** The parts whose settings a reload changes, each through its own small method. */
export interface ReloadableParts {
  /** The live upstream list the catalog reads (changed in place: at once by a reload, as upstreams join). */
  upstreams: Upstream[];
  /** What lists and lookups wait for while the gateway starts (the start's upstreams' first attempts). */
  firstAttempts?: { begin(attempts: readonly FirstAttempt[]): void };
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
  /** The webhook endpoints and how deliveries are made. */
  webhooks?: { reconfigure(settings: Pick<GatewayConfig, 'webhooks' | 'webhookDelivery'>): void };
}

export interface ReloadResult {
  /** What changed and applies now, in words. */
  changes: string[];
  /** What differs but keeps its running value until a restart, in words. */
  restart: string[];
}

export class ConfigReloader {
  private running: GatewayConfig;
  /** Upstreams draining after a reload: shutdown waits for (and cuts short) them. */
  private readonly retiring = new Set<Promise<void>>();
  private readonly joins: UpstreamJoins;

  constructor(
    config: GatewayConfig,
    private readonly parts: ReloadableParts,
    private readonly events: GatewayEvents,
    private readonly logger: Logger,
  ) {
    this.running = config;
    this.joins = new UpstreamJoins({
      live: parts.upstreams,
      configs: () => this.running.upstreams,
      create: parts.createUpstream,
      sink: parts.upstreamSink,
      logger,
      admitted: (upstream, replaced) => this.admitted(upstream, replaced),
      refused: (upstream, problems) => {
        const error = `upstream '${upstream.name}' is not admitted, its names collide: ${problems.join('; ')}`;
        this.logger.error({ upstream: upstream.name, source: this.running.source, problems }, error);
        this.events.emit('config.rejected', { source: this.running.source, error });
      },
    });
  }

  /**
   * Connects the configured upstreams (the gateway's start); resolves when each has made its first attempt, with
   * the collisions that kept any of them out.
   */
  async startUpstreams(): Promise<string[]> {
    const joins = this.running.upstreams.map((config) => ({ config, attempt: this.joins.join(config) }));
    // Lists and lookups asked meanwhile wait for these, each at most its initializeTimeoutMs.
    this.parts.firstAttempts?.begin(joins.map(({ config, attempt }) => ({ attempt, boundMs: config.initializeTimeoutMs })));
    const outcomes = await Promise.all(joins.map(({ attempt }) => attempt));
    return outcomes.flatMap((outcome) => ('refused' in outcome ? outcome.refused : []));
  }

  /** Upstreams of the configuration in force still connecting, or kept out by colliding names. */
  joiningStatus(): JsonObject[] {
    return this.joins.status();
  }

  /** Names of the upstreams still connecting (readiness at start). */
  starting(): string[] {
    return this.joins.starting();
  }

  /** An upstream in the live list or still joining it, by name (a lost task's run looks it up). */
  upstream(name: string): Upstream | undefined {
    return this.parts.upstreams.find((u) => u.name === name) ?? this.joins.find(name);
  }

  /** The configuration in force. */
  get config(): GatewayConfig {
    return this.running;
  }

  /**
   * Applies `next` (validated by the loader) at once. Rejects with UpstreamConflict, nothing changed, when the
   * running upstreams' catalogs show that the new selections would collide; an added or changed upstream whose
   * names collide is refused when its catalog is known (config.rejected).
   */
  // async: apply runs to its end in this call (it never awaits); a refusal becomes the rejection.
  async reload(next: GatewayConfig): Promise<ReloadResult> {
    return this.apply(next);
  }

  /** Waits for the upstreams a reload retired to drain and close. */
  async settled(): Promise<void> {
    await Promise.all(this.retiring);
  }

  /** Stops the upstreams still joining at once (shutdown: they have no calls to finish); closeJoins waits for them. */
  stopJoining(): void {
    for (const name of this.joins.starting()) this.joins.abandon(name, 'the gateway is shutting down');
  }

  /** Stops the upstreams still joining (shutdown), and waits until they are gone. */
  async closeJoins(): Promise<void> {
    await this.joins.close();
  }

  private apply(next: GatewayConfig): ReloadResult {
    const diff = diffConfigs(this.running, next);
    const { parts } = this;
    const conflict = this.knownCollisions(diff);
    if (conflict.length > 0) {
      const error = new UpstreamConflict(`upstream names collide:\n  ${conflict.join('\n  ')}`);
      this.logger.error({ source: next.source, err: error }, `config reload refused, the running config stays: ${error.message}`);
      this.events.emit('config.rejected', { source: next.source, error: error.message });
      throw error;
    }
    // From here nothing can refuse, and nothing waits: every part takes its settings in this tick.
    const { removed, added, changed } = diff.upstreams;
    for (const name of [...removed, ...changed.map((config) => config.name)]) this.joins.abandon(name);
    const leaving = parts.upstreams.filter((u) => removed.includes(u.name));
    const order = diff.effective.upstreams.map((config) => config.name);
    const staying = parts.upstreams.filter((u) => !leaving.includes(u)).sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name));
    parts.upstreams.splice(0, parts.upstreams.length, ...staying);
    parts.catalog.reselect(diff.effective.upstreams);
    this.reconfigure(diff);
    this.running = diff.effective;

    for (const setting of diff.restart) this.logger.warn({ source: next.source, setting }, `config reload: ${setting}; the running value is kept`);
    const joining = [...added, ...changed].map((config) => config.name);
    this.logger.info({ source: next.source, changes: diff.changes, restart: diff.restart, ...(joining.length > 0 ? { joining } : {}) }, diff.changes.length > 0 ? 'config reloaded' : 'config reloaded: nothing to apply');
    this.events.emit('config.reloaded', { source: next.source, changes: diff.changes });
    const reselected = parts.upstreams.filter((u) => diff.upstreams.reselected.some((config) => config.name === u.name));
    const kinds = this.listsTouched(diff, [...leaving, ...reselected]);
    if (kinds.length > 0) parts.upstreamSink.listsChanged(kinds);
    for (const upstream of leaving) this.retire(upstream, 'removed from');
    for (const config of [...added, ...changed]) void this.joins.join(config);
    return { changes: diff.changes, restart: diff.restart };
  }

  /**
   * Collisions the running upstreams' catalogs already show under the new selections (those that stay; a newcomer's
   * catalog is not known yet), beyond those that exist now.
   */
  private knownCollisions(diff: ConfigDiff): string[] {
    const leaving = new Set([...diff.upstreams.removed, ...diff.upstreams.changed.map((config) => config.name)]);
    const staying = this.parts.upstreams.filter((u) => !leaving.has(u.name));
    const now = new Set(new MergedCatalog(this.parts.upstreams, this.running.upstreams).collisions());
    return new MergedCatalog(staying, diff.effective.upstreams).collisions().filter((problem) => !now.has(problem));
  }

  /** An upstream joined the live list (at start or after a reload): clients hear of it; the one it replaces drains. */
  private admitted(upstream: Upstream, replaced: Upstream | undefined): void {
    const kinds: ListKind[] = ['tools'];
    if ([upstream, replaced].some((u) => u?.capabilities.prompts !== undefined)) kinds.push('prompts');
    if ([upstream, replaced].some((u) => u?.capabilities.resources !== undefined)) kinds.push('resources');
    this.parts.upstreamSink.listsChanged(kinds);
    if (replaced !== undefined) this.retire(replaced, 'replaced (its settings changed) in');
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
    if (diff.live.webhooks) parts.webhooks?.reconfigure(config);
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
