// OpenTelemetry traces, end to end: a gateway process exports OTLP/HTTP to a receiver in this test, real SDK
// clients call a fixture upstream over Streamable HTTP and over stdio, and the upstream says what trace context
// it received. Spans are awaited as they arrive at the receiver, never by a fixed sleep. With upstream identity
// (issue 33) on, no exported byte carries a caller's token, a token the gateway obtained or signed, or a secret.
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { decodeJwt } from 'jose';
import { connectPlainClient, eventually, suiteScope, testScope, textOf, type TestScope } from '../helpers/harness.js';
import { freePort, nodeArgs, REPO_ROOT, startChild, type GatewayChild } from '../fixtures/spawn.js';
import type { EchoedTrace } from '../fixtures/trace-echo-server.js';
import { startAuthServer } from '../fixtures/auth-server.js';
import { startProtectedServer } from '../fixtures/protected-server.js';
import { bearer } from '../helpers/auth-requests.js';
import { startTask } from '../helpers/dashboard-browser.js';
import { GATEWAY_CLIENT, whoamiOf } from '../helpers/identity-gateway.js';
import { recordingProxy, type RecordingProxy } from '../helpers/recording-proxy.js';
import { sendRev2026 } from '../helpers/stateless-wire.js';
import { HANG_MS } from '../helpers/waits.js';

const ECHO_FIXTURE = join(REPO_ROOT, 'test/fixtures/trace-echo-server.ts');
const MODULE_WATCH = join(REPO_ROOT, 'test/fixtures/module-watch.mjs');
/** Only against hangs: spans come within the batch delay (50 ms here) of their end. */
const HANG_GUARD_MS = 30_000;
const SERVER = 2;
const CLIENT = 3;

interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
  status: { code?: number; message?: string };
  service: unknown;
}

type OtlpValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
type OtlpAttribute = { key: string; value: OtlpValue };

function attributesOf(list: OtlpAttribute[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of list ?? []) out[key] = value.stringValue ?? (value.intValue === undefined ? undefined : Number(value.intValue)) ?? value.boolValue ?? value.doubleValue;
  return out;
}

/** A collector's OTLP/HTTP JSON endpoint, as small as a test needs: it keeps every span it is sent. */
class OtlpReceiver extends EventEmitter {
  readonly spans: ReceivedSpan[] = [];
  /** Every export as sent (attributes, events, status messages, resource and all), for scans of what left the gateway. */
  readonly exports: string[] = [];
  private readonly server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.method === 'POST' && request.url === '/v1/traces') {
        const text = Buffer.concat(chunks).toString('utf8');
        this.exports.push(text);
        this.take(JSON.parse(text));
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });

  async listen(): Promise<string> {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** The first span that `match` accepts, as soon as it has arrived. */
  async span(what: string, match: (span: ReceivedSpan) => boolean): Promise<ReceivedSpan> {
    const found = (): ReceivedSpan | undefined => this.spans.find(match);
    const seen = found();
    if (seen !== undefined) return seen;
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const span = found();
        if (span === undefined) return;
        clearTimeout(timer);
        this.off('spans', check);
        resolve(span);
      };
      const timer = setTimeout(() => {
        this.off('spans', check);
        reject(new Error(`no span arrived for ${what}; received: ${this.spans.map((s) => s.name).join(', ')}`));
      }, HANG_GUARD_MS);
      this.on('spans', check);
    });
  }

  private take(body: { resourceSpans?: { resource?: { attributes?: OtlpAttribute[] }; scopeSpans?: { spans?: Record<string, unknown>[] }[] }[] }): void {
    for (const resourceSpans of body.resourceSpans ?? []) {
      const service = attributesOf(resourceSpans.resource?.attributes)['service.name'];
      for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
        for (const span of scopeSpans.spans ?? []) {
          this.spans.push({
            traceId: String(span.traceId),
            spanId: String(span.spanId),
            parentSpanId: typeof span.parentSpanId === 'string' ? span.parentSpanId : '',
            name: String(span.name),
            kind: Number(span.kind),
            attributes: attributesOf(span.attributes as OtlpAttribute[]),
            links: ((span.links as { traceId: string; spanId: string }[] | undefined) ?? []).map(({ traceId, spanId }) => ({ traceId, spanId })),
            status: (span.status as ReceivedSpan['status'] | undefined) ?? {},
            service,
          });
        }
      }
    }
    this.emit('spans');
  }
}

/** The trace-echo fixture over Streamable HTTP, resolved once it listens. */
async function echoOverHttp(scope: TestScope): Promise<string> {
  const child = startChild(process.execPath, [...nodeArgs(ECHO_FIXTURE), '--transport', 'streamable-http'], {});
  scope.defer(() => child.kill());
  const listening = /^LISTENING (\S+)$/m;
  const timer = setTimeout(() => void child.kill(), HANG_GUARD_MS);
  try {
    while (!listening.test(child.stdout())) await Promise.race([once(child.child.stdout!, 'data'), child.exited.then((code) => Promise.reject(new Error(`trace-echo fixture exited (${code}): ${child.stderr()}`)))]);
  } finally {
    clearTimeout(timer);
  }
  return (listening.exec(child.stdout()) as RegExpExecArray)[1] as string;
}

function tracingEnv(endpoint: string | undefined, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('TASKGATE_') && !key.startsWith('OTEL_')) env[key] = value;
  if (endpoint !== undefined) Object.assign(env, { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_SERVICE_NAME: 'taskgate-trace-test' });
  return { ...env, ...extra };
}

function parseTraceparent(value: unknown): { traceId: string; spanId: string } {
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(String(value));
  assert.ok(match, `a W3C traceparent: ${String(value)}`);
  return { traceId: match[1] as string, spanId: match[2] as string };
}

async function echoed(client: Client, tool: string): Promise<EchoedTrace> {
  return JSON.parse(textOf(await client.callTool({ name: tool, arguments: {} }))) as EchoedTrace;
}

describe('OpenTelemetry traces', () => {
  const scope = suiteScope();
  const receiver = new OtlpReceiver();
  let gateway: GatewayChild;
  let client: Client;
  let sessionId: string | undefined;

  before(async () => {
    const endpoint = await receiver.listen();
    scope.defer(() => receiver.close());
    const url = await echoOverHttp(scope);
    gateway = await scope.spawnGateway({
      config: {
        upstreams: {
          web: { transport: 'streamable-http', url, protocol: 'legacy', prefix: 'web_' },
          pipe: { transport: 'stdio', command: process.execPath, args: [...nodeArgs(ECHO_FIXTURE), '--transport', 'stdio'], cwd: REPO_ROOT, prefix: 'pipe_' },
        },
        tasks: { defaults: { mode: 'optional', pollIntervalMs: 100 } },
      },
      env: tracingEnv(endpoint),
    });
    const connected = await scope.client(gateway.url);
    client = connected.client;
    sessionId = connected.transport.sessionId;
  });

  for (const [upstream, overHttp] of [['web', true], ['pipe', false]] as const) {
    test(`a tools/call over ${overHttp ? 'Streamable HTTP' : 'stdio'}: server span, client span as its child, and the upstream got the client span's context`, async () => {
      const echo = await echoed(client, `${upstream}_echo_trace`);
      const sent = parseTraceparent(echo.meta.traceparent);
      if (overHttp) assert.equal(echo.header, echo.meta.traceparent, 'the POST carried the same traceparent as a header');
      else assert.equal(echo.header, undefined);

      const call = await receiver.span('the upstream call', (s) => s.spanId === sent.spanId);
      assert.equal(call.traceId, sent.traceId);
      assert.equal(call.name, 'tools/call echo_trace');
      assert.equal(call.kind, CLIENT);
      assert.equal(call.service, 'taskgate-trace-test');
      assert.equal(call.attributes['mcp.method.name'], 'tools/call');
      assert.equal(call.attributes['gen_ai.tool.name'], 'echo_trace');
      assert.equal(call.attributes['taskgate.upstream'], upstream);

      const request = await receiver.span('the MCP request', (s) => s.spanId === call.parentSpanId);
      assert.equal(request.traceId, call.traceId);
      assert.equal(request.name, `tools/call ${upstream}_echo_trace`);
      assert.equal(request.kind, SERVER);
      assert.equal(request.attributes['mcp.method.name'], 'tools/call');
      assert.equal(request.attributes['gen_ai.tool.name'], `${upstream}_echo_trace`);
      assert.equal(request.attributes['gen_ai.operation.name'], 'execute_tool');
      assert.equal(request.attributes['mcp.session.id'], sessionId);
      assert.equal(request.attributes['mcp.protocol.version'], '2025-11-25');
      assert.match(String(request.attributes['jsonrpc.request.id']), /^\d+$/);
      assert.equal(request.attributes['taskgate.upstream'], upstream);
      assert.equal(request.attributes['error.type'], undefined);
    });
  }

  test('a task-augmented call: the run is its own trace, linked to the request that created the task', async () => {
    const created = (await client.request(
      { method: 'tools/call', params: { name: 'web_echo_trace', arguments: {}, task: {} } },
      CreateTaskResultSchema,
    )) as { task: { taskId: string } };
    const taskId = created.task.taskId;
    const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    const echo = JSON.parse(textOf(result)) as EchoedTrace;
    const sent = parseTraceparent(echo.meta.traceparent);
    assert.equal(echo.header, echo.meta.traceparent);

    const call = await receiver.span('the task\'s upstream call', (s) => s.spanId === sent.spanId);
    assert.equal(call.kind, CLIENT);
    assert.equal(call.attributes['taskgate.task.id'], taskId);
    const run = await receiver.span('the task run', (s) => s.spanId === call.parentSpanId);
    assert.equal(run.name, 'task.run web_echo_trace');
    assert.equal(run.parentSpanId, '', 'the run is the root of its own trace');
    assert.equal(run.attributes['taskgate.task.id'], taskId);
    assert.equal(run.attributes['taskgate.upstream'], 'web');
    assert.equal(run.links.length, 1);

    const creating = await receiver.span('the creating request', (s) => s.spanId === run.links[0]?.spanId);
    assert.equal(creating.traceId, run.links[0]?.traceId);
    assert.notEqual(creating.traceId, run.traceId);
    assert.equal(creating.name, 'tools/call web_echo_trace');
    assert.equal(creating.kind, SERVER);
    assert.equal(creating.attributes['taskgate.task.id'], taskId);
  });

  test('an incoming traceparent header parents the HTTP span, which parents the MCP span', async (t) => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '00f067aa0ba902b7';
    const traced = await connectPlainClient(gateway.url, { headers: { traceparent: `00-${traceId}-${callerSpan}-01` } });
    testScope(t).defer(() => traced.close());
    const echo = await echoed(traced, 'pipe_echo_trace');
    const sent = parseTraceparent(echo.meta.traceparent);
    assert.equal(sent.traceId, traceId, 'the upstream call continues the caller\'s trace');

    const call = await receiver.span('the upstream call', (s) => s.spanId === sent.spanId);
    const request = await receiver.span('the MCP request', (s) => s.spanId === call.parentSpanId);
    assert.equal(request.name, 'tools/call pipe_echo_trace');
    // Up from the MCP span: the HTTP spans of @fastify/otel, the outermost one a child of the caller's span.
    let span = request;
    const chain: string[] = [];
    while (span.parentSpanId !== callerSpan) {
      const parentId = span.parentSpanId;
      assert.notEqual(parentId, '', `the chain ${chain.join(' < ')} reaches the caller's span`);
      span = await receiver.span('an HTTP span', (s) => s.spanId === parentId);
      chain.push(span.name);
    }
    assert.equal(span.traceId, traceId);
    assert.equal(span.name, 'request', 'the outermost is the HTTP request span');
    assert.equal(span.kind, SERVER);
  });

  test('errors: a JSON-RPC error and a tool result with isError set error.type and an error status', async () => {
    await assert.rejects(client.callTool({ name: 'nowhere_tool', arguments: {} }), /Unknown tool/);
    const refused = await receiver.span('the refused request', (s) => s.name === 'tools/call nowhere_tool');
    assert.equal(refused.attributes['error.type'], '-32602');
    assert.equal(refused.attributes['rpc.response.status_code'], '-32602');
    assert.equal(refused.status.code, 2);
    assert.match(String(refused.status.message), /Unknown tool/);

    // The upstream's tool fails: its answer is a tool result with isError. (An unlisted name never reaches it.)
    const result = await client.callTool({ name: 'web_fails', arguments: {} });
    assert.equal(result.isError, true);
    const toolError = await receiver.span('the tool error', (s) => s.name === 'tools/call web_fails');
    assert.equal(toolError.attributes['error.type'], 'tool_error');
    assert.equal(toolError.attributes['rpc.response.status_code'], undefined);
    assert.equal(toolError.status.code, 2);
  });
});

/** The bearer tokens the gateway sent through `proxy`. */
function bearersSent(proxy: RecordingProxy): string[] {
  return proxy.requests.map((r) => /^Bearer (\S+)$/.exec(r.headers.authorization ?? '')?.[1]).filter((token) => token !== undefined);
}

describe('OpenTelemetry traces with upstream identity: no token or secret in any exported span', () => {
  test('token exchange and signed identity with claim headers, plain calls, a task, a 401 retried and refused: nothing exported holds a token', async (t) => {
    const scope = testScope(t);
    const receiver = new OtlpReceiver();
    const endpoint = await receiver.listen();
    scope.defer(() => receiver.close());
    const as = await startAuthServer({ clients: { [GATEWAY_CLIENT.id]: { secret: GATEWAY_CLIENT.secret } } });
    scope.defer(() => as.close());
    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    const resource = `${origin}/mcp`;
    // Two OAuth-protected upstreams, each behind a proxy that records the tokens the gateway sends it.
    const exchanging = await startProtectedServer({ issuers: [{ issuer: as.issuer, jwksUri: as.jwksUri }] });
    scope.defer(() => exchanging.close());
    const signed = await startProtectedServer({ issuers: [{ issuer: origin, jwksUri: `${origin}/.well-known/jwks.json` }] });
    scope.defer(() => signed.close());
    const exchangingProxy = await recordingProxy(scope, exchanging.url);
    const signedProxy = await recordingProxy(scope, signed.url);
    const robotKey = `robot-${randomBytes(16).toString('hex')}`;
    const sealingKey = randomBytes(32).toString('base64');
    const privateKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const gateway = await scope.spawnGateway({
      config: {
        listen: { host: '127.0.0.1', port, path: '/mcp' },
        log: { level: 'debug' },
        tasks: { defaults: { mode: 'optional', pollIntervalMs: 100, retry: { onLoss: true } } },
        auth: { resource, oauth: { issuer: as.issuer }, apiKeys: [{ principal: 'robot', key: robotKey }] },
        identity: { keys: [{ kid: 'gw-1', privateKey }], sealingKeys: [{ kid: 'seal-1', key: sealingKey }] },
        upstreams: {
          prot: { url: exchangingProxy.url, auth: { tokenExchange: { ...GATEWAY_CLIENT.config, tokenUrl: `${as.issuer}/token`, resource: exchanging.url } } },
          signed: { url: signedProxy.url, auth: { signedIdentity: { claims: ['email'], audience: signed.url }, claimHeaders: { 'x-user': 'principal', 'x-email': 'email' } } },
        },
      },
      env: tracingEnv(endpoint),
    });

    const alice = await as.mint({ sub: 'alice', aud: resource, extra: { email: 'alice@example.test' } });
    const client = await connectPlainClient(gateway.url, { headers: bearer(alice) });
    scope.defer(() => client.close());
    await eventually(async () => (await client.listTools()).tools.length >= 2 * 4, HANG_MS); // both upstreams' tools
    assert.equal(whoamiOf(await client.callTool({ name: 'prot__whoami', arguments: {} })).sub, 'alice');
    assert.equal(whoamiOf(await client.callTool({ name: 'signed__whoami', arguments: {} })).sub, `oauth:${as.issuer}#alice`);
    const rev2026Answer = await sendRev2026(gateway.url, 'tools/call', { name: 'prot__whoami', arguments: {} }, { headers: bearer(alice) });
    assert.equal(whoamiOf(rev2026Answer.result).sub, 'alice', JSON.stringify(rev2026Answer.response));
    const taskId = await startTask(client, 'prot__whoami', {});
    assert.equal(whoamiOf(await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)).sub, 'alice');
    exchanging.rejectNext(1); // refused once: a new exchange, and the call sent again
    assert.equal(whoamiOf(await client.callTool({ name: 'prot__whoami', arguments: {} })).sub, 'alice');
    exchanging.rejectNext(2); // refused twice: the call fails, its error in its spans
    const refused = await client.callTool({ name: 'prot__whoami', arguments: {} }).then((r) => JSON.stringify(r), (e: unknown) => String(e));
    assert.match(refused, /refused the gateway's credential/);
    // An API-key caller: nothing to exchange (an error naming the upstream), a signed identity for the key.
    const robot = await connectPlainClient(gateway.url, { headers: bearer(robotKey) });
    scope.defer(() => robot.close());
    const noToken = await robot.callTool({ name: 'prot__whoami', arguments: {} }).then((r) => JSON.stringify(r), (e: unknown) => String(e));
    assert.match(noToken, /no access token to exchange/);
    assert.equal(whoamiOf(await robot.callTool({ name: 'signed__whoami', arguments: {} })).sub, 'key:robot');

    // Stopped gracefully, the gateway exports every span it still holds before it exits.
    await gateway.kill(HANG_MS);
    const exchanged = bearersSent(exchangingProxy);
    const signedTokens = bearersSent(signedProxy);
    assert.ok(exchanged.some((token) => (decodeJwt(token).act as { sub?: string } | undefined)?.sub === GATEWAY_CLIENT.id), 'the upstream got exchanged tokens');
    assert.ok(signedTokens.some((token) => decodeJwt(token).iss === origin), 'and identities the gateway signed');
    const secrets = new Map<string, string>([
      ['alice\'s access token', alice],
      ['the API key', robotKey],
      ['the client secret', GATEWAY_CLIENT.secret],
      ['the sealing key', sealingKey],
      ['the signing key', privateKey.split('\n')[1] ?? privateKey],
      ...[...exchanged, ...signedTokens].map((token, i): [string, string] => [`token #${i} the gateway sent upstream`, token]),
    ]);
    const exported = receiver.exports.join('\n');
    assert.ok(receiver.spans.some((s) => s.name === 'task.run prot__whoami'), 'the task\'s run was traced');
    assert.ok(receiver.spans.some((s) => s.kind === CLIENT && s.attributes['taskgate.upstream'] === 'signed'), 'calls to both upstreams were traced');
    assert.ok(receiver.spans.some((s) => s.status.code === 2 && /refused the gateway's credential/.test(s.status.message ?? '')), 'the refused call\'s error was exported');
    for (const [what, secret] of secrets) {
      assert.ok(!exported.includes(secret), `${what} appears in an exported span`);
      assert.ok(!gateway.stdout().includes(secret) && !gateway.stderr().includes(secret), `${what} appears in the gateway's log`);
    }
    assert.doesNotMatch(exported, /eyJ[\w-]+\.eyJ[\w-]+\./, 'no JWT of any kind was exported');
    assert.ok(!exported.includes('v1.seal-1.'), 'nothing sealed was exported');
  });
});

describe('tracing off', () => {
  test('a start without OTEL_* loads no OpenTelemetry module; with them it does', async (t) => {
    const scope = testScope(t);
    const dir = mkdtempSync(join(tmpdir(), 'taskgate-modules-'));
    scope.defer(() => rmSync(dir, { recursive: true, force: true }));
    const config = { upstreams: { pipe: { transport: 'stdio', command: process.execPath, args: nodeArgs(ECHO_FIXTURE), cwd: REPO_ROOT, prefix: 'pipe_' } } };
    const loaded = async (name: string, endpoint: string | undefined): Promise<string> => {
      const file = join(dir, name);
      const watched = tracingEnv(endpoint, { MODULE_WATCH_FILE: file, NODE_OPTIONS: `--import ${MODULE_WATCH}` });
      const gateway = await scope.spawnGateway({ config, env: watched });
      const client = await connectPlainClient(gateway.url);
      await client.callTool({ name: 'pipe_echo_trace', arguments: {} });
      await client.close();
      await gateway.kill();
      try {
        return readFileSync(file, 'utf8');
      } catch {
        return '';
      }
    };
    assert.equal(await loaded('off.txt', undefined), '', 'no @opentelemetry or @fastify/otel module was resolved');
    // The same watch sees them when tracing is on (an endpoint nobody listens at: nothing needs to arrive).
    assert.match(await loaded('on.txt', 'http://127.0.0.1:9'), /@opentelemetry\/sdk-trace-node/);
  });
});
