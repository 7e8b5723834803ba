// What becomes of a tool call, decided once for every revision: a plain call, a task (at once or past a window), a
// background task a client without tasks is told of through the task tools, a plain caller waiting for the task a
// hold made, or a refusal; and the steps the core takes for it: a keyed replay (the task the call's key made), a task
// opened (and run) for the call, the wait of a plain caller for its held call's end. A revision turns its wire into
// a ToolCallRequest and a TaskAsk, and the plan's outcome back into its wire; which rule holds a call for a
// person's approval, or which key made which task, is no revision's business. A caller without a connection at an
// upstream that acts as each user (issue 41) is answered with a consent request instead (planConsent), or its task
// waits for the connection (consent-wait.ts).
import type { TaskMode, TaskPolicy } from '../config/types.js';
import { effectiveMode } from '../config/policy.js';
import { InternalError } from '../errors.js';
import type { JsonObject, Outcome } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import { isTerminal, type Era, type TaskRecord } from '../store/task-store.js';
import type { CallContext, UpstreamCall } from '../upstream/peer/connection.js';
import type { SessionIdentity, Upstream } from '../upstream/life/upstream.js';
import type { ActingFor } from '../upstream/peer/adapter.js';
import type { ConsentRequest, UserConnections } from '../consent/ports.js';
import { consentState, type ConsentState } from './consent-wait.js';
import { idempotentCreation, type IdempotentCreation } from './idempotency.js';
import type { InflightCharge } from './inflight-bytes.js';
import type { RunHandle, TaskCaller } from './local-run.js';
import type { TaskPolicies } from './task-policies.js';
import type { TaskQueries } from './task-queries.js';
import { storedCall, type TaskRuns } from './task-runs.js';

/** One tool call on its way to an upstream, as every revision hands it to the core. */
export interface ToolCallRequest {
  /** The tool as the client named it (policy, listings and tasks use this name). */
  exposedName: string;
  upstream: Upstream;
  /** The `tools/call` params as the upstream gets them: its own tool name, the arguments, no gateway `_meta`. */
  params: JsonObject;
  /** The tool's task policy, read once for the call. */
  policy: TaskPolicy;
  /** Whose task it would be: the principal, or a revision's stand-in without authentication. */
  owner: string;
  /** Whom the upstream sees the call from (none: no authentication). */
  actingFor: ActingFor | undefined;
  /** The upstream session the call runs over, and is kept with for another replica. */
  identity: SessionIdentity;
  /** The bytes of the request that carried the arguments: held by the call, and by a task that takes it. */
  charge: InflightCharge | undefined;
  /** The idempotency key the call carries, with the digest of the call it binds (none: no key). */
  once: IdempotentCreation | undefined;
  /** The revision a task it makes is stored with. */
  era: Era;
  /** The retention the client asked for, where its revision lets it ask. */
  requestedTtl?: unknown;
}

/** The fields of a ToolCallRequest a revision reads off its wire; the key is the one its client sent, if any. */
export type ToolCallFields = Omit<ToolCallRequest, 'once'> & { key: string | undefined };

/** The request, with the key bound to the tool and the arguments the client sent (`args`). */
export function toolCallRequest(fields: ToolCallFields, args: unknown): ToolCallRequest {
  // Copied field by field: an object rest (`{ key, ...request }`) took V8's slow generic path, on every call.
  const request: ToolCallRequest = {
    exposedName: fields.exposedName,
    upstream: fields.upstream,
    params: fields.params,
    policy: fields.policy,
    owner: fields.owner,
    actingFor: fields.actingFor,
    identity: fields.identity,
    charge: fields.charge,
    once: idempotentCreation(fields.key, fields.exposedName, args),
    era: fields.era,
  };
  if (fields.requestedTtl !== undefined) request.requestedTtl = fields.requestedTtl;
  return request;
}

/** What a client can do with a task, as its revision says it, in no revision's words. */
export interface TaskAsk {
  /** Whether the client's protocol can hold a task at all (a session of a revision without tasks cannot). */
  speaksTasks: boolean;
  /** The client asked for a task (its choice), accepts one where the gateway decides, or neither. */
  task: 'asked' | 'accepted' | 'none';
  /**
   * The upstream's own task support where the client is shown it (a tool the upstream runs only as its own task is
   * then one the client must call as a task); none where the gateway waits on an upstream's task for the client.
   */
  upstreamSupport?: TaskMode;
}

/** Why a call is refused: a task it may not be, or one it must be (the upstream's doing, or the policy's). */
export type CallRefusal = { why: 'task_forbidden' } | { why: 'task_required'; byUpstream: boolean };

export type CallPlan =
  /** The upstream answers the request. */
  | { kind: 'plain' }
  /** A task for the client: at once (`afterMs` 0), or once the upstream has not answered within `afterMs`. */
  | { kind: 'task'; afterMs: number; held: boolean }
  /** The same for a client without tasks: the task tools name it (`plainCalls: background`). */
  | { kind: 'background'; afterMs: number; held: boolean }
  /** A plain caller of a held call: a task at once, whose end answers the request. */
  | { kind: 'wait_held' }
  | ({ kind: 'refuse' } & CallRefusal);

const PLAIN: CallPlan = Object.freeze({ kind: 'plain' });
const WAIT_HELD: CallPlan = Object.freeze({ kind: 'wait_held' });

/**
 * The plan for a call under `policy` from a client that can do `ask`. A held call (`policy.approval`) is a task of
 * the gateway's at once whatever the window: the upstream sees nothing before the decision.
 */
export function planCall(policy: TaskPolicy, requested: TaskAsk): CallPlan {
  // A client whose protocol has no tasks makes a plain call whatever it sent: a task hint its revision does not have
  // asks for nothing, and never takes a held call past its hold (docs/security.md, Approvals).
  const ask: TaskAsk = requested.speaksTasks ? requested : { ...requested, task: 'none' };
  const held = policy.approval !== undefined;
  const afterMs = held ? 0 : policy.taskAfterMs;
  // Hosts that never ask for a task get a background task where policy says so.
  if (ask.task === 'none' && policy.plainCalls === 'background' && policy.mode !== 'forbidden') return { kind: 'background', afterMs, held };
  const upstreamSupport = ask.upstreamSupport ?? 'forbidden';
  const mode = effectiveMode(policy.mode, upstreamSupport);
  if (ask.task === 'none') {
    // A plain call held for approval waits as a task all the same (a tool that must be called as one still says so).
    if (held && !(ask.speaksTasks && mode === 'required')) return WAIT_HELD;
    if (ask.speaksTasks && mode === 'required') return { kind: 'refuse', why: 'task_required', byUpstream: upstreamSupport === 'required' };
    return PLAIN;
  }
  if (ask.task === 'asked') return mode === 'forbidden' ? { kind: 'refuse', why: 'task_forbidden' } : { kind: 'task', afterMs: 0, held };
  // The client takes a task where the gateway decides: where policy forbids one, the call is plain.
  if (mode === 'forbidden') return held ? WAIT_HELD : PLAIN;
  return { kind: 'task', afterMs, held };
}

/** What a client can take of a consent request, as its revision says it. */
export interface ConsentAsk {
  /** It declared URL-mode elicitation (`capabilities.elicitation.url`). */
  urlElicitation: boolean;
  /** Its revision answers a request with input it needs first (2026-07-28's input-required answer) rather than an error. */
  inputRequired: boolean;
}

/** What a call at an upstream that acts as each user gets before the upstream sees it. */
export type ConsentPlanKind =
  /** Nothing to ask: no consent needed, the caller is connected, or another answer (a refusal) comes first. */
  | 'none'
  /** The call is a task at once, whose run waits for the connection (consent-wait.ts untilConnected). */
  | 'in_task'
  /** Nobody a browser can sign in as (an API key, no authentication): a clear error, no link. */
  | 'no_user'
  /** -32042 with the URL elicitation (a plain call of a client that takes URL elicitation). */
  | 'elicit'
  /** The revision's input-required answer carrying the URL elicitation (2026-07-28 without the Tasks extension). */
  | 'input_required'
  /** A tool error whose text holds the link (a client that takes no URL elicitation). */
  | 'link';

/**
 * What becomes of a call from a caller standing at `state` at its upstream, planned `plan`, from a client that can
 * take `ask`. Decided once, before the upstream is called; a refusal of the plan's own comes first.
 */
export function planConsent(plan: CallPlan, state: ConsentState, ask: ConsentAsk): ConsentPlanKind {
  if (state === 'not_required' || state === 'connected' || plan.kind === 'refuse') return 'none';
  if (state === 'no_user') return 'no_user';
  // A task waits for the connection (a client without URL elicitation reads the link in its result); one for a name
  // its upstream has not listed yet is called only if the upstream lists it once connected (task-runs.ts).
  if (plan.kind === 'task') return 'in_task';
  if (!ask.urlElicitation) return 'link';
  return ask.inputRequired ? 'input_required' : 'elicit';
}

/** The consent step's outcome: nothing to do, a task that waits, or an answer (with the link, where it has one). */
export type ConsentPlan =
  | { kind: 'none' | 'in_task' | 'no_user'; upstream: string }
  | { kind: 'elicit' | 'input_required' | 'link'; upstream: string; request: ConsentRequest };

/** How the task of a call runs once it is stored. */
export interface TaskLaunch {
  /** Whom the run reaches; made once the task is stored (it may watch it). */
  caller(task: TaskRecord): TaskCaller;
  /** The call, if it runs already (it outlived its window): the task adopts it, and it holds no place in line. */
  running?: () => UpstreamCall | undefined;
  /** Starts the call once the task may run; by default the request's tools/call over its identity. */
  start?: (context: CallContext) => Promise<UpstreamCall | undefined>;
  /** The run the task made, or undefined when the key's task existed already (this call then runs nowhere). */
  launched?(run: RunHandle | undefined): void;
}

export interface CallPlansDeps {
  runs: Pick<TaskRuns, 'openOnce' | 'keyed' | 'run' | 'cancel'>;
  queries: Pick<TaskQueries, 'find' | 'waitFor'>;
  policies: Pick<TaskPolicies, 'policyFor'>;
  logger: Logger;
  /** Per-user connections to upstreams that act as each user (issue 41); none: no upstream needs one. */
  consent?: UserConnections | undefined;
}

/** The core's steps for a planned call. */
export class CallPlans {
  constructor(private readonly deps: CallPlansDeps) {}

  /**
   * The consent step of a call planned `plan` for `principal` (none: no authentication) at `upstream`: where the
   * caller must connect first, the answer it gets (a fresh link in it) or that its task waits; 'none' to go on.
   */
  consent(upstream: string, principal: string | undefined, plan: CallPlan, ask: ConsentAsk): ConsentPlan | Promise<ConsentPlan> {
    // Most calls: their upstream does not act as each user. Answered without a promise: it is on every call's path.
    if (this.deps.consent?.requires(upstream) !== true) return { kind: 'none', upstream };
    return this.consentOf(upstream, principal, plan, ask);
  }

  private async consentOf(upstream: string, principal: string | undefined, plan: CallPlan, ask: ConsentAsk): Promise<ConsentPlan> {
    const consent = this.deps.consent;
    const kind = planConsent(plan, await consentState(consent, principal, upstream), ask);
    if (kind === 'none' || kind === 'in_task' || kind === 'no_user') return { kind, upstream };
    // Not connected: a caller who can connect, at an upstream the consent service serves.
    if (consent === undefined || principal === undefined) return { kind: 'none', upstream };
    const request = await consent.request(principal, upstream, 'call');
    this.deps.logger.info({ upstream, principal, elicitationId: request.elicitationId, answer: kind }, 'call needs the user to connect their account first');
    return { kind, upstream, request };
  }

  /** The consent step for a call whose credential failed mid-call (the connection went): as `consent`, once more. */
  async consentLost(upstream: string, principal: string | undefined, ask: ConsentAsk): Promise<ConsentPlan> {
    return this.consent(upstream, principal, PLAIN, ask);
  }

  /**
   * A keyed replay: the task the call's key made already, when its plan makes a task and the task still exists
   * (-32602 when the key made it for another call). Asked before the upstream is called, so that a retry of a call
   * that became a task (or would, past its window) answers with that task and calls nothing again.
   */
  async replayed(request: ToolCallRequest, plan: CallPlan): Promise<TaskRecord | undefined> {
    if (request.once === undefined || (plan.kind !== 'task' && plan.kind !== 'background')) return undefined;
    return this.deps.runs.keyed(request.once, request.owner);
  }

  /**
   * Stores the call's task (durable before anyone hears of it) and runs it as `launch` says. Under a key already
   * used, the answer is the key's task as it is now, and nothing runs again (`run` undefined).
   */
  async openTask(request: ToolCallRequest, launch: TaskLaunch): Promise<{ task: TaskRecord; run: RunHandle | undefined }> {
    const { upstream, identity, params } = request;
    const opened = await this.deps.runs.openOnce(request.once, {
      principal: request.owner,
      era: request.era,
      exposedName: request.exposedName,
      upstream,
      requestedTtl: request.requestedTtl,
      call: storedCall(params, identity),
      actingFor: request.actingFor,
    });
    const { task, existing } = opened;
    this.deps.logger.debug({ task: task.taskId, session: identity.sessionId, principal: task.principal, existing }, existing ? 'idempotency key: answered with its task' : 'task belongs to session');
    if (existing) {
      launch.launched?.(undefined);
      return { task, run: undefined };
    }
    const running = launch.running?.();
    const start = launch.start ?? ((context: CallContext) => upstream.callFor({ session: identity, actingFor: request.actingFor, method: 'tools/call', params, context, timeoutMs: 0, asTask: true }));
    const run = this.deps.runs.run(task, upstream, launch.caller(task), running === undefined ? start : () => Promise.resolve(running), {
      queue: running === undefined,
      sessionId: identity.sessionId,
      charge: request.charge,
      params,
    });
    launch.launched?.(run);
    return { task, run };
  }

  /**
   * A plain caller of a held call: a task at once (it waits in the store), whose end is the request's answer;
   * undefined when `signal` aborts first, which cancels the task only where the rule says `onCallerGone: cancel`
   * (else the hold stays for its approvers, and the caller finds the task with the task tools). Under a key already
   * used, the wait is for the key's task: one hold, one run.
   */
  async waitHeld(request: ToolCallRequest, launch: TaskLaunch, signal: AbortSignal): Promise<Outcome | undefined> {
    const { task } = await this.openTask(request, launch);
    const outcome = await heldOutcome(this.deps.queries, task.taskId, signal);
    if (outcome !== undefined) return outcome;
    // Hosts time out long before people decide, and an SDK's timeout cancels: leaving keeps the hold unless told.
    if (this.deps.policies.policyFor(request.exposedName).approval?.onCallerGone === 'cancel') {
      const now = await this.deps.queries.find(task.taskId).catch(() => undefined);
      if (now !== undefined && !isTerminal(now.status)) await this.deps.runs.cancel(now).catch(() => undefined);
    } else {
      this.deps.logger.info({ task: task.taskId, principal: task.principal, session: request.identity.sessionId }, 'plain caller stopped waiting for a held call: the task goes on for its approvers');
    }
    return undefined;
  }
}

/**
 * What the held task ends with, as the plain call's answer: the upstream's own result or error once approved, the
 * denial, expiry or cancellation as an error; undefined when `signal` aborts first (the request is gone).
 */
async function heldOutcome(queries: Pick<TaskQueries, 'waitFor' | 'find'>, taskId: string, signal: AbortSignal): Promise<Outcome | undefined> {
  const ended = await queries.waitFor(taskId, (task) => isTerminal(task.status), signal);
  if (ended === undefined) return undefined;
  const task = ended.outcome !== undefined ? ended : await queries.find(taskId, { withOutcome: true });
  return task.outcome ?? { error: { code: InternalError, message: task.message ?? `The call ended ${task.status}` } };
}
