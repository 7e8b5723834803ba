// Every protocol revision of the registry, served from the same shared parts, and what the rest of the gateway asks
// of them together: whose a task is, what every client without a session hears, a cancel from another replica.
import type { GatewayConfig } from '../config/types.js';
import type { GatewayEvents } from '../events.js';
import type { MergedCatalog } from '../gateway/merged-catalog.js';
import { ListCursors, ListPages } from '../gateway/list-pages.js';
import type { ClientSession } from '../gateway/session.js';
import type { JsonObject, JsonRpcNotification } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import type { GatewayParts, ProtocolRevision, RevisionRuntime } from '../protocol/revision.js';
import { creatorOf, notifiedTaskId, REVISIONS, SUPPORTED_VERSIONS } from '../protocol/revisions.js';
import { taskToolDefinitions } from '../protocol/task-tool-definitions.js';
import { CursorCodec, type TaskRecord } from '../store/task-store.js';
import { VERSION } from '../version.js';
import type { Foundation } from './foundation.js';
import type { GatewaySessions } from './sessions.js';
import type { TaskCore } from './task-core.js';

export interface RevisionsDeps {
  config: GatewayConfig;
  logger: Logger;
  events: GatewayEvents;
  foundation: Foundation;
  catalog: MergedCatalog;
  sessions: GatewaySessions;
  taskCore: TaskCore;
}

export interface ServedRevisions {
  /** In the registry's order. */
  readonly entries: readonly { revision: ProtocolRevision; runtime: RevisionRuntime }[];
  /** The list pages every revision serves (a reload changes their size and the gateway's own tools). */
  readonly lists: ListPages;
  /** The revision that created a task: its era is that revision's id, any other is an error (naming the task and era). */
  creatorOf(task: TaskRecord): RevisionRuntime;
  /** Clients without a session hear list changes and resource updates through their revision (listen streams). */
  broadcast(message: JsonRpcNotification): void;
  /** Stops a call of the session running here, in whichever revision runs it; false when none does. */
  cancelHere(session: ClientSession, params: JsonObject): boolean;
}

export function serveRevisions(deps: RevisionsDeps): ServedRevisions {
  const { config, logger, catalog } = deps;
  const { store, replicas, rateLimiter, signingSecret } = deps.foundation;
  const { sessions, relay, streamBudget } = deps.sessions;
  const lists = new ListPages({
    catalog,
    logger,
    pageSize: config.lists.pageSize,
    cursors: new ListCursors(async () => new CursorCodec(await signingSecret())),
    ownTools: taskToolDefinitions(config.tasks.taskTools),
  });
  const parts: GatewayParts = {
    config,
    logger,
    events: deps.events,
    store,
    engine: deps.taskCore.tasks,
    catalog,
    lists,
    taskTools: deps.taskCore.taskTools,
    replicas,
    sessions,
    relay,
    streamBudget,
    notifiedTaskId,
    supportedVersions: SUPPORTED_VERSIONS,
    rateLimiter,
    signingSecret,
    version: VERSION,
  };
  const entries = REVISIONS.map((revision) => ({ revision, runtime: revision.serve(parts) }));
  return {
    entries,
    lists,
    creatorOf: (task) => creatorOf(entries, task).runtime,
    broadcast: (message) => entries.forEach(({ runtime }) => runtime.broadcast(message)),
    cancelHere: (session, params) => entries.some(({ runtime }) => runtime.cancelInflight(session, params)),
  };
}
