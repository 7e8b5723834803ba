// Calls held for approval, on Redis: the hold lives in its task's record (the `approval` field, beside the kept
// call), so deciding is one atomic step on the task's own slot (decide-approval.lua); the `{approvals}` index of
// pending holds by deadline is what an approver's listing and the expiry sweep read. It is kept after the record
// (added once the task exists, dropped once decided): a replica lost in between leaves an entry that the next
// read drops, or a hold the index misses until the replica that takes its task over indexes it again
// (TaskStore.indexApproval, from the run's wait). The embedded store's
// twin is in memory-task-store.ts.
import type { RedisClient } from '../redis-connection.js';
import type { RedisKeys } from '../redis-keys.js';
import type { ApprovalDecision, DecideResult, TaskRecord } from '../task-store.js';
import type { RunScript } from './scripts.js';
import { parseTask } from './task-record.js';

export class RedisApprovals {
  constructor(
    private readonly run: RunScript,
    private readonly keys: RedisKeys,
    private readonly redis: RedisClient,
    /** Reads a task with its stored call (the store's own read, batched). */
    private readonly read: (taskId: string) => Promise<TaskRecord | undefined>,
  ) {}

  /** Lists a held task among the pending ones (again, after a takeover: adding is idempotent). */
  async index(taskId: string, deadlineMs: number): Promise<void> {
    await this.redis.zadd(this.keys.pendingApprovals(), String(deadlineMs), taskId);
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

  async pending(limit: number): Promise<TaskRecord[]> {
    const ids = await this.redis.zrange(this.keys.pendingApprovals(), '0', String(Math.max(0, limit - 1)));
    const tasks = await Promise.all(ids.map((taskId) => this.read(taskId)));
    const held: TaskRecord[] = [];
    const gone: string[] = [];
    ids.forEach((taskId, i) => {
      const task = tasks[i];
      if (task?.approval?.state === 'pending' && !['completed', 'failed', 'cancelled'].includes(task.status)) held.push(task);
      else gone.push(taskId);
    });
    if (gone.length > 0) await this.redis.zrem(this.keys.pendingApprovals(), ...gone);
    return held;
  }

  private async drop(taskId: string): Promise<void> {
    await this.redis.zrem(this.keys.pendingApprovals(), taskId).catch(() => undefined);
  }
}
