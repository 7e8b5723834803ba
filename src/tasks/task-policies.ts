// The task policy of every tool, as the running configuration says. One holder that every part of the task core
// and the routers read it from, so that a config reload replaces it in one place: tasks created from then on get
// the new policy. A tool's policy is resolved once (rules matched, merged onto the defaults) and kept until the next
// reload: every call reads it.
import { resolvePolicy } from '../config/policy.js';
import type { TaskPolicy, TasksConfig } from '../config/types.js';

/**
 * Tools whose policy is kept resolved. Names reach it from calls and from stored tasks (of tools no upstream lists
 * any more, too), so the map starts over past this many rather than growing with whatever names come.
 */
const MAX_RESOLVED = 1024;

export class TaskPolicies {
  private readonly resolved = new Map<string, Readonly<TaskPolicy>>();

  constructor(private tasks: TasksConfig) {}

  /** The `tasks` section in force (the stored-results budgets and maxResultBytes are read off it). */
  get config(): TasksConfig {
    return this.tasks;
  }

  /** A config reload's task policy. */
  reconfigure(config: TasksConfig): void {
    this.tasks = config;
    this.resolved.clear();
  }

  /** The tool's policy; frozen, as it is shared by every call of the tool until the next reload. */
  policyFor(exposedName: string): Readonly<TaskPolicy> {
    let policy = this.resolved.get(exposedName);
    if (policy === undefined) {
      if (this.resolved.size >= MAX_RESOLVED) this.resolved.clear();
      policy = Object.freeze(resolvePolicy(this.tasks, exposedName));
      this.resolved.set(exposedName, policy);
    }
    return policy;
  }
}
