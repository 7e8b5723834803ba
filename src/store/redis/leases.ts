// Who runs what, on Redis: the `{running}` keys (replicas by liveness, each running task's replica, each replica's
// tasks) that lease.lua, reserve.lua, heartbeat.lua, expire-replica.lua, unlease.lua and take-orphans.lua keep. The upstream sessions each
// replica opened share the liveness key (upstream-sessions.ts). The embedded store's twin is memory/leases.ts (over memory/running.ts).
import type { Leases } from '../leases.js';
import type { RedisKeys } from '../redis-keys.js';
import { batches, IDS_PER_SCRIPT_CALL } from '../task-store.js';
import type { RunScript } from './scripts.js';

export class RedisLeases implements Leases {
  constructor(
    private readonly run: RunScript,
    private readonly keys: RedisKeys,
  ) {}

  async assign(taskIds: readonly string[], owner: string, leaseMs: number): Promise<void> {
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

  async expire(replica: string): Promise<void> {
    await this.run('expire-replica', this.keys.replicasAlive(), replica);
  }

  async release(taskId: string, owner?: string): Promise<void> {
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
}
