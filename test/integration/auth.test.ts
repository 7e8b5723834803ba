// Identity: the gateway as an OAuth 2.1 resource server (tokens from a real local authorization server, JWKS by
// discovery) and with API keys; sessions and tasks of both eras bound to the principal that made them, across
// two replicas on one Redis. The SDK client finds the authorization server from the gateway's 401 by itself.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { before, describe, test } from 'node:test';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import type { AuthServer } from '../fixtures/auth-server.js';
import { eventually, type Json, logEntries, suiteScope, type TestGateway, testScope, textOf, whenLogged } from '../helpers/harness.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';
import { bearer, INITIALIZE, post } from '../helpers/auth-requests.js';
import { oauthGateway } from '../helpers/oauth-gateway.js';
import { twoReplicas } from '../helpers/replicas.js';

const ALICE_KEY = 'alice-key-0123456789abcdef';
const BOB_KEY = 'bob-key-0123456789abcdef-bob';
describe('authentication: OAuth access tokens and API keys', () => {
  const scope = suiteScope();
  let issuer: AuthServer;
  let gateway: TestGateway;
  let resource: string;

  before(async () => {
    ({ issuer, gateway, resource } = await oauthGateway(scope, { clients: { svc: { secret: 'svc-secret-123', scope: 'mcp:tools', sub: 'svc-bot' } } }, {
      apiKeys: [
        { principal: 'alice', key: ALICE_KEY },
        { principal: 'bob', sha256: createHash('sha256').update(BOB_KEY).digest('hex') },
      ],
      oauth: { requiredScopes: ['mcp:tools'] },
    }));
  });

  test('no token: 401 naming the metadata, which names the resource and its authorization server', async () => {
    const answer = await post(gateway.url, INITIALIZE);
    assert.equal(answer.status, 401);
    const challenge = answer.headers.get('www-authenticate') ?? '';
    const metadataUrl = `${gateway.origin}/.well-known/oauth-protected-resource/mcp`;
    assert.match(challenge, /^Bearer /);
    assert.ok(challenge.includes(`resource_metadata="${metadataUrl}"`), challenge);
    assert.ok(challenge.includes('scope="mcp:tools"'), challenge);
    assert.ok(!challenge.includes('error='), 'no error code when no token was sent (RFC 6750 §3.1)');
    for (const url of [metadataUrl, `${gateway.origin}/.well-known/oauth-protected-resource`]) {
      const metadata = (await (await fetch(url)).json()) as Json;
      assert.equal(metadata.resource, resource);
      assert.deepEqual(metadata.authorization_servers, [issuer.issuer]);
      assert.deepEqual(metadata.scopes_supported, ['mcp:tools']);
    }
    // Health stays open for probes.
    assert.equal((await fetch(`${gateway.origin}/healthz`)).status, 200);
  });

  test('bad tokens of every kind: 401 invalid_token', async () => {
    const good = { aud: resource, scope: 'mcp:tools' };
    const cases: [string, string][] = [
      ['malformed header', 'Basic abc'],
      ['unknown API key', 'Bearer not-a-key-not-a-jwt'],
      ['expired', `Bearer ${await issuer.mint({ ...good, expiresInSeconds: -60 })}`],
      ['not yet valid', `Bearer ${await issuer.mint({ ...good, notBeforeSeconds: 600 })}`],
      ['wrong audience', `Bearer ${await issuer.mint({ ...good, aud: 'https://elsewhere.example/mcp' })}`],
      ['no audience', `Bearer ${await issuer.mint({ scope: 'mcp:tools' })}`],
      ['wrong issuer', `Bearer ${await issuer.mint({ ...good, iss: 'https://evil.example' })}`],
      ['key not in the JWKS', `Bearer ${await issuer.mint({ ...good, signWith: 'unknown' })}`],
      ['forged signature', `Bearer ${await issuer.mint({ ...good, signWith: 'forged' })}`],
      ['unsigned (alg none)', `Bearer ${issuer.unsigned(good)}`],
    ];
    for (const [what, authorization] of cases) {
      const answer = await post(gateway.url, INITIALIZE, { authorization });
      assert.equal(answer.status, 401, what);
      const challenge = answer.headers.get('www-authenticate') ?? '';
      assert.ok(challenge.includes('error="invalid_token"'), `${what}: ${challenge}`);
      assert.ok(challenge.includes('resource_metadata='), what);
    }
  });

  test('a valid token without the required scope: 403 insufficient_scope', async () => {
    const token = await issuer.mint({ aud: resource, scope: 'other' });
    const answer = await post(gateway.url, INITIALIZE, bearer(token));
    assert.equal(answer.status, 403);
    assert.ok((answer.headers.get('www-authenticate') ?? '').includes('error="insufficient_scope"'));
  });

  test('the SDK client finds the authorization server from the 401 and gets a token itself (client credentials)', async (t) => {
    const provider = new ClientCredentialsProvider({ clientId: 'svc', clientSecret: 'svc-secret-123', expectedIssuer: issuer.issuer });
    const client = new Client({ name: 'oauth-client', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(gateway.url), { authProvider: provider }));
    testScope(t).defer(() => client.close());
    assert.ok((await client.listTools()).tools.some((tool) => tool.name === 'greet'));
    const result = await client.callTool({ name: 'greet', arguments: { name: 'svc' } });
    assert.match(textOf(result), /Hello, svc!/);
  });

  test('a verified token is remembered: many requests, one JWKS fetch; a rotated key is picked up', async (t) => {
    const token = await issuer.mint({ sub: 'carol', aud: resource, scope: 'mcp:tools' });
    const client = await testScope(t).plainClient(gateway.url, { headers: bearer(token) });
    const before = issuer.jwksRequests;
    for (let i = 0; i < 20; i++) await client.listTools();
    assert.ok(issuer.jwksRequests - before <= 1, `JWKS fetched ${issuer.jwksRequests - before} times for 20 requests`);
    await issuer.rotate();
    await new Promise((resolve) => setTimeout(resolve, 1_100)); // the JWKS is refetched at most once a second
    const rotated = await issuer.mint({ sub: 'carol', aud: resource, scope: 'mcp:tools' });
    const answer = await post(gateway.url, INITIALIZE, bearer(rotated));
    assert.equal(answer.status, 200);
  });

  test('API keys: the key, or its stored hash, is the principal\'s', async (t) => {
    const scope = testScope(t);
    for (const key of [ALICE_KEY, BOB_KEY]) {
      const client = await scope.plainClient(gateway.url, { headers: bearer(key) });
      assert.match(textOf(await client.callTool({ name: 'greet', arguments: { name: 'k' } })), /Hello, k!/);
    }
  });

  test('a session belongs to its principal: another principal\'s request with its id gets 404', async () => {
    const opened = await post(gateway.url, INITIALIZE, bearer(ALICE_KEY));
    assert.equal(opened.status, 200);
    const sessionId = opened.headers.get('mcp-session-id') ?? '';
    const ping = { jsonrpc: '2.0', id: 2, method: 'ping' };
    const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' };
    assert.equal((await post(gateway.url, ping, { ...headers, ...bearer(ALICE_KEY) })).status, 200);
    assert.equal((await post(gateway.url, ping, { ...headers, ...bearer(BOB_KEY) })).status, 404);
    const bobToken = await issuer.mint({ sub: 'alice-impostor', aud: resource, scope: 'mcp:tools' });
    assert.equal((await post(gateway.url, ping, { ...headers, ...bearer(bobToken) })).status, 404);
  });

  test('2025-11-25 tasks belong to their principal: another one is told the task does not exist; list shows only its own', async (t) => {
    const scope = testScope(t);
    const alice = await scope.plainClient(gateway.url, { headers: bearer(ALICE_KEY) });
    const created = await alice.request(
      { method: 'tools/call', params: { name: 'slow', arguments: { ms: 200 }, task: { ttl: 60_000 } } },
      CreateTaskResultSchema,
    );
    const taskId = created.task.taskId;
    const bob = await scope.plainClient(gateway.url, { headers: bearer(BOB_KEY) });
    for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel'] as const) {
      await assert.rejects(bob.request({ method, params: { taskId } }, CallToolResultSchema.passthrough()), /Task not found/, method);
    }
    assert.ok(!(await bob.experimental.tasks.listTasks()).tasks.some((task) => task.taskId === taskId));
    // The principal's, not the session's: alice sees it from another session too.
    const aliceAgain = await scope.plainClient(gateway.url, { headers: bearer(ALICE_KEY) });
    assert.ok((await aliceAgain.experimental.tasks.listTasks()).tasks.some((task) => task.taskId === taskId));
    await eventually(async () => (await aliceAgain.experimental.tasks.getTask(taskId)).status === 'completed');
  });

  test('2026-07-28 tasks belong to their principal too', async () => {
    const options = (key: string) => ({ capabilities: TASKS_CAPABILITIES, headers: bearer(key) });
    const created = await sendRev2026(gateway.url, 'tools/call', { name: 'slow', arguments: { ms: 3_000 } }, options(ALICE_KEY));
    assert.equal(created.result?.resultType, 'task', JSON.stringify(created.response));
    const taskId = created.result?.taskId as string;
    for (const method of ['tasks/get', 'tasks/cancel']) {
      const answer = await sendRev2026(gateway.url, method, { taskId }, options(BOB_KEY));
      assert.match(String(answer.error?.message), /Task not found/, `${method}: ${JSON.stringify(answer.response)}`);
    }
    assert.equal((await sendRev2026(gateway.url, 'tasks/get', { taskId }, options(ALICE_KEY))).result?.status, 'working');
    await sendRev2026(gateway.url, 'tasks/cancel', { taskId }, options(ALICE_KEY));
    assert.equal((await sendRev2026(gateway.url, 'tasks/get', { taskId }, options(ALICE_KEY))).result?.status, 'cancelled');
  });

  test('a 2026-07-28 request without a token is refused like any other', async () => {
    const answer = await sendRev2026(gateway.url, 'tools/list', {}, {});
    assert.equal(answer.status, 401);
  });
});

describe('principals across two replicas on one Redis', () => {
  const scope = suiteScope();
  let a: TestGateway;
  let b: TestGateway;

  before(async () => {
    const upstream = await scope.upstream('stdio');
    [a, b] = await twoReplicas(scope, {
      upstreams: { fx: upstream.config },
      tasks: { defaults: { mode: 'optional', pollIntervalMs: 100 } },
      auth: { resource: 'http://gateway.example/mcp', apiKeys: [{ principal: 'alice', key: ALICE_KEY }, { principal: 'bob', key: BOB_KEY }] },
    }, 'auth');
  });

  test('a session opened on one replica is its principal\'s on the other; a task made on one is hidden from others on both', async (t) => {
    const scope = testScope(t);
    const opened = await post(a.url, INITIALIZE, bearer(ALICE_KEY));
    const headers = { 'mcp-session-id': opened.headers.get('mcp-session-id') ?? '', 'mcp-protocol-version': '2025-11-25' };
    const ping = { jsonrpc: '2.0', id: 2, method: 'ping' };
    assert.equal((await post(b.url, ping, { ...headers, ...bearer(ALICE_KEY) })).status, 200);
    assert.equal((await post(b.url, ping, { ...headers, ...bearer(BOB_KEY) })).status, 404);

    const alice = await scope.plainClient(a.url, { headers: bearer(ALICE_KEY) });
    const created = await alice.request({ method: 'tools/call', params: { name: 'slow', arguments: { ms: 100 }, task: {} } }, CreateTaskResultSchema);
    const taskId = created.task.taskId;
    const bobOnB = await scope.plainClient(b.url, { headers: bearer(BOB_KEY) });
    await assert.rejects(bobOnB.experimental.tasks.getTask(taskId), /Task not found/);
    const aliceOnB = await scope.plainClient(b.url, { headers: bearer(ALICE_KEY) });
    await eventually(async () => (await aliceOnB.experimental.tasks.getTask(taskId)).status === 'completed');
    const rev2026OnB = await sendRev2026(b.url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES, headers: bearer(BOB_KEY) });
    assert.match(String(rev2026OnB.error?.message), /Task not found/);
  });
});

describe('start-up without auth', () => {
  test('binding beyond loopback without an auth section is warned about', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.spawnGateway({ config: { listen: { host: '0.0.0.0', port: 0 }, upstreams: { fx: upstream.config } } });
    await whenLogged(gateway, () => /without an auth section/.test(gateway.stdout()));
  });
});

describe('access rules (auth.access): lists show only what a caller may use; anything else is unknown to it', () => {
  const scope = suiteScope();
  let issuer: AuthServer;
  let gateway: TestGateway;
  let resource: string;

  before(async () => {
    ({ issuer, gateway, resource } = await oauthGateway(scope, {}, {
      apiKeys: [{ principal: 'alice', key: ALICE_KEY }, { principal: 'bob', key: BOB_KEY }],
      oauth: {},
      access: [
        { principals: ['alice', 'team-*'], tools: ['*'], prompts: ['*'], resources: ['*'] },
        { principals: ['bob'], tools: ['greet', 'slow_compute'] },
        { scopes: ['admin'], tools: ['*'] },
      ],
    }));
  });

  test('a principal sees and calls only its tools; a denied call never reaches the upstream', async (t) => {
    const scope = testScope(t);
    const bob = await scope.plainClient(gateway.url, { headers: bearer(BOB_KEY) });
    assert.deepEqual((await bob.listTools()).tools.map((tool) => tool.name).sort(), ['greet', 'slow_compute']);
    assert.match(textOf(await bob.callTool({ name: 'greet', arguments: { name: 'bob' } })), /Hello, bob!/);
    const alice = await scope.plainClient(gateway.url, { headers: bearer(ALICE_KEY) });
    const whoami = async (): Promise<{ pid: number; calls: number }> => JSON.parse(textOf(await alice.callTool({ name: 'whoami', arguments: {} }))) as { pid: number; calls: number };
    const before = await whoami();
    // `crash` would end the upstream process, and every call counts on its connection: neither denied call went there.
    const denied = await bob.callTool({ name: 'crash', arguments: {} }).then(() => undefined, (error: Error) => error);
    assert.match(String(denied?.message), /Unknown tool: crash/);
    const unknown = await bob.callTool({ name: 'no_such_tool', arguments: {} }).then(() => undefined, (error: Error) => error);
    assert.equal(String(denied?.message).replace('crash', 'X'), String(unknown?.message).replace('no_such_tool', 'X'), 'a denied tool is answered like an unknown one');
    // The same process, and no call on its connection between the two whoami calls but the second itself.
    const after = await whoami();
    assert.equal(after.pid, before.pid);
    assert.equal(after.calls, before.calls + 1);
    assert.ok((await alice.listTools()).tools.some((tool) => tool.name === 'crash'));
  });

  test('prompts and resources follow the rules that name them: none named, none listed or read', async (t) => {
    const scope = testScope(t);
    const bob = await scope.plainClient(gateway.url, { headers: bearer(BOB_KEY) });
    assert.deepEqual((await bob.listPrompts()).prompts, []);
    assert.deepEqual((await bob.listResources()).resources, []);
    await assert.rejects(bob.readResource({ uri: 'test://static-text' }), /Resource not found/);
    const alice = await scope.plainClient(gateway.url, { headers: bearer(ALICE_KEY) });
    assert.ok((await alice.listPrompts()).prompts.length > 0);
    assert.ok((await alice.readResource({ uri: 'test://static-text' })).contents.length > 0);
  });

  test('a token\'s scopes grant what a rule gives them; principals match by glob', async (t) => {
    const scope = testScope(t);
    const admin = await scope.plainClient(gateway.url, { headers: bearer(await issuer.mint({ sub: 'dave', aud: resource, scope: 'admin' })) });
    assert.ok((await admin.listTools()).tools.some((tool) => tool.name === 'crash'));
    const team = await scope.plainClient(gateway.url, { headers: bearer(await issuer.mint({ sub: 'team-blue', aud: resource })) });
    assert.ok((await team.listPrompts()).prompts.length > 0);
    const nobody = await scope.plainClient(gateway.url, { headers: bearer(await issuer.mint({ sub: 'eve', aud: resource })) });
    assert.deepEqual((await nobody.listTools()).tools, []);
  });

  test('2026-07-28: the same lists and the same answer for a denied tool', async () => {
    const listed = await sendRev2026(gateway.url, 'tools/list', {}, { headers: bearer(BOB_KEY) });
    assert.deepEqual((listed.result?.tools as Json[]).map((tool) => tool.name).sort(), ['greet', 'slow_compute']);
    const denied = await sendRev2026(gateway.url, 'tools/call', { name: 'crash', arguments: {} }, { headers: bearer(BOB_KEY) });
    assert.match(String(denied.error?.message), /Unknown tool: crash/);
  });
});

describe('rate limits per principal, counted across replicas', () => {
  const scope = suiteScope();
  const key = (name: string): string => `${name}-key-0123456789abcdef`;
  let a: TestGateway;
  let b: TestGateway;

  before(async () => {
    const upstream = await scope.upstream('stdio');
    [a, b] = await twoReplicas(scope, {
      upstreams: { fx: upstream.config },
      tasks: { defaults: { mode: 'optional', taskAfterMs: 0 } },
      auth: {
        resource: 'http://gateway.example/mcp',
        apiKeys: ['dora', 'erin', 'fred', 'gina'].map((name) => ({ principal: name, key: key(name) })),
        rateLimits: { requestsPerSecond: 5, taskCreationsPerMinute: 2, rules: [{ principals: ['fred'], requestsPerSecond: 1000 }] },
      },
    }, 'rate');
  });

  test('requests per second: both replicas count one window; past it, 429 with Retry-After and a JSON-RPC error saying when', async () => {
    const list = (url: string) => sendRev2026(url, 'tools/list', {}, { headers: bearer(key('dora')) });
    // 4 + 4 at once, limit 5: counted per replica none would be refused; counted together, 3 are.
    const answers = await Promise.all([a.url, a.url, a.url, a.url, b.url, b.url, b.url, b.url].map(list));
    const refused = answers.filter((answer) => answer.status === 429);
    assert.equal(refused.length, 3, JSON.stringify(answers.map((answer) => answer.status)));
    assert.ok(answers.filter((answer) => answer.status !== 429).every((answer) => answer.status === 200 && answer.result?.tools !== undefined));
    for (const answer of refused) {
      assert.ok(Number(answer.headers['retry-after']) >= 1, JSON.stringify(answer.headers));
      assert.match(String(answer.error?.message), /Rate limit exceeded: 5 requests per second for 'key:dora'.*retry in/);
      assert.equal(typeof (answer.error?.data as Json | undefined)?.retryAfterMs, 'number');
    }
    // Another principal has its own window; a rule may give one more.
    const fred = await Promise.all(Array.from({ length: 8 }, () => sendRev2026(a.url, 'tools/list', {}, { headers: bearer(key('fred')) })));
    assert.ok(fred.every((answer) => answer.status === 200), JSON.stringify(fred.map((answer) => [answer.status, answer.error])));
  });

  test('task creations per minute: the third task of a principal within the minute is refused with 429', async () => {
    const create = (url: string) => sendRev2026(url, 'tools/call', { name: 'slow', arguments: { ms: 10 } }, { capabilities: TASKS_CAPABILITIES, headers: bearer(key('erin')) });
    const first = await create(a.url);
    const second = await create(b.url);
    assert.equal(first.result?.resultType, 'task', JSON.stringify(first.response));
    assert.equal(second.result?.resultType, 'task', JSON.stringify(second.response));
    const third = await create(a.url);
    assert.equal(third.status, 429, JSON.stringify(third.response));
    assert.ok(Number(third.headers['retry-after']) >= 1);
    assert.match(String(third.error?.message), /2 task creations per minute for 'key:erin'/);
  });
  test('2025-11-25: the third task creation of a principal within the minute is refused with 429 and Retry-After too', async () => {
    const headers = { ...bearer(key('gina')), 'mcp-protocol-version': '2025-11-25' };
    const init = await post(a.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'rate', version: '1' } } }, headers);
    const session = { ...headers, 'mcp-session-id': String(init.headers.get('mcp-session-id')) };
    const create = (url: string, id: number) => post(url, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'slow', arguments: { ms: 10 }, task: {} } }, session);
    for (const [url, id] of [[a.url, 1], [b.url, 2]] as const) {
      const created = await create(url, id);
      assert.equal(created.status, 200, JSON.stringify(created.json));
      assert.equal(typeof ((created.json?.result as Json | undefined)?.task as Json | undefined)?.taskId, 'string', JSON.stringify(created.json));
    }
    const third = await create(a.url, 3);
    assert.equal(third.status, 429, JSON.stringify(third.json));
    assert.ok(Number(third.headers.get('retry-after')) >= 1, String(third.headers.get('retry-after')));
    assert.equal(third.json?.id, 3, 'the refusal answers the request it refuses');
    const error = third.json?.error as { code: number; message: string; data?: Json };
    assert.equal(error.code, -32001);
    assert.match(error.message, /2 task creations per minute for 'key:gina'.*retry in/);
    assert.equal(typeof error.data?.retryAfterMs, 'number');
    // Other requests of the session are not limited by it: the same session still lists its two tasks.
    const listed = await post(b.url, { jsonrpc: '2.0', id: 4, method: 'tasks/list' }, session);
    assert.equal(listed.status, 200);
    assert.equal(((listed.json?.result as Json).tasks as Json[]).length, 2);
  });
});

describe('the audit log', () => {
  test('task created, completed, retrieved and denied access are logged with the principal; keys never are', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.spawnGateway({
      config: {
        upstreams: { fx: upstream.config },
        log: { level: 'info' },
        tasks: { defaults: { mode: 'optional', pollIntervalMs: 100 } },
        auth: { resource: 'http://gateway.example/mcp', apiKeys: [{ principal: 'alice', key: ALICE_KEY }], access: [{ principals: ['alice'], tools: ['slow'] }] },
      },
    });
    const alice = await scope.plainClient(gateway.url, { headers: bearer(ALICE_KEY) });
    const created = await alice.request({ method: 'tools/call', params: { name: 'slow', arguments: { ms: 10 }, task: {} } }, CreateTaskResultSchema);
    await eventually(async () => (await alice.experimental.tasks.getTask(created.task.taskId)).status === 'completed');
    await alice.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
    await alice.callTool({ name: 'greet', arguments: { name: 'x' } }).catch(() => undefined);
    await post(gateway.url, INITIALIZE, bearer('wrong-key-0123456789'));
    const audit = (): Json[] => logEntries(gateway).filter((entry) => entry.audit !== undefined);
    await eventually(() => audit().filter((entry) => entry.audit === 'access.denied').length >= 2);
    const events = audit();
    for (const kind of ['task.created', 'task.completed', 'task.retrieved']) {
      const event = events.find((entry) => entry.audit === kind && entry.task === created.task.taskId);
      assert.equal(event?.principal, 'key:alice', `${kind}: ${JSON.stringify(events)}`);
    }
    assert.ok(events.some((entry) => entry.audit === 'access.denied' && entry.principal === 'key:alice' && entry.name === 'greet'));
    assert.ok(events.some((entry) => entry.audit === 'access.denied' && entry.status === 401));
    assert.ok(!gateway.stdout().includes(ALICE_KEY) && !gateway.stdout().includes('wrong-key-0123456789'), 'no key in the log');
  });
});

describe('the client\'s token never goes upstream', () => {
  test('an upstream sees its own configured credentials on every request, never the client\'s key or token', async (t) => {
    const scope = testScope(t);
    const seen: IncomingHttpHeaders[] = [];
    // A minimal Streamable HTTP upstream that records the headers of every request it gets.
    const upstream = createServer((request, response) => {
      seen.push(request.headers);
      let text = '';
      request.on('data', (chunk: Buffer) => (text += String(chunk)));
      request.on('end', () => {
        const message = text === '' ? {} : (JSON.parse(text) as Json);
        if (message.id === undefined) return void response.writeHead(request.method === 'POST' ? 202 : 405).end();
        const params = (message.params ?? {}) as Json;
        const result =
          message.method === 'initialize' ? { protocolVersion: params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'recorder', version: '1' } }
          : message.method === 'tools/list' ? { tools: [{ name: 'hello', inputSchema: { type: 'object' } }] }
          : message.method === 'tools/call' ? { content: [{ type: 'text', text: 'hello' }] }
          : undefined;
        const body = result === undefined ? { jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'Method not found' } } : { jsonrpc: '2.0', id: message.id, result };
        response.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'recorded' }).end(JSON.stringify(body));
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    scope.defer(() => new Promise((resolve) => upstream.close(resolve)));
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp`;
    const gateway = await scope.gateway({
      upstreams: { rec: { url, headers: { Authorization: 'Bearer upstream-own-credential' } } },
      auth: { resource: 'http://gateway.example/mcp', apiKeys: [{ principal: 'alice', key: ALICE_KEY }] },
    });
    const client = await scope.plainClient(gateway.url, { headers: bearer(ALICE_KEY) });
    assert.equal(textOf(await client.callTool({ name: 'hello', arguments: {} })), 'hello');
    assert.equal((await sendRev2026(gateway.url, 'tools/call', { name: 'hello', arguments: {} }, { headers: bearer(ALICE_KEY) })).status, 200);
    assert.ok(seen.length > 0);
    for (const headers of seen) assert.equal(headers.authorization, 'Bearer upstream-own-credential', JSON.stringify(headers));
  });
});
