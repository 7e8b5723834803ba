// The one seam through which the gateway announces what happens. The core emits each fact once, typed, where it
// happens; the audit log, Prometheus metrics and OpenTelemetry traces (src/observability/) subscribe. Nothing in
// the core calls a subscriber by name, and a subscriber that throws never breaks the core (it is logged).
//
// Two kinds of announcement, as undici's diagnostics channels and BullMQ's telemetry port have them:
// - events: facts, after they happened (a task ended). Listeners run synchronously, in the emitter's async
//   context, so a tracing listener sees the span that was active where the fact happened.
// - scopes: work with a duration (an MCP request, an upstream request, a task's run). Subscribers wrap the work
//   (a tracer runs it inside a span so what happens within nests under it) and read the outcome the core writes
//   into the scope's info before the work settles. With no subscriber, a scope is a direct call.
import type { RequestId } from './jsonrpc.js';
import type { RevisionId } from './mcp.js';

/** How a request or a call ended, for metrics labels: low cardinality by construction. */
export type Outcome = 'ok' | 'error' | 'cancelled';

/** Who connects where (issue 41): the qualified principal, the upstream, the authorization server when known. */
export interface ConnectionFacts {
  principal: string;
  upstream: string;
  issuer?: string;
}

export interface TaskFacts {
  taskId: string;
  /** Qualified principal (`key:<name>`, `oauth:<issuer>#<sub>`, or the anonymous one). */
  principal: string;
  /** The tool as clients see it (namespaced). */
  tool: string;
  upstream: string;
}

/** How the gateway gets a credential for an upstream (issue 33): its own OAuth client, an RFC 8693 exchange, a JWT it signs. */
export type TokenGrant = 'client_credentials' | 'token_exchange' | 'signed';

/**
 * How a token request ended: `refused` when the authorization server (or the gateway, for a caller with nothing to
 * exchange) said no, `timeout` when it did not answer in time, `error` for the rest (down, 5xx, a broken answer).
 */
export type TokenOutcome = 'ok' | 'error' | 'timeout' | 'refused';

/** What a token cache did with one lookup (src/identity/token-cache.ts). */
export type TokenCacheResult = 'hit' | 'refresh_ahead' | 'miss' | 'failure_cached' | 'invalidated' | 'evicted';

/** Facts, emitted once each where they happen. Payloads are plain data; listeners must not keep or change them. */
export interface GatewayEventMap {
  /**
   * Durably stored. `queued`: it goes through a line for concurrency slots (`concurrency`, `taskConcurrency`)
   * before it starts; whether it actually waits there shows as a `task.status` with `queued: true`.
   */
  'task.created': TaskFacts & {
    /** The id of the protocol revision that created it (the store's era). */
    era: RevisionId;
    queued: boolean;
    /** The upstream runs it itself (a 2026-07-28 upstream's own task): the gateway only routes its methods there. */
    native?: boolean;
  };
  /** The upstream got the call (after `waitedMs` in line for a slot). `attempt` > 1 is a re-run after a lost replica. */
  'task.started': TaskFacts & { attempt: number; waitedMs: number };
  /**
   * A status or status-message change that is not the end. `queued`: true when the task starts waiting in line for
   * a concurrency slot, false when it leaves the line (absent otherwise).
   */
  'task.status': TaskFacts & { status: 'working' | 'input_required'; message?: string; queued?: boolean };
  /** The upstream asked the client something (elicitation, sampling, roots) on the task's behalf. */
  'task.input.asked': TaskFacts & { method: string };
  'task.input.answered': TaskFacts & { method: string };
  /**
   * Terminal, recorded once. `reason` says why the gateway ended it when the upstream did not:
   * `maxRunMs`, `lost` (its replica stopped), `drained` (shutdown), `cancelled` (by the client), `upstream removed` (a config reload dropped its upstream),
   * `maxResultBytes` (its result was larger than tasks.maxResultBytes, and was not stored).
   */
  'task.ended': TaskFacts & {
    status: 'completed' | 'failed' | 'cancelled';
    reason?: string;
    durationMs: number;
    era?: RevisionId;
    /** The outcome was kept through a store outage and written once the store was back. */
    kept?: boolean;
  };
  /** A client deleted an ended task and its result before its TTL (tasks/delete, a 2025-11-25 extension). */
  'task.deleted': TaskFacts;
  /**
   * A call to a tool under an approval rule (tasks.rules[].approval, issue 34) is held before the upstream is called,
   * until one of `approvers` (principal globs) decides or `deadline` (epoch ms) passes.
   */
  'approval.requested': TaskFacts & { approvers: string[]; deadline: number };
  /**
   * The hold ended: approved or denied by `decidedBy` (a qualified principal, with their `comment`), `expired` at its
   * deadline, or `cancelled` with its task. Only `approved` lets the call reach the upstream.
   */
  'approval.decided': TaskFacts & { decision: 'approved' | 'denied' | 'expired' | 'cancelled'; decidedBy?: string; comment?: string; waitedMs: number };
  /**
   * Per-user consent (issue 41): a link was made for `principal` to connect `upstream` (`via`: the URL elicitation of
   * a call or task, or the connections API); `issuer`, once known, is the authorization server's.
   */
  'consent.requested': ConnectionFacts & { via: 'call' | 'task' | 'connections' };
  /** A browser started the flow (the consent page sent it to the authorization server). */
  'consent.started': ConnectionFacts;
  /**
   * A consent did not go through: `reason` says why (`wrong_user`: a browser signed in as someone else opened the
   * link; `link_unknown`, `state_mismatch`, `denied` by the user, `untrusted_server`, ...). Never a token or code.
   */
  'consent.refused': ConnectionFacts & { reason: string };
  /** The user connected: tokens stored sealed; whatever waited for this connection resumes. */
  'connection.created': ConnectionFacts & { scopes: string[] };
  /** One replica refreshed the user's access token (a rotated refresh token stored before use). */
  'connection.refreshed': ConnectionFacts & { rotated: boolean };
  /** The connection was removed: by its user (`DELETE /connections/{upstream}`), or after the server refused it. */
  'connection.revoked': ConnectionFacts & { by: 'user' | 'server'; revokedAtServer: boolean };
  /** A token request for a connection failed (`reason`: `invalid_grant` deletes the connection; others are kept). */
  'connection.failed': ConnectionFacts & { reason: string; step: 'exchange' | 'refresh' | 'registration' | 'discovery' | 'revocation' };
  /**
   * One try of a webhook delivery ended (src/webhooks/): `delivered` (2xx), `failed` (another status: `status` says
   * which), `timeout` (webhookDelivery.timeoutMs), or `error` (no answer: refused, reset, DNS). `endpoint` is the
   * endpoint's id, never its URL.
   */
  'webhook.attempt': { endpoint: string; type: string; webhookId: string; attempt: number; outcome: 'delivered' | 'failed' | 'timeout' | 'error'; status?: number; durationMs: number };
  /** A delivery's last try failed, or it outlived webhookDelivery.maxAgeMs: no further try. */
  'webhook.dead_lettered': { endpoint: string; type: string; webhookId: string; attempts: number; reason: string };
  /**
   * An event was not queued for an endpoint: its queue was full (the newest is dropped), the body too large, or this
   * replica held too many events not yet queued (`backlog_full`: the store is slow or down).
   */
  'webhook.dropped': { endpoint: string; type: string; webhookId: string; reason: 'queue_full' | 'too_large' | 'backlog_full' };
  /** How many deliveries an endpoint's queue held (leased or waiting, every replica's) when this replica last looked. */
  'webhook.queue': { endpoint: string; depth: number };
  /** A client read the task's result (tasks/result, the task_result tool). */
  'task.retrieved': TaskFacts & { via: 'tasks/result' | 'task tool' };
  /**
   * A replica that shuts down left the task to the others (issue 42) instead of failing it: its call had `not
   * started` (held for approval, waiting for its user's connection or a slot), or its policy runs it again (`retry on
   * loss`; the call here was cancelled). Another replica takes it over within one sweep (`task.recovered`).
   */
  'task.handed_over': TaskFacts & { why: 'not started' | 'retry on loss' };
  /** A replica took over the tasks of one that stopped: re-queued, re-run, or failed as lost. */
  'task.recovered': TaskFacts & { action: 'requeued' | 'retried' | 'lost'; previousOwner: string; attempt?: number };

  'upstream.up': { upstream: string; transport: string };
  'upstream.down': { upstream: string; reason: string };
  /** A stdio child started again after it exited (`attempt` counts since it last stayed up). */
  'upstream.restarted': { upstream: string; attempt: number };
  /** The gateway closed the upstream (shutdown, reload, a refused join) and every process of its children is gone. */
  'upstream.stopped': { upstream: string };
  /** The upstream broke the protocol (each time; the log warns once a minute per kind): `what` names the kind. */
  'upstream.violation': { upstream?: string; what: string };

  /**
   * The gateway asked for a credential for an upstream (a token request, or a JWT it signed), once per cache miss
   * or refresh: `principal` is the caller's, absent for the gateway's own. Never a token or a secret: `cause` and
   * `oauthError` (an RFC 6749 error code, e.g. `invalid_grant`) say why it failed, `status` the HTTP status.
   */
  'upstream.token': {
    upstream: string;
    grant: TokenGrant;
    outcome: TokenOutcome;
    durationMs: number;
    principal?: string;
    cause?: string;
    oauthError?: string;
    status?: number;
  };
  /** A token cache lookup, for hit rates: `hit` and `refresh_ahead` served a cached token, `miss` asked for one. */
  'upstream.token.cache': { upstream: string; grant: TokenGrant; result: TokenCacheResult };

  /**
   * A store operation took longer than expected (`durationMs`); `operation` is a fixed name, never a key: a script's
   * name, or a Redis command's (`hmget`, …) that got no answer within store.commandTimeoutMs on a live connection.
   */
  'store.slow': { operation: string; durationMs: number };
  /**
   * Every store operation that went to the store server (Redis scripts), for latency histograms. Emitted only while
   * someone listens (the payload is not even built otherwise).
   */
  'store.operation': { operation: string; durationMs: number };
  'store.unavailable': { error: string };
  /** The store answers again after `outageMs`. */
  'store.back': { outageMs: number };

  /**
   * This replica holds a session (2025-11-25) from now on: one it created (`initialize`), or, `resumed`, one created
   * elsewhere (another replica, or before a restart) whose requests now reach it too.
   */
  'session.opened': { sessionId: string; principal: string; protocolVersion: string; resumed?: boolean };
  /**
   * This replica no longer holds the session: the client deleted it (here or through another replica), it was idle
   * here, the replica shuts down, or the store no longer has it (`evicted`: expired, or ended elsewhere).
   */
  'session.closed': { sessionId: string; principal: string; reason: 'deleted' | 'idle' | 'shutdown' | 'evicted' };
  /** An SSE stream to a client opened or closed (either revision); `kind` says which endpoint. */
  'stream.opened': { kind: 'get' | 'post' | 'listen' };
  'stream.closed': { kind: 'get' | 'post' | 'listen' };

  /** A credential or access rule refused something; `kind` is what was refused (tools, prompts, resources, credentials). */
  'access.denied': {
    principal?: string;
    kind: string;
    name?: string;
    reason?: string;
    /** A stored task hidden because the rules deny its tool. */
    taskId?: string;
    /** The HTTP status the refusal got, where one was sent. */
    status?: number;
  };
  /** `limit` names the bound (requestsPerSecond, maxTasksPerPrincipal, maxInflightBytes, …). */
  'rate.limited': {
    principal?: string;
    limit: string;
    retryAfterMs?: number;
    /** The first refusal of a counted window (auth.rateLimits): the one the audit log records. */
    firstInWindow?: boolean;
  };

  /**
   * A client request was accepted although it did not follow the letter of its revision, where the gateway is
   * lenient on purpose (docs/protocol.md): `kind` names what was let off (`missing_mcp_name`: a 2026-07-28 tasks
   * method without its Mcp-Name header); `client` is the name the request's clientInfo gives, unchecked.
   */
  'request.lenient': { kind: 'missing_mcp_name'; method: string; client?: string };

  /** A new configuration is in force (`changes` lists what differs, in words). */
  'config.reloaded': { source: string; changes: string[] };
  /** A new configuration was refused and the running one stays. */
  'config.rejected': { source: string; error: string };
}

/** Work with a duration. The core fills in the outcome fields before the work settles. */
export interface GatewayScopeMap {
  /** One JSON-RPC request from a client (each element of a batch is its own). */
  'mcp.request': {
    method: string;
    /** The tool, prompt or resource the request names, as the client named it. */
    target?: string;
    upstream?: string;
    sessionId?: string;
    protocolVersion: string;
    requestId?: RequestId;
    /** Set when the request created or names a task. */
    taskId?: string;
    /** Trace-context fields (`traceparent`, `tracestate`) the client sent in `params._meta`, when it sent any. */
    carrier?: Record<string, string>;
    outcome?: Outcome;
    /** The JSON-RPC error code, when the outcome is an error; absent on an error outcome of a tool result (`isError`). */
    errorCode?: number;
    /** The JSON-RPC error message, with errorCode (for traces and logs; never a metrics label). */
    errorMessage?: string;
  };
  /**
   * One request the gateway sends to an upstream. `carrier` starts empty; subscribers may add trace-context
   * fields (`traceparent`, `tracestate`), which go to the upstream in `params._meta` and, over HTTP, as headers.
   */
  'upstream.request': {
    upstream: string;
    method: string;
    tool?: string;
    taskId?: string;
    carrier: Record<string, string>;
    outcome?: Outcome;
    /** As for `mcp.request`: absent on an error outcome of a tool result (`isError`). */
    errorCode?: number;
    errorMessage?: string;
  };
  /** A task's run on this replica, from taking a slot to its terminal record. */
  'task.run': TaskFacts & { attempt: number; outcome?: 'completed' | 'failed' | 'cancelled' | 'handed over' };
}

export type GatewayEventName = keyof GatewayEventMap;
export type GatewayScopeName = keyof GatewayScopeMap;

/**
 * Runs `next` (the work) and returns what it returns. A wrapper must call `next` exactly once and synchronously
 * (the core counts on its work starting in the same tick: a request's bytes go out before the scope returns).
 */
export type ScopeWrapper<K extends GatewayScopeName> = <T>(info: GatewayScopeMap[K], next: () => Promise<T>) => Promise<T>;

/** Where a failing subscriber is reported (a pino logger fits; base imports no logger). */
export interface SubscriberFailureLog {
  error(fields: object, message: string): void;
}

type Listener<K extends GatewayEventName> = (payload: GatewayEventMap[K]) => void;

export class GatewayEvents {
  private readonly listeners = new Map<GatewayEventName, Set<Listener<never>>>();
  private readonly wrappers = new Map<GatewayScopeName, ScopeWrapper<never>[]>();

  constructor(private readonly logger?: SubscriberFailureLog) {}

  /** Calls `listener` for every `name` event until the returned function is called. */
  on<K extends GatewayEventName>(name: K, listener: Listener<K>): () => void {
    let set = this.listeners.get(name);
    if (set === undefined) this.listeners.set(name, (set = new Set()));
    set.add(listener as Listener<never>);
    return () => void set.delete(listener as Listener<never>);
  }

  /** Whether anyone listens: lets an emitter skip building a payload nobody reads. */
  listened(name: GatewayEventName): boolean {
    return (this.listeners.get(name)?.size ?? 0) > 0;
  }

  emit<K extends GatewayEventName>(name: K, payload: GatewayEventMap[K]): void {
    const set = this.listeners.get(name);
    if (set === undefined) return;
    for (const listener of set) {
      try {
        (listener as Listener<K>)(payload);
      } catch (error) {
        this.logger?.error({ err: error, event: name }, 'an event listener failed');
      }
    }
  }

  /** Wraps every `name` scope with `wrapper` (the last added is outermost) until the returned function is called. */
  around<K extends GatewayScopeName>(name: K, wrapper: ScopeWrapper<K>): () => void {
    const list = this.wrappers.get(name) ?? [];
    this.wrappers.set(name, [...list, wrapper as ScopeWrapper<never>]);
    return () => {
      const current = this.wrappers.get(name) ?? [];
      this.wrappers.set(name, current.filter((w) => w !== (wrapper as ScopeWrapper<never>)));
    };
  }

  /** Whether any subscriber wraps `name` scopes. */
  wrapped(name: GatewayScopeName): boolean {
    return (this.wrappers.get(name)?.length ?? 0) > 0;
  }

  /** Runs `work` inside every wrapper of `name`; `info` is shared with them (fill in its outcome before settling). */
  scope<K extends GatewayScopeName, T>(name: K, info: GatewayScopeMap[K], work: () => Promise<T>): Promise<T> {
    const list = this.wrappers.get(name);
    if (list === undefined || list.length === 0) return work();
    let run = work;
    for (const wrapper of list) {
      const inner = run;
      run = () => this.wrapOnce(name, wrapper as ScopeWrapper<K>, info, inner);
    }
    return run();
  }

  /** One wrapper around `inner`, held to its contract: a wrapper that throws or skips `next` cannot lose the work. */
  private wrapOnce<K extends GatewayScopeName, T>(name: K, wrapper: ScopeWrapper<K>, info: GatewayScopeMap[K], inner: () => Promise<T>): Promise<T> {
    let started: Promise<T> | undefined;
    const next = (): Promise<T> => (started ??= inner());
    let wrapped: Promise<T>;
    try {
      wrapped = wrapper(info, next);
    } catch (error) {
      this.logger?.error({ err: error, scope: name }, 'a scope subscriber failed');
      return next();
    }
    if (started === undefined) {
      this.logger?.error({ scope: name }, 'a scope subscriber did not start the work: started without it');
      return next();
    }
    return wrapped;
  }
}

/** Announces to nobody, and takes no subscribers (it is shared: one would hear every part built with it). */
class SilentEvents extends GatewayEvents {
  override on(): () => void {
    throw new Error('NO_EVENTS takes no listeners: give the part its own GatewayEvents');
  }

  override around(): () => void {
    throw new Error('NO_EVENTS takes no scope wrappers: give the part its own GatewayEvents');
  }
}

/** For parts built without observability (unit tests, tools). */
export const NO_EVENTS: GatewayEvents = new SilentEvents();
