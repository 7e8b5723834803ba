// What a protocol revision provides to be served, and what it gets from the gateway to do so. Each revision's
// folder has a revision.ts whose one export implements ProtocolRevision; the registry (revisions.ts) lists them.
// These two files and the entries sit above the HTTP front (an entry builds its revision's front) and below the
// composition root (src/taskgate.ts), which builds the shared parts once and hands them to every entry.
import type { GatewayConfig } from '../config/types.js';
import type { ConfigDiff } from '../config/diff.js';
import type { GatewayEvents } from '../events.js';
import type { JsonObject, JsonRpcNotification } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import type { ListPages } from '../gateway/list-pages.js';
import type { MergedCatalog } from '../gateway/merged-catalog.js';
import type { ReplicaLink } from '../gateway/replicas.js';
import type { ClientSession } from '../gateway/session.js';
import type { SessionRelay } from '../gateway/session-relay.js';
import type { SessionRegistry } from '../gateway/sessions.js';
import type { EndpointRevision, FrontContext, RevisionFront } from '../http/mcp-endpoint.js';
import type { StoredCall, TaskRecord, TaskStore } from '../store/task-store.js';
import type { TaskEngine } from '../tasks/engine.js';
import type { TaskCaller } from '../tasks/local-run.js';
import type { RateLimiter } from '../tasks/rate-limits.js';
import type { SessionIdentity } from '../upstream/life/upstream.js';
import type { RevisionId } from '../mcp.js';
import type { StreamBudget } from '../streams/stream-budget.js';
import type { UpstreamAdapter } from '../upstream/peer/adapter.js';
import type { NotifiedTaskId } from '../upstream/peer/client-flow.js';
import type { WireCodec } from './wire-codec.js';
import type { TaskTools } from './task-tools.js';

/** The parts of the gateway every revision is served with, built once by the composition root. */
export interface GatewayParts {
  /** The configuration at start; a reload reaches a revision through RevisionRuntime.reconfigure. */
  config: GatewayConfig;
  logger: Logger;
  events: GatewayEvents;
  store: TaskStore;
  /** The era-neutral task core. */
  engine: TaskEngine;
  /** Every upstream's tools, prompts and resources under the names clients see. */
  catalog: MergedCatalog;
  lists: ListPages;
  /** The gateway's own tools for background tasks. */
  taskTools: TaskTools;
  /** Messages between replicas. */
  replicas: ReplicaLink;
  /** Client sessions (Mcp-Session-Id), shared by every replica, and their streams held on other replicas. */
  sessions: SessionRegistry;
  relay: SessionRelay;
  /** What SSE streams of every revision may hold for clients that do not read. */
  streamBudget: StreamBudget;
  /** The task a task-status notification names, in whichever revision the gateway speaks (streams coalesce by it). */
  notifiedTaskId: NotifiedTaskId;
  /** Every version the gateway speaks, newest first: every entry's `versions`, in the registry's order. */
  supportedVersions: readonly string[];
  /** Per-principal request rates (with `auth`). */
  rateLimiter: RateLimiter | undefined;
  /** The store's shared secret, which signs what one replica hands out and another must recognise. */
  signingSecret(): Promise<Buffer>;
  /** The gateway's version, as its server info says. */
  version: string;
}

/** A revision as the gateway runs it: its front, and what the rest of the gateway asks of it. */
export interface RevisionRuntime {
  front(context: FrontContext): RevisionFront;
  /**
   * A task this revision created, which a replica that died was running, resumed here: whom the run reports to
   * now and the identity its upstream call runs under (`stored`: the one it was stored with).
   */
  resume(task: TaskRecord & { call: StoredCall }, stored: SessionIdentity): Promise<{ caller: TaskCaller; identity: SessionIdentity }>;
  /** A task this revision created was lost (its replica died and it could not be resumed): tell whom it concerns. */
  lost(task: TaskRecord): void;
  /** What upstreams announce to every client without a session: list changes and resource updates. */
  broadcast(notification: JsonRpcNotification): void;
  /** Stops a call of `session` running here that its client cancelled through another replica; false when none runs here. */
  cancelInflight(session: ClientSession, params: JsonObject): boolean;
  /** A config reload: the settings this revision holds that `live` says changed. */
  reconfigure(config: GatewayConfig, live: ConfigDiff['live']): void;
  /** Shutdown: ends what the revision holds open (listen streams, parked calls). */
  close(): void;
}

/** A protocol revision the gateway speaks: how its messages are told, its codec and error edge, how it is served. */
export interface ProtocolRevision extends Omit<EndpointRevision, 'front'> {
  /**
   * Its id, its codec's (`codec.revision`): also the era the tasks it creates are stored with, so that a recovered
   * or lost task goes back to the revision that made it.
   */
  readonly id: RevisionId;
  /** The MCP-Protocol-Version values it serves, newest first. */
  readonly versions: readonly string[];
  /** Its wire shapes (the gateway as a server; the same codec serves the gateway as a client of upstreams). */
  readonly codec: WireCodec;
  /** Its side of an upstream: whether and how the gateway speaks this revision to an upstream as a client. */
  readonly upstream: UpstreamAdapter;
  serve(parts: GatewayParts): RevisionRuntime;
}
