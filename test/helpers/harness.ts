// In-process gateway and fixture upstreams for integration tests: real HTTP, real child processes, real SDK
// clients; nothing mocked. Scopes stop whatever a test started. Hand-written wire requests are in session-wire.ts and
// stateless-wire.ts, the shared test Redis in shared-redis.ts.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { after, type TestContext } from 'node:test';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { startGateway, type RunningGateway } from '../../src/taskgate.js';
import { createLogger } from '../../src/log.js';
import { bounded, HANG_MS } from './waits.js';
import { fixtureCommand, spawnFixture, spawnGateway, type FixtureChild, type FixtureTransport, type GatewayChild } from '../fixtures/spawn.js';

/** A JSON object as tests build and read them. */
export type Json = Record<string, unknown>;

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

/**
 * Polls until `check` returns true, for a state nothing announces (where something does, wait for that instead:
 * whenLogged, waits.ts). It asks again after 20 ms, then less and less often, up to every POLL_MAX_MS: the many
 * waits of a full run, several files at a time, then leave the cores to the gateways they wait on. `timeoutMs` only
 * guards against a hang (it asserts nothing about time); HANG_MS unless a caller wants a hang reported sooner.
 */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = HANG_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let pauseMs = 20;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
    pauseMs = Math.min(POLL_MAX_MS, Math.ceil(pauseMs * 1.5));
  }
}

/** The longest pause between two checks of eventually: how late, at most, it notices a state it polls for. */
const POLL_MAX_MS = 100;

/**
 * Resolves once `check` holds, checked again each time the gateway process writes to stdout (its log, pino's JSON
 * lines: logEntries), so a wait for a log line takes no polling. Rejects if the process exits before; bounded only
 * against a hang.
 */
export function whenLogged(gateway: Pick<GatewayChild, 'child' | 'exited'>, check: () => boolean, what = 'a log line'): Promise<void> {
  const stdout = gateway.child.stdout;
  let onData = (): void => undefined;
  const logged = new Promise<void>((resolve, reject) => {
    onData = () => {
      // The handle's own listener appends the chunk: look once it has.
      setImmediate(() => {
        try {
          if (check()) resolve();
        } catch (error) {
          reject(error instanceof Error ? error : new Error(String(error)));
        }
      });
    };
    stdout?.on('data', onData);
    void gateway.exited.then((code) => (check() ? resolve() : reject(new Error(`the gateway exited (${code}) before logging ${what}`))));
    onData();
  });
  return bounded(logged, what).finally(() => stdout?.off('data', onData));
}

export function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.map((c) => c.text ?? '').join('');
}
