// One try of one webhook delivery: a POST of the queued body to the endpoint's configured URL, signed as Standard
// Webhooks (the `standardwebhooks` reference implementation) with the time of this try. Nothing but that URL is
// called: undici's request follows no redirect (only its redirect interceptor would, and this agent has none), so a
// 3xx is a failed try like any other non-2xx. The whole exchange is bounded by webhookDelivery.timeoutMs, and the
// endpoint's answer is read only to let the connection be reused (at most RESPONSE_BYTES_READ).
import { Agent } from 'undici';
import { Webhook } from 'standardwebhooks';

/** Bytes of an endpoint's response body read (and thrown away) before the connection is given up instead. */
const RESPONSE_BYTES_READ = 64 * 1024;
/** An idle connection to an endpoint is kept this long for the next delivery. */
const IDLE_KEEP_ALIVE_MS = 4_000;

/** How a try went; `stopped`: the replica shut down during it (nothing can be said about it). */
export type AttemptOutcome = { outcome: 'delivered' | 'failed'; status: number } | { outcome: 'timeout' | 'error' | 'stopped'; reason: string };

export interface SignedRequest {
  url: string;
  /** The endpoint's `whsec_` secret. */
  secret: string;
  webhookId: string;
  body: string;
  timeoutMs: number;
  /** Aborts the try (shutdown). */
  stop?: AbortSignal;
}

export class WebhookSender {
  /** Connections per endpoint are as many as its tries in flight, which its leases bound (webhookDelivery.concurrency). */
  private readonly agent: Agent;
  private readonly signers = new Map<string, Webhook>();

  constructor() {
    this.agent = new Agent({ keepAliveTimeout: IDLE_KEEP_ALIVE_MS, keepAliveMaxTimeout: IDLE_KEEP_ALIVE_MS });
  }

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
    try {
      const response = await this.agent.request({
        origin: new URL(request.url).origin,
        path: pathOf(request.url),
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'taskgate-webhooks', ...this.headers(request.secret, request.webhookId, request.body) },
        body: request.body,
        signal,
        headersTimeout: request.timeoutMs,
        bodyTimeout: request.timeoutMs,
      });
      await response.body.dump({ limit: RESPONSE_BYTES_READ, signal }).catch(() => undefined);
      const delivered = response.statusCode >= 200 && response.statusCode < 300;
      return { outcome: delivered ? 'delivered' : 'failed', status: response.statusCode };
    } catch (error) {
      if (request.stop?.aborted === true) return { outcome: 'stopped', reason: 'the gateway is shutting down' };
      if (timeout.aborted) return { outcome: 'timeout', reason: `no answer within ${request.timeoutMs} ms` };
      return { outcome: 'error', reason: (error as { code?: string }).code ?? (error as Error).message };
    }
  }

  async close(): Promise<void> {
    await this.agent.destroy();
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
