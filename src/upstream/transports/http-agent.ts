// The connection pool of one HTTP upstream. Two things here are about connections going stale, which a chaos soak
// showed failing a task 4 ms after creation with "read ECONNRESET": idle connections are dropped before the
// upstream drops them, and a POST that failed before its bytes all left the gateway goes once more, on a new
// connection (the only failure after which the upstream certainly did not get the call).
import type { Socket } from 'node:net';
import { Agent, buildConnector, Client, type Dispatcher } from 'undici';
import type { HttpUpstreamConfig } from '../../config/types.js';
import type { CredentialSource } from '../../identity/credential-source.js';
import { outboundInterceptor, replayable } from './outbound.js';

/**
 * How long an idle pooled connection to an upstream is kept when the upstream does not say (no `Keep-Alive:
 * timeout=N` on its responses): below Node's http.Server default of 5 s, the most common upstream. A connection
 * kept longer than the upstream keeps it is closed by the upstream while the gateway sends the next call on it.
 */
export const UPSTREAM_IDLE_KEEP_ALIVE_MS = 4_000;
/**
 * When the upstream says `Keep-Alive: timeout=N`, the gateway keeps an idle connection this much less than N s (a
 * hint of 1 s or less means it is not reused at all): the margin covers the call in flight when the upstream's
 * timer fires.
 */
export const UPSTREAM_KEEP_ALIVE_MARGIN_MS = 1_000;
/** The longest an upstream's `Keep-Alive: timeout=N` makes the gateway keep an idle connection. */
export const UPSTREAM_MAX_IDLE_KEEP_ALIVE_MS = 600_000;
/** Connections per upstream origin. */
const CONNECTIONS_PER_UPSTREAM = 256;

/**
 * Failures of a request that had bytes still in the socket's own buffer when its connection failed: they never
 * reached the kernel, so the upstream cannot have received the whole request.
 */
const unwritten = new WeakSet<Error>();

/**
 * Marks the failures of `socket` that happen while bytes of the request on it were still unwritten. Listens before
 * undici does (undici attaches its listeners after the connector hands the socket over), so the mark is there when
 * undici fails the request with the same error. The end of the stream is noted first: undici destroys the socket
 * on it, and a destroyed socket's buffer is already dropped when the error comes.
 */
function watchWrites(socket: Socket): void {
  let unwrittenAtEnd = 0;
  socket.on('end', () => {
    unwrittenAtEnd = socket.writableLength;
  });
  socket.on('error', (error: Error) => {
    if (socket.writableLength > 0 || unwrittenAtEnd > 0) unwritten.add(error);
  });
}

/**
 * A request's handler, passed through to the caller's, except for one failure: a request that failed before any of
 * its response arrived, with some of its own bytes unwritten, is dispatched once more on a connection of its own.
 * Any other failure (after the request was fully written, the upstream may have it) reaches the caller as it was.
 */
class ResendUnwritten implements Dispatcher.DispatchHandler {
  private responded = false;
  private resent = false;
  private aborted = false;

  constructor(
    private readonly inner: Dispatcher.DispatchHandler,
    private readonly options: Dispatcher.DispatchOptions,
    private readonly fresh: () => Client,
  ) {}

  onConnect(abort: (err?: Error) => void): void {
    // The caller's abort (a signal, a closing transport) stops whichever attempt is under way.
    this.inner.onConnect?.((reason?: Error) => {
      this.aborted = true;
      abort(reason);
    });
  }

  onHeaders(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean {
    this.responded = true;
    return this.inner.onHeaders?.(statusCode, headers, resume, statusText) ?? true;
  }

  onData(chunk: Buffer): boolean {
    return this.inner.onData?.(chunk) ?? true;
  }

  onComplete(trailers: string[] | null): void {
    this.inner.onComplete?.(trailers);
  }

  onUpgrade(statusCode: number, headers: Buffer[] | string[] | null, socket: import('node:stream').Duplex): void {
    this.inner.onUpgrade?.(statusCode, headers, socket);
  }

  onError(error: Error): void {
    if (!this.responded && !this.resent && !this.aborted && unwritten.has(error)) {
      this.resent = true;
      const client = this.fresh();
      client.dispatch(this.options, this);
      // Closed once this one request is done: the connection served it alone.
      void client.close().catch(() => undefined);
      return;
    }
    this.inner.onError?.(error);
  }
}

/**
 * One pooled undici dispatcher per HTTP upstream. Every timeout is explicit: undici's 300 s header/body defaults
 * would cut long tool calls and idle SSE streams, so those are off unless configured; deadlines are policy. Idle
 * connections are dropped before the upstream drops them: undici reads `Keep-Alive: timeout=N` itself (less
 * keepAliveTimeoutThreshold) and uses keepAliveTimeout when the header is absent.
 */
export class UpstreamAgent extends Agent {
  private readonly clientOptions: Client.Options;

  constructor(config: Pick<HttpUpstreamConfig, 'connectTimeoutMs' | 'headersTimeoutMs' | 'bodyTimeoutMs'>) {
    const connector = buildConnector({ timeout: config.connectTimeoutMs });
    const connect: buildConnector.connector = (options, callback) =>
      connector(options, (error, socket) => {
        if (error === null && socket != null) watchWrites(socket as Socket);
        // The overloads of the callback split on error / socket; this is either.
        (callback as (error: Error | null, socket: unknown) => void)(error, socket);
      });
    const clientOptions: Client.Options = {
      connect,
      headersTimeout: config.headersTimeoutMs,
      bodyTimeout: config.bodyTimeoutMs,
      keepAliveTimeout: UPSTREAM_IDLE_KEEP_ALIVE_MS,
      keepAliveTimeoutThreshold: UPSTREAM_KEEP_ALIVE_MARGIN_MS,
      keepAliveMaxTimeout: UPSTREAM_MAX_IDLE_KEEP_ALIVE_MS,
      pipelining: 1,
    };
    super({ ...clientOptions, connections: CONNECTIONS_PER_UPSTREAM });
    this.clientOptions = clientOptions;
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    // Only requests with a body that can go again, to handlers of the callback kind (undici's own request() and
    // post-response.ts both are); everything else goes through untouched.
    if (typeof handler.onError !== 'function' || !replayable(options.body) || options.origin === undefined) return super.dispatch(options, handler);
    const origin = options.origin;
    return super.dispatch(options, new ResendUnwritten(handler, options, () => new Client(origin, this.clientOptions)));
  }
}

export function createUpstreamAgent(config: HttpUpstreamConfig): Agent {
  return new UpstreamAgent(config);
}

/**
 * The dispatcher one connection to the upstream sends through: the upstream's pool, with what every request goes
 * out with applied in one place (outbound.ts): `credentials` (the connection's identity, unless a request carries
 * its caller's own), the refresh after a 401, the trace context. Composing is cheap (undici wraps the pool, it
 * copies nothing), so each connection has its own.
 */
export function upstreamDispatcher(pool: Dispatcher, credentials: CredentialSource): Dispatcher {
  return pool.compose(outboundInterceptor(credentials));
}
