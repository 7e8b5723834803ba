// Who runs what, for the embedded store: the same contract as the Redis store's `{running}` keys (lease.lua,
// heartbeat.lua, expire-replica.lua, unlease.lua, take-orphans.lua, and the upstream sessions of
// record-upstream-session.lua and take-upstream-sessions.lua) in one process. A replica's tasks live as long as its liveness.
import { IDS_PER_SCRIPT_CALL } from '../task-store.js';
import { UPSTREAM_SESSIONS_PER_TAKE, type DeadUpstreamSession, type UpstreamSessionRecord } from '../upstream-sessions.js';

export class RunningIndex {
  /** Each replica's liveness deadline (epoch ms; run out when <= now). */
  private readonly aliveUntil = new Map<string, number>();
  /** Each running task's replica. */
  private readonly owners = new Map<string, string>();
  /** Each replica's running tasks. */
  private readonly runningOf = new Map<string, Set<string>>();
  /** Each replica's upstream sessions, by upstream and session id. */
  private readonly upstreamSessions = new Map<string, Map<string, UpstreamSessionRecord>>();

  /** Tasks run on `owner` from now on, which is alive until `deadline` (never shortened by this). */
  lease(taskIds: readonly string[], owner: string, deadline: number): void {
    if ((this.aliveUntil.get(owner) ?? 0) < deadline) this.aliveUntil.set(owner, deadline);
    for (const taskId of taskIds) this.run(taskId, owner);
  }

  /** A task about to be created runs on `owner` (alive until `deadline`), unless a replica holds its id already. */
  reserve(taskId: string, owner: string, deadline: number): boolean {
    if ((this.aliveUntil.get(owner) ?? 0) < deadline) this.aliveUntil.set(owner, deadline);
    if (this.owners.has(taskId)) return false;
    this.run(taskId, owner);
    return true;
  }

  heartbeat(replica: string, deadline: number): void {
    this.aliveUntil.set(replica, deadline);
  }

  /** The replica gives up its liveness (it shuts down): its tasks are orphans now. Unknown replicas are left out. */
  expire(replica: string): void {
    if (this.aliveUntil.has(replica)) this.aliveUntil.set(replica, 0);
  }

  /** The task stops running; with `only`, only while that replica holds it (a reservation given back). */
  unlease(taskId: string, only?: string): void {
    const owner = this.owners.get(taskId);
    if (owner === undefined || (only !== undefined && owner !== only)) return;
    this.owners.delete(taskId);
    this.runningOf.get(owner)?.delete(taskId);
  }

  /** Up to `limit` tasks of replicas dead at `now`, moved to `taker` (alive until `deadline`). */
  takeOrphans(limit: number, taker: string, now: number, deadline: number): { taskId: string; owner: string }[] {
    const most = Math.min(limit, IDS_PER_SCRIPT_CALL);
    this.aliveUntil.set(taker, deadline);
    const orphans: { taskId: string; owner: string }[] = [];
    for (const [replica, aliveUntil] of this.aliveUntil) {
      if (aliveUntil > now) continue;
      const tasks = this.runningOf.get(replica) ?? new Set<string>();
      for (const taskId of tasks) {
        if (orphans.length >= most) break;
        this.run(taskId, taker);
        orphans.push({ taskId, owner: replica });
      }
      if (tasks.size > 0) break; // the batch is full; the rest go to the next call
      // A dead replica with nothing left leaves the index.
      this.aliveUntil.delete(replica);
      this.runningOf.delete(replica);
    }
    return orphans;
  }

  /** Task `taskId` runs on `replica` from now on (and no longer on the one it ran on). */
  private run(taskId: string, replica: string): void {
    const previous = this.owners.get(taskId);
    if (previous !== undefined && previous !== replica) this.runningOf.get(previous)?.delete(taskId);
    this.owners.set(taskId, replica);
    let tasks = this.runningOf.get(replica);
    if (tasks === undefined) this.runningOf.set(replica, (tasks = new Set()));
    tasks.add(taskId);
  }

  /** Replica `replica` opened an upstream session, and is alive until `deadline` (never shortened by this). */
  recordUpstreamSession(replica: string, session: UpstreamSessionRecord, deadline: number): void {
    if ((this.aliveUntil.get(replica) ?? 0) < deadline) this.aliveUntil.set(replica, deadline);
    let sessions = this.upstreamSessions.get(replica);
    if (sessions === undefined) this.upstreamSessions.set(replica, (sessions = new Map()));
    sessions.set(sessionKey(session), { ...session });
  }

  forgetUpstreamSession(replica: string, session: Pick<UpstreamSessionRecord, 'upstream' | 'sessionId'>): void {
    this.upstreamSessions.get(replica)?.delete(sessionKey(session));
  }

  /** Up to `limit` upstream sessions of replicas dead at `now` (or gone from the liveness index), forgotten here. */
  takeDeadUpstreamSessions(limit: number, now: number): DeadUpstreamSession[] {
    const most = Math.max(1, Math.min(limit, UPSTREAM_SESSIONS_PER_TAKE));
    const taken: DeadUpstreamSession[] = [];
    for (const [replica, sessions] of this.upstreamSessions) {
      if (taken.length >= most) break;
      if ((this.aliveUntil.get(replica) ?? 0) > now) continue;
      for (const [key, session] of sessions) {
        if (taken.length >= most) break;
        sessions.delete(key);
        taken.push({ replica, ...session });
      }
      if (sessions.size === 0) this.upstreamSessions.delete(replica);
    }
    return taken;
  }
}

function sessionKey(session: Pick<UpstreamSessionRecord, 'upstream' | 'sessionId'>): string {
  return JSON.stringify([session.upstream, session.sessionId]);
}
