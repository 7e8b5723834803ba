// Upstream sessions each replica opened, on Redis: a hash per replica (record-upstream-session.lua writes it and
// marks the replica alive in the `{running}` liveness key; take-upstream-sessions.lua takes those of dead replicas).
// The embedded store's twin is memory/leases.ts (over memory/running.ts).
import type { RedisClient } from '../redis-connection.js';
import type { RedisKeys } from '../redis-keys.js';
import { UPSTREAM_SESSIONS_PER_TAKE, type DeadUpstreamSession, type UpstreamSessionRecord, type UpstreamSessions } from '../upstream-sessions.js';
import type { RunScript } from './scripts.js';

export class RedisUpstreamSessions implements UpstreamSessions {
  constructor(
    private readonly run: RunScript,
    private readonly keys: RedisKeys,
    private readonly redis: RedisClient,
  ) {}

  async record(replica: string, session: UpstreamSessionRecord, leaseMs: number): Promise<void> {
    const keys = [this.keys.replicasAlive(), this.keys.upstreamSessionReplicas(), this.keys.upstreamSessionsOf(replica)];
    await this.run('record-upstream-session', ...keys, replica, String(leaseMs), upstreamSessionField(session), session.protocolVersion ?? '');
  }

  async forget(replica: string, session: Pick<UpstreamSessionRecord, 'upstream' | 'sessionId'>): Promise<void> {
    // One command: a replica left in the set with an empty hash costs nothing, and the sweep drops it once dead.
    await this.redis.hdel(this.keys.upstreamSessionsOf(replica), upstreamSessionField(session));
  }

  async takeDead(limit: number): Promise<DeadUpstreamSession[]> {
    const most = String(Math.max(1, Math.min(limit, UPSTREAM_SESSIONS_PER_TAKE)));
    const flat = (await this.run('take-upstream-sessions', this.keys.replicasAlive(), this.keys.upstreamSessionReplicas(), most, this.keys.upstreamSessionsOfPrefix())) as string[];
    const taken: DeadUpstreamSession[] = [];
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
