// Streamable HTTP load generator: N MCP sessions over one pooled keep-alive undici Agent, each running a closed
// loop of sync `tools/call`. Usable as a library (run.ts) and on its own:
//   tsx bench/load.ts --url http://127.0.0.1:3001/mcp [--clients 50] [--warmup-ms 2000] [--duration-ms 8000]
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { Agent } from 'undici';
import {
  checkEchoResult,
  planFromArgs,
  planOptions,
  runPhase,
  runPlan,
  uniqueId,
  type Driver,
  type PhaseSpec,
  type PhaseStats,
} from './stats.js';

export const PROTOCOL_VERSION = '2025-11-25';

export interface HttpLoadOptions {
  url: string;
  clients: number;
  /** Exposed tool name; when absent, discovered with tools/list (a gateway may prefix upstream tool names). */
  tool?: string;
  /** Per-request deadline for headers and between body chunks. */
  timeoutMs?: number;
  /** Sent with every request (e.g. `authorization` for a gateway with `auth`). */
  headers?: Record<string, string>;
}

export interface JsonRpcResponse {
  jsonrpc: '2.0';
  id: number | string | null;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

/** One MCP session: what a client keeps between requests. */
export interface McpSession {
  sessionId: string | undefined;
}

/** A response and when its bytes arrived, for timing against a clock another process reads too. */
export interface TimedResult {
  result: unknown;
  /** Wall-clock ms (`wallMs()`) when the chunk holding the response was read. */
  atMs: number;
  /** Answered as an SSE stream (else plain JSON). */
  sse: boolean;
}

/**
 * Wall-clock milliseconds with sub-ms resolution. Date.now() rounds to whole ms; timeOrigin + now() is read the
 * same way by every Node process on the machine, so times taken in two processes can be subtracted.
 */
export const wallMs = (): number => performance.timeOrigin + performance.now();

/** Extracts the JSON-RPC response with `id` from an SSE body; notifications and priming events are skipped. */
export function findInSse(body: string, id: number): JsonRpcResponse | undefined {
  let data: string[] = [];
  const flush = (): JsonRpcResponse | undefined => {
    const payload = data.join('\n');
    data = [];
    if (payload.trim() === '') return undefined;
    const msg = JSON.parse(payload) as Partial<JsonRpcResponse> & { method?: string };
    if (msg.method === undefined && msg.id === id) return msg as JsonRpcResponse;
    return undefined;
  };
  for (const line of body.split(/\r?\n/)) {
    if (line === '') {
      const found = flush();
      if (found) return found;
    } else if (line.startsWith('data:')) {
      data.push(line.slice(line[5] === ' ' ? 6 : 5));
    }
  }
  return flush();
}

/**
 * Streamable HTTP client side shared by every HTTP driver: sessions over one pooled keep-alive undici Agent,
 * JSON or SSE responses, process-wide unique JSON-RPC ids.
 */
export class McpHttp {
  readonly agent: Agent;
  private readonly origin: string;
  private readonly path: string;

  constructor(
    url: string,
    connections: number,
    timeoutMs = 15_000,
    /** Sent with every request (an Authorization header for a gateway with auth). */
    private readonly extraHeaders: Record<string, string> = {},
  ) {
    const u = new URL(url);
    this.origin = u.origin;
    this.path = u.pathname + u.search;
    this.agent = new Agent({
      // One connection per client: requests never queue behind each other inside the load generator.
      connections,
      pipelining: 1,
      keepAliveTimeout: 60_000,
      keepAliveMaxTimeout: 120_000,
      connectTimeout: 5_000,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
  }

  private headers(session: McpSession): Record<string, string> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...this.extraHeaders,
    };
    if (session.sessionId !== undefined) {
      headers['mcp-session-id'] = session.sessionId;
      headers['mcp-protocol-version'] = PROTOCOL_VERSION;
    }
    return headers;
  }

  async post(session: McpSession, message: object, id: number | undefined): Promise<JsonRpcResponse | undefined> {
    const res = await this.agent.request({
      origin: this.origin,
      path: this.path,
      method: 'POST',
      headers: this.headers(session),
      body: JSON.stringify(message),
    });
    const text = await res.body.text();
    if (res.statusCode === 202 && id === undefined) return undefined;
    if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
    const sid = res.headers['mcp-session-id'];
    if (typeof sid === 'string' && session.sessionId === undefined) session.sessionId = sid;
    if (id === undefined) return undefined;
    const ctype = String(res.headers['content-type'] ?? '');
    const msg = ctype.startsWith('text/event-stream')
      ? findInSse(text, id)
      : (JSON.parse(text) as JsonRpcResponse);
    return checked(msg, id, ctype);
  }

  async rpc(session: McpSession, method: string, params: object): Promise<unknown> {
    const id = uniqueId();
    const msg = await this.post(session, { jsonrpc: '2.0', id, method, params }, id);
    return msg?.result;
  }

  /**
   * A request whose answer is timed as it arrives: an SSE body is read chunk by chunk and stamped when the
   * event carrying the response is complete (the stream may stay open a little longer), a JSON body when read.
   */
  async rpcTimed(session: McpSession, method: string, params: object): Promise<TimedResult> {
    const id = uniqueId();
    const res = await this.agent.request({
      origin: this.origin,
      path: this.path,
      method: 'POST',
      headers: this.headers(session),
      body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
    });
    const ctype = String(res.headers['content-type'] ?? '');
    if (res.statusCode !== 200 || !ctype.startsWith('text/event-stream')) {
      const text = await res.body.text();
      const atMs = wallMs();
      if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
      return { result: checked(JSON.parse(text) as JsonRpcResponse, id, ctype).result, atMs, sse: false };
    }
    let buffer = '';
    let found: JsonRpcResponse | undefined;
    let atMs = 0;
    res.body.setEncoding('utf8');
    for await (const chunk of res.body as AsyncIterable<string>) {
      if (found !== undefined) continue; // drain, so the connection goes back to the pool
      buffer += chunk;
      // Only complete events (up to the last blank line) are parsed: a chunk may end inside a data line.
      const end = Math.max(buffer.lastIndexOf('\n\n'), buffer.lastIndexOf('\r\n\r\n'));
      if (end < 0) continue;
      found = findInSse(buffer.slice(0, end), id);
      if (found !== undefined) atMs = wallMs();
      else buffer = buffer.slice(end);
    }
    if (found === undefined) {
      found = findInSse(buffer, id);
      atMs = wallMs();
    }
    return { result: checked(found, id, ctype).result, atMs, sse: true };
  }

  /** initialize (protocol 2025-11-25) + notifications/initialized. */
  async openSession(): Promise<McpSession> {
    const session: McpSession = { sessionId: undefined };
    await this.rpc(session, 'initialize', {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: 'taskgate-bench', version: '0.1.0' },
    });
    if (session.sessionId === undefined) throw new Error('initialize answered without Mcp-Session-Id');
    await this.post(session, { jsonrpc: '2.0', method: 'notifications/initialized' }, undefined);
    return session;
  }

  /** Opened in small batches: 50 simultaneous initializes would measure session setup, not calls. */
  async openSessions(n: number): Promise<McpSession[]> {
    const sessions: McpSession[] = [];
    for (let i = 0; i < n; i += 10) {
      const batch = Math.min(10, n - i);
      sessions.push(...(await Promise.all(Array.from({ length: batch }, () => this.openSession()))));
    }
    return sessions;
  }

  /** DELETE the sessions (so a target can free them). Failures are counted, not thrown. */
  async deleteSessions(sessions: readonly McpSession[]): Promise<{ deleted: number; failed: number }> {
    let deleted = 0;
    let failed = 0;
    await Promise.all(
      sessions.map(async (c) => {
        if (c.sessionId === undefined) return;
        try {
          const res = await this.agent.request({
            origin: this.origin,
            path: this.path,
            method: 'DELETE',
            headers: { ...this.extraHeaders, 'mcp-session-id': c.sessionId, 'mcp-protocol-version': PROTOCOL_VERSION },
          });
          await res.body.dump();
          if (res.statusCode < 300) deleted++;
          else failed++;
        } catch {
          failed++;
        }
      }),
    );
    return { deleted, failed };
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

function checked(msg: JsonRpcResponse | undefined, id: number, ctype: string): JsonRpcResponse {
  if (msg === undefined || msg.id !== id) throw new Error(`no JSON-RPC response with id ${id} in ${ctype} body`);
  if (msg.error) throw new Error(`JSON-RPC error ${msg.error.code}: ${msg.error.message}`);
  return msg;
}

/** Resolves an upstream tool's exposed name: as is, or with a gateway's prefix in front. */
export async function resolveTool(http: McpHttp, session: McpSession, name: string): Promise<string> {
  const list = (await http.rpc(session, 'tools/list', {})) as { tools?: { name: string }[] } | undefined;
  const names = (list?.tools ?? []).map((t) => t.name);
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const found = names.find((n) => n === name) ?? names.find((n) => new RegExp(`(^|[^a-z])${escaped}$`, 'i').test(n));
  if (found === undefined) throw new Error(`no ${name} tool in tools/list: ${names.join(', ')}`);
  return found;
}

export class HttpLoad implements Driver {
  readonly http: McpHttp;
  private readonly clients: McpSession[] = [];
  private tool: string | undefined;

  constructor(private readonly opts: HttpLoadOptions) {
    this.http = new McpHttp(opts.url, opts.clients, opts.timeoutMs, opts.headers);
    this.tool = opts.tool;
  }

  get agent(): Agent {
    return this.http.agent;
  }

  /** initialize + notifications/initialized for every client; then resolves the echo tool's exposed name. */
  async open(): Promise<void> {
    this.clients.push(...(await this.http.openSessions(this.opts.clients)));
    if (this.tool === undefined) {
      const first = this.clients[0];
      if (!first) throw new Error('no clients');
      this.tool = await resolveTool(this.http, first, 'echo');
    }
  }

  get toolName(): string | undefined {
    return this.tool;
  }

  /** One closed-loop phase of sync tools/call, on the first `clients` sessions (default: all). */
  async run(spec: PhaseSpec, clients = this.clients.length): Promise<PhaseStats> {
    const tool = this.tool;
    if (tool === undefined || this.clients.length === 0) throw new Error('open() first');
    return runPhase(Math.min(clients, this.clients.length), spec, async (w) => {
      const client = this.clients[w];
      if (!client) throw new Error(`no client ${w}`);
      checkEchoResult(await this.http.rpc(client, 'tools/call', { name: tool, arguments: { message: 'hi' } }));
    });
  }

  /** DELETE every session (so a target can free it), then close the pool. Failures are reported, not thrown. */
  async close(): Promise<{ deleted: number; failed: number }> {
    const out = await this.http.deleteSessions(this.clients);
    this.clients.length = 0;
    await this.http.close();
    return out;
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { ...planOptions, url: { type: 'string' }, tool: { type: 'string' } } });
  if (values.url === undefined) {
    console.error(
      'usage: tsx bench/load.ts --url <mcp endpoint> [--clients N] [--warmup-ms N] [--latency-ms N] [--duration-ms N] [--count N] [--tool name]',
    );
    process.exit(2);
  }
  const plan = planFromArgs(values);
  const load = new HttpLoad({ url: values.url, clients: plan.clients, ...(values.tool !== undefined ? { tool: values.tool } : {}) });
  const result = await runPlan(load, plan);
  console.log(JSON.stringify({ tool: load.toolName, ...result }, null, 2));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
