// The deliveries of one endpoint, on one replica: claims due deliveries from the endpoint's queue in the store (leased
// to this replica; the lease bounds how many are in flight to the endpoint across every replica) and tries each once.
// A 2xx acknowledges it; anything else puts it back in line after a backoff, or, once the next try would come after
// webhookDelivery.maxAgeMs, dead-letters it. Each endpoint has its own worker and its own queue: one that is slow or
// down holds up nothing but itself. The worker claims when told a delivery was queued here, when one of its tries
// ends, when the next retry is due, and at least every poll interval (deliveries queued on other replicas, leases of
// a replica that died).
import type { WebhookConfig, WebhookDeliveryConfig } from '../config/types.js';
import type { GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import { CLAIM_LIMIT, type DeliveryQueue, type QueuedDelivery } from '../store/delivery-queue.js';
import { retryDelayMs } from './backoff.js';
import type { WebhookSender } from './sender.js';
import { typeOfBody } from './webhook-body.js';

/** How long an endpoint's keys stay in the store past the age of its last delivery: its dead letters are read then. */
const DEAD_LETTERS_KEPT_MS = 86_400_000;
/** A failing claim (the store is down) is logged at most this often per endpoint. */
const CLAIM_FAILURE_LOG_MS = 60_000;

export interface WorkerDeps {
  queue: DeliveryQueue;
  sender: WebhookSender;
  events: GatewayEvents;
  logger: Logger;
  /** This replica, as leases name it. */
  owner: string;
  /** The delivery settings in force (a reload may change them). */
  settings(): WebhookDeliveryConfig;
  /** How long a replica may go silent before it counts as dead (replicas.leaseMs): added to a try's lease. */
  leaseMarginMs: number;
  /** The longest wait between two claims. */
  pollMs: number;
}

/** How long an endpoint's keys are kept after they were last used. */
export function keepMs(settings: WebhookDeliveryConfig): number {
  return settings.maxAgeMs + DEAD_LETTERS_KEPT_MS;
}

export class EndpointWorker {
  private inflight = 0;
  private readonly running = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private pumping = false;
  private again = false;
  private closed = false;
  private lastClaimFailureLog = 0;
  /** Aborts the tries in flight when the replica shuts down: they go back in line at once, for any replica. */
  private readonly stopping = new AbortController();

  constructor(
    private endpoint: WebhookConfig,
    private readonly deps: WorkerDeps,
  ) {}

  /** The endpoint's settings changed (a reload): its next tries use them. */
  update(endpoint: WebhookConfig): void {
    this.endpoint = endpoint;
    this.wake();
  }

  /** Claims now (or right after the claim under way). */
  wake(): void {
    if (this.closed) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    void this.pump();
  }

  /** Stops claiming; tries in flight are cut short and put back in line. Resolves once they are settled. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.stopping.abort();
    await Promise.all([...this.running]);
  }

  private async pump(): Promise<void> {
    this.pumping = true;
    let waitMs = this.deps.pollMs;
    try {
      const settings = this.deps.settings();
      if (this.inflight < settings.concurrency) {
        const claim = await this.deps.queue.claim(this.endpoint.id, this.deps.owner, {
          concurrency: settings.concurrency,
          // Longer than any try can take: a live replica settles its try before the lease runs out.
          leaseMs: settings.timeoutMs + this.deps.leaseMarginMs,
          keepMs: keepMs(settings),
        });
        this.deps.events.emit('webhook.queue', { endpoint: this.endpoint.id, depth: claim.depth });
        for (const delivery of claim.deliveries) this.start(delivery);
        if (claim.nextDueMs !== undefined) waitMs = Math.min(waitMs, Math.max(0, claim.nextDueMs - claim.nowMs));
        if (claim.deliveries.length === CLAIM_LIMIT) waitMs = 0;
      }
    } catch (error) {
      if (Date.now() - this.lastClaimFailureLog >= CLAIM_FAILURE_LOG_MS) {
        this.lastClaimFailureLog = Date.now();
        this.deps.logger.warn({ endpoint: this.endpoint.id, err: error }, 'could not claim webhook deliveries from the store; trying again');
      }
    } finally {
      this.pumping = false;
    }
    if (this.closed) return;
    if (this.again) {
      this.again = false;
      waitMs = 0;
    }
    this.timer = setTimeout(() => void this.pump(), waitMs);
    this.timer.unref();
  }

  private start(delivery: QueuedDelivery): void {
    this.inflight++;
    const run: Promise<void> = this.attempt(delivery)
      .catch((error: unknown) => this.deps.logger.warn({ endpoint: this.endpoint.id, webhookId: delivery.id, err: error }, 'could not settle a webhook delivery; its lease will run out and it is tried again'))
      .finally(() => {
        this.inflight--;
        this.running.delete(run);
        this.wake();
      });
    this.running.add(run);
  }

  private async attempt(delivery: QueuedDelivery): Promise<void> {
    const { queue, events } = this.deps;
    const settings = this.deps.settings();
    const endpoint = this.endpoint;
    const type = typeOfBody(delivery.body);
    const started = performance.now();
    const result = await this.deps.sender.send({
      endpoint: endpoint.id,
      url: endpoint.url,
      secret: endpoint.secret,
      webhookId: delivery.id,
      body: delivery.body,
      timeoutMs: settings.timeoutMs,
      concurrency: settings.concurrency,
      stop: this.stopping.signal,
    });
    const base = { endpoint: endpoint.id, type, webhookId: delivery.id, attempt: delivery.attempt };
    if (result.outcome === 'stopped') {
      await queue.retry(endpoint.id, { id: delivery.id, owner: this.deps.owner, attempt: delivery.attempt }, 0, keepMs(settings));
      return;
    }
    events.emit('webhook.attempt', { ...base, outcome: result.outcome, durationMs: performance.now() - started, ...('status' in result ? { status: result.status } : {}) });
    if (result.outcome === 'delivered') {
      await queue.acknowledge(endpoint.id, delivery.id);
      return;
    }
    const lease = { id: delivery.id, owner: this.deps.owner, attempt: delivery.attempt };
    const delayMs = retryDelayMs(delivery.attempt, settings);
    if (Date.now() + delayMs <= delivery.enqueuedMs + settings.maxAgeMs) {
      await queue.retry(endpoint.id, lease, delayMs, keepMs(settings));
      return;
    }
    const last = 'status' in result ? `HTTP ${result.status}` : result.reason;
    const reason = `not acknowledged within webhookDelivery.maxAgeMs (${settings.maxAgeMs} ms) after ${delivery.attempt} tries; the last: ${last}`;
    if (await queue.deadLetter(endpoint.id, lease, reason, keepMs(settings))) {
      events.emit('webhook.dead_lettered', { endpoint: endpoint.id, type, webhookId: delivery.id, attempts: delivery.attempt, reason });
    }
  }
}
