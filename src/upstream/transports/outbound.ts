// What every request to an HTTP upstream goes out with besides its own bytes, applied in one place: an undici
// interceptor (Dispatcher.compose) on the dispatcher of each connection (http-agent.ts: upstreamDispatcher). It adds
// the credential of whom the request is sent for, and sends it once more with a new one after a 401 (a 401 means
// the request did not run), and the trace context of the span the request belongs to. Transports, the stateless
// client and every new one just send; a new `auth` mode is a new CredentialSource, never a transport change.
//
// What a request is sent for travels on its own dispatch options (`outbound`), not in an AsyncLocalStorage scope:
// a send starts follow-up requests from within its own async context (the GET stream after initialized, a POST
// stream's resumption), which would inherit a call's credential and trace context from a scope, and an
// AsyncLocalStorage adds a context per request besides. On the options, it reaches exactly the one request it
// was given to, and the connection's own identity (bound when its dispatcher was composed) covers the rest.
//
// Not here: whom a message from the upstream is for (peer/message-origin.ts). That is decided per JSON-RPC message,
// inbound (the stream it came on, the calls pending), for stdio as for HTTP; an interceptor sees outbound requests
// and raw bytes. Nor the session headers (Mcp-Session-Id, MCP-Protocol-Version): Streamable HTTP's own state, learnt
// from its responses and ended by its 404, which only that transport has.
import type { Duplex } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { CredentialSource } from '../../identity/credential-source.js';

/** What one request carries for the interceptor; none: the connection's credential, no trace context. */
export interface Outbound {
  /** What this one request authenticates with, in place of the connection's (a call carries its own caller's). */
  readonly credentials?: CredentialSource | undefined;
  /** W3C `traceparent` / `tracestate` of the request's span (peer/request-scope.ts: traceFields). */
  readonly traceHeaders?: Readonly<Record<string, string>> | undefined;
}

/**
 * Dispatch options as the upstream's dispatcher takes them: headers as one object (the request's own: session,
 * protocol version, content type), and what the request goes out with.
 */
export interface OutboundDispatchOptions extends Dispatcher.DispatchOptions {
  headers?: Readonly<Record<string, string>>;
  outbound?: Outbound | undefined;
}

type Headers = Readonly<Record<string, string>>;
type Dispatch = Dispatcher.Dispatch;

/**
 * A request's headers: the credential (the upstream's configured headers and its `auth` token) first, so that the
 * request's own headers and the trace context replace a configured header of the same name, as they always have.
 */
function merged(credential: Headers, own: Headers | undefined, trace: Headers | undefined): Record<string, string> {
  return trace === undefined ? { ...credential, ...own } : { ...credential, ...own, ...trace };
}

/** Whether a request's body can be sent again as it was (a stream is consumed by the first attempt). */
export function replayable(body: Dispatcher.DispatchOptions['body']): boolean {
  return body === undefined || body === null || typeof body === 'string' || body instanceof Uint8Array;
}

/**
 * The interceptor of one connection, whose requests authenticate with `connection` unless they carry their own.
 * Its handlers are of undici's callback kind (onHeaders, onData…), as the gateway's are (post-response.ts, undici's
 * request()): the raw headers pass through unparsed.
 */
export function outboundInterceptor(connection: CredentialSource): Dispatcher.DispatcherComposeInterceptor {
  // The last headers made, and what from: a connection's POSTs carry the same own headers and credential object
  // while neither changes, so they share one object rather than each spreading anew.
  let lastCredential: Headers | undefined;
  let lastOwn: Headers | undefined;
  let last: Record<string, string> = {};
  const headersOf = (credential: Headers, own: Headers | undefined, trace: Headers | undefined): Record<string, string> => {
    if (trace !== undefined) return merged(credential, own, trace);
    if (credential !== lastCredential || own !== lastOwn) {
      last = merged(credential, own, undefined);
      lastCredential = credential;
      lastOwn = own;
    }
    return last;
  };
  return (dispatch: Dispatch): Dispatch =>
    (options, handler) => {
      if (typeof handler.onHeaders !== 'function') throw new TypeError('an upstream request needs a handler of the callback kind (onHeaders, onData, onComplete, onError)');
      const { outbound, headers: own } = options as OutboundDispatchOptions;
      const credentials = outbound?.credentials ?? connection;
      const trace = outbound?.traceHeaders;
      const send = (credential: Headers, to: Dispatcher.DispatchHandler): void => {
        try {
          dispatch({ ...options, headers: headersOf(credential, own, trace) }, to);
        } catch (error) {
          to.onError?.(error as Error);
        }
      };
      // A source that cannot get a new credential needs no watch for 401s, nor a body that cannot go twice (the
      // gateway's are strings: encoded messages): the response goes straight through.
      const watch = credentials.refreshAfterUnauthorized !== undefined && replayable(options.body);
      credentials.headers().then(
        (credential) => {
          if (!watch) send(credential, handler);
          else send(credential, new RefreshOnUnauthorized(handler, credentials, credential, send));
        },
        (error: Error) => handler.onError?.(error),
      );
      return true;
    };
}

/**
 * Passes a request's response through, except a first 401 whose credential the source can replace: its body is
 * read and dropped, and the request goes once more with the new credential; that answer, whatever it is, is the
 * request's. The caller's abort reaches whichever attempt is under way, and one between the two ends the request.
 */
class RefreshOnUnauthorized implements Dispatcher.DispatchHandler {
  /** The current attempt was refused with a 401 that is retried: its response is not the caller's. */
  private refused = false;
  private retried = false;
  private connected = false;
  private abortReason: Error | undefined;
  private abortAttempt: ((reason?: Error) => void) | undefined;

  constructor(
    private readonly inner: Dispatcher.DispatchHandler,
    private readonly credentials: CredentialSource,
    private sent: Headers,
    private readonly send: (credential: Headers, to: Dispatcher.DispatchHandler) => void,
  ) {}

  onConnect(abort: (reason?: Error) => void): void {
    this.abortAttempt = abort;
    if (this.abortReason !== undefined) {
      abort(this.abortReason);
      return;
    }
    if (this.connected) return;
    this.connected = true;
    this.inner.onConnect?.((reason?: Error) => {
      this.abortReason = reason ?? new Error('aborted');
      this.abortAttempt?.(reason);
    });
  }

  onResponseStarted(): void {
    this.inner.onResponseStarted?.();
  }

  onHeaders(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean {
    if (statusCode === 401 && !this.retried && this.credentials.refreshAfterUnauthorized?.(this.sent) === true) {
      this.refused = true;
      return true;
    }
    return this.inner.onHeaders?.(statusCode, headers, resume, statusText) ?? true;
  }

  onData(chunk: Buffer): boolean {
    return this.refused || (this.inner.onData?.(chunk) ?? true);
  }

  onComplete(trailers: string[] | null): void {
    if (this.refused) this.retry();
    else this.inner.onComplete?.(trailers);
  }

  onError(error: Error): void {
    // A refused response that failed while it was being dropped still did not run: it goes again, unless aborted.
    if (this.refused && this.abortReason === undefined) this.retry();
    else this.inner.onError?.(error);
  }

  onUpgrade(statusCode: number, headers: Buffer[] | string[] | null, socket: Duplex): void {
    this.inner.onUpgrade?.(statusCode, headers, socket);
  }

  onBodySent(chunkSize: number, totalBytesSent: number): void {
    this.inner.onBodySent?.(chunkSize, totalBytesSent);
  }

  private retry(): void {
    this.refused = false;
    this.retried = true;
    this.abortAttempt = undefined;
    this.credentials.headers().then(
      (credential) => {
        if (this.abortReason !== undefined) return this.inner.onError?.(this.abortReason);
        this.sent = credential;
        this.send(credential, this);
      },
      (error: Error) => this.inner.onError?.(error),
    );
  }
}
