// The webhook delivery queue on Redis: each endpoint's keys share one hash tag (one Cluster slot), and only
// enqueue-delivery.lua, claim-deliveries.lua, ack-delivery.lua, retry-delivery.lua and dead-letter-delivery.lua change
// them. The embedded store's twin is memory/deliveries.ts.
import { CLAIM_LIMIT, DEAD_LETTERS_KEPT, type DeadLetter, type DeliveryClaim, type DeliveryLease, type DeliveryQueue, type EnqueueResult, type QueuedDelivery } from '../delivery-queue.js';
import type { RedisClient } from '../redis-connection.js';
import type { RedisKeys, WebhookQueueKeys } from '../redis-keys.js';
import type { RunScript } from './scripts.js';

/** The queue's keys in the order the delivery scripts take them (the dead letters only where a script needs them). */
function queueKeys(keys: WebhookQueueKeys, withDead: boolean): string[] {
  const list = [keys.waiting, keys.leased, keys.bodies, keys.state, keys.bytes];
  return withDead ? [...list, keys.dead] : list;
}

export class RedisDeliveries implements DeliveryQueue {
  constructor(
    private readonly run: RunScript,
    private readonly keys: RedisKeys,
    private readonly redis: RedisClient,
  ) {}

  async enqueue(endpoint: string, delivery: { id: string; body: string }, options: { maxQueued: number; maxQueuedBytes: number; keepMs: number }): Promise<EnqueueResult> {
    const keys = queueKeys(this.keys.webhookQueue(endpoint), true);
    return (await this.run('enqueue-delivery', ...keys, delivery.id, delivery.body, String(options.maxQueued), String(options.keepMs), String(options.maxQueuedBytes))) as EnqueueResult;
  }

  async claim(endpoint: string, owner: string, options: { concurrency: number; leaseMs: number; keepMs: number }): Promise<DeliveryClaim> {
    const keys = queueKeys(this.keys.webhookQueue(endpoint), false);
    const reply = (await this.run('claim-deliveries', ...keys, owner, String(options.concurrency), String(options.leaseMs), String(options.keepMs), String(CLAIM_LIMIT))) as string[];
    const [now, nextDue, depth, ...flat] = reply;
    const deliveries: QueuedDelivery[] = [];
    for (let i = 0; i + 3 < flat.length; i += 4) {
      deliveries.push({ id: flat[i] as string, body: flat[i + 1] as string, attempt: Number(flat[i + 2]), enqueuedMs: Number(flat[i + 3]) });
    }
    return { deliveries, depth: Number(depth), nowMs: Number(now), ...(nextDue === undefined || nextDue === '' ? {} : { nextDueMs: Number(nextDue) }) };
  }

  async acknowledge(endpoint: string, id: string): Promise<void> {
    await this.run('ack-delivery', ...queueKeys(this.keys.webhookQueue(endpoint), false), id);
  }

  async retry(endpoint: string, lease: DeliveryLease, delayMs: number, keepMs: number): Promise<boolean> {
    const keys = queueKeys(this.keys.webhookQueue(endpoint), false);
    return (await this.run('retry-delivery', ...keys, lease.id, lease.owner, String(lease.attempt), String(Math.max(0, Math.round(delayMs))), String(keepMs))) === 1;
  }

  async deadLetter(endpoint: string, lease: DeliveryLease, reason: string, keepMs: number): Promise<boolean> {
    const keys = queueKeys(this.keys.webhookQueue(endpoint), true);
    return (await this.run('dead-letter-delivery', ...keys, lease.id, lease.owner, String(lease.attempt), reason, String(keepMs), String(DEAD_LETTERS_KEPT))) === 1;
  }

  depth(endpoint: string): Promise<number> {
    return this.redis.hlen(this.keys.webhookQueue(endpoint).bodies);
  }

  async queuedBytes(endpoint: string): Promise<number> {
    return Number((await this.redis.get(this.keys.webhookQueue(endpoint).bytes)) ?? 0);
  }

  async deadLetters(endpoint: string, limit: number): Promise<DeadLetter[]> {
    const entries = await this.redis.lrange(this.keys.webhookQueue(endpoint).dead, 0, Math.max(0, limit - 1));
    return entries.map((text) => JSON.parse(text) as DeadLetter);
  }
}
