// What a config reload changes, in words, and what it may change at all. Some settings are bound when the process
// starts (the listening socket, the store, stream and session bounds, the pages that are registered): a new value
// for them is reported as needing a restart and the running one stays. Everything else applies to new requests.
import { isDeepStrictEqual } from 'node:util';
import type { AuthConfig, GatewayConfig, UpstreamConfig } from './types.js';

/** Sections bound at start: a change is logged as needing a restart and the running value stays. */
const RESTART_SECTIONS = ['listen', 'store', 'sessions', 'sse', 'replicas', 'metrics', 'dashboard'] as const;

/** Most key paths named for one section before the rest is summed up. */
const MAX_PATHS = 8;

export interface UpstreamChanges {
  added: readonly UpstreamConfig[];
  removed: readonly string[];
  /** Same name, other settings: a new upstream takes over and the old one drains. */
  changed: readonly UpstreamConfig[];
  /**
   * Same name and connection settings, another selection (`tools`, `prompts`, `resources`): the running upstream
   * stays (its calls and tasks go on) and only what it exposes changes.
   */
  reselected: readonly UpstreamConfig[];
  /** Only the order of the upstreams differs (which orders merged lists). */
  reordered: boolean;
}

/** Which live parts a reload touches. */
export interface LiveChanges {
  tasks: boolean;
  taskTools: boolean;
  access: boolean;
  /** API keys, OAuth settings, admin access. */
  credentials: boolean;
  rateLimits: boolean;
  lists: boolean;
  mrtr: boolean;
  log: boolean;
  shutdown: boolean;
  /**
   * `identity` (issuer, signing or sealing keys): applies to what is signed, sealed or opened from now on. An
   * upstream's own `auth` is part of its connection settings, so a change to it is an upstream change, like `headers`.
   */
  identity: boolean;
  /** `webhooks` or `webhookDelivery`: the endpoints told of events, and how deliveries are made. */
  webhooks: boolean;
}

export interface ConfigDiff {
  /** What applies live, in words (key paths only: values may be secrets). */
  changes: string[];
  /** What differs but needs a restart, in words; the running values stay. */
  restart: string[];
  upstreams: UpstreamChanges;
  live: LiveChanges;
  /** The configuration in force once applied: `next`, with what needs a restart kept as it runs. */
  effective: GatewayConfig;
}

export function diffConfigs(running: GatewayConfig, next: GatewayConfig): ConfigDiff {
  const restart: string[] = [];
  for (const section of RESTART_SECTIONS) {
    for (const path of changedPaths(running[section], next[section], section)) restart.push(`${path} needs a restart`);
  }
  const auth = effectiveAuth(running.auth, next.auth, restart);
  const effective: GatewayConfig = Object.freeze({
    ...next,
    ...Object.fromEntries(RESTART_SECTIONS.map((section) => [section, running[section]])),
    auth,
  });

  const upstreams = diffUpstreams(running.upstreams, next.upstreams);
  const changes: string[] = [
    ...upstreams.added.map((u) => `upstream '${u.name}' added`),
    ...upstreams.removed.map((name) => `upstream '${name}' removed`),
    ...upstreams.changed.map((u) => {
      const before = running.upstreams.find((r) => r.name === u.name);
      return `upstream '${u.name}' changed (${changedPaths(before, u, '').map((p) => p.replace(/^\./, '')).join(', ')})`;
    }),
    ...upstreams.reselected.map((u) => {
      const before = running.upstreams.find((r) => r.name === u.name);
      return `upstream '${u.name}' selection changed (${changedPaths(selectionOf(before), selectionOf(u), '').map((p) => p.replace(/^\./, '')).join(', ')})`;
    }),
  ];
  if (upstreams.reordered) changes.push('upstream order changed');

  const differs = (path: string, a: unknown, b: unknown): boolean => {
    const paths = changedPaths(a, b, path);
    if (paths.length > 0) changes.push(`${paths.join(', ')} changed`);
    return paths.length > 0;
  };
  const before = running.auth;
  // Every comparison runs (each adds its words), then the flags are read.
  const tasks = [
    differs('tasks.defaults', running.tasks.defaults, effective.tasks.defaults),
    differs('tasks.rules', running.tasks.rules, effective.tasks.rules),
    differs('tasks.immediateResponse', running.tasks.immediateResponse, effective.tasks.immediateResponse),
  ];
  const taskTools = differs('tasks.taskTools', running.tasks.taskTools, effective.tasks.taskTools);
  const access = differs('auth.access', before?.access, auth?.access);
  const credentials = [
    differs('auth.apiKeys', before?.apiKeys, auth?.apiKeys),
    differs('auth.oauth', before?.oauth, auth?.oauth),
    differs('auth.admin', before?.admin, auth?.admin),
  ];
  const live: LiveChanges = {
    tasks: tasks.includes(true),
    taskTools,
    access,
    credentials: credentials.includes(true),
    rateLimits: differs('auth.rateLimits', before?.rateLimits, auth?.rateLimits),
    lists: differs('lists', running.lists, effective.lists),
    mrtr: differs('mrtr', running.mrtr, effective.mrtr),
    log: differs('log', running.log, effective.log),
    shutdown: differs('shutdownTimeoutMs', running.shutdownTimeoutMs, effective.shutdownTimeoutMs),
    identity: differs('identity', running.identity, effective.identity),
    webhooks: [differs('webhooks', running.webhooks, effective.webhooks), differs('webhookDelivery', running.webhookDelivery, effective.webhookDelivery)].includes(true),
  };
  return { changes, restart, upstreams, live, effective };
}

/**
 * Auth as it can run: turning authentication on or off, or moving the resource (whose metadata pages are
 * registered at start), needs a restart; keys, OAuth, access rules and limits apply live.
 */
function effectiveAuth(running: AuthConfig | undefined, next: AuthConfig | undefined, restart: string[]): AuthConfig | undefined {
  if ((running === undefined) !== (next === undefined)) {
    restart.push(`auth ${next === undefined ? 'removed' : 'added'}: needs a restart`);
    return running;
  }
  if (running === undefined || next === undefined) return undefined;
  if (running.resource === next.resource) return next;
  restart.push('auth.resource needs a restart');
  return Object.freeze({ ...next, resource: running.resource });
}

function diffUpstreams(running: readonly UpstreamConfig[], next: readonly UpstreamConfig[]): UpstreamChanges {
  const names = new Set(running.map((u) => u.name));
  const nextNames = new Set(next.map((u) => u.name));
  const kept = next.filter((u) => names.has(u.name)).map((u) => u.name);
  const before = (u: UpstreamConfig): UpstreamConfig | undefined => running.find((r) => r.name === u.name);
  const changed = next.filter((u) => {
    const was = before(u);
    return was !== undefined && !isDeepStrictEqual(withoutSelection(was), withoutSelection(u));
  });
  return {
    added: next.filter((u) => !names.has(u.name)),
    removed: running.filter((u) => !nextNames.has(u.name)).map((u) => u.name),
    changed,
    reselected: next.filter((u) => {
      const was = before(u);
      return was !== undefined && !changed.includes(u) && !isDeepStrictEqual(selectionOf(was), selectionOf(u));
    }),
    reordered: !isDeepStrictEqual(kept, running.filter((u) => nextNames.has(u.name)).map((u) => u.name)),
  };
}

/** What an upstream exposes: a reload changes it without reconnecting. */
function selectionOf(u: UpstreamConfig | undefined): Pick<UpstreamConfig, 'tools' | 'prompts' | 'resources'> {
  return { tools: u?.tools, prompts: u?.prompts, resources: u?.resources };
}

function withoutSelection(u: UpstreamConfig): Omit<UpstreamConfig, 'tools' | 'prompts' | 'resources'> {
  const { tools: _tools, prompts: _prompts, resources: _resources, ...settings } = u;
  return settings;
}

/** The key paths under `path` whose values differ (leaves of objects; lists as a whole), at most MAX_PATHS. */
export function changedPaths(a: unknown, b: unknown, path: string): string[] {
  if (isDeepStrictEqual(a, b)) return [];
  const paths: string[] = [];
  const walk = (x: unknown, y: unknown, at: string): void => {
    if (isDeepStrictEqual(x, y)) return;
    if (isPlainObject(x) && isPlainObject(y)) {
      for (const key of new Set([...Object.keys(x), ...Object.keys(y)])) walk(x[key], y[key], `${at}.${key}`);
    } else paths.push(at);
  };
  walk(a, b, path);
  if (paths.length <= MAX_PATHS) return paths;
  return [...paths.slice(0, MAX_PATHS), `${paths.length - MAX_PATHS} more under ${path}`];
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
