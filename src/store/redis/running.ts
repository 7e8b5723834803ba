// Who runs what, on Redis: the `{running}` keys (replicas by liveness, each running task's replica, each replica's
// tasks) that lease.lua, heartbeat.lua, unlease.lua and take-orphans.lua keep, and the upstream sessions each replica
// opened (record-upstream-session.lua, take-upstream-sessions.lua). The embedded store's twin is memory/running.ts.
import type { RedisClient } from '../redis-connection.js';
import type { RedisKeys } from '../redis-keys.js';
import { batches, IDS_PER_SCRIPT_CALL, UPSTREAM_SESSIONS_PER_TAKE, type UpstreamSessionRecord } from '../task-store.js';
import type { RunScript } from './scripts.js';

export class RedisRunning {
  constructor(
    private readonly run: RunScript,
    private readonly keys: RedisKeys,
    private readonly redis: RedisClient,
  ) {}

  async lease(taskIds: readonly string[], owner: string, leaseMs: number): Promise<void> {
    const keys = [this.keys.replicasAlive(), this.keys.runningOwners(), this.keys.runningOf(owner)];
    // One batch after the other: other clients' commands get their turn between them.
    for (const batch of batches(taskIds)) await this.run('lease', ...keys, owner, String(leaseMs), this.keys.runningOfPrefix(), ...batch);
  }

  async reserve(taskId: string, owner: string, leaseMs: number): Promise<boolean> {
    const keys = [this.keys.replicasAlive(), this.keys.runningOwners(), this.keys.runningOf(owner)];
    return (await this.run('reserve', ...keys, owner, String(leaseMs), taskId)) === 1;
  }

  async heartbeat(replica: string, leaseMs: number): Promise<void> {
    await this.run('heartbeat', this.keys.replicasAlive(), replica, String(leaseMs));
  }

  async unlease(taskId: string, owner?: string): Promise<void> {
    await this.run('unlease', this.keys.runningOwners(), this.keys.runningByLeaseDeadline(), taskId, this.keys.runningOfPrefix(), owner ?? '');
  }

  async takeOrphans(limit: number, taker: string, leaseMs: number): Promise<{ taskId: string; owner: string }[]> {
    const most = String(Math.min(limit, IDS_PER_SCRIPT_CALL));
    const keys = [this.keys.replicasAlive(), this.keys.runningOwners(), this.keys.runningOf(taker), this.keys.runningByLeaseDeadline()];
    const flat = (await this.run('take-orphans', ...keys, most, taker, String(leaseMs), this.keys.runningOfPrefix())) as string[];
    const orphans: { taskId: string; owner: string }[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) orphans.push({ taskId: flat[i] as string, owner: flat[i + 1] as string });
    return orphans;
  }

  async recordUpstreamSession(replica: string, session: UpstreamSessionRecord, leaseMs: number): Promise<void> {
    const keys = [this.keys.replicasAlive(), this.keys.upstreamSessionReplicas(), this.keys.upstreamSessionsOf(replica)];
    await this.run('record-upstream-session', ...keys, replica, String(leaseMs), upstreamSessionField(session), session.protocolVersion ?? '');
  }

  async forgetUpstreamSession(replica: string, session: Pick<UpstreamSessionRecord, 'upstream' | 'sessionId'>): Promise<void> {
    // One command: a replica left in the set with an empty hash costs nothing, and the sweep drops it once dead.
    await this.redis.hdel(this.keys.upstreamSessionsOf(replica), upstreamSessionField(session));
  }

  async takeDeadUpstreamSessions(limit: number): Promise<(UpstreamSessionRecord & { replica: string })[]> {
    const most = String(Math.max(1, Math.min(limit, UPSTREAM_SESSIONS_PER_TAKE)));
    const flat = (await this.run('take-upstream-sessions', this.keys.replicasAlive(), this.keys.upstreamSessionReplicas(), most, this.keys.upstreamSessionsOfPrefix())) as string[];
    const taken: (UpstreamSessionRecord & { replica: string })[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) {
      const parsed = parseUpstreamSessionField(flat[i + 1] as string);
      if (parsed === undefined) continue;
      const protocolVersion = flat[i + 2] as string;
      taken.push({ replica: flat[i] as string, ...parsed, ...(protocolVersion === '' ? {} : { protocolVersion }) });
    }
    return taken;
  }
}

/** An upstream session's field in its replica's hash: the upstream's name and the session id, both arbitrary text. */
function upstreamSessionField(session: Pick<UpstreamSessionRecord, 'upstream' | 'sessionId'>): string {
  return JSON.stringify([session.upstream, session.sessionId]);
}

function parseUpstreamSessionField(field: string): Pick<UpstreamSessionRecord, 'upstream' | 'sessionId'> | undefined {
  try {
    const [upstream, sessionId] = JSON.parse(field) as unknown[];
    return typeof upstream === 'string' && typeof sessionId === 'string' ? { upstream, sessionId } : undefined;
  } catch {
    return undefined;
  }
}
