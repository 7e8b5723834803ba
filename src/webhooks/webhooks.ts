// Webhooks (issue 34): operators' endpoints told of task and approval events, signed as Standard Webhooks and
// delivered at least once. The replica where an event happens queues one delivery per endpoint that wants it, in the
// store (so a replica's death loses none); every replica delivers from every endpoint's queue, a delivery leased to
// one of them at a time (endpoint-worker.ts). Follows config reloads: endpoints added, changed or removed take
// effect at once (a removed endpoint's queue is left to expire: only configured URLs are ever called).
import { randomBytes } from 'node:crypto';
import type { WebhookConfig, WebhookDeliveryConfig } from '../config/types.js';
import type { GatewayEvents } from '../events.js';
import type { Logger } from '../log.js';
import type { TaskStore } from '../store/task-store.js';
import { endpointWants } from './endpoint-filter.js';
import { EndpointWorker, keepMs } from './endpoint-worker.js';
import { WebhookSender } from './sender.js';
import { webhookBody } from './webhook-body.js';
import { subscribeWebhookEvents, type WebhookEvent } from './webhook-events.js';

/**
 * Events this replica holds while their deliveries are being queued (each may hold a task's result): past it, a new
 * event is dropped for every endpoint that wanted it (`backlog_full`). Queued MAX_QUEUEING at a time.
 */
const MAX_BACKLOG = 10_000;
const MAX_QUEUEING = 8;
/** A dropped delivery is logged at most this often per endpoint and reason (each is counted in the metrics). */
const DROP_LOG_MS = 10_000;

export interface WebhookSettings {
  webhooks: readonly WebhookConfig[];
  webhookDelivery: WebhookDeliveryConfig;
}

export interface WebhookDeps {
  store: Pick<TaskStore, 'deliveries' | 'tasks'>;
  events: GatewayEvents;
  logger: Logger;
  /** This replica's id (leases name it). */
  replica: string;
  /** replicas.leaseMs: a try's lease is its timeout plus this, and idle queues are looked at this often. */
  leaseMs: number;
}

export class Webhooks {
  private settings: WebhookSettings;
  private readonly workers = new Map<string, EndpointWorker>();
  private readonly sender = new WebhookSender();
  private readonly backlog: WebhookEvent[] = [];
  private queueing = 0;
  private readonly queued = new Set<Promise<void>>();
  private readonly dropLogged = new Map<string, number>();
  private unsubscribe: (() => void) | undefined;

  constructor(
    settings: WebhookSettings,
    private readonly deps: WebhookDeps,
  ) {
    this.settings = settings;
  }

  start(): void {
    this.unsubscribe = subscribeWebhookEvents(this.deps.events, (event) => this.heard(event));
    this.applyEndpoints();
  }

  /** A config reload: the endpoints and delivery settings in force from now on. */
  reconfigure(settings: WebhookSettings): void {
    this.settings = settings;
    this.applyEndpoints();
  }

  /** Stops hearing events, queues what was heard, then stops delivering (tries in flight go back in line). */
  async close(): Promise<void> {
    this.unsubscribe?.();
    while (this.queued.size > 0) await Promise.all([...this.queued]);
    await Promise.all([...this.workers.values()].map((worker) => worker.close()));
    this.workers.clear();
    await this.sender.close();
  }

  private applyEndpoints(): void {
    const configured = new Map(this.settings.webhooks.map((endpoint) => [endpoint.id, endpoint]));
    for (const [id, worker] of this.workers) {
      if (configured.has(id)) continue;
      this.workers.delete(id);
      void worker.close();
    }
    for (const [id, endpoint] of configured) {
      const worker = this.workers.get(id);
      if (worker !== undefined) {
        worker.update(endpoint);
        continue;
      }
      const created = new EndpointWorker(endpoint, {
        queue: this.deps.store.deliveries,
        sender: this.sender,
        events: this.deps.events,
        logger: this.deps.logger,
        owner: this.deps.replica,
        settings: () => this.settings.webhookDelivery,
        leaseMarginMs: this.deps.leaseMs,
        pollMs: this.deps.leaseMs,
      });
      this.workers.set(id, created);
      created.wake();
    }
  }

  private heard(event: WebhookEvent): void {
    const wanted = this.settings.webhooks.filter((endpoint) => endpointWants(endpoint, event));
    if (wanted.length === 0) return;
    if (this.backlog.length >= MAX_BACKLOG) {
      for (const endpoint of wanted) this.dropped(endpoint, event, 'backlog_full', `this replica holds ${MAX_BACKLOG} events not yet queued`);
      return;
    }
    this.backlog.push(event);
    this.next();
  }

  /** Queues backlogged events, MAX_QUEUEING at a time. */
  private next(): void {
    while (this.queueing < MAX_QUEUEING && this.backlog.length > 0) {
      const event = this.backlog.shift() as WebhookEvent;
      this.queueing++;
      const done: Promise<void> = this.queue(event)
        .catch((error: unknown) => this.deps.logger.error({ task: event.facts.taskId, type: event.type, err: error }, 'could not queue webhook deliveries: this event is not delivered'))
        .finally(() => {
          this.queueing--;
          this.queued.delete(done);
          this.next();
        });
      this.queued.add(done);
    }
  }

  /** One delivery per endpoint that wants the event (as configured now), under one webhook-id. */
  private async queue(event: WebhookEvent): Promise<void> {
    const wanted = this.settings.webhooks.filter((endpoint) => endpointWants(endpoint, event));
    if (wanted.length === 0) return;
    const delivery = this.settings.webhookDelivery;
    const withResult = event.ended && wanted.some((endpoint) => endpoint.includeResult);
    const taskId = event.facts.taskId;
    const task = taskId === undefined ? undefined : await this.deps.store.tasks.get(taskId, { outcome: withResult });
    const webhookId = `msg_${randomBytes(16).toString('base64url')}`;
    for (const endpoint of wanted) {
      const body = webhookBody(event, task, endpoint.includeResult, delivery.maxBodyBytes);
      if (body === undefined) {
        this.dropped(endpoint, event, 'too_large', `its body is larger than webhookDelivery.maxBodyBytes (${delivery.maxBodyBytes})`, webhookId);
        continue;
      }
      const queued = await this.deps.store.deliveries.enqueue(endpoint.id, { id: webhookId, body }, { maxQueued: delivery.maxQueuedPerEndpoint, maxQueuedBytes: delivery.maxQueuedBytesPerEndpoint, keepMs: keepMs(delivery) });
      if (queued === 'full') this.dropped(endpoint, event, 'queue_full', `the endpoint's queue holds webhookDelivery.maxQueuedPerEndpoint (${delivery.maxQueuedPerEndpoint}) deliveries; the newest is dropped`, webhookId);
      else if (queued === 'full_bytes') this.dropped(endpoint, event, 'queue_full', `the endpoint's queued bodies would pass webhookDelivery.maxQueuedBytesPerEndpoint (${delivery.maxQueuedBytesPerEndpoint} bytes); the newest is dropped`, webhookId);
      else this.workers.get(endpoint.id)?.wake();
    }
  }

  private dropped(endpoint: WebhookConfig, event: WebhookEvent, reason: 'queue_full' | 'too_large' | 'backlog_full', why: string, webhookId = ''): void {
    this.deps.events.emit('webhook.dropped', { endpoint: endpoint.id, type: event.type, webhookId, reason });
    const key = `${endpoint.id}\u0000${reason}`;
    const now = Date.now();
    if (now - (this.dropLogged.get(key) ?? 0) < DROP_LOG_MS) return;
    this.dropLogged.set(key, now);
    this.deps.logger.warn({ endpoint: endpoint.id, type: event.type, task: event.facts.taskId, reason }, `webhook delivery dropped: ${why} (logged once per ${DROP_LOG_MS / 1000} s per endpoint and reason; taskgate_webhook_dropped_total counts each)`);
  }
}
