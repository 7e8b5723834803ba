// Method → handler for 2026-07-28 requests. Each request stands alone: its envelope says who the client is and
// what it can do. Lists, discovery, listen streams and the task methods are answered here; a call that goes to an
// upstream (tools/call, prompts/get, resources/read, completion/complete) is calls.ts's, which bridges session
// upstreams (their questions become MRTR rounds or task input requests). Results get the revision's `resultType`
// and hints (codec.ts); failures its HTTP statuses (errors.ts).
import { GatewayError } from '../../errors.js';
import { NO_EVENTS, type GatewayEvents } from '../../events.js';
import { asObject, withoutMeta, type JsonObject, type JsonRpcRequest, type Outcome } from '../../jsonrpc.js';
import type { Logger } from '../../log.js';
import type { PostContext } from '../post-context.js';
import { statelessSideOf } from './upstream/side.js';
import type { Upstream } from '../../upstream/life/upstream.js';
import { LIST_METHODS } from '../../mcp.js';
import type { AggregatedLists } from '../ports.js';
import { inRequestScope, requestInfo, type RequestScope } from '../request-scope.js';
import type { AccessRule } from '../../config/types.js';
import { CallerAccess } from '../access.js';
import { codec, discoverResult, statelessOutcome, taskUpdateAnswers } from './codec.js';
import { statelessAnswerStatus, statelessFailure, withUri } from './errors.js';
import { declaresTasks, missingTasksExtension, type StatelessClient } from './envelope.js';
import type { ListenFilter, ListenHub } from './listen.js';
import type { StatelessResponder } from './responder.js';
import { plainCallView } from '../task-tool-definitions.js';
import { StatelessCalls, type StatelessCallsDeps } from './calls.js';

type Headers = Record<string, string | string[] | undefined>;

export interface StatelessAnswer {
  outcome: Outcome;
  /** HTTP status when the answer is sent as JSON. */
  status: number;
}

export interface StatelessRouterDeps extends StatelessCallsDeps {
  lists: AggregatedLists;
  listeners: ListenHub;
  logger: Logger;
  /** `auth.access`: undefined when every caller may use everything. */
  access: readonly AccessRule[] | undefined;
  /** Where each request and access denial is announced (src/events.ts); nowhere when absent. */
  events?: GatewayEvents;
  /** Every version the gateway speaks, newest first (the registry's): what server/discover lists. */
  supportedVersions: readonly string[];
}

export class StatelessRouter {
  /** Calls to upstreams (calls.ts). */
  private readonly calls: StatelessCalls;
  private access: readonly AccessRule[] | undefined;
  /** Where each request is announced, and what its scope reads (built once: it is the same for every request). */
  private readonly requestScope: RequestScope;

  constructor(private readonly deps: StatelessRouterDeps) {
    this.access = deps.access;
    this.requestScope = { events: deps.events ?? NO_EVENTS, catalog: deps.catalog, codec };
    this.calls = new StatelessCalls(deps, (client) => this.accessOf(client));
  }

  /** A config reload's access rules: they apply from the next request on. */
  reconfigure(access: readonly AccessRule[] | undefined): void {
    this.access = access;
  }

  /**
   * Answers one request; request-level failures carry the HTTP status the revision gives them. `post` is what the
   * front read of the POST: the bytes of its body, which the upstream call it starts (and a task that takes it
   * over) holds until it ends, and its Idempotency-Key header.
   */
  handle(client: StatelessClient, request: JsonRpcRequest, headers: Headers, responder: StatelessResponder, post: PostContext = {}): Promise<StatelessAnswer | undefined> {
    return inRequestScope(
      this.requestScope,
      () => requestInfo(request, { protocolVersion: client.protocolVersion }, codec),
      (answer) => answer?.outcome,
      () => this.answer(client, request, headers, responder, post),
    );
  }

  private async answer(client: StatelessClient, request: JsonRpcRequest, headers: Headers, responder: StatelessResponder, post: PostContext): Promise<StatelessAnswer | undefined> {
    try {
      const params = request.params ?? {};
      const outcome = await this.dispatch(client, request, headers, responder, post);
      if (outcome === undefined) return undefined;
      if (request.method === 'resources/read' && 'error' in outcome) withUri(outcome.error, params.uri);
      // Request-level errors an upstream answered (a capability the client lacks) keep their HTTP status.
      return { outcome: statelessOutcome(request.method, outcome), status: statelessAnswerStatus(outcome) };
    } catch (error) {
      if (!(error instanceof GatewayError)) this.deps.logger.error({ err: error, method: request.method }, 'stateless request failed');
      return statelessFailure(error);
    }
  }

  /** A listen stream: validated, acknowledged, then open until the client leaves. */
  async listen(client: StatelessClient, request: JsonRpcRequest, responder: StatelessResponder): Promise<void> {
    const wanted = asObject(request.params?.notifications);
    if (wanted === undefined) throw new GatewayError('invalid_params', 'subscriptions/listen: params.notifications must be an object');
    const filter: ListenFilter = {};
    for (const key of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged'] as const) if (wanted[key] === true) filter[key] = true;
    const uris = wanted.resourceSubscriptions;
    const access = this.accessOf(client);
    if (Array.isArray(uris)) {
      filter.resourceSubscriptions = uris.filter((u): u is string => typeof u === 'string' && this.deps.catalog.routeUri(u) !== undefined && access.allows('resources', u));
    }
    const taskIds = wanted.taskIds;
    if (Array.isArray(taskIds) && taskIds.length > 0) {
      if (!declaresTasks(client)) throw missingTasksExtension('subscriptions/listen with notifications.taskIds');
      filter.taskIds = taskIds.filter((id): id is string => typeof id === 'string');
    }
    for (const uri of filter.resourceSubscriptions ?? []) void this.subscribeUpstream(uri);
    await this.deps.listeners.open(request.id, filter, responder, access.taskReader(client.caller?.principal));
  }

  private async dispatch(client: StatelessClient, request: JsonRpcRequest, headers: Headers, responder: StatelessResponder, post: PostContext): Promise<Outcome | undefined> {
    const params = request.params ?? {};
    if (LIST_METHODS.has(request.method)) {
      const result = await this.deps.lists.page(
        request.method,
        withoutMeta(params),
        (upstream, page) => this.fetchPage(client, upstream, request.method, page, params._meta),
        // A client without the extension calls every tool plainly.
        declaresTasks(client) ? undefined : (tool) => (typeof tool.name === 'string' ? plainCallView(tool, this.deps.tasks.policies.policyFor(tool.name)) : tool),
        this.accessOf(client).visible,
        (tool) => this.deps.taskTools.shownTo(tool, client.caller ?? undefined),
      );
      return { result: codec.clientResult(request.method, result) };
    }
    switch (request.method) {
      case 'server/discover':
        await this.deps.catalog.whenStarted();
        return { result: discoverResult(this.deps.catalog.capabilities(), this.deps.catalog.instructions(), this.deps.version, this.deps.supportedVersions) };
      case 'tools/call':
      case 'prompts/get':
      case 'resources/read':
        return this.calls.call(client, request, params, headers, responder, post);
      case 'completion/complete':
        return this.calls.complete(client, request, params, responder);
      case 'tasks/get':
      case 'tasks/update':
      case 'tasks/cancel':
        if (!declaresTasks(client)) throw missingTasksExtension(request.method);
        return this.taskMethod(client, request, params, responder);
      default:
        // Includes what 2026-07-28 removed (initialize, ping, logging/setLevel, resources/subscribe, tasks/result,
        // tasks/list): the revision answers those as unknown.
        throw new GatewayError('stateless_method_not_found', `Method not found: ${request.method}`);
    }
  }

  /** tasks/get|update|cancel: the gateway's own tasks here, an upstream's own tasks at that upstream. */
  private async taskMethod(client: StatelessClient, request: JsonRpcRequest, params: JsonObject, responder: StatelessResponder): Promise<Outcome | undefined> {
    const task = await this.deps.tasks.find(codec.taskIdOf(params), request.method === 'tasks/get', this.accessOf(client).taskReader(client.caller?.principal));
    if (task.native === true) {
      const upstream = this.deps.catalog.upstreams.find((u) => u.name === task.upstream && statelessSideOf(u) !== undefined);
      if (upstream === undefined) throw new GatewayError('invalid_params', `Task ${task.taskId} runs on upstream '${task.upstream}', which is not available`);
      return this.calls.nativeTask(client, request, upstream, responder);
    }
    if (request.method === 'tasks/get') return this.deps.tasks.get(task);
    if (request.method === 'tasks/update') return this.deps.tasks.update(task, taskUpdateAnswers(params));
    return this.deps.tasks.cancel(task);
  }

  private accessOf(client: StatelessClient): CallerAccess {
    return new CallerAccess(this.access, client.caller, this.deps.events ?? NO_EVENTS);
  }

  private async fetchPage(client: StatelessClient, upstream: Upstream, method: string, page: JsonObject, meta: unknown): Promise<JsonObject> {
    const statelessSide = statelessSideOf(upstream);
    if (statelessSide !== undefined) {
      const outcome = await statelessSide.request(method, { ...page, _meta: meta }, { timeoutMs: upstream.config.requestTimeoutMs, credentials: this.calls.credentialsOf(upstream, client) });
      if ('error' in outcome) throw new Error(outcome.error.message);
      return outcome.result;
    }
    // An upstream that does not speak this revision: a neutral request its side translates.
    const outcome = await (await upstream.callFor({ session: this.calls.identity, actingFor: client.caller, method, params: page, context: undefined, timeoutMs: upstream.config.requestTimeoutMs })).outcome;
    if ('error' in outcome) throw new Error(outcome.error.message);
    return outcome.result;
  }

  /** Session upstreams get resource updates for listen streams through the gateway's own connection. */
  private async subscribeUpstream(uri: string): Promise<void> {
    const upstream = this.deps.catalog.routeUri(uri);
    if (upstream === undefined || upstream.capabilities.resources === undefined) return;
    await upstream.subscribeControl(uri).catch((error: Error) => this.deps.logger.debug({ uri, err: error }, 'could not subscribe upstream for a listener'));
  }
}
