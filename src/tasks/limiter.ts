/**
 * Counted slots per key, handed out first come, first served: at most `limit` holders at once, the rest wait in
 * order. In-process: each replica limits its own runs.
 */
export class SlotLimiter {
  private readonly holders = new Map<string, number>();
  private readonly waiting = new Map<string, { limit: number; grant: () => void }[]>();

  /**
   * Resolves with a release function once the caller holds a slot. `onQueued` is told how many are ahead when the
   * caller has to wait; an abort while waiting leaves the queue and rejects.
   */
  acquire(key: string, limit: number, signal: AbortSignal, onQueued: (ahead: number) => void): Promise<() => void> {
    if (limit <= 0) return Promise.resolve(() => undefined);
    const queue = this.waiting.get(key) ?? [];
    if ((this.holders.get(key) ?? 0) < limit && queue.length === 0) return Promise.resolve(this.take(key));
    return new Promise((resolve, reject) => {
      const entry = {
        limit,
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          resolve(this.take(key));
        },
      };
      const onAbort = (): void => {
        const at = queue.indexOf(entry);
        if (at >= 0) queue.splice(at, 1);
        reject(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason ?? 'aborted')));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      queue.push(entry);
      this.waiting.set(key, queue);
      onQueued(queue.length - 1 + (this.holders.get(key) ?? 0));
    });
  }

  private take(key: string): () => void {
    this.holders.set(key, (this.holders.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.holders.get(key) ?? 1) - 1;
      if (left === 0) this.holders.delete(key);
      else this.holders.set(key, left);
      const queue = this.waiting.get(key);
      const next = queue?.[0];
      if (next !== undefined && left < next.limit) {
        queue?.shift();
        if (queue?.length === 0) this.waiting.delete(key);
        next.grant();
      }
    };
  }
}
