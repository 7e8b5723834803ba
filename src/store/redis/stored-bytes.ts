// The Redis store's ledgers of stored result bytes: each principal's under its own hash tag and the store-wide one
// under `{stored}`, each kept by the stored-bytes script. A charge or release touches both ledgers in two atomic
// steps (they cannot share a Cluster slot), sent together: the first to land may be seen alone for a moment.
import type { RedisKeys } from '../redis-keys.js';
import { storedLedgerKeyList } from '../redis-keys.js';
import { STORED_TRIM_PER_CALL, type StoredBytes } from '../task-store.js';
import type { RunScript } from './scripts.js';

export class RedisStoredBytes {
  constructor(
    private readonly run: RunScript,
    private readonly keys: RedisKeys,
  ) {}

  async charge(principal: string, taskId: string, bytes: number, expiresAt: number): Promise<void> {
    await Promise.all([this.step(principal, 'charge', taskId, bytes, expiresAt), this.step(undefined, 'charge', taskId, bytes, expiresAt)]);
  }

  async release(principal: string, taskId: string): Promise<void> {
    await Promise.all([this.step(principal, 'release', taskId), this.step(undefined, 'release', taskId)]);
  }

  async read(principal: string): Promise<StoredBytes> {
    const [mine, all] = await Promise.all([this.step(principal, 'read'), this.step(undefined, 'read')]);
    return {
      principal: mine.bytes,
      total: all.bytes,
      ...(mine.freesAt === undefined ? {} : { principalFreesAtMs: mine.freesAt }),
      ...(all.freesAt === undefined ? {} : { totalFreesAtMs: all.freesAt }),
    };
  }

  /** One ledger's step: the principal's, or the store-wide one when `principal` is undefined. */
  private async step(principal: string | undefined, action: 'charge' | 'release' | 'read', taskId = '', bytes = 0, expiresAt = 0): Promise<{ bytes: number; freesAt?: number }> {
    const keys = principal === undefined ? this.keys.allStoredBytes() : this.keys.storedBytes(principal);
    const [sum, oldest] = (await this.run('stored-bytes', ...storedLedgerKeyList(keys), action, taskId, String(bytes), String(expiresAt), String(STORED_TRIM_PER_CALL))) as [number, number];
    return Number(oldest) < 0 ? { bytes: Number(sum) } : { bytes: Number(sum), freesAt: Number(oldest) };
  }
}
