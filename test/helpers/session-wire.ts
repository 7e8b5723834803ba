// A hand-written 2025-11-25 client over Streamable HTTP, for tests that send each request of one session to a
// different gateway replica (the SDK client is bound to one URL).
import type { Json } from './harness.js';
import { sseMessages } from './stateless-wire.js';
import { HANG_MS } from './waits.js';

export const REV2025_PROTOCOL = '2025-11-25';

/** The headers of a POST in a 2025-11-25 session (none yet before initialize). */
export function rev2025Headers(sessionId: string, extra: Record<string, string> = {}): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': REV2025_PROTOCOL, ...extra };
  if (sessionId !== '') headers['mcp-session-id'] = sessionId;
  return headers;
}

/** An SSE response being read: messages as they arrive, and waiting for one that matches. */
export class EventReader {
  readonly messages: Json[] = [];
  /** Event ids seen, in order. */
  readonly eventIds: string[] = [];
  readonly done: Promise<void>;
  private waiters: (() => void)[] = [];

  constructor(
    readonly status: number,
    body: ReadableStream<Uint8Array> | null,
    private readonly abort: AbortController,
    /** The HTTP response's headers (Retry-After on a refused exchange). */
    readonly headers: Headers = new Headers(),
  ) {
    this.done = this.read(body);
  }

  /** The first message (already received or yet to come) that `match` accepts; `timeoutMs` only guards against a hang. */
  async next(match: (message: Json) => boolean, timeoutMs = HANG_MS): Promise<Json> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.messages.find(match);
      if (found !== undefined) return found;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no matching message within ${timeoutMs} ms; got ${JSON.stringify(this.messages)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.abort.abort();
  }

  private async read(body: ReadableStream<Uint8Array> | null): Promise<void> {
    if (body === null) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of body) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, end + 2);
          buffer = buffer.slice(end + 2);
          const id = /^id: (\S+)/m.exec(event)?.[1];
          if (id !== undefined) this.eventIds.push(id);
          this.messages.push(...sseMessages(event));
          for (const wake of this.waiters.splice(0)) wake();
        }
      }
    } catch {
      // aborted by close()
    }
    for (const wake of this.waiters.splice(0)) wake();
  }
}

/** The task id of a CreateTaskResult response (a task-augmented tools/call). */
export function createdTaskId(response: Json): string {
  return String(((response.result as Json).task as Json).taskId);
}

export class SessionWire {
  sessionId = '';
  private nextId = 1;

  /** `always`: headers every request of the session carries (an Authorization). */
  constructor(
    private readonly capabilities: Json = {},
    private readonly always: Record<string, string> = {},
  ) {}

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return rev2025Headers(this.sessionId, { ...this.always, ...extra });
  }

  /** `protocolVersion`: the session's revision (an older one has no tasks). */
  async initialize(url: string, protocolVersion = REV2025_PROTOCOL): Promise<Json> {
    const response = await fetch(url, {
      method: 'POST',
      headers: this.headers(),
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion, capabilities: this.capabilities, clientInfo: { name: 'rev2025-wire', version: '1' } } }),
    });
    const body = (await response.json()) as Json;
    this.sessionId = response.headers.get('mcp-session-id') ?? '';
    if (this.sessionId === '') throw new Error(`initialize failed: ${JSON.stringify(body)}`);
    await this.notify(url, 'notifications/initialized');
    return body;
  }

  /** Sends a request and reads its whole answer (plain JSON or an SSE stream); returns the response message. */
  async request(url: string, method: string, params: Json = {}): Promise<Json> {
    const reader = await this.start(url, method, params);
    await reader.done;
    const response = reader.messages.find((m) => 'result' in m || 'error' in m);
    if (response === undefined) throw new Error(`${method}: no response (HTTP ${reader.status}): ${JSON.stringify(reader.messages)}`);
    return response;
  }

  /** Sends a request and returns its answer as it arrives (messages before the response included). */
  async start(url: string, method: string, params: Json = {}): Promise<EventReader> {
    const id = this.nextId++;
    return this.send(url, { jsonrpc: '2.0', id, method, params });
  }

  async notify(url: string, method: string, params?: Json): Promise<number> {
    const message: Json = { jsonrpc: '2.0', method };
    if (params !== undefined) message.params = params;
    const response = await fetch(url, { method: 'POST', headers: this.headers(), body: JSON.stringify(message) });
    await response.arrayBuffer();
    return response.status;
  }

  /** Answers a request the gateway sent to this client. */
  async respond(url: string, id: unknown, result: Json): Promise<number> {
    const response = await fetch(url, { method: 'POST', headers: this.headers(), body: JSON.stringify({ jsonrpc: '2.0', id, result }) });
    await response.arrayBuffer();
    return response.status;
  }

  /** Opens the GET stream (or resumes a stream after `lastEventId`). */
  async listen(url: string, lastEventId?: string): Promise<EventReader> {
    const abort = new AbortController();
    const extra: Record<string, string> = { accept: 'text/event-stream' };
    if (lastEventId !== undefined) extra['last-event-id'] = lastEventId;
    const response = await fetch(url, { method: 'GET', headers: this.headers(extra), signal: abort.signal });
    return new EventReader(response.status, response.body, abort, response.headers);
  }

  async end(url: string): Promise<number> {
    const response = await fetch(url, { method: 'DELETE', headers: this.headers() });
    await response.arrayBuffer();
    return response.status;
  }

  private async send(url: string, message: Json): Promise<EventReader> {
    const abort = new AbortController();
    const response = await fetch(url, { method: 'POST', headers: this.headers(), body: JSON.stringify(message), signal: abort.signal });
    if ((response.headers.get('content-type') ?? '').includes('text/event-stream')) return new EventReader(response.status, response.body, abort, response.headers);
    const text = await response.text();
    const reader = new EventReader(response.status, null, abort, response.headers);
    if (text !== '') reader.messages.push(...([JSON.parse(text)].flat() as Json[]));
    return reader;
  }
}
