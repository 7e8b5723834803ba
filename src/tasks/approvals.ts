// Calls held for a person's approval (tasks.rules[].approval): the wait a run makes before its upstream call (the
// hold a task opens with is held-calls.ts), the decisions approvers take (on any replica, one atomic store step
// each), and the sweep that expires holds nobody decided. The hold lives in the task's record beside its kept call, so whichever
// replica runs the task (the one that opened it, or one that took it over) waits on the store for the decision,
// and a restart loses nothing. An approved call runs once, with the arguments the hold recorded a digest of.
// Listings and the sweep read the store's index of pending holds (small entries: who asked, tool, approvers,
// deadline) and never a call they do not return: a listing filters by its caller first and reads the calls of its
// own page only, pages with a cursor so that nobody's holds hide anyone else's, and is bounded in how much of the
// index it scans and in how many run at once; the sweep reads ids and deadlines.
import { principalMatches } from '../config/access.js';
import type { ApprovalPolicy } from '../config/types.js';
import { GatewayError, storeUnavailable } from '../errors.js';
import type { GatewayEvents } from '../events.js';
import type { JsonObject } from '../jsonrpc.js';
import { approvalDigest } from './call-digest.js';
import type { Logger } from '../log.js';
import { CursorCodec, failedWith, InvalidCursorError, isTerminal, type ApprovalState, type TaskRecord, type TaskStore } from '../store/task-store.js';
import { HOLDS_PER_READ, pendingHoldOf, type DecideResult, type HoldPosition, type PendingHold } from '../store/approvals.js';
import type { EndWrites } from './end-writes.js';
import type { Caller } from '../principals.js';
import { taskAgeMs, taskFacts } from './task-facts.js';
import type { TaskPolicies } from './task-policies.js';
import type { TaskQueries } from './task-queries.js';

/** How often each replica looks for holds past their deadline (a held run's own timer usually comes first). */
export const APPROVAL_SWEEP_MS = 1_000;

/** Holds one listing page returns unless the caller asks for fewer (`limit`), and at most: their calls are read. */
export const APPROVALS_PAGE_SIZE = 50;
export const APPROVALS_PAGE_MAX = 100;
/**
 * A page ends once the calls it holds reach this many bytes (as JSON; at least one hold): what one listing reads
 * and sends is bounded whatever the arguments' sizes. The calls are read CALLS_READ_AT_ONCE at a time.
 */
export const APPROVALS_PAGE_CALL_BYTES = 16 * 1024 * 1024;
const CALLS_READ_AT_ONCE = 4;
/**
 * Index entries (small: no call) one listing looks at, at most, for holds its caller may decide; past them it
 * answers with what it found and a cursor that goes on from there (possibly with an empty page).
 */
export const HOLDS_SCANNED_PER_LISTING = 2_000;
/** Listings one replica serves at once, and one principal at once on a replica; more are refused, to retry. */
export const LISTINGS_PER_REPLICA = 8;
export const LISTINGS_PER_PRINCIPAL = 2;
/** When a listing refused for being one too many is told to try again. */
export const LISTING_RETRY_MS = 1_000;

/** A page of the holds a caller may decide, soonest deadline first, each with its stored call. */
export interface ApprovalsPage {
  tasks: TaskRecord[];
  /** Where the next page starts (opaque, bound to the caller); absent once every hold has been seen. */
  nextCursor?: string;
}

/** What deciding who sees and decides a hold needs: who asked, for which tool, whom the hold named. */
type HoldFacts = Pick<PendingHold, 'principal' | 'tool' | 'approvers' | 'scopes'>;

/** Whether `caller` is one of the approvers `approval` names. */
export function isApprover(approval: Pick<ApprovalPolicy, 'approvers' | 'scopes'>, caller: Caller): boolean {
  return approval.approvers.some((glob) => principalMatches(glob, caller)) || approval.scopes.some((scope) => caller.scopes.includes(scope));
}

/** The longest comment kept with a decision (characters): it goes into the task's status message, the audit log and webhooks. */
export const MAX_COMMENT_CHARS = 1_000;

/** Why a decision's comment is refused (not a string, or longer than MAX_COMMENT_CHARS); undefined when it is fine. */
export function commentRefusal(comment: unknown): string | undefined {
  if (comment === undefined) return undefined;
  if (typeof comment !== 'string') return 'comment must be a string';
  if (comment.length > MAX_COMMENT_CHARS) return `comment must be at most ${MAX_COMMENT_CHARS} characters (it was ${comment.length})`;
  return undefined;
}

/** A decision as an approver asks for it: `digest` is the one the listing showed for the call they decide on. */
export interface DecisionAsked {
  decision: 'approve' | 'deny';
  comment?: string | undefined;
  digest?: string | undefined;
}

/** Why a decision was not taken, in words a client can branch on (the HTTP API sends it as `reason`). */
export type DecisionRefusal = 'bad_comment' | 'unknown' | 'not_approver' | 'own_call' | 'ended' | 'cancelled' | 'changed' | 'expired' | 'decided';

/** What an approver may decide: the decision asked for, refused with an HTTP-like reason when it cannot be taken. */
export type DecisionAnswer =
  | { ok: true; task: TaskRecord }
  | { ok: false; status: 400 | 403 | 404 | 409; reason: DecisionRefusal; message: string; task?: TaskRecord };

/**
 * How a hold stands, as approvers are told: its recorded state, except that a pending hold of a task that ended
 * (cancelled by its caller, or failed some other way before anyone decided) ended with its task.
 */
export function holdState(task: TaskRecord): ApprovalState | 'cancelled' | 'ended' | undefined {
  const state = task.approval?.state;
  if (state !== 'pending' || !isTerminal(task.status)) return state;
  return task.status === 'cancelled' ? 'cancelled' : 'ended';
}

export interface ApprovalsDeps {
  store: TaskStore;
  policies: Pick<TaskPolicies, 'policyFor' | 'config'>;
  queries: Pick<TaskQueries, 'waitFor'>;
  endWrites: Pick<EndWrites, 'record'>;
  events: GatewayEvents;
  logger: Logger;
}

/** A run waiting on its hold: its task, whether it ended, and the signal that says so. */
export interface HeldRun {
  task: TaskRecord;
  readonly ended: boolean;
  readonly signal: AbortSignal;
}

export class Approvals {
  private sweeper: NodeJS.Timeout | undefined;
  private sweeping = false;
  /** Listings being served here: in all, and per principal. */
  private listings = 0;
  private readonly listingsOf = new Map<string, number>();
  private cursors: CursorCodec | undefined;

  constructor(private readonly deps: ApprovalsDeps) {}

  /** Announces a new hold (the task was just stored with it). */
  requested(task: TaskRecord): void {
    if (task.approval === undefined) return;
    this.deps.events.emit('approval.requested', { ...taskFacts(task), approvers: [...task.approval.approvers, ...task.approval.scopes.map((scope) => `scope:${scope}`)], deadline: task.approval.deadlineMs });
  }

  /**
   * Waits until the run's hold is decided. True when approved and `params` (the call about to go upstream) are what
   * was approved; false when the run ended first, or the hold was denied, expired, or bound to other arguments
   * (the task is failed saying so). The run's own timer expires the hold at its deadline; the sweep does it for
   * holds nobody waits on.
   */
  async untilApproved(run: HeldRun, params: JsonObject | undefined): Promise<boolean> {
    const hold = run.task.approval;
    if (hold === undefined) return true;
    const taskId = run.task.taskId;
    let timer: NodeJS.Timeout | undefined;
    if (hold.state === 'pending') {
      timer = setTimeout(() => void this.expire(taskId), Math.max(0, hold.deadlineMs - Date.now()));
      timer.unref();
      // A run taken over from a lost replica may hold a call that replica never got to index: list it (again; idempotent).
      await this.deps.store.approvals.index(pendingHoldOf({ ...run.task, approval: hold }) as PendingHold).catch(() => undefined);
    }
    let decided: TaskRecord | undefined;
    try {
      decided = await this.deps.queries.waitFor(taskId, (task) => isTerminal(task.status) || task.approval?.state !== 'pending', run.signal);
    } catch {
      decided = undefined; // gone, or the store is away: the run ends; its lease lets another replica take it over
    } finally {
      clearTimeout(timer);
    }
    if (decided === undefined || run.ended) return false;
    if (isTerminal(decided.status)) return false;
    const approval = decided.approval;
    if (approval?.state !== 'approved') {
      await this.failDecided(decided);
      return false;
    }
    run.task = { ...run.task, approval };
    if (params !== undefined && approvalDigest(params) !== approval.digest) {
      await this.deps.endWrites.record({ task: run.task, change: failedWith('The call was not run: its arguments differ from the ones that were approved'), reason: 'approval' });
      return false;
    }
    return true;
  }

  /**
   * A page of the pending holds `caller` may decide, soonest deadline first, each with its stored call, after
   * `cursor` (a page's nextCursor). Filters on the index's small entries, so a caller who may decide nothing reads
   * no call, and reads the calls of the page it returns only. Refused (rate_limited, to retry) past
   * LISTINGS_PER_PRINCIPAL listings of one principal, or LISTINGS_PER_REPLICA in all, at once on this replica;
   * InvalidCursorError for a cursor this caller was not given.
   */
  async pendingFor(caller: Caller, page: { cursor?: string; limit?: number } = {}): Promise<ApprovalsPage> {
    const release = this.admitListing(caller.principal);
    try {
      return await this.page(caller, page).catch((error: unknown) => {
        throw error instanceof InvalidCursorError || error instanceof GatewayError ? error : storeUnavailable(error);
      });
    } finally {
      release();
    }
  }

  private async page(caller: Caller, request: { cursor?: string; limit?: number }): Promise<ApprovalsPage> {
    const { store } = this.deps;
    const limit = Math.max(1, Math.min(request.limit ?? APPROVALS_PAGE_SIZE, APPROVALS_PAGE_MAX));
    const codec = await this.cursorCodec();
    let after = request.cursor === undefined ? undefined : positionIn(codec.decode(cursorOwner(caller), request.cursor));
    const tasks: TaskRecord[] = [];
    let callBytes = 0;
    const full = (): boolean => tasks.length >= limit || callBytes >= APPROVALS_PAGE_CALL_BYTES;
    let scanned = 0;
    for (;;) {
      const want = Math.min(HOLDS_PER_READ, HOLDS_SCANNED_PER_LISTING - scanned);
      const entries = await store.approvals.pending({ ...(after === undefined ? {} : { after }), limit: want });
      scanned += entries.length;
      const mine = entries.filter((entry) => this.mayDecide(entry, caller) && this.mayDecideOwn(entry, caller));
      // The calls of this caller's holds, a few at a time, in order, until the page is full (in holds or in bytes).
      for (let next = 0; next < mine.length && !full(); ) {
        const batch = mine.slice(next, next + Math.min(CALLS_READ_AT_ONCE, limit - tasks.length));
        next += batch.length;
        const records = await Promise.all(batch.map((entry) => store.tasks.get(entry.taskId, { call: true })));
        for (const [i, entry] of batch.entries()) {
          if (full()) break;
          const task = records[i];
          if (task !== undefined && !isTerminal(task.status) && task.approval?.state === 'pending') {
            tasks.push(task);
            callBytes += Buffer.byteLength(JSON.stringify(task.call?.params ?? null));
          } else await store.approvals.unindex(entry.taskId); // decided elsewhere, ended, or gone
          after = entry;
        }
      }
      const indexEnded = entries.length < want;
      if (full()) {
        // Full: the next page goes on after its last hold (unless the index ended right there).
        const lastOfIndex = indexEnded && after === entries.at(-1);
        return { tasks, ...(lastOfIndex || after === undefined ? {} : { nextCursor: codec.encode(cursorOwner(caller), positionText(after)) }) };
      }
      after = entries.at(-1) ?? after;
      if (indexEnded) return { tasks };
      if (scanned >= HOLDS_SCANNED_PER_LISTING) return { tasks, ...(after === undefined ? {} : { nextCursor: codec.encode(cursorOwner(caller), positionText(after)) }) };
    }
  }

  /** Counts a listing in, or refuses it (retryable) when this replica or its principal serves enough at once. */
  private admitListing(principal: string): () => void {
    const own = this.listingsOf.get(principal) ?? 0;
    if (own >= LISTINGS_PER_PRINCIPAL || this.listings >= LISTINGS_PER_REPLICA) {
      const which = own >= LISTINGS_PER_PRINCIPAL ? `${own} of yours (at most ${LISTINGS_PER_PRINCIPAL} per principal)` : `${this.listings} (at most ${LISTINGS_PER_REPLICA} per replica)`;
      this.deps.events.emit('rate.limited', { principal, limit: 'approvalListings', retryAfterMs: LISTING_RETRY_MS });
      throw new GatewayError('rate_limited', `Too many approval listings at once: ${which} are being served; try again shortly`, { retryAfterMs: LISTING_RETRY_MS });
    }
    this.listings++;
    this.listingsOf.set(principal, own + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.listings--;
      const left = (this.listingsOf.get(principal) ?? 1) - 1;
      if (left <= 0) this.listingsOf.delete(principal);
      else this.listingsOf.set(principal, left);
    };
  }

  private async cursorCodec(): Promise<CursorCodec> {
    this.cursors ??= new CursorCodec(await this.deps.store.signingSecret());
    return this.cursors;
  }

  /**
   * Takes `caller`'s decision on the task's hold: 400 for a comment past MAX_COMMENT_CHARS, 404 for no such hold,
   * 403 for anyone who is not its approver (or who asked for the call, unless the rule allows it), 409 once it is
   * decided (or past its deadline), and 409 when the hold is bound to another call than the one the approver was
   * shown (`digest`, from the listing): the check is the store's, atomic with the decision.
   */
  async decide(taskId: string, caller: Caller, asked: DecisionAsked): Promise<DecisionAnswer> {
    const { store, events } = this.deps;
    const { decision, comment, digest } = asked;
    const badComment = commentRefusal(comment);
    if (badComment !== undefined) return { ok: false, status: 400, reason: 'bad_comment', message: badComment };
    const task = await store.tasks.get(taskId, { call: true }).catch((error: unknown) => {
      throw storeUnavailable(error);
    });
    if (task?.approval === undefined) return { ok: false, status: 404, reason: 'unknown', message: 'No such approval (unknown task, or a call that was never held)' };
    const facts: HoldFacts = { principal: task.principal, tool: task.tool, approvers: task.approval.approvers, scopes: task.approval.scopes };
    if (!this.mayDecide(facts, caller)) {
      events.emit('access.denied', { principal: caller.principal, kind: 'approval', name: task.tool, taskId, reason: 'not an approver of this tool' });
      return { ok: false, status: 403, reason: 'not_approver', message: 'Forbidden: you are not an approver of this tool' };
    }
    if (!this.mayDecideOwn(facts, caller)) {
      events.emit('access.denied', { principal: caller.principal, kind: 'approval', name: task.tool, taskId, reason: 'own call: the rule does not allow self-approval' });
      return { ok: false, status: 403, reason: 'own_call', message: 'Forbidden: you asked for this call, and its rule does not let the caller approve their own call (allowSelf)' };
    }
    const state = decision === 'approve' ? 'approved' : 'denied';
    const message = state === 'approved' ? `Approved by ${caller.principal}; the call starts` : deniedMessage(caller.principal, comment);
    const result = await store.approvals.decide(taskId, { state, by: caller.principal, ...(comment === undefined ? {} : { comment }), ...(digest === undefined ? {} : { digest }), message }).catch((error: unknown) => {
      throw storeUnavailable(error);
    });
    if (!result.ok) {
      // A changed call is answered with the call as it stands now, so that the approver is shown it anew.
      if (result.reason === 'changed') return refusal({ ...result, task: (await store.tasks.get(taskId, { call: true }).catch(() => undefined)) ?? result.task });
      return refusal(result);
    }
    const decided = result.task;
    this.announce(decided);
    if (state === 'denied') await this.failDecided(decided);
    // The decided record, with the arguments that were decided on (a denied task's end drops its kept call).
    const now = (await store.tasks.get(taskId).catch(() => undefined)) ?? decided;
    return { ok: true, task: task.call === undefined ? now : { ...now, call: task.call } };
  }

  /** Starts looking for holds past their deadline every APPROVAL_SWEEP_MS (any replica; each hold expires once). */
  start(): void {
    this.sweeper = setInterval(() => void this.sweep(), APPROVAL_SWEEP_MS);
    this.sweeper.unref();
  }

  stop(): void {
    clearInterval(this.sweeper);
  }

  /** Expires the holds past their deadline, and fails their tasks. */
  async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      // Ids and deadlines only: expiring a hold never needs its call.
      const due = await this.deps.store.approvals.due(Date.now(), HOLDS_PER_READ).catch(() => []);
      for (const taskId of due) await this.expire(taskId);
    } finally {
      this.sweeping = false;
    }
  }

  /** The run of a held task ended while it waited (cancelled, or the task ended some other way): the hold ends with it. */
  endedWhileHeld(task: TaskRecord, status: string): void {
    if (task.approval?.state !== 'pending') return;
    // Out of the index (and its principal's count) at once, not when a listing or the sweep next meets it.
    void this.deps.store.approvals.unindex(task.taskId).catch(() => undefined);
    if (status !== 'cancelled') return;
    this.deps.events.emit('approval.decided', { ...taskFacts(task), decision: 'cancelled', waitedMs: taskAgeMs(task) });
  }

  private async expire(taskId: string): Promise<void> {
    const result = await this.deps.store.approvals.decide(taskId, { state: 'expired', message: 'The approval expired: nobody approved the call in time; the tool was not called' }).catch(() => undefined);
    if (result?.ok !== true) return;
    this.announce(result.task);
    await this.failDecided(result.task);
  }

  /** Fails a task whose hold was denied or expired (whoever comes first: the decider, or the replica holding it). */
  private async failDecided(task: TaskRecord): Promise<void> {
    const approval = task.approval;
    if (approval === undefined || approval.state === 'pending' || approval.state === 'approved') return;
    const message = approval.state === 'denied' ? deniedMessage(approval.decidedBy, approval.comment) : 'The approval expired: nobody approved the call in time; the tool was not called';
    await this.deps.endWrites.record({ task, change: failedWith(message), reason: approval.state === 'denied' ? 'approval denied' : 'approval expired' });
  }

  private announce(task: TaskRecord): void {
    const approval = task.approval;
    if (approval === undefined || approval.state === 'pending') return;
    this.deps.events.emit('approval.decided', {
      ...taskFacts(task),
      decision: approval.state,
      ...(approval.decidedBy === undefined ? {} : { decidedBy: approval.decidedBy }),
      ...(approval.comment === undefined ? {} : { comment: approval.comment }),
      waitedMs: Math.max(0, (approval.decidedMs ?? Date.now()) - task.createdMs),
    });
  }

  /**
   * Whether `caller` approves calls of the task's tool: by the rule in force now (a reload applies at once), or,
   * where no rule holds the tool any more, by the approvers the hold was opened with (it still waits for someone).
   */
  private mayDecide(hold: HoldFacts, caller: Caller): boolean {
    const policy = this.deps.policies.policyFor(hold.tool).approval;
    return isApprover(policy ?? hold, caller);
  }

  /** The caller of a held call decides it only where the rule says so. */
  private mayDecideOwn(hold: HoldFacts, caller: Caller): boolean {
    return hold.principal !== caller.principal || this.deps.policies.policyFor(hold.tool).approval?.allowSelf === true;
  }
}

/** Whether any rule in force names `caller` as an approver (the approval tools are listed to them only). */
export function approvesAnything(policies: Pick<TaskPolicies, 'config'>, caller: Caller | undefined): boolean {
  if (caller === undefined) return false;
  return policies.config.rules.some((rule) => rule.approval !== undefined && isApprover(rule.approval, caller));
}

/** Whom a listing cursor is bound to: the caller, apart from task-list cursors signed with the same secret. */
function cursorOwner(caller: Caller): string {
  return `approvals\u0000${caller.principal}`;
}

function positionText(position: HoldPosition): string {
  return `${position.deadlineMs}:${position.taskId}`;
}

function positionIn(text: string): HoldPosition {
  const colon = text.indexOf(':');
  const deadlineMs = Number(text.slice(0, colon));
  if (colon <= 0 || !Number.isSafeInteger(deadlineMs)) throw new InvalidCursorError();
  return { deadlineMs, taskId: text.slice(colon + 1) };
}

function deniedMessage(by: string | undefined, comment: string | undefined): string {
  return `The call was denied by ${by ?? 'an approver'}${comment === undefined || comment === '' ? '' : `: ${comment}`}; the tool was not called`;
}

function refusal(result: Exclude<DecideResult, { ok: true }>): DecisionAnswer {
  switch (result.reason) {
    case 'not_found':
    case 'not_held':
      return { ok: false, status: 404, reason: 'unknown', message: 'No such approval (unknown task, or a call that was never held)' };
    case 'terminal':
      if (result.task.status === 'cancelled' && result.task.approval?.state === 'pending') {
        return { ok: false, status: 409, reason: 'cancelled', message: 'The task was cancelled while its call waited for approval: the hold ended with it, and there is nothing left to decide', task: result.task };
      }
      return { ok: false, status: 409, reason: 'ended', message: `The task has ended (${result.task.status}): there is nothing left to decide`, task: result.task };
    case 'changed':
      return { ok: false, status: 409, reason: 'changed', message: 'The call changed since it was shown to you: its tool or arguments are not the ones you decided on, and nothing was decided. Look at it again (the approval below is the call as it stands)', task: result.task };
    case 'expired':
    case 'not_due':
      return { ok: false, status: 409, reason: 'expired', message: 'The approval has expired: its deadline passed', task: result.task };
    case 'decided':
      return { ok: false, status: 409, reason: 'decided', message: `Already decided (${result.task.approval?.state ?? 'decided'})`, task: result.task };
  }
}
