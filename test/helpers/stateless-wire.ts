// 2026-07-28 requests written by hand, for tests that check the wire itself: one POST per request, the
// envelope in params._meta, the answer read whole (JSON or SSE), and subscriptions/listen streams.
import { EventEmitter } from 'node:events';
import { request as httpRequest } from 'undici';
import { type Json } from './harness.js';
import { bounded, HANG_MS } from './waits.js';

export const STATELESS_VERSION = '2026-07-28';
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
/** The capabilities of a 2026-07-28 client that speaks the Tasks extension. */
export const TASKS_CAPABILITIES: Json = { extensions: { [TASKS_EXTENSION]: {} } };

export interface Rev2026Options {
  /** `…/clientCapabilities` (default `{}`). */
  capabilities?: Json;
  /** `…/logLevel`; absent unless given. */
  logLevel?: string;
  /** Extra or replacing headers (names case-insensitive). */
  headers?: Record<string, string>;
  /** Headers to leave out (names case-insensitive). */
  omitHeaders?: string[];
  /** Merged over the envelope (a key set to undefined is left out); null sends no `_meta` at all. */
  meta?: Json | null;
  accept?: string;
  id?: string | number;
}

export interface Rev2026Response {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Whether the answer came as an SSE stream. */
  sse: boolean;
  /** Every message of the answer in order: the JSON body, or each SSE event. */
  messages: Json[];
  /** Messages with a method and no id. */
  notifications: Json[];
  /** The JSON-RPC response carrying the request's id (or, for errors without one, the only error). */
  response: Json;
  result: Json | undefined;
  error: { code: number; message: string; data?: Json } | undefined;
}

let rev2026Ids = 0;

/** The body field `Mcp-Name` mirrors, per method. */
function mcpNameOf(method: string, params: Json): unknown {
  if (method === 'tools/call' || method === 'prompts/get') return params.name;
  if (method === 'resources/read') return params.uri;
  if (method === 'tasks/get' || method === 'tasks/update' || method === 'tasks/cancel') return params.taskId;
  return undefined;
}

/** The JSON-RPC request body and headers of a 2026-07-28 request. */
export function rev2026Request(method: string, params: Json = {}, options: Rev2026Options = {}): { body: Json; headers: Record<string, string> } {
  const envelope: Json = {
    'io.modelcontextprotocol/protocolVersion': STATELESS_VERSION,
    'io.modelcontextprotocol/clientCapabilities': options.capabilities ?? {},
    'io.modelcontextprotocol/clientInfo': { name: 'taskgate-rev2026-test', version: '1.0.0' },
  };
  if (options.logLevel !== undefined) envelope['io.modelcontextprotocol/logLevel'] = options.logLevel;
  const meta = options.meta === null ? undefined : { ...envelope, ...options.meta };
  const body: Json = { jsonrpc: '2.0', id: options.id ?? ++rev2026Ids, method, params: meta === undefined ? params : { ...params, _meta: meta } };
  const version = meta?.['io.modelcontextprotocol/protocolVersion'];
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: options.accept ?? 'application/json, text/event-stream',
    'mcp-protocol-version': typeof version === 'string' ? version : STATELESS_VERSION,
    'mcp-method': method,
  };
  const name = mcpNameOf(method, params);
  if (typeof name === 'string') headers['mcp-name'] = name;
  for (const [key, value] of Object.entries(options.headers ?? {})) headers[key.toLowerCase()] = value;
  for (const key of options.omitHeaders ?? []) delete headers[key.toLowerCase()];
  return { body, headers };
}

/** JSON-RPC messages of an SSE body (`data:` lines; comments and empty events skipped). */
export function sseMessages(text: string): Json[] {
  return text
    .split(/\r?\n\r?\n/)
    .map((event) => event.split(/\r?\n/).filter((line) => line.startsWith('data:')).map((line) => line.slice(5).trimStart()).join('\n'))
    .filter((data) => data.trim() !== '')
    .map((data) => JSON.parse(data) as Json);
}

/** Sends one 2026-07-28 request and reads its whole answer, JSON or SSE. */
export async function sendRev2026(url: string, method: string, params: Json = {}, options: Rev2026Options = {}): Promise<Rev2026Response> {
  const { body, headers } = rev2026Request(method, params, options);
  const answer = await httpRequest(url, { method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
  const text = await answer.body.text();
  const sse = String(answer.headers['content-type'] ?? '').includes('text/event-stream');
  const messages = sse ? sseMessages(text) : text.trim() === '' ? [] : [JSON.parse(text) as Json];
  const response = messages.find((m) => m.id === body.id && ('result' in m || 'error' in m))
    ?? messages.find((m) => !('method' in m) && 'error' in m)
    ?? {};
  return {
    status: answer.statusCode,
    headers: answer.headers,
    sse,
    messages,
    notifications: messages.filter((m) => typeof m.method === 'string' && !('id' in m)),
    response,
    result: response.result as Json | undefined,
    error: response.error as Rev2026Response['error'],
  };
}

export interface ListenStream {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Messages received so far, in order. */
  events: Json[];
  /** Waits (bounded) for an event matching `predicate`. */
  next(predicate: (event: Json) => boolean, timeoutMs?: number): Promise<Json>;
  close(): void;
}

/** Opens `subscriptions/listen` and keeps reading its stream in the background until close(). */
export async function openListen(url: string, notifications: Json, options: Rev2026Options = {}): Promise<ListenStream> {
  const { body, headers } = rev2026Request('subscriptions/listen', { notifications }, options);
  const abort = new AbortController();
  const answer = await httpRequest(url, { method: 'POST', headers, body: JSON.stringify(body), signal: abort.signal });
  const events: Json[] = [];
  // Told of every batch of events that arrives (next() waits on it instead of polling `events`).
  const arrivals = new EventEmitter();
  const sse = String(answer.headers['content-type'] ?? '').includes('text/event-stream');
  if (!sse) {
    const text = await answer.body.text();
    if (text.trim() !== '') events.push(JSON.parse(text) as Json);
  } else {
    void (async () => {
      let buffer = '';
      try {
        for await (const chunk of answer.body) {
          buffer += (chunk as Buffer).toString('utf8');
          const parts = buffer.split(/\r?\n\r?\n/);
          buffer = parts.pop() ?? '';
          events.push(...sseMessages(parts.map((p) => `${p}\n\n`).join('')));
          arrivals.emit('events');
        }
      } catch {
        // closed by close()
      }
    })();
  }
  return {
    status: answer.statusCode,
    headers: answer.headers,
    events,
    async next(predicate, timeoutMs = HANG_MS) {
      const found = (): Json | undefined => events.find(predicate);
      let onEvents = (): void => undefined;
      const arrived = new Promise<Json>((resolve) => {
        onEvents = () => {
          const event = found();
          if (event !== undefined) resolve(event);
        };
        arrivals.on('events', onEvents);
        onEvents();
      });
      return bounded(arrived, 'an event on the listen stream', timeoutMs).finally(() => arrivals.off('events', onEvents));
    },
    close: () => abort.abort(),
  };
}
