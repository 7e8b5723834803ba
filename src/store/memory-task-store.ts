// The embedded store: one process, nothing survives a restart. Same contract as the Redis store; each concern is a
// module of memory/, on this store's clock, and this class builds them and keeps what belongs to the whole store
// (its secret, the sweep of what expired).
import { randomBytes } from 'node:crypto';
import { MemoryApprovals, MemoryHolds } from './memory/approvals.js';
import { MemoryBus } from './memory/bus.js';
import { MemoryConnections } from './memory/connections.js';
import { MemoryDeliveries } from './memory/deliveries.js';
import { MemoryLeases, MemoryUpstreamSessions } from './memory/leases.js';
import { MemoryRates } from './memory/rates.js';
import { RunningIndex } from './memory/running.js';
import { MemorySessions } from './memory/sessions.js';
import { MemorySlots } from './memory/slots.js';
import { MemoryTasks } from './memory/tasks.js';
import { CursorCodec, type TaskStore } from './task-store.js';

/** How often what expired is dropped even if nothing reads it. */
const SWEEP_EVERY_MS = 30_000;

export class MemoryTaskStore implements TaskStore {
  readonly kind = 'memory' as const;
  readonly tasks: MemoryTasks;
  readonly bus = new MemoryBus();
  readonly sessions: MemorySessions;
  readonly slots: MemorySlots;
  readonly rates: MemoryRates;
  readonly leases: MemoryLeases;
  readonly upstreamSessions: MemoryUpstreamSessions;
  readonly approvals: MemoryApprovals;
  readonly connections: MemoryConnections;
  readonly deliveries = new MemoryDeliveries();
  private readonly secret = randomBytes(32);
  private readonly sweeper: NodeJS.Timeout;

  constructor(options: { resultGraceMs?: number; now?: () => number } = {}) {
    const now = options.now ?? Date.now;
    /** The index of calls waiting for approval (entries of decided holds go at once, of gone ones as they are met). */
    const holds = new MemoryHolds();
    const running = new RunningIndex();
    this.tasks = new MemoryTasks({ now, cursors: new CursorCodec(this.secret), holds, resultGraceMs: options.resultGraceMs });
    this.sessions = new MemorySessions(now);
    this.slots = new MemorySlots(this.bus, now);
    this.rates = new MemoryRates(now);
    this.leases = new MemoryLeases(running, now);
    this.upstreamSessions = new MemoryUpstreamSessions(running, now);
    this.approvals = new MemoryApprovals(holds, this.tasks, now);
    this.connections = new MemoryConnections(now);
    this.sweeper = setInterval(() => this.sweep(), SWEEP_EVERY_MS);
    this.sweeper.unref();
  }

  async signingSecret(): Promise<Buffer> {
    return this.secret;
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.tasks.close();
    this.bus.close();
  }

  private sweep(): void {
    this.tasks.sweep();
    this.sessions.sweep();
    this.slots.sweep();
    this.connections.sweep();
  }
}
