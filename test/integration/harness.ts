// In-process gateway and fixture upstreams for integration tests: real HTTP, real child processes, real SDK
// clients; nothing mocked.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { startGateway, type RunningGateway } from '../../src/gateway.js';
import { createLogger } from '../../src/log.js';
import { fixtureCommand, spawnFixture, type FixtureChild, type FixtureTransport } from '../fixtures/spawn.js';

export interface TestGateway extends RunningGateway {
  origin: string;
}

/** Starts the gateway in this process from a config object (listen/store/log defaults filled in). */
export async function startTestGateway(config: Record<string, unknown>): Promise<TestGateway> {
  const full = {
    listen: { host: '127.0.0.1', port: 0, path: '/mcp' },
    store: { type: 'memory' },
    log: { level: process.env.TEST_LOG_LEVEL ?? 'silent' },
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
