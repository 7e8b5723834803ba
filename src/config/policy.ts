import type { TaskMode, TaskPolicy, TaskRule, TasksConfig } from './types.js';

// Compiled globs are cached per pattern: resolvePolicy runs on every tools/call and tools/list decoration.
const globCache = new Map<string, RegExp>();

/** `*` matches any run of characters (including none), `?` exactly one; everything else is literal. */
export function globToRegExp(glob: string): RegExp {
  let re = globCache.get(glob);
  if (re === undefined) {
    let source = '';
    for (const ch of glob) {
      if (ch === '*') source += '.*';
      else if (ch === '?') source += '.';
      else source += ch.replace(/[.+^${}()|[\]\\/-]/g, '\\$&');
    }
    re = new RegExp(`^${source}$`, 's');
    globCache.set(glob, re);
  }
  return re;
}

export function globMatches(glob: string, name: string): boolean {
  return globToRegExp(glob).test(name);
}

/** The first rule whose glob matches the exposed tool name, or undefined when only the defaults apply. */
export function matchRule(tasks: TasksConfig, toolName: string): TaskRule | undefined {
  return tasks.rules.find((rule) => globMatches(rule.match, toolName));
}

/** Merges a rule's fields onto the defaults; fields the rule leaves out keep the default. */
export function mergePolicy(defaults: TaskPolicy, rule: TaskRule | undefined): TaskPolicy {
  const policy: TaskPolicy = { ...defaults };
  if (rule === undefined) return policy;
  for (const key of Object.keys(defaults) as (keyof TaskPolicy)[]) {
    const value = rule[key];
    if (value !== undefined) (policy as unknown as Record<string, unknown>)[key] = value;
  }
  // Only rules hold calls for approval: the defaults have no such key to copy over. A held call waits longer than
  // hosts wait for an answer, so its plain callers get a handle to the task unless the rule itself says otherwise.
  if (rule.approval !== undefined) {
    policy.approval = rule.approval;
    policy.plainCalls = rule.plainCalls ?? 'background';
  }
  return policy;
}

/** Effective task policy of one exposed tool: the first matching rule wins, merged onto the defaults. */
export function resolvePolicy(tasks: TasksConfig, toolName: string): TaskPolicy {
  return mergePolicy(tasks.defaults, matchRule(tasks, toolName));
}

/**
 * How long a new task is kept (what the client asked for, else the policy's, never past `maxTtlMs`) and how
 * often its clients are told to poll, in milliseconds.
 */
export function taskTiming(policy: TaskPolicy, requestedTtl: unknown): { retentionMs: number; pollMs: number } {
  // Below 1 ms nothing is asked for (a fraction would floor to a retention of 0): the policy's default.
  const retentionMs = typeof requestedTtl === 'number' && Number.isFinite(requestedTtl) && requestedTtl >= 1
    ? Math.min(Math.floor(requestedTtl), policy.maxTtlMs)
    : Math.min(policy.ttlMs, policy.maxTtlMs);
  return { retentionMs, pollMs: policy.pollIntervalMs };
}

/**
 * The task mode clients that speak tasks see for a tool: the policy's, raised to `required` where the upstream
 * runs the tool only as its own task. An upstream that merely allows tasks asks nothing of the client.
 */
export function effectiveMode(policyMode: TaskMode, upstreamSupport: TaskMode): TaskMode {
  return upstreamSupport === 'required' ? 'required' : policyMode;
}
