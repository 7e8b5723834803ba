// Leases and upstream sessions of the embedded store: its running index (running.ts) on the store's clock, as the
// two concerns of the TaskStore that share a replica's liveness.
import type { Leases } from '../leases.js';
import type { DeadUpstreamSession, UpstreamSessionRecord, UpstreamSessions } from '../upstream-sessions.js';
import { inTurns } from './in-turns.js';
import type { RunningIndex } from './running.js';

export class MemoryLeases implements Leases {
  constructor(
    private readonly running: RunningIndex,
    private readonly now: () => number,
  ) {}

  async assign(taskIds: readonly string[], owner: string, leaseMs: number): Promise<void> {
    await inTurns(taskIds, (batch) => this.running.lease(batch, owner, this.now() + leaseMs));
  }

  async reserve(taskId: string, owner: string, leaseMs: number): Promise<boolean> {
    return this.running.reserve(taskId, owner, this.now() + leaseMs);
  }

  async heartbeat(replica: string, leaseMs: number): Promise<void> {
    this.running.heartbeat(replica, this.now() + leaseMs);
  }

  async expire(replica: string): Promise<void> {
    this.running.expire(replica);
  }

  async release(taskId: string, owner?: string): Promise<void> {
    this.running.unlease(taskId, owner);
  }

  async takeOrphans(limit: number, taker: string, leaseMs: number): Promise<{ taskId: string; owner: string }[]> {
    const now = this.now();
    return this.running.takeOrphans(limit, taker, now, now + leaseMs);
  }
}

export class MemoryUpstreamSessions implements UpstreamSessions {
  constructor(
    private readonly running: RunningIndex,
    private readonly now: () => number,
  ) {}

  async record(replica: string, session: UpstreamSessionRecord, leaseMs: number): Promise<void> {
    this.running.recordUpstreamSession(replica, session, this.now() + leaseMs);
  }

  async forget(replica: string, session: Pick<UpstreamSessionRecord, 'upstream' | 'sessionId'>): Promise<void> {
    this.running.forgetUpstreamSession(replica, session);
  }

  async takeDead(limit: number): Promise<DeadUpstreamSession[]> {
    return this.running.takeDeadUpstreamSessions(limit, this.now());
  }
}
