// Reads of task records asked for in one turn of the event loop go to Redis together, as one pipeline. Under load
// many clients poll at once, and alone each read cost a write to the Redis socket (a system call): the largest
// item of a tasks/get's CPU profile (about a fifth of the gateway's busy time at 50 clients). A lone read waits
// only for the end of the turn it was asked in.
import type { Redis } from 'ioredis';

interface QueuedRead {
  key: string;
  fields: readonly string[];
  resolve: (values: (string | null)[]) => void;
  reject: (error: unknown) => void;
}

export class ReadBatch {
  private queued: QueuedRead[] = [];

  /** One server (or a Sentinel-managed primary): a cluster client batches by node itself (auto-pipelining). */
  constructor(private readonly redis: Redis) {}

  /** HMGET `key` `fields`, sent with the other reads of this turn. */
  hmget(key: string, fields: readonly string[]): Promise<(string | null)[]> {
    if (this.queued.length === 0) setImmediate(() => this.flush());
    return new Promise((resolve, reject) => this.queued.push({ key, fields, resolve, reject }));
  }

  private flush(): void {
    const reads = this.queued;
    this.queued = [];
    const only = reads.length === 1 ? reads[0] : undefined;
    if (only !== undefined) {
      this.redis.hmget(only.key, ...only.fields).then(only.resolve, only.reject);
      return;
    }
    const pipeline = this.redis.pipeline();
    for (const read of reads) pipeline.hmget(read.key, ...read.fields);
    pipeline.exec().then(
      (replies) => {
        reads.forEach((read, i) => {
          const [error, values] = replies?.[i] ?? [new Error('Redis answered no reply for a batched read'), undefined];
          if (error !== null) read.reject(error);
          else read.resolve(values as (string | null)[]);
        });
      },
      (error: unknown) => {
        for (const read of reads) read.reject(error);
      },
    );
  }
}
