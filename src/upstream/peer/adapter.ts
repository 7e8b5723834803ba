// The seam between one upstream's connection life (upstream.ts: transports, the control connection, reconnects,
// per-session connections) and the protocol revisions it may speak. Each revision folder provides an
// UpstreamAdapter (src/protocol/rev*/upstream/), which its registry entry brings along; the list of them
// (src/protocol/revisions.ts: UPSTREAM_ADAPTERS) is handed to every Upstream by the composition root, so nothing in
// src/upstream/ knows a revision by name.
//
// Every call carries an UpstreamCaller: whose session it runs in, for whom (its principal), and what its requests
// authenticate with (caller-identity.ts makes them from the upstream's `auth`: issue 33). The interceptor of the
// upstream's HTTP client asks them per request (transports/outbound.ts); transports never do.
import type { Agent } from 'undici';
import type { TaskMode, UpstreamConfig } from '../../config/types.js';
import type { GatewayEvents } from '../../events.js';
import type { JsonObject, JsonRpcNotification } from '../../jsonrpc.js';
import type { Logger } from '../../log.js';
import type { UpstreamCatalog } from './catalog.js';
import type { CallContext, ClientFlow, UpstreamCall, UpstreamConnection } from './connection.js';

/**
 * The client capabilities every upstream connection declares, whatever the transport, the revision and the
 * client: what the gateway can relay. Servers shape their tool lists by these, so one rule keeps a client's lists
 * the same over stdio, SSE and Streamable HTTP; a request the actual client cannot answer is refused by the
 * gateway (sessions: an error to the upstream; 2026-07-28: -32021 naming the capability).
 */
export const RELAY_CAPABILITIES: JsonObject = Object.freeze({ roots: { listChanged: true }, sampling: {}, elicitation: { form: {}, url: {} } });

/** Who a client session is, as the upstream is told when the gateway opens a connection for it. */
export interface SessionIdentity {
  sessionId: string;
  protocolVersion: string;
  capabilities: JsonObject;
  clientInfo: JsonObject | undefined;
  /** The identity stands for many clients (2026-07-28 clients share one upstream session): no one client may stall it. */
  readonly manyClients?: boolean;
}

export type { CredentialSource } from '../../identity/credential-source.js';
import type { CredentialSource } from '../../identity/credential-source.js';

/**
 * The authenticated caller the gateway acts for at the upstream: what an upstream's `auth` makes its identity
 * from. `subjectToken` reads the caller's own verified access token when a token exchange needs it; the token
 * itself is never sent to an upstream.
 */
export interface ActingFor {
  readonly principal: string;
  /** The caller's verified token claims (none for an API key). */
  readonly claims: Readonly<Record<string, unknown>>;
  readonly subjectToken?: () => string | undefined;
}

/** Who a call to the upstream is for. */
export interface UpstreamCaller {
  /** The client session as the upstream is told of it (its handshake, its envelope). */
  readonly identity: SessionIdentity;
  /** The authenticated principal the call runs for; undefined: the gateway's own request, or no authentication. */
  readonly principal: string | undefined;
  /** Whom the gateway acts for (a per-principal child's env reads its claims). */
  readonly actingFor?: ActingFor;
  readonly credentials: CredentialSource;
}

/** The credentials every caller has today: the upstream's configured `headers`. */
export function staticCredentials(headers: Readonly<Record<string, string>>): CredentialSource {
  const answer = Promise.resolve(headers);
  return { headers: () => answer };
}

/** How a request passes through a side as a client of its revision sent it. */
export interface PassThroughOptions {
  /** Notifications the upstream sends before its answer (progress, logs). */
  onNotification?: (message: JsonRpcNotification) => void;
  signal?: AbortSignal;
  timeoutMs?: number;
  /** The upstream's definition of the tool called (a revision may put its schema's parameters in headers). */
  tool?: JsonObject | undefined;
  /** The room on the stream of the client the notifications go to. */
  clientFlow?: () => ClientFlow | undefined;
}

/** A call through a side: the neutral form a router (or a task run) asks for. */
export interface SideCall {
  caller: UpstreamCaller;
  method: string;
  /** Plain params: no revision's envelope; the side adds its own. */
  params: JsonObject;
  /** Where the upstream's related notifications and requests go; none: nobody to ask. */
  context: CallContext | undefined;
  /** 0: none (a tool call runs as long as it runs). */
  timeoutMs: number;
  /** The gateway runs the call as a task of its own: the upstream's own task support may show through. */
  asTask: boolean;
}

/** A neutral call as a router or a task run asks an upstream for it (Upstream.callFor): for a session, and whom the gateway acts for. */
export interface UpstreamCallRequest extends Omit<SideCall, 'caller' | 'asTask'> {
  session: SessionIdentity;
  /** None: the gateway's own request (or no authentication). */
  actingFor: ActingFor | undefined;
  /** The gateway runs the call as a task of its own (default: it does not). */
  asTask?: boolean;
}

/** One revision spoken with one upstream, once its handshake or discovery said it speaks it. */
export interface UpstreamSide {
  /** The revision id, as the client-side registry (src/protocol/revisions.ts) names it. */
  readonly revision: string;
  /** Whether the upstream speaks this revision (its last handshake or discovery said so). */
  readonly speaks: boolean;
  /** The protocol version spoken, for /readyz. */
  readonly protocolVersion: string | undefined;
  /** What the upstream offers in this revision (`{}` while it does not speak it). */
  readonly capabilities: JsonObject;
  /** What the upstream says about itself here (instructions…). */
  readonly description: JsonObject | undefined;
  readonly serverInfo: unknown;
  /**
   * Asks the upstream whether it speaks this revision (the handshake, or discovery); resolves with why not,
   * undefined when it does.
   */
  connect(): Promise<string | undefined>;
  /** Everything the upstream lists in this revision; undefined: it cannot be read now (the last reading stands). */
  readCatalog(): Promise<UpstreamCatalog | undefined>;
  /** Starts a neutral call, translated to this revision (and its answer back to a plain one). */
  call(call: SideCall): Promise<UpstreamCall>;
  /** How the upstream runs one of its tools as a task of its own, in this revision ('forbidden': it does not). */
  taskSupportOf(tool: JsonObject | undefined): TaskMode;
  /** Follows the upstream's list changes and unsolicited messages for the gateway itself, until stop(). */
  watch(onMessage: (message: JsonRpcNotification) => void): void;
  /** Subscribes the gateway itself to a resource, whose updates reach listeners; once per URI per connection. */
  subscribe(uri: string): Promise<void>;
  /**
   * A revision with sessions: the handshake a client session's own connection opens with (upstream.ts opens,
   * bounds and closes those connections). None: the revision is stateless.
   */
  readonly sessionHandshake?: (identity: SessionIdentity) => JsonObject;
  /** Stops what connect() and watch() started (the upstream is going, or reconnecting). */
  stop(): Promise<void>;
}

/** What upstream.ts lends a side: the connection life stays with it. */
export interface UpstreamLink {
  readonly config: UpstreamConfig;
  readonly logger: Logger;
  readonly events: GatewayEvents | undefined;
  readonly gatewayVersion: string;
  /** The HTTP agent of a Streamable HTTP or SSE upstream. */
  readonly agent: Agent | undefined;
  /** The credentials of the gateway's own requests (discovery, catalog, listen). */
  readonly credentials: CredentialSource;
  /** Opens the control connection with this handshake; resolves with what the upstream answered. */
  openControl(handshake: JsonObject): Promise<JsonObject>;
  /** The control connection, while open. */
  control(): UpstreamConnection | undefined;
  /** The caller's own connection (or the shared one), opened with a side's `sessionHandshake` when new. */
  connectionFor(caller: UpstreamCaller): Promise<UpstreamConnection>;
  /** Whether a result is a create-task result in any revision the gateway speaks, and its task id. */
  createdTaskId(result: JsonObject): string | undefined;
  /** The upstream's tool of this name, as last listed. */
  tool(name: unknown): JsonObject | undefined;
}

/** A revision's upstream side, as a stateless registry entry. */
export interface UpstreamAdapter {
  /** The same id as the revision's client-side entry (src/protocol/revisions.ts). */
  readonly revision: string;
  /** Whether it may speak to this upstream as configured (its transport, its `protocol` pin). */
  speaksTo(config: UpstreamConfig): boolean;
  /** The live side for one upstream (not connected yet). */
  side(link: UpstreamLink): UpstreamSide;
  /** The task id a result of this revision names when it is a create-task result (answers.ts asks each). */
  createdTaskId(result: JsonObject): string | undefined;
  /** The task a task-status notification of this revision names. */
  notifiedTaskId(params: JsonObject): string | undefined;
}

/** The task id of a create-task result in whichever of `adapters`' revisions it is one, or undefined for any other. */
export function createdTaskIdIn(adapters: readonly UpstreamAdapter[], result: JsonObject): string | undefined {
  return firstAnswer(adapters, (adapter) => adapter.createdTaskId(result));
}

/** The task a task-status notification names, in whichever of `adapters`' revisions it is one. */
export function notifiedTaskIdIn(adapters: readonly UpstreamAdapter[], params: JsonObject): string | undefined {
  return firstAnswer(adapters, (adapter) => adapter.notifiedTaskId(params));
}

function firstAnswer(adapters: readonly UpstreamAdapter[], ask: (adapter: UpstreamAdapter) => string | undefined): string | undefined {
  for (const adapter of adapters) {
    const answer = ask(adapter);
    if (answer !== undefined) return answer;
  }
  return undefined;
}
