// What a sweep does after it settled a dead replica's tasks (leases.ts): it ends the upstream sessions that replica
// left open, each record going to one sweeping replica; and the bounds both steps share.
import type { Logger } from '../log.js';
import type { TaskStore } from '../store/task-store.js';
import { UPSTREAM_SESSIONS_PER_TAKE, type DeadUpstreamSession } from '../store/upstream-sessions.js';
import type { Upstream } from '../upstream/life/upstream.js';
import type { Peers } from './peers.js';

/** How long a sweep waits for a task's owner (or a replica that looks dead) to answer. */
export const OWNER_CHECK_MS = 500;
/** Lost tasks (or dead replicas' sessions) settled at once during a sweep (store round trips in flight). */
export const RECOVERY_CONCURRENCY = 64;

export interface DeadSessionsDeps {
  store: Pick<TaskStore, 'upstreamSessions'>;
  /** Asked whether a replica that looks dead is alive after all (leases.ts declares the message). */
  peers: Peers<{ 'replica.alive': { body: Record<string, never>; answer: { alive: true } } }>;
  /** The live upstream of that name, through which a session is ended. */
  losses: { upstream(name: string): Upstream | undefined };
  logger: Logger;
  leaseMs: number;
}

/**
 * Ends the upstream sessions that dead replicas left open (recorded in the store as they opened them), batch
 * after batch: otherwise the upstream keeps each to its own expiry, if it has one. Each record goes to one
 * sweeping replica, which sends the DELETE through its own configuration of that upstream (one no longer
 * configured here cannot be reached, and its sessions are dropped). False when the store failed.
 */
export async function endDeadUpstreamSessions(deps: DeadSessionsDeps): Promise<boolean> {
  const { store, losses, logger } = deps;
  for (;;) {
    let taken: DeadUpstreamSession[];
    try {
      taken = await store.upstreamSessions.takeDead(UPSTREAM_SESSIONS_PER_TAKE);
    } catch {
      return false;
    }
    if (taken.length === 0) return true;
    const lost = await stillAlive(deps, taken);
    let ended = 0;
    await eachAtMost(RECOVERY_CONCURRENCY, lost, async ({ upstream, sessionId, protocolVersion }) => {
      if (await losses.upstream(upstream)?.endOrphanSession(sessionId, protocolVersion)) ended++;
    });
    const replicas = [...new Set(lost.map(({ replica }) => replica))];
    if (lost.length > 0) logger.info({ sessions: lost.length, ended, replicas }, 'ended the upstream sessions of lost replicas');
    if (taken.length < UPSTREAM_SESSIONS_PER_TAKE) return true;
  }
}

/**
 * Hands back the upstream sessions of replicas that answer (alive after all: their heartbeats came late), and
 * returns the rest, whose replicas are gone.
 */
async function stillAlive<T extends { replica: string; upstream: string; sessionId: string; protocolVersion?: string }>(deps: DeadSessionsDeps, taken: T[]): Promise<T[]> {
  const { store, peers, leaseMs } = deps;
  const lost: T[] = [];
  for (const replica of new Set(taken.map((session) => session.replica))) {
    const sessions = taken.filter((session) => session.replica === replica);
    const alive =
      replica === peers.id ||
      (await peers.exists?.(replica).catch(() => false)) === true ||
      (await peers.ask(replica, 'replica.alive', {}, undefined, OWNER_CHECK_MS).catch(() => undefined)) !== undefined;
    if (!alive) {
      lost.push(...sessions);
      continue;
    }
    for (const { upstream, sessionId, protocolVersion } of sessions) {
      const record = protocolVersion === undefined ? { upstream, sessionId } : { upstream, sessionId, protocolVersion };
      await store.upstreamSessions.record(replica, record, leaseMs).catch(() => undefined);
    }
  }
  return lost;
}

/** Runs `work` over `items`, at most `limit` at once. */
export async function eachAtMost<T>(limit: number, items: readonly T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await work(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
