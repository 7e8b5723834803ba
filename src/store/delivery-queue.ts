// The webhook delivery queue's contract, shared by the Redis and in-memory stores (src/webhooks/ delivers from it).
// One queue per endpoint, so an endpoint that is down holds up only its own line. A delivery is leased to one
// replica at a time, as a running task is: a replica that dies holding one leaves it to whoever claims after the
// lease ran out, and two live replicas never hold the same delivery. Times are the store's clock.

/** A delivery as it waits in an endpoint's queue: the exact body that is signed and sent, under its webhook-id. */
export interface QueuedDelivery {
  /** The `webhook-id`: the same on every try. */
  id: string;
  /** The JSON body, as sent (and signed). */
  body: string;
  /** Which try this lease is for (1 for the first). */
  attempt: number;
  /** When it was queued (epoch ms, store time): retries stop at the configured age. */
  enqueuedMs: number;
}

/** What a claim hands out, and when the endpoint's next waiting delivery is due (absent when none waits). */
export interface DeliveryClaim {
  deliveries: QueuedDelivery[];
  nextDueMs?: number;
  /** Deliveries in the endpoint's queue, leased or waiting. */
  depth: number;
  /** The store's clock when it answered (epoch ms), to turn nextDueMs into a wait on this replica. */
  nowMs: number;
}

/** A delivery given up on after its last try, as kept for operators (the newest DEAD_LETTERS_KEPT per endpoint). */
export interface DeadLetter {
  id: string;
  body: string;
  attempts: number;
  reason: string;
  /** When it was dead-lettered (epoch ms, store time). */
  atMs: number;
}

/** Which try of which delivery a replica holds. */
export interface DeliveryLease {
  id: string;
  owner: string;
  attempt: number;
}

/**
 * `full`: refused, the endpoint's queue holds maxQueued deliveries already; `full_bytes`: refused, this body would
 * take the bodies queued past maxQueuedBytes (either way the newest is the one dropped).
 */
export type EnqueueResult = 'queued' | 'duplicate' | 'full' | 'full_bytes';

/** Dead letters kept per endpoint; older ones go. */
export const DEAD_LETTERS_KEPT = 1_000;

/** Deliveries one claim hands out at most (a claim is one store script). */
export const CLAIM_LIMIT = 100;

export interface DeliveryQueue {
  /**
   * Queues a delivery to `endpoint`, due at once, unless one of the same id is queued already (`duplicate`), the
   * queue holds `maxQueued` (`full`), or its bodies with this one would pass `maxQueuedBytes` (UTF-8 bytes;
   * `full_bytes`). A body's bytes count from its enqueue until it is acknowledged or dead-lettered. The endpoint's
   * keys are kept `keepMs` after the last enqueue.
   */
  enqueue(endpoint: string, delivery: { id: string; body: string }, options: { maxQueued: number; maxQueuedBytes: number; keepMs: number }): Promise<EnqueueResult>;
  /**
   * Leases due deliveries to `owner` for `leaseMs`, as many as keep the endpoint's leased deliveries (all replicas'
   * together) at most `concurrency` (and at most CLAIM_LIMIT per call). Leases that ran out first go back to the
   * line, due at once: their replica died, or never said how the try went.
   */
  claim(endpoint: string, owner: string, options: { concurrency: number; leaseMs: number; keepMs: number }): Promise<DeliveryClaim>;
  /** The endpoint acknowledged it (2xx): it leaves the queue, whoever holds its lease now. */
  acknowledge(endpoint: string, id: string): Promise<void>;
  /**
   * The try failed: due again in `delayMs`. Only while `owner` still holds the lease of try `attempt`; resolves
   * false when it does not (the lease ran out and another replica has it now).
   */
  retry(endpoint: string, lease: DeliveryLease, delayMs: number, keepMs: number): Promise<boolean>;
  /** Given up: out of the queue and into the endpoint's dead letters, under the same condition as retry. */
  deadLetter(endpoint: string, lease: DeliveryLease, reason: string, keepMs: number): Promise<boolean>;
  /** Deliveries in the endpoint's queue, leased or waiting. */
  depth(endpoint: string): Promise<number>;
  /** Bytes of the bodies in the endpoint's queue, leased or waiting (what maxQueuedBytes bounds). */
  queuedBytes(endpoint: string): Promise<number>;
  /** The endpoint's dead letters, newest first, at most `limit`. */
  deadLetters(endpoint: string, limit: number): Promise<DeadLetter[]>;
}
