// The task core and what hears it: webhook deliveries of task and approval events (issue 34), the engine (leases,
// slots, runs, recovery of lost tasks), and the gateway's own task tools.
import type { GatewayConfig } from '../config/types.js';
import type { GatewayEvents } from '../events.js';
import type { Lifecycle } from '../lifecycle.js';
import type { Logger } from '../log.js';
import { ANONYMOUS_PRINCIPAL } from '../principals.js';
import type { RevisionRuntime } from '../protocol/revision.js';
import { TaskTools } from '../protocol/task-tools.js';
import type { TaskRecord } from '../store/task-store.js';
import { TaskEngine, type RecoveryDeps } from '../tasks/engine.js';
import { Webhooks } from '../webhooks/webhooks.js';
import type { Foundation } from './foundation.js';

export interface TaskCoreDeps {
  config: GatewayConfig;
  logger: Logger;
  events: GatewayEvents;
  foundation: Foundation;
  /** The live upstream a lost task's call runs on again (the upstream set, built later). */
  upstream: RecoveryDeps['upstream'];
  /** The revision that created a task (served later); throws for an era no revision here serves. */
  creatorOf(task: TaskRecord): RevisionRuntime;
}

export interface TaskCore {
  tasks: TaskEngine;
  taskTools: TaskTools;
  webhooks: Webhooks;
}

/**
 * Webhooks start first: subscribed before anything can emit one of their events, and stopped after the tasks
 * drained (their ends are queued too). The engine starts later ('task engine'), once what its runs need is up.
 */
export async function startTaskCore(life: Lifecycle, deps: TaskCoreDeps): Promise<TaskCore> {
  const { config, logger, events } = deps;
  const { store, replicas, rateLimiter, acting, consent } = deps.foundation;
  const webhooks = new Webhooks({ webhooks: config.webhooks, webhookDelivery: config.webhookDelivery }, { store, events, logger, replica: replicas.id, leaseMs: config.replicas.leaseMs });
  await life.start({ name: 'webhooks', start: () => webhooks.start(), stop: () => webhooks.close() });
  const callers = { authenticated: config.auth !== undefined, rateLimiter };
  const tasks = new TaskEngine({ store, config: config.tasks, logger, replica: config.replicas, peers: replicas, recovery: recoveryOf(deps), callers, events, acting, ...(consent !== undefined && { consent }) });
  const taskTools = new TaskTools(tasks, config.tasks.taskTools, logger, events);
  return { tasks, taskTools, webhooks };
}

/**
 * A lost task runs again for whoever created it, as the revision it was created in says; its call runs under the
 * identity it was stored with (or one that revision gives it). A task of an era no revision here serves cannot: the
 * throw fails it as lost (leases.ts logs why), before any of its bytes are held.
 */
function recoveryOf({ config, logger, foundation, upstream, creatorOf }: TaskCoreDeps): RecoveryDeps {
  return {
    upstream,
    resume: async (task) => {
      const created = creatorOf(task);
      const stored = { clientInfo: undefined, ...task.call.identity };
      // Its arguments are held here again: charged to whom its request was (whatever the budgets say: it was accepted).
      const principal = config.auth === undefined ? ANONYMOUS_PRINCIPAL : task.principal;
      const bytes = foundation.inflight.force(principal, Buffer.byteLength(JSON.stringify(task.call.params)));
      return { ...(await created.resume(task, stored)), bytes };
    },
    lost: (task) => {
      try {
        creatorOf(task).lost(task);
      } catch (error) {
        logger.error({ task: task.taskId, err: error }, 'a lost task was failed, but no revision here can tell whom it concerns');
      }
    },
  };
}
