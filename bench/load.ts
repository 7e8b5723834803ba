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
}

interface JsonRpcResponse {
  jsonrpc: '2.0';
  id: number | string | null;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

interface Client {
  sessionId: string | undefined;
}

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

export class HttpLoad implements Driver {
  readonly agent: Agent;
  private readonly clients: Client[] = [];
  private tool: string | undefined;
  private readonly origin: string;
  private readonly path: string;

  constructor(private readonly opts: HttpLoadOptions) {
    const url = new URL(opts.url);
    this.origin = url.origin;
    this.path = url.pathname + url.search;
    this.tool = opts.tool;
    const timeout = opts.timeoutMs ?? 15_000;
    this.agent = new Agent({
      // One connection per client: requests never queue behind each other inside the load generator.
      connections: opts.clients,
      pipelining: 1,
      keepAliveTimeout: 60_000,
      keepAliveMaxTimeout: 120_000,
      connectTimeout: 5_000,
      headersTimeout: timeout,
      bodyTimeout: timeout,
    });
  }

  private async post(client: Client, message: object, id: number | undefined): Promise<JsonRpcResponse | undefined> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    };
    if (client.sessionId !== undefined) {
      headers['mcp-session-id'] = client.sessionId;
      headers['mcp-protocol-version'] = PROTOCOL_VERSION;
    }
    const res = await this.agent.request({
      origin: this.origin,
      path: this.path,
      method: 'POST',
      headers,
      body: JSON.stringify(message),
    });
    const text = await res.body.text();
    if (res.statusCode === 202 && id === undefined) return undefined;
    if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
    const sid = res.headers['mcp-session-id'];
    if (typeof sid === 'string' && client.sessionId === undefined) client.sessionId = sid;
    if (id === undefined) return undefined;
    const ctype = String(res.headers['content-type'] ?? '');
    const msg = ctype.startsWith('text/event-stream')
      ? findInSse(text, id)
      : (JSON.parse(text) as JsonRpcResponse);
    if (msg === undefined || msg.id !== id) throw new Error(`no JSON-RPC response with id ${id} in ${ctype} body`);
    if (msg.error) throw new Error(`JSON-RPC error ${msg.error.code}: ${msg.error.message}`);
    return msg;
  }

  private async rpc(client: Client, method: string, params: object): Promise<unknown> {
    const id = uniqueId();
    const msg = await this.post(client, { jsonrpc: '2.0', id, method, params }, id);
    return msg?.result;
  }

  /** initialize + notifications/initialized for every client; then resolves the echo tool's exposed name. */
  async open(): Promise<void> {
    const open = async (): Promise<Client> => {
      const client: Client = { sessionId: undefined };
      await this.rpc(client, 'initialize', {
        protocolVersion: PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: 'taskgate-bench', version: '0.1.0' },
      });
      if (client.sessionId === undefined) throw new Error('initialize answered without Mcp-Session-Id');
      await this.post(client, { jsonrpc: '2.0', method: 'notifications/initialized' }, undefined);
      return client;
    };
    // Opened in small batches: 50 simultaneous initializes would measure session setup, not calls.
    for (let i = 0; i < this.opts.clients; i += 10) {
      const batch = Math.min(10, this.opts.clients - i);
      this.clients.push(...(await Promise.all(Array.from({ length: batch }, open))));
    }
    if (this.tool === undefined) {
      const first = this.clients[0];
      if (!first) throw new Error('no clients');
      const list = (await this.rpc(first, 'tools/list', {})) as { tools?: { name: string }[] } | undefined;
      const names = (list?.tools ?? []).map((t) => t.name);
      this.tool = names.find((n) => n === 'echo') ?? names.find((n) => /(^|[^a-z])echo$/i.test(n));
      if (this.tool === undefined) throw new Error(`no echo tool in tools/list: ${names.join(', ')}`);
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
      checkEchoResult(await this.rpc(client, 'tools/call', { name: tool, arguments: { message: 'hi' } }));
    });
  }

  /** DELETE every session (so a target can free it), then close the pool. Failures are reported, not thrown. */
  async close(): Promise<{ deleted: number; failed: number }> {
    let deleted = 0;
    let failed = 0;
    await Promise.all(
      this.clients.map(async (c) => {
        if (c.sessionId === undefined) return;
        try {
          const res = await this.agent.request({
            origin: this.origin,
            path: this.path,
            method: 'DELETE',
            headers: { 'mcp-session-id': c.sessionId, 'mcp-protocol-version': PROTOCOL_VERSION },
          });
          await res.body.dump();
          if (res.statusCode < 300) deleted++;
          else failed++;
        } catch {
          failed++;
        }
      }),
    );
    this.clients.length = 0;
    await this.agent.close();
    return { deleted, failed };
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
