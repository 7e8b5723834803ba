// One try of one webhook delivery: a POST of the queued body to the endpoint's configured URL, signed as Standard
// Webhooks (the `standardwebhooks` reference implementation) with the time of this try. Nothing but that URL is
// called: undici's request follows no redirect (only its redirect interceptor would, and these clients have none),
// so a 3xx is a failed try like any other non-2xx. The whole exchange is bounded by webhookDelivery.timeoutMs, and
// the endpoint's answer is read only to let the connection be reused (at most RESPONSE_BYTES_READ).
//
// Connections: each endpoint has webhookDelivery.concurrency one-connection clients, and a try holds one of them
// from its start to its end. A try that times out (or fails) destroys its client's socket then and there, so an
// endpoint that never answers holds at most `concurrency` sockets from this replica, each for at most one timeout
// (an aborted request alone would leave its socket open until undici's own coarse timers noticed).
import { Client } from 'undici';
import { Webhook } from 'standardwebhooks';

/** Bytes of an endpoint's response body read (and thrown away) before the connection is given up instead. */
const RESPONSE_BYTES_READ = 64 * 1024;
/** An idle connection to an endpoint is kept this long for the next delivery. */
const IDLE_KEEP_ALIVE_MS = 4_000;

/** How a try went; `stopped`: the replica shut down during it (nothing can be said about it). */
export type AttemptOutcome = { outcome: 'delivered' | 'failed'; status: number } | { outcome: 'timeout' | 'error' | 'stopped'; reason: string };

export interface SignedRequest {
  /** The endpoint's id: its connections are its own. */
  endpoint: string;
  url: string;
  /** The endpoint's `whsec_` secret. */
  secret: string;
  webhookId: string;
  body: string;
  timeoutMs: number;
  /** Connections to the endpoint at most (webhookDelivery.concurrency); a try past them waits for one, within its timeout. */
  concurrency: number;
  /** Aborts the try (shutdown). */
  stop?: AbortSignal;
}

/**
 * An endpoint's connections: `size` clients of one connection each, lent to one try at a time. A client whose try
 * went wrong is destroyed (its socket with it) and its place filled by a new one on the next take.
 */
class EndpointConnections {
  private readonly idle: Client[] = [];
  private lent = 0;
  private readonly waiting: (() => void)[] = [];
  private closed = false;

  constructor(
    readonly origin: string,
    readonly size: number,
  ) {}

  /** A client for one try, once fewer than `size` are lent; rejects when `signal` aborts first. */
  async take(signal: AbortSignal): Promise<Client> {
    while (this.lent >= this.size) {
      signal.throwIfAborted();
      await new Promise<void>((resolve, reject) => {
        const wake = (): void => {
          signal.removeEventListener('abort', abort);
          resolve();
        };
        const abort = (): void => {
          const at = this.waiting.indexOf(wake);
          if (at >= 0) this.waiting.splice(at, 1);
          reject(signal.reason as Error);
        };
        this.waiting.push(wake);
        signal.addEventListener('abort', abort, { once: true });
      });
    }
    this.lent++;
    return this.idle.pop() ?? new Client(this.origin, { pipelining: 1, keepAliveTimeout: IDLE_KEEP_ALIVE_MS, keepAliveMaxTimeout: IDLE_KEEP_ALIVE_MS });
  }

  /**
   * The try is over: its connection is kept for the next (`reusable`), or destroyed at once, and its place is lent
   * again only once the socket is closed (so the endpoint never sees one more).
   */
  give(client: Client, reusable: boolean): void {
    const free = (): void => {
      this.lent--;
      this.waiting.shift()?.();
    };
    if (reusable && !this.closed) {
      this.idle.push(client);
      free();
      return;
    }
    void client
      .destroy()
      .catch(() => undefined)
      .finally(free);
  }

  /** Idle connections go now; lent ones when their try gives them back. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.idle.splice(0).map((client) => client.destroy().catch(() => undefined)));
  }
}

export class WebhookSender {
  private readonly endpoints = new Map<string, EndpointConnections>();
  private readonly signers = new Map<string, Webhook>();

  /** The three Standard Webhooks headers for `body`, signed now. */
  headers(secret: string, webhookId: string, body: string, at: Date = new Date()): Record<string, string> {
    return {
      'webhook-id': webhookId,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': this.signer(secret).sign(webhookId, at, body),
    };
  }

  async send(request: SignedRequest): Promise<AttemptOutcome> {
    const timeout = AbortSignal.timeout(request.timeoutMs);
    const signal = request.stop === undefined ? timeout : AbortSignal.any([timeout, request.stop]);
    const connections = this.connections(request);
    let client: Client | undefined;
    let reusable = false;
    try {
      client = await connections.take(signal);
      const response = await client.request({
        path: pathOf(request.url),
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'taskgate-webhooks', ...this.headers(request.secret, request.webhookId, request.body) },
        body: request.body,
        signal,
        headersTimeout: request.timeoutMs,
        bodyTimeout: request.timeoutMs,
      });
      await response.body.dump({ limit: RESPONSE_BYTES_READ, signal }).catch(() => undefined);
      // An answer read whole within the timeout leaves a connection fit for the next try.
      reusable = !signal.aborted;
      const delivered = response.statusCode >= 200 && response.statusCode < 300;
      return { outcome: delivered ? 'delivered' : 'failed', status: response.statusCode };
    } catch (error) {
      if (request.stop?.aborted === true) return { outcome: 'stopped', reason: 'the gateway is shutting down' };
      if (timeout.aborted) return { outcome: 'timeout', reason: `no answer within ${request.timeoutMs} ms` };
      return { outcome: 'error', reason: (error as { code?: string }).code ?? (error as Error).message };
    } finally {
      if (client !== undefined) connections.give(client, reusable);
    }
  }

  async close(): Promise<void> {
    const all = [...this.endpoints.values()];
    this.endpoints.clear();
    await Promise.all(all.map((connections) => connections.close()));
  }

  /** The endpoint's connections; new ones when its URL's origin or its concurrency changed (a reload). */
  private connections(request: SignedRequest): EndpointConnections {
    const origin = new URL(request.url).origin;
    let connections = this.endpoints.get(request.endpoint);
    if (connections === undefined || connections.origin !== origin || connections.size !== request.concurrency) {
      void connections?.close();
      connections = new EndpointConnections(origin, request.concurrency);
      this.endpoints.set(request.endpoint, connections);
    }
    return connections;
  }

  /** One signer per secret (a reload may change it): the key is decoded once. */
  private signer(secret: string): Webhook {
    let signer = this.signers.get(secret);
    if (signer === undefined) {
      if (this.signers.size > 100) this.signers.clear();
      this.signers.set(secret, (signer = new Webhook(secret)));
    }
    return signer;
  }
}

function pathOf(url: string): string {
  const parsed = new URL(url);
  return `${parsed.pathname}${parsed.search}`;
}
