import type { Readable } from 'node:stream';
import { request, type Dispatcher } from 'undici';
import type { Logger } from '../../log.js';
import { encodeMessage, type JsonRpcMessage } from '../../jsonrpc.js';
import { readBodyStart } from './body-reader.js';
import { oversized, RESYNC_FACTOR } from './oversized.js';
import { readSse } from './sse-reader.js';
import { decodePayload } from './payload.js';
import { refusalMessage } from './http-refusal.js';
import type { Outbound, OutboundDispatchOptions } from './outbound.js';
import { holdReadable, receiveDecoded, type HttpTransportOptions, type UpstreamTransport } from './transport.js';

const POST_HEADERS: Readonly<Record<string, string>> = { 'content-type': 'application/json' };

/**
 * The 2024-11-05 HTTP+SSE transport: one GET stream carries every server message; the `endpoint` event names
 * where to POST. The upstream's session is that stream, so when it ends the connection is gone.
 */
export class HttpSseTransport implements UpstreamTransport {
  onmessage?: UpstreamTransport['onmessage'];
  onclose?: UpstreamTransport['onclose'];
  onrequestlost?: UpstreamTransport['onrequestlost'];
  onoversized?: UpstreamTransport['onoversized'];

  private endpoint: string | undefined;
  private closed = false;
  private readonly abort = new AbortController();
  /** The one stream every message arrives on. */
  private body: Readable | undefined;

  private readonly url: string;
  private readonly dispatcher: Dispatcher;
  private readonly logger: Logger;
  /** Largest SSE event taken from the upstream. */
  private readonly maxMessageBytes: number;

  constructor(options: HttpTransportOptions) {
    ({ url: this.url, dispatcher: this.dispatcher, logger: this.logger, maxMessageBytes: this.maxMessageBytes } = options);
  }

  async start(): Promise<void> {
    const response = await request(this.url, { method: 'GET', dispatcher: this.dispatcher, signal: this.abort.signal, headers: { accept: 'text/event-stream' } });
    if (response.statusCode !== 200) {
      const refusal = refusalMessage(response.statusCode, response.headers['www-authenticate'], await readBodyStart(response.body, 300));
      throw new Error(`${refusal} opening the SSE stream`);
    }
    this.body = response.body;
    // Every message comes on this one stream: an over-long event is skipped to its end (its call, when its head
    // names one, fails), and only one that does not end within RESYNC_FACTOR × the limit closes the connection.
    const limit = this.maxMessageBytes;
    await new Promise<void>((resolve, reject) => {
      void readSse(response.body, (event) => {
        if (event.event === 'endpoint') {
          this.endpoint = new URL(event.data.trim(), this.url).href;
          resolve();
          return;
        }
        if (event.event !== undefined && event.event !== 'message') return;
        for (const item of decodePayload(event.data, this.logger, 'SSE data that is not JSON')) receiveDecoded(item, this, this.logger);
      }, { maxEventBytes: limit, skipOversized: (head) => this.onoversized?.(oversized(limit, head)) }).then((outcome) => {
        if (outcome.oversized) this.logger.warn({ maxMessageBytes: limit }, 'upstream SSE event does not end; closing the stream');
        const reason = outcome.oversized
          ? `it sent an SSE event of more than ${RESYNC_FACTOR * limit} bytes (${RESYNC_FACTOR} × maxMessageBytes) without ending it`
          : outcome.error
            ? `the SSE stream failed (${outcome.error.message})`
            : 'the upstream closed its SSE stream';
        if (this.endpoint === undefined) reject(new Error(`${reason} before naming its endpoint`));
        if (!this.closed) {
          this.closed = true;
          this.onclose?.(reason);
        }
      });
    });
  }

  async send(message: JsonRpcMessage, outbound?: Outbound): Promise<void> {
    if (this.closed || this.endpoint === undefined) throw new Error('connection is closed');
    const options: Omit<OutboundDispatchOptions, 'origin' | 'path'> & { dispatcher: Dispatcher } = { method: 'POST', dispatcher: this.dispatcher, headers: POST_HEADERS, body: encodeMessage(message), outbound };
    const response = await request(this.endpoint, options);
    const text = await readBodyStart(response.body, 300);
    if (response.statusCode >= 300) throw new Error(refusalMessage(response.statusCode, response.headers['www-authenticate'], text));
  }

  /** One stream carries everything: held back only on a connection of one client (the connection decides). */
  hold(_relatedTo: unknown, until: Promise<void>): void {
    holdReadable(this.body, until);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.abort.abort();
  }
}
