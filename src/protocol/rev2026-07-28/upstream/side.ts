// The gateway as a 2026-07-28 client of one upstream: discovery (server/discover and the versions it supports),
// its catalog, the listen stream that tells of list changes, the envelope a relayed call carries, and native
// tasks (the routers pass tasks/* through `client`). Only Streamable HTTP upstreams not pinned to the session
// revisions are asked.
import type { TaskMode, UpstreamConfig } from '../../../config/types.js';
import { MethodNotFound } from '../../../errors.js';
import { asObject, type JsonObject, type JsonRpcNotification } from '../../../jsonrpc.js';
import { META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION, META_SERVER_INFO } from '../../../mcp.js';
import { RELAY_CAPABILITIES, type SideCall, type UpstreamAdapter, type UpstreamLink, type UpstreamSide } from '../../../upstream/peer/adapter.js';
import { fetchCatalog, type UpstreamCatalog } from '../../../upstream/peer/catalog.js';
import type { CallContext, UpstreamCall } from '../../../upstream/peer/connection.js';
import { codec, declaresTasksExtension, STATELESS_VERSION, supportsVersion, withoutStatelessFields } from '../codec.js';
import { StatelessUpstreamClient, type StatelessRequestOptions } from './client.js';

/** The id of this revision, as its client-side entry (../revision.ts) names it. */
export const STATELESS_REVISION = codec.revision;

export class StatelessUpstreamSide implements UpstreamSide {
  readonly revision = STATELESS_REVISION;
  /** Set when the upstream speaks 2026-07-28 (it answered server/discover). */
  private discovered: JsonObject | undefined;
  private listenAbort: AbortController | undefined;
  /** The stateless client: every request its own POST. */
  readonly client: StatelessUpstreamClient;

  constructor(private readonly link: UpstreamLink) {
    const config = link.config as Extract<UpstreamConfig, { url: string }>;
    this.client = new StatelessUpstreamClient({
      upstreamName: config.name,
      url: config.url,
      headers: config.headers,
      agent: link.agent as NonNullable<UpstreamLink['agent']>,
      logger: link.logger,
      clientInfo: { name: 'taskgate', version: link.gatewayVersion },
      maxMessageBytes: config.maxMessageBytes,
      events: link.events,
      createdTaskId: (result) => link.createdTaskId(result),
    });
  }

  get speaks(): boolean {
    return this.discovered !== undefined;
  }

  get protocolVersion(): string | undefined {
    return this.speaks ? STATELESS_VERSION : undefined;
  }

  get capabilities(): JsonObject {
    return asObject(this.discovered?.capabilities) ?? {};
  }

  get description(): JsonObject | undefined {
    return this.discovered;
  }

  get serverInfo(): unknown {
    return asObject(this.discovered?._meta)?.[META_SERVER_INFO];
  }

  /** Whether the upstream runs tasks of its own (it declares the Tasks extension). */
  get nativeTasks(): boolean {
    return this.speaks && declaresTasksExtension(this.capabilities);
  }

  async connect(): Promise<string | undefined> {
    this.discovered = undefined;
    const outcome = await this.client.request('server/discover', { _meta: this.client.ownEnvelope() }, { timeoutMs: this.link.config.initializeTimeoutMs, credentials: this.link.credentials });
    if ('result' in outcome && supportsVersion(outcome.result, STATELESS_VERSION)) {
      this.discovered = outcome.result;
      return undefined;
    }
    return `it does not speak ${STATELESS_VERSION} (server/discover: ${'error' in outcome ? outcome.error.message : 'no supportedVersions'})`;
  }

  readCatalog(): Promise<UpstreamCatalog> {
    return fetchCatalog(this.capabilities, (method, page) => this.request(method, { ...page, _meta: this.client.ownEnvelope() }, { timeoutMs: this.link.config.requestTimeoutMs }));
  }

  /** Passes a request through as a 2026-07-28 client sent it (`params` carries its envelope). */
  request(method: string, params: JsonObject, options: StatelessRequestOptions = {}): ReturnType<StatelessUpstreamClient['request']> {
    return this.client.request(method, params, { credentials: this.link.credentials, ...options });
  }

  /**
   * A call for a client of another revision, as stateless requests whose input rounds the context answers (the
   * gateway asks that client); the answer goes back without this revision's fields.
   */
  async call({ caller, method, params, context, timeoutMs }: SideCall): Promise<UpstreamCall> {
    const identity = caller.identity;
    const envelope: JsonObject = {
      [META_PROTOCOL_VERSION]: STATELESS_VERSION,
      [META_CLIENT_CAPABILITIES]: RELAY_CAPABILITIES,
      [META_CLIENT_INFO]: identity.clientInfo ?? { name: 'taskgate', version: this.link.gatewayVersion },
    };
    const logLevel = (identity as { logLevel?: unknown }).logLevel;
    if (typeof logLevel === 'string') envelope[META_LOG_LEVEL] = logLevel;
    const forwarded = { ...params, _meta: { ...asObject(params._meta), ...envelope } };
    const tool = method === 'tools/call' ? this.link.tool(params.name) : undefined;
    const noContext: CallContext = {
      sessionId: identity.sessionId,
      notify: () => undefined,
      ask: async () => ({ error: { code: MethodNotFound, message: 'No client to ask' } }),
    };
    const options = { tool, credentials: caller.credentials, ...(timeoutMs > 0 ? { timeoutMs } : {}) };
    const call = this.client.callResolvingInput(method, forwarded, context ?? noContext, options);
    const outcome = call.outcome.then((answer) => ('error' in answer ? answer : { result: withoutStatelessFields(answer.result) }));
    return { ...call, outcome };
  }

  /** A call whose input rounds `context` answers, for a client of this revision (its envelope already on `params`). */
  callResolvingInput(method: string, params: JsonObject, context: CallContext, options: StatelessRequestOptions): UpstreamCall {
    return this.client.callResolvingInput(method, params, context, { credentials: this.link.credentials, ...options });
  }

  taskSupportOf(): TaskMode {
    // Its native tasks pass through to 2026-07-28 clients; a call relayed for another revision is never one.
    return 'forbidden';
  }

  /** The upstream tells the gateway about list changes on a listen stream it keeps open. */
  watch(onMessage: (message: JsonRpcNotification) => void): void {
    if (!this.speaks) return;
    this.listenAbort?.abort();
    const abort = new AbortController();
    this.listenAbort = abort;
    void this.client.listen({ toolsListChanged: true, promptsListChanged: true, resourcesListChanged: true }, onMessage, abort.signal);
  }

  async subscribe(): Promise<void> {
    // Resource updates reach 2026-07-28 listeners on their own listen streams.
  }

  async stop(): Promise<void> {
    this.listenAbort?.abort();
  }
}

export const statelessUpstreamAdapter: UpstreamAdapter = {
  revision: STATELESS_REVISION,
  speaksTo: (config) => config.transport === 'streamable-http' && config.protocol !== 'legacy',
  side: (link) => new StatelessUpstreamSide(link),
  createdTaskId: (result) => codec.createdTask(result)?.taskId,
  notifiedTaskId: (params) => {
    const taskId = codec.taskIdOf(params);
    return typeof taskId === 'string' ? taskId : undefined;
  },
};

/** The upstream's 2026-07-28 side, when it speaks this revision. */
export function statelessSideOf(upstream: { side(revision: string): UpstreamSide | undefined }): StatelessUpstreamSide | undefined {
  const side = upstream.side(STATELESS_REVISION);
  return side instanceof StatelessUpstreamSide && side.speaks ? side : undefined;
}
