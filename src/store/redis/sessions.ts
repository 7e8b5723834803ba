// Client sessions on Redis: one hash per session that Redis expires itself; only save-session.lua writes it (so a
// session that ended is never revived by a late save). The embedded store's twin is memory/sessions.ts.
import type { RedisClient } from '../redis-connection.js';
import type { RedisKeys } from '../redis-keys.js';
import type { ClientSessions } from '../sessions.js';
import type { RunScript } from './scripts.js';

export class RedisSessions implements ClientSessions {
  constructor(
    private readonly run: RunScript,
    private readonly keys: RedisKeys,
    private readonly redis: RedisClient,
  ) {}

  async save(sessionId: string, fields: Record<string, string | null>, expireAfterMs: number, options: { create?: boolean } = {}): Promise<boolean> {
    const args: string[] = [];
    for (const [field, value] of Object.entries(fields)) args.push(field, value === null ? 'del' : 'set', value ?? '');
    const saved = await this.run('save-session', this.keys.session(sessionId), options.create ? 'create' : 'update', String(Math.max(1, Math.ceil(expireAfterMs))), ...args);
    return saved === 1;
  }

  async get(sessionId: string): Promise<Record<string, string> | undefined> {
    const fields = await this.redis.hgetall(this.keys.session(sessionId));
    return Object.keys(fields).length === 0 ? undefined : fields;
  }

  async delete(sessionId: string): Promise<boolean> {
    return (await this.redis.del(this.keys.session(sessionId))) === 1;
  }
}
