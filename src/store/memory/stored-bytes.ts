// The memory store's ledgers of stored result bytes: per principal and in total, each entry a task's outcome size
// until the task expires. Entries are kept in expiry order, so what expired is trimmed from the front and the
// oldest entry says when the budget frees up; a delete takes its entry out wherever it is.
interface Charge {
  taskId: string;
  bytes: number;
  expiresAt: number;
}

/** One ledger: charges by expiry, and their sum. */
export class StoredLedger {
  private readonly byExpiry: Charge[] = [];
  private readonly byTask = new Map<string, Charge>();
  private sum = 0;

  get total(): number {
    return this.sum;
  }

  get empty(): boolean {
    return this.byTask.size === 0;
  }

  /** When the oldest charge expires. */
  get freesAt(): number | undefined {
    return this.byExpiry[0]?.expiresAt;
  }

  /** Charges `bytes` for the task until `expiresAt` (a second charge for the same task replaces the first). */
  charge(taskId: string, bytes: number, expiresAt: number): void {
    this.release(taskId);
    const entry = { taskId, bytes, expiresAt };
    // Mostly appended: tasks end in time order and most share a TTL.
    let at = this.byExpiry.length;
    while (at > 0 && (this.byExpiry[at - 1] as Charge).expiresAt > expiresAt) at--;
    this.byExpiry.splice(at, 0, entry);
    this.byTask.set(taskId, entry);
    this.sum += bytes;
  }

  release(taskId: string): void {
    const entry = this.byTask.get(taskId);
    if (entry === undefined) return;
    this.byTask.delete(taskId);
    this.sum -= entry.bytes;
    const at = this.byExpiry.indexOf(entry);
    if (at >= 0) this.byExpiry.splice(at, 1);
  }

  /** Drops charges whose task has expired by `now` (all of them: no script here holds a server while it runs). */
  trim(now: number): void {
    let n = 0;
    while (n < this.byExpiry.length && (this.byExpiry[n] as Charge).expiresAt <= now) {
      const entry = this.byExpiry[n] as Charge;
      this.byTask.delete(entry.taskId);
      this.sum -= entry.bytes;
      n++;
    }
    if (n > 0) this.byExpiry.splice(0, n);
  }
}

/** Every principal's ledger and the total one. */
export class StoredBytesLedgers {
  private readonly principals = new Map<string, StoredLedger>();
  private readonly all = new StoredLedger();

  charge(principal: string, taskId: string, bytes: number, expiresAt: number): void {
    let ledger = this.principals.get(principal);
    if (ledger === undefined) {
      ledger = new StoredLedger();
      this.principals.set(principal, ledger);
    }
    ledger.charge(taskId, bytes, expiresAt);
    this.all.charge(taskId, bytes, expiresAt);
  }

  release(principal: string, taskId: string): void {
    const ledger = this.principals.get(principal);
    ledger?.release(taskId);
    if (ledger?.empty === true) this.principals.delete(principal);
    this.all.release(taskId);
  }

  read(principal: string, now: number): { principal: number; total: number; principalFreesAtMs?: number; totalFreesAtMs?: number } {
    const ledger = this.principals.get(principal);
    ledger?.trim(now);
    if (ledger?.empty === true) this.principals.delete(principal);
    this.all.trim(now);
    const principalFreesAt = ledger?.freesAt;
    const totalFreesAt = this.all.freesAt;
    return {
      principal: ledger?.total ?? 0,
      total: this.all.total,
      ...(principalFreesAt === undefined ? {} : { principalFreesAtMs: principalFreesAt }),
      ...(totalFreesAt === undefined ? {} : { totalFreesAtMs: totalFreesAt }),
    };
  }

  /** Trims every ledger (the store's periodic sweep), so principals that never create again are forgotten. */
  sweep(now: number): void {
    for (const [principal, ledger] of this.principals) {
      ledger.trim(now);
      if (ledger.empty) this.principals.delete(principal);
    }
    this.all.trim(now);
  }
}
