// Calls held for approval, on Redis: the hold lives in its task's record (the `approval` field, beside the kept
// call), so deciding is one atomic step on the task's own slot (decide-approval.lua). The `{approvals}` slot keeps
// the index of pending holds: ids by deadline, each with a small entry (who asked, tool, approvers, deadline) that
// listings filter on without reading any record, and each principal's pending holds (what the per-principal cap
// counts). The index is written after the record (index-hold.lua) and emptied once decided (unindex-hold.lua): a
// replica lost in between leaves an entry the next reader drops, or a hold the index misses until the replica that
// takes its task over indexes it again (store.approvals.index, from the run's wait). The embedded store's twin is
// memory/approvals.ts.
import type { RedisClient } from '../redis-connection.js';
import type { RedisKeys } from '../redis-keys.js';
import { isTerminal, type TaskRecord } from '../task-store.js';
import { HOLDS_PER_READ, holdAfter, pendingHoldOf, type ApprovalDecision, type Approvals, type DecideResult, type HoldPosition, type HoldReservation, type PendingHold } from '../approvals.js';
import type { RunScript } from './scripts.js';
import { parseTask } from './task-record.js';

export class RedisApprovals implements Approvals {
  constructor(
    private readonly run: RunScript,
    private readonly keys: RedisKeys,
    private readonly redis: RedisClient,
    /** Reads a task's summary, never its stored call (the store's own read, batched). */
    private readonly read: (taskId: string) => Promise<TaskRecord | undefined>,
  ) {}

  async reserve(principal: string, taskId: string, deadlineMs: number, cap: number): Promise<HoldReservation> {
    const [reserved, pending] = (await this.run('reserve-hold', this.keys.pendingApprovalsOf(principal), taskId, String(deadlineMs), String(Math.max(0, cap)))) as [number, number?];
    return reserved === 1 ? { reserved: true } : { reserved: false, pending: Number(pending) };
  }

  async index(hold: PendingHold): Promise<void> {
    await this.run('index-hold', this.keys.pendingApprovals(), this.keys.pendingApprovalEntries(), this.keys.pendingApprovalsOf(hold.principal), hold.taskId, String(hold.deadlineMs), JSON.stringify(entryOf(hold)));
  }

  async unindex(taskId: string): Promise<void> {
    await this.run('unindex-hold', this.keys.pendingApprovals(), this.keys.pendingApprovalEntries(), taskId, this.keys.pendingApprovalsOfPrefix());
  }

  async decide(taskId: string, decision: ApprovalDecision): Promise<DecideResult> {
    const comment = decision.comment;
    const reply = (await this.run(
      'decide-approval',
      this.keys.task(taskId),
      this.keys.taskEvents(),
      decision.state,
      decision.by ?? '',
      comment ?? '',
      comment === undefined ? '0' : '1',
      decision.message,
      decision.digest ?? '',
    )) as string[];
    const [verdict, ...fields] = reply;
    if (verdict === 'not_found') {
      await this.drop(taskId);
      return { ok: false, reason: 'not_found' };
    }
    const task = parseTask(fields);
    if (verdict === 'ok') {
      await this.drop(taskId);
      return { ok: true, task };
    }
    if (verdict === 'terminal' || verdict === 'decided' || verdict === 'not_held') await this.drop(taskId);
    return { ok: false, reason: verdict as Exclude<DecideResult, { ok: true }>['reason'] & string, task } as DecideResult;
  }

  async pending(page: { after?: HoldPosition; limit: number }): Promise<PendingHold[]> {
    const limit = Math.max(0, Math.min(page.limit, HOLDS_PER_READ));
    if (limit === 0) return [];
    const after = page.after;
    const found: PendingHold[] = [];
    const gone: string[] = [];
    // Entries sharing the cursor's deadline but ordered at or before its id are skipped (Redis orders equal scores
    // by member bytes, as holdAfter does); the offset walks past them however many there are. Gone holds are
    // unindexed once the walk is over, so that the offsets stay true during it.
    for (let offset = 0; found.length < limit; ) {
      const reply = await this.redis.zrangebyscore(this.keys.pendingApprovals(), after === undefined ? '-inf' : String(after.deadlineMs), '+inf', 'WITHSCORES', 'LIMIT', offset, limit);
      const positions: HoldPosition[] = [];
      for (let i = 0; i + 1 < reply.length; i += 2) positions.push({ taskId: reply[i] as string, deadlineMs: Number(reply[i + 1]) });
      offset += positions.length;
      const next = after === undefined ? positions : positions.filter((position) => holdAfter(position, after));
      found.push(...(await this.entries(next, gone)).slice(0, limit - found.length));
      if (positions.length < limit) break;
    }
    for (const taskId of gone) await this.drop(taskId);
    return found;
  }

  async due(nowMs: number, limit: number): Promise<string[]> {
    return this.redis.zrangebyscore(this.keys.pendingApprovals(), '-inf', String(nowMs), 'LIMIT', 0, Math.max(0, Math.min(limit, HOLDS_PER_READ)));
  }

  /**
   * The small entries of the holds at `positions`. An id indexed by an earlier release has none: its record's
   * summary (never its call) makes one, written back; an id whose hold is gone or decided goes to `gone` instead.
   */
  private async entries(positions: readonly HoldPosition[], gone: string[]): Promise<PendingHold[]> {
    if (positions.length === 0) return [];
    const texts = await this.redis.hmget(this.keys.pendingApprovalEntries(), ...positions.map((p) => p.taskId));
    const holds = await Promise.all(
      positions.map(async ({ taskId, deadlineMs }, i): Promise<PendingHold | undefined> => {
        const text = texts[i];
        if (text !== null && text !== undefined) return { ...(JSON.parse(text) as Omit<PendingHold, 'taskId' | 'deadlineMs'>), taskId, deadlineMs };
        const task = await this.read(taskId);
        if (task?.approval?.state !== 'pending' || isTerminal(task.status)) {
          gone.push(taskId);
          return undefined;
        }
        const hold = pendingHoldOf(task);
        if (hold !== undefined) await this.index(hold);
        return hold;
      }),
    );
    return holds.filter((hold) => hold !== undefined);
  }

  private async drop(taskId: string): Promise<void> {
    await this.unindex(taskId).catch(() => undefined);
  }
}

/** What the entries hash keeps of a hold (its id and deadline are the index's own). */
function entryOf(hold: PendingHold): Omit<PendingHold, 'taskId' | 'deadlineMs'> {
  return { principal: hold.principal, tool: hold.tool, approvers: hold.approvers, scopes: hold.scopes };
}
