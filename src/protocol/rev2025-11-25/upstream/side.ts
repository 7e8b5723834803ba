// The gateway as a client of one upstream in the session revisions: the initialize handshake (of the gateway's
// control connection and of each client session's own connection), its catalog over the control connection,
// tools the upstream runs as its own tasks (upstream-task.ts), and the gateway's own resource subscriptions.
// Every transport can carry it, unless the configuration pins the upstream to 2026-07-28.
import type { TaskMode } from '../../../config/types.js';
import { asObject, type JsonObject } from '../../../jsonrpc.js';
import { LATEST_SESSION_VERSION } from '../../../mcp.js';
import { RELAY_CAPABILITIES, type SessionIdentity, type SideCall, type UpstreamAdapter, type UpstreamLink, type UpstreamSide } from '../../../upstream/peer/adapter.js';
import { fetchCatalog, type UpstreamCatalog } from '../../../upstream/peer/catalog.js';
import type { UpstreamCall } from '../../../upstream/peer/connection.js';
import { codec, upstreamTaskSupport } from '../codec.js';
import { callAsUpstreamTask } from './upstream-task.js';

/** The id of this revision, as its client-side entry (../revision.ts) names it. */
export const SESSION_REVISION = codec.revision;

class SessionUpstreamSide implements UpstreamSide {
  readonly revision = SESSION_REVISION;
  /** What the upstream answered to the control connection's initialize; set while it speaks the revision. */
  private initialized: JsonObject | undefined;
  /** Resources the gateway itself subscribed to on the control connection (their updates reach listeners). */
  private readonly subscriptions = new Set<string>();

  constructor(private readonly link: UpstreamLink) {}

  get speaks(): boolean {
    return this.initialized !== undefined;
  }

  get protocolVersion(): string | undefined {
    return this.initialized === undefined ? undefined : String(this.initialized.protocolVersion);
  }

  get capabilities(): JsonObject {
    return asObject(this.initialized?.capabilities) ?? {};
  }

  get description(): JsonObject | undefined {
    return this.initialized;
  }

  get serverInfo(): unknown {
    return this.initialized?.serverInfo;
  }

  /** A client session's own connection opens as that client would: its version (none given: the latest) and clientInfo. */
  readonly sessionHandshake = (identity: SessionIdentity): JsonObject => ({
    protocolVersion: identity.protocolVersion === '' ? LATEST_SESSION_VERSION : identity.protocolVersion,
    capabilities: RELAY_CAPABILITIES,
    clientInfo: identity.clientInfo ?? { name: 'taskgate', version: this.link.gatewayVersion },
  });

  async connect(): Promise<string | undefined> {
    this.initialized = undefined;
    try {
      const handshake = { protocolVersion: LATEST_SESSION_VERSION, capabilities: RELAY_CAPABILITIES, clientInfo: { name: 'taskgate', version: this.link.gatewayVersion } };
      const result = await this.link.openControl(handshake);
      this.subscriptions.clear();
      this.initialized = result;
      return undefined;
    } catch (error) {
      return (error as Error).message;
    }
  }

  async readCatalog(): Promise<UpstreamCatalog | undefined> {
    const connection = this.link.control();
    if (connection === undefined || !connection.isOpen) return undefined;
    return fetchCatalog(this.capabilities, (method, page) => connection.request(method, page, undefined, this.link.config.requestTimeoutMs).outcome);
  }

  /**
   * Over the caller's own connection, each request with the caller's own credential (a session a principal's
   * clients share may have been opened with another of its tokens); a tool the upstream runs as its own task is
   * waited on as one.
   */
  async call({ caller, method, params, context, timeoutMs, asTask }: SideCall): Promise<UpstreamCall> {
    const connection = await this.link.connectionFor(caller);
    const { credentials } = caller;
    if (method === 'tools/call' && this.runsAsOwnTask(params.name, asTask)) {
      return callAsUpstreamTask(connection, params, context, { timeoutMs, requestTimeoutMs: this.link.config.requestTimeoutMs, credentials });
    }
    return connection.request(method, params, context, timeoutMs, credentials);
  }

  taskSupportOf(tool: JsonObject | undefined): TaskMode {
    return upstreamTaskSupport(this.capabilities, tool);
  }

  /**
   * Whether a call of the tool goes as the upstream's own task: always where the upstream requires it, and where
   * it allows it when the gateway runs the call as a task anyway (`asTask`), so the upstream's status shows.
   */
  private runsAsOwnTask(toolName: unknown, asTask: boolean): boolean {
    const support = this.taskSupportOf(this.link.tool(toolName));
    return support === 'required' || (support === 'optional' && asTask);
  }

  watch(): void {
    // The control connection's own notifications tell of list changes (upstream.ts hands them on).
  }

  async subscribe(uri: string): Promise<void> {
    const control = this.link.control();
    if (control === undefined || !control.isOpen || this.subscriptions.has(uri)) return;
    if (this.capabilities.resources === undefined || asObject(this.capabilities.resources)?.subscribe !== true) return;
    this.subscriptions.add(uri);
    const outcome = await control.request('resources/subscribe', { uri }, undefined, this.link.config.requestTimeoutMs).outcome;
    if ('error' in outcome) {
      this.subscriptions.delete(uri);
      throw new Error(outcome.error.message);
    }
  }

  async stop(): Promise<void> {
    // The control connection and the sessions' connections are upstream.ts's to close.
  }
}

export const sessionUpstreamAdapter: UpstreamAdapter = {
  revision: SESSION_REVISION,
  speaksTo: (config) => !(config.transport === 'streamable-http' && config.protocol === 'modern'),
  side: (link) => new SessionUpstreamSide(link),
  // A tool result always has content, so a result with both is the tool's.
  createdTaskId: (result) => (result.content === undefined ? codec.createdTask(result)?.taskId : undefined),
  notifiedTaskId: (params) => stringOrNone(codec.taskIdOf(params)),
};

function stringOrNone(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}
