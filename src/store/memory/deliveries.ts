// The webhook delivery queue of the embedded store: the same contract as the Redis scripts (enqueue-delivery.lua,
// claim-deliveries.lua, ack-delivery.lua, retry-delivery.lua, dead-letter-delivery.lua) in one process. Nothing
// survives a restart, as nothing else of this store does.
import { CLAIM_LIMIT, DEAD_LETTERS_KEPT, type DeadLetter, type DeliveryClaim, type DeliveryLease, type DeliveryQueue, type EnqueueResult, type QueuedDelivery } from '../delivery-queue.js';

interface Entry {
  body: string;
  /** The body's UTF-8 bytes. */
  size: number;
  enqueuedMs: number;
  attempt: number;
  /** The replica holding the lease of try `attempt`, and until when; absent while it waits. */
  owner?: string;
  leasedUntil?: number;
  /** When it is due, while it waits. */
  dueMs: number;
}

interface EndpointQueue {
  /** In arrival order: claims take the due ones first come, first served. */
  entries: Map<string, Entry>;
  /** UTF-8 bytes of the entries' bodies. */
  bytes: number;
  dead: DeadLetter[];
  /** Epoch ms after which the queue is dropped (keepMs after it was last touched). */
  keptUntil: number;
}

export class MemoryDeliveries implements DeliveryQueue {
  private readonly queues = new Map<string, EndpointQueue>();

  async enqueue(endpoint: string, delivery: { id: string; body: string }, options: { maxQueued: number; maxQueuedBytes: number; keepMs: number }): Promise<EnqueueResult> {
    const now = Date.now();
    const queue = this.queue(endpoint, now);
    if (queue.entries.has(delivery.id)) return 'duplicate';
    if (queue.entries.size >= options.maxQueued) return 'full';
    const size = Buffer.byteLength(delivery.body);
    if (queue.bytes + size > options.maxQueuedBytes) return 'full_bytes';
    queue.entries.set(delivery.id, { body: delivery.body, size, enqueuedMs: now, attempt: 0, dueMs: now });
    queue.bytes += size;
    queue.keptUntil = now + options.keepMs;
    return 'queued';
  }

  async claim(endpoint: string, owner: string, options: { concurrency: number; leaseMs: number; keepMs: number }): Promise<DeliveryClaim> {
    const now = Date.now();
    const queue = this.queue(endpoint, now);
    let leased = 0;
    for (const entry of queue.entries.values()) {
      if (entry.leasedUntil === undefined) continue;
      if (entry.leasedUntil > now) leased++;
      else {
        // Its replica never settled the try: due again at once.
        delete entry.owner;
        delete entry.leasedUntil;
        entry.dueMs = now;
      }
    }
    const deliveries: QueuedDelivery[] = [];
    const free = Math.min(options.concurrency - leased, CLAIM_LIMIT);
    const due = [...queue.entries].filter(([, entry]) => entry.leasedUntil === undefined && entry.dueMs <= now).sort(([, a], [, b]) => a.dueMs - b.dueMs);
    for (const [id, entry] of due.slice(0, Math.max(0, free))) {
      entry.attempt++;
      entry.owner = owner;
      entry.leasedUntil = now + options.leaseMs;
      deliveries.push({ id, body: entry.body, attempt: entry.attempt, enqueuedMs: entry.enqueuedMs });
    }
    if (deliveries.length > 0) queue.keptUntil = now + options.keepMs;
    let nextDueMs: number | undefined;
    for (const entry of queue.entries.values()) if (entry.leasedUntil === undefined && (nextDueMs === undefined || entry.dueMs < nextDueMs)) nextDueMs = entry.dueMs;
    return { deliveries, depth: queue.entries.size, nowMs: now, ...(nextDueMs === undefined ? {} : { nextDueMs }) };
  }

  async acknowledge(endpoint: string, id: string): Promise<void> {
    const queue = this.queues.get(endpoint);
    if (queue !== undefined) forget(queue, id);
  }

  async retry(endpoint: string, lease: DeliveryLease, delayMs: number, keepMs: number): Promise<boolean> {
    const now = Date.now();
    const queue = this.queues.get(endpoint);
    const entry = this.held(queue, lease);
    if (queue === undefined || entry === undefined) return false;
    delete entry.owner;
    delete entry.leasedUntil;
    entry.dueMs = now + Math.max(0, delayMs);
    queue.keptUntil = now + keepMs;
    return true;
  }

  async deadLetter(endpoint: string, lease: DeliveryLease, reason: string, keepMs: number): Promise<boolean> {
    const now = Date.now();
    const queue = this.queues.get(endpoint);
    const entry = this.held(queue, lease);
    if (queue === undefined || entry === undefined) return false;
    forget(queue, lease.id);
    queue.dead.unshift({ id: lease.id, body: entry.body, attempts: lease.attempt, reason, atMs: now });
    queue.dead.length = Math.min(queue.dead.length, DEAD_LETTERS_KEPT);
    queue.keptUntil = now + keepMs;
    return true;
  }

  async depth(endpoint: string): Promise<number> {
    return this.queue(endpoint, Date.now()).entries.size;
  }

  async queuedBytes(endpoint: string): Promise<number> {
    return this.queue(endpoint, Date.now()).bytes;
  }

  async deadLetters(endpoint: string, limit: number): Promise<DeadLetter[]> {
    return this.queue(endpoint, Date.now()).dead.slice(0, limit);
  }

  /** The entry whose try `lease` names, while that lease is held (run out or not, nobody claimed it since). */
  private held(queue: EndpointQueue | undefined, lease: DeliveryLease): Entry | undefined {
    const entry = queue?.entries.get(lease.id);
    return entry !== undefined && entry.leasedUntil !== undefined && entry.owner === lease.owner && entry.attempt === lease.attempt ? entry : undefined;
  }

  /** The endpoint's queue, a new empty one when it was never used or was not touched for its keep period. */
  private queue(endpoint: string, now: number): EndpointQueue {
    let queue = this.queues.get(endpoint);
    if (queue === undefined || queue.keptUntil <= now) this.queues.set(endpoint, (queue = { entries: new Map(), bytes: 0, dead: [], keptUntil: now }));
    return queue;
  }
}

/** Takes a delivery out of its queue, and its body's bytes off the queue's count. */
function forget(queue: EndpointQueue, id: string): void {
  const entry = queue.entries.get(id);
  if (entry === undefined) return;
  queue.entries.delete(id);
  queue.bytes -= entry.size;
}
