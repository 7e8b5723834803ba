// The task policy of every tool, as the running configuration says. One holder that every part of the task core
// and the routers read it from, so that a config reload replaces it in one place: tasks created from then on get
// the new policy.
import { resolvePolicy } from '../config/policy.js';
import type { TaskPolicy, TasksConfig } from '../config/types.js';

export class TaskPolicies {
  constructor(private tasks: TasksConfig) {}

  /** The `tasks` section in force (the stored-results budgets and maxResultBytes are read off it). */
  get config(): TasksConfig {
    return this.tasks;
  }

  /** A config reload's task policy. */
  reconfigure(config: TasksConfig): void {
    this.tasks = config;
  }

  policyFor(exposedName: string): TaskPolicy {
    return resolvePolicy(this.tasks, exposedName);
  }
}
