// In-process gateway and fixture upstreams for integration tests: real HTTP, real child processes, real SDK
// clients; nothing mocked.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { randomBytes } from 'node:crypto';
import { after, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { request as httpRequest } from 'undici';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { startGateway, type RunningGateway } from '../../src/gateway.js';
import { createLogger } from '../../src/log.js';
import { fixtureCommand, spawnFixture, spawnGateway, type FixtureChild, type FixtureTransport, type GatewayChild } from '../fixtures/spawn.js';

export interface TestGateway extends RunningGateway {
  origin: string;
}

/** Starts the gateway in this process from a config object (listen/store/log defaults filled in). */
export async function startTestGateway(config: Record<string, unknown>): Promise<TestGateway> {
  const full = {
    listen: { host: '127.0.0.1', port: 0, path: '/mcp' },
    store: { type: 'memory' },
    log: { level: process.env.TEST_LOG_LEVEL ?? 'silent' },
    // Tests close gateways with tasks still running; the drain has its own tests.
    replicas: { drainTimeoutMs: 0 },
    ...config,
  };
  const parsed = parseConfig(stringify(full), 'test.yaml', {});
  const gateway = await startGateway(parsed, createLogger(parsed.log, { pretty: false }));
  return { ...gateway, origin: new URL(gateway.url).origin };
}

/** A fixture upstream over the given transport, as a config entry (and the child to stop, for HTTP). */
export async function fixtureUpstream(
  transport: FixtureTransport,
  extra: Record<string, unknown> = {},
): Promise<{ config: Record<string, unknown>; child: FixtureChild | undefined; stop(): Promise<void> }> {
  if (transport === 'stdio') {
    const { command, args, cwd } = fixtureCommand('stdio');
    return { config: { transport, command, args, cwd, ...extra }, child: undefined, stop: async () => {} };
  }
  const child = await spawnFixture({ transport });
  return { config: { transport, url: child.url, ...extra }, child, stop: () => child.kill() };
}

export interface ClientLog {
  elicitations: unknown[];
  samplings: unknown[];
  notifications: { method: string; params?: unknown }[];
}

/** An SDK v1 client that answers elicitation, sampling and roots, and records what it receives. */
export async function connectClient(url: string, options: { capabilities?: Record<string, unknown> } = {}): Promise<{ client: Client; log: ClientLog; transport: StreamableHTTPClientTransport }> {
  const log: ClientLog = { elicitations: [], samplings: [], notifications: [] };
  const client = new Client(
    { name: 'taskgate-test', version: '1.0.0' },
    { capabilities: options.capabilities ?? { elicitation: { form: {} }, sampling: {}, roots: { listChanged: true } } },
  );
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    log.elicitations.push(request.params);
    const schema = (request.params as { requestedSchema?: { properties?: Record<string, unknown> } }).requestedSchema;
    const field = Object.keys(schema?.properties ?? {})[0] ?? 'answer';
    return { action: 'accept', content: { [field]: `answer to ${request.params.message}` } };
  });
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    log.samplings.push(request.params);
    return { role: 'assistant', content: { type: 'text', text: 'sampled by the test client' }, model: 'test-model', stopReason: 'endTurn' };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///workspace', name: 'workspace' }] }));
  client.fallbackNotificationHandler = async (notification) => {
    log.notifications.push({ method: notification.method, params: notification.params });
  };
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return { client, log, transport };
}

/**
 * An SDK v1 client as a host without tasks is: it declares `capabilities` only (none by default) and handles no
 * requests until a test adds handlers; `headers` go with every request (credentials).
 */
export async function connectPlainClient(url: string, options: { capabilities?: Record<string, unknown>; headers?: Record<string, string> } = {}): Promise<Client> {
  const client = new Client({ name: 'plain-host', version: '1.0.0' }, { capabilities: options.capabilities ?? {} });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), options.headers === undefined ? undefined : { requestInit: { headers: options.headers } }));
  return client;
}

// ---- Scopes: what a test starts, it stops, however the test ends ----

/**
 * The gateways, upstreams and clients a test (or a suite) started, stopped together when it ends, so that no
 * test writes its own try/finally. Each start method registers the matching stop; defer() registers anything
 * else. close() runs the stops last-registered-first (a client before its gateway, a gateway before its
 * upstream), every one of them even if another fails, and then throws the first failure.
 *
 * Get one from testScope(t) or suiteScope(): node:test then closes it after the test (or the suite's last
 * test) whether it passed, failed or timed out. A failing stop fails a test that passed; a test that failed
 * reports its own error. Bound to node:test's hooks rather than a `withGateway(config, fn)` callback so that
 * test bodies stay flat, also when a test needs two gateways, a gateway and a child process, or a restart.
 */
export class TestScope {
  private readonly stops: (() => unknown)[] = [];

  /** Runs `stop` when the scope closes, before whatever was registered earlier. */
  defer(stop: () => unknown): void {
    this.stops.push(stop);
  }

  /** startTestGateway, closed with the scope. Its close() may also be called earlier: it runs once. */
  async gateway(config: Record<string, unknown>): Promise<TestGateway> {
    const started = await startTestGateway(config);
    let closing: Promise<void> | undefined;
    const gateway = { ...started, close: () => (closing ??= started.close()) };
    this.defer(() => gateway.close());
    return gateway;
  }

  /** spawnGateway (a gateway process), killed with the scope. */
  async spawnGateway(options: Parameters<typeof spawnGateway>[0]): Promise<GatewayChild> {
    const gateway = await spawnGateway(options);
    this.defer(() => gateway.kill());
    return gateway;
  }

  /** fixtureUpstream, stopped with the scope (after the gateways started later). */
  async upstream(transport: FixtureTransport, extra: Record<string, unknown> = {}): ReturnType<typeof fixtureUpstream> {
    const upstream = await fixtureUpstream(transport, extra);
    this.defer(() => upstream.stop());
    return upstream;
  }

  /** connectClient, closed with the scope. */
  async client(url: string, options: Parameters<typeof connectClient>[1] = {}): ReturnType<typeof connectClient> {
    const connected = await connectClient(url, options);
    this.defer(() => connected.client.close());
    return connected;
  }

  /** connectPlainClient, closed with the scope. */
  async plainClient(url: string, options: Parameters<typeof connectPlainClient>[1] = {}): Promise<Client> {
    const client = await connectPlainClient(url, options);
    this.defer(() => client.close());
    return client;
  }

  async close(): Promise<void> {
    const failures: unknown[] = [];
    for (const stop of this.stops.splice(0).reverse()) {
      try {
        await stop();
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length > 0) throw failures[0];
  }
}

/** A scope closed when test `t` ends: `test('…', async (t) => { const scope = testScope(t); … })`. */
export function testScope(t: TestContext): TestScope {
  const scope = new TestScope();
  t.after(() => scope.close());
  return scope;
}

/** A scope closed after the last test of the suite (describe) it is created in, for what its tests share. */
export function suiteScope(): TestScope {
  const scope = new TestScope();
  after(() => scope.close());
  return scope;
}

/** The fixture's own count of slow_compute calls started per label (its `executions` tool), asked at `url`. */
export async function fixtureExecutions(url: string): Promise<Record<string, number>> {
  const { client } = await connectClient(url);
  try {
    const result = await client.callTool({ name: 'executions', arguments: {} });
    return (result.structuredContent as { counts: Record<string, number> }).counts;
  } finally {
    await client.close();
  }
}

/** What a gateway process logged: pino writes one JSON object per line to stdout (other lines are skipped). */
export function logEntries(gateway: { stdout(): string }): Json[] {
  return gateway
    .stdout()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Json);
}

/** Polls until `check` returns true (bounded); for asynchronous deliveries such as notifications. */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.map((c) => c.text ?? '').join('');
}

// ---- 2026-07-28 ("modern") requests, written by hand: one POST per request, the envelope in params._meta ----

export const MODERN_VERSION = '2026-07-28';
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
export type Json = Record<string, unknown>;
/** The capabilities of a 2026-07-28 client that speaks the Tasks extension. */
export const TASKS_CAPABILITIES: Json = { extensions: { [TASKS_EXTENSION]: {} } };

export interface ModernOptions {
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

export interface ModernResponse {
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

let modernIds = 0;

/** The body field `Mcp-Name` mirrors, per method. */
function mcpNameOf(method: string, params: Json): unknown {
  if (method === 'tools/call' || method === 'prompts/get') return params.name;
  if (method === 'resources/read') return params.uri;
  if (method === 'tasks/get' || method === 'tasks/update' || method === 'tasks/cancel') return params.taskId;
  return undefined;
}

/** The JSON-RPC request body and headers of a modern request. */
export function modernRequest(method: string, params: Json = {}, options: ModernOptions = {}): { body: Json; headers: Record<string, string> } {
  const envelope: Json = {
    'io.modelcontextprotocol/protocolVersion': MODERN_VERSION,
    'io.modelcontextprotocol/clientCapabilities': options.capabilities ?? {},
    'io.modelcontextprotocol/clientInfo': { name: 'taskgate-modern-test', version: '1.0.0' },
  };
  if (options.logLevel !== undefined) envelope['io.modelcontextprotocol/logLevel'] = options.logLevel;
  const meta = options.meta === null ? undefined : { ...envelope, ...options.meta };
  const body: Json = { jsonrpc: '2.0', id: options.id ?? ++modernIds, method, params: meta === undefined ? params : { ...params, _meta: meta } };
  const version = meta?.['io.modelcontextprotocol/protocolVersion'];
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: options.accept ?? 'application/json, text/event-stream',
    'mcp-protocol-version': typeof version === 'string' ? version : MODERN_VERSION,
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

/** Sends one modern request and reads its whole answer, JSON or SSE. */
export async function modern(url: string, method: string, params: Json = {}, options: ModernOptions = {}): Promise<ModernResponse> {
  const { body, headers } = modernRequest(method, params, options);
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
    error: response.error as ModernResponse['error'],
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
export async function openListen(url: string, notifications: Json, options: ModernOptions = {}): Promise<ListenStream> {
  const { body, headers } = modernRequest('subscriptions/listen', { notifications }, options);
  const abort = new AbortController();
  const answer = await httpRequest(url, { method: 'POST', headers, body: JSON.stringify(body), signal: abort.signal });
  const events: Json[] = [];
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
    async next(predicate, timeoutMs = 5000) {
      await eventually(() => events.some(predicate), timeoutMs);
      return events.find(predicate) as Json;
    },
    close: () => abort.abort(),
  };
}

/** The shared test Redis (CI's, at 127.0.0.1:6379 unless TASKGATE_TEST_REDIS_URL says otherwise). */
export const TEST_REDIS_URL = process.env.TASKGATE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * A key prefix of this test file's own on the shared test Redis (`name`, the process and random bits), whose keys
 * are deleted when the file's tests are done.
 */
export function redisTestPrefix(name: string): string {
  const prefix = `taskgate-${name}-${process.pid}-${randomBytes(4).toString('hex')}`;
  after(async () => {
    const redis = new Redis(TEST_REDIS_URL);
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });
  return prefix;
}
