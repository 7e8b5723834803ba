// The response to a POST to a Streamable HTTP upstream, taken from undici's dispatcher directly rather than through
// its request() API. Every proxied call makes one; request() wraps each in an async resource, parses every header
// into an object and pushes the body through a stream.Readable, which together were a good share of the gateway's
// CPU per call. Here the three headers the transport reads are picked from the raw ones, and the body hands its
// chunks straight to whoever reads it (the SSE reader, the bounded text readers).
import type { Dispatcher } from 'undici';
import type { BodyStream } from './body-reader.js';

export interface PostResponse {
  statusCode: number;
  /** Joined with ',' when the header came more than once, as String() of undici's parsed headers had it. */
  contentType: string;
  contentLength: string | string[] | undefined;
  /** Undefined when absent or sent more than once. */
  sessionId: string | undefined;
  /** Why a 401 or 403 refused (RFC 6750 §3); its values joined when it came more than once. */
  wwwAuthenticate: string | undefined;
  body: ResponseBody;
}

/** Any of the events' listeners (each event's own type is BodyStream's). */
type Listener = (value: never) => void;
type Call = (value?: unknown) => void;

/** Bytes held for a reader before undici is told to stop reading the socket (a Readable's default high-water mark). */
const HIGH_WATER_MARK = 64 * 1024;

/**
 * A response body as a minimal readable. Like a Readable it holds what arrives until a 'data' listener is there
 * (the response may be whole before its reader is), then hands over each chunk, then 'end' (or 'error'), then
 * 'close'; pause() holds chunks here and, past the high-water mark, stops undici reading the socket (the
 * upstream waits) until resume(); destroy() aborts the request.
 */
export class ResponseBody implements BodyStream {
  destroyed = false;
  private readonly listeners = { data: [] as Listener[], end: [] as Listener[], error: [] as Listener[], close: [] as Listener[] };
  /** A reader is there (a 'data' listener, and the turn in which it attached the others has passed). */
  private flowing = false;
  private starting = false;
  private paused = false;
  /** What arrived while it could not be handed over: chunks, then the end or the failure. */
  private held: Buffer[] = [];
  private heldBytes = 0;
  private ended = false;
  private failure: Error | undefined;
  /** Restarts undici's reading, when a chunk was refused (onData returned false). */
  private resumeSocket: (() => void) | undefined;

  constructor(private readonly abort: () => void) {}

  on(event: 'data' | 'end' | 'error' | 'close', listener: Listener): this {
    this.listeners[event].push(listener);
    if (event === 'data' && !this.flowing && !this.starting) {
      this.starting = true;
      // The reader attaches its 'end' and 'error' listeners right after its 'data' one. A tick, not a microtask:
      // queueMicrotask makes an async resource of each callback.
      process.nextTick(() => {
        this.flowing = true;
        this.flush();
      });
    }
    return this;
  }

  once(event: 'data' | 'end' | 'error' | 'close', listener: Listener): this {
    // Every event but 'data' comes at most once, so a listener of one is a once listener already.
    return this.on(event, listener);
  }

  off(event: 'data' | 'end' | 'error' | 'close', listener: Listener): this {
    const list = this.listeners[event];
    const at = list.indexOf(listener);
    if (at >= 0) list.splice(at, 1);
    return this;
  }

  pause(): this {
    this.paused = true;
    return this;
  }

  resume(): this {
    this.paused = false;
    this.flush();
    return this;
  }

  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    this.drop();
    this.abort();
    this.closeSoon();
    return this;
  }

  /** Reads the body to its end, keeping nothing. */
  dump(): Promise<void> {
    return new Promise((resolve) => {
      if (this.destroyed) return resolve();
      this.listeners.data.length = 0;
      this.on('data', () => undefined);
      this.once('close', () => resolve());
      this.resume();
    });
  }

  /** A chunk from undici; false to stop it reading the socket until `resumeSocket` is called. */
  chunk(data: Buffer, resumeSocket: () => void): boolean {
    if (this.destroyed) return true;
    if (this.deliverable && this.held.length === 0) {
      this.emitData(data);
      if (this.deliverable || this.destroyed) return true;
      this.resumeSocket = resumeSocket;
      return false;
    }
    this.held.push(data);
    this.heldBytes += data.length;
    if (this.heldBytes <= HIGH_WATER_MARK) return true;
    this.resumeSocket = resumeSocket;
    return false;
  }

  /** The body is complete. */
  end(): void {
    if (this.destroyed) return;
    this.ended = true;
    this.flush();
  }

  /** The request failed after its headers: what is held is dropped, as a Readable destroyed with an error does. */
  fail(error: Error): void {
    if (this.destroyed) return;
    this.failure = error;
    this.drop();
    this.flush();
  }

  private get deliverable(): boolean {
    return this.flowing && !this.paused && !this.destroyed;
  }

  private flush(): void {
    while (this.deliverable && this.held.length > 0) {
      const chunk = this.held.shift() as Buffer;
      this.heldBytes -= chunk.length;
      this.emitData(chunk);
    }
    if (!this.deliverable) return;
    if (this.failure !== undefined) {
      this.destroyed = true;
      this.emit('error', this.failure);
      this.closeSoon();
    } else if (this.ended) {
      this.destroyed = true;
      this.emit('end');
      this.closeSoon();
    } else if (this.resumeSocket !== undefined) {
      const resume = this.resumeSocket;
      this.resumeSocket = undefined;
      resume();
    }
  }

  private drop(): void {
    this.held = [];
    this.heldBytes = 0;
  }

  /** 'close' comes a tick after the end, as a Readable's does: a reader that settles on 'end' or on its own destroy() is told first. */
  private closeSoon(): void {
    process.nextTick(() => this.emit('close'));
  }

  private emitData(chunk: Buffer): void {
    const list = this.listeners.data;
    for (const listener of list.length === 1 ? list : [...list]) (listener as Call)(chunk);
  }

  private emit(event: 'end' | 'error' | 'close', value?: unknown): void {
    const list = this.listeners[event];
    this.listeners[event] = [];
    for (const listener of list) (listener as Call)(value);
  }
}

/** The headers a POST's response is read by, from undici's raw [name, value, ...] list. */
function pickHeaders(raw: Buffer[]): Pick<PostResponse, 'contentType' | 'contentLength' | 'sessionId' | 'wwwAuthenticate'> {
  let contentType: string[] | undefined;
  let wwwAuthenticate: string | undefined;
  let contentLength: string[] | undefined;
  let sessionId: string[] | undefined;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as Buffer;
    // Only names as long as the four read here are decoded.
    if (name.length !== 12 && name.length !== 14 && name.length !== 16) continue;
    const lower = name.toString('latin1').toLowerCase();
    const value = (raw[i + 1] as Buffer).toString('latin1');
    if (lower === 'content-type') (contentType ??= []).push(value);
    else if (lower === 'content-length') (contentLength ??= []).push(value);
    else if (lower === 'mcp-session-id') (sessionId ??= []).push(value);
    else if (lower === 'www-authenticate') wwwAuthenticate = wwwAuthenticate === undefined ? value : `${wwwAuthenticate}, ${value}`;
  }
  return {
    contentType: contentType?.join(',') ?? '',
    contentLength: contentLength === undefined ? undefined : contentLength.length === 1 ? contentLength[0] : contentLength,
    sessionId: sessionId?.length === 1 ? sessionId[0] : undefined,
    wwwAuthenticate,
  };
}

/**
 * Sends a request through `dispatcher` and resolves with its response once the headers are in (informational 1xx
 * responses are skipped). Rejects when it fails before that; a failure after it is the body's 'error'.
 * `inflight` holds the request until it ends, so that the transport can abort every one when it closes.
 */
export function dispatchPost(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions, inflight: Set<(reason: Error) => void>): Promise<PostResponse> {
  return new Promise((resolve, reject) => {
    let abortRequest: ((reason: Error) => void) | undefined;
    let aborted: Error | undefined;
    let body: ResponseBody | undefined;
    let resumeSocket: () => void = () => undefined;
    const abort = (reason: Error): void => {
      aborted ??= reason;
      abortRequest?.(reason);
    };
    inflight.add(abort);
    const handler: Dispatcher.DispatchHandler = {
      onConnect(abortIt) {
        // Aborted while it waited for a connection: it goes no further.
        if (aborted !== undefined) abortIt(aborted);
        else abortRequest = abortIt;
      },
      onHeaders(statusCode, rawHeaders, resume) {
        if (statusCode < 200) return true;
        resumeSocket = resume;
        body = new ResponseBody(() => abort(new Error('the response body was destroyed')));
        resolve({ statusCode, ...pickHeaders(rawHeaders as unknown as Buffer[]), body });
        return true;
      },
      onData(chunk) {
        return body === undefined ? true : body.chunk(chunk, resumeSocket);
      },
      onComplete() {
        inflight.delete(abort);
        body?.end();
      },
      onError(error) {
        inflight.delete(abort);
        if (body === undefined) reject(error);
        else body.fail(error);
      },
    };
    dispatcher.dispatch(options, handler);
  });
}
