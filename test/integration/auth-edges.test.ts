// Identity edges (issue 20, item 6), each against real parts: a gateway process or an in-process gateway, the
// local OAuth authorization server fixture, a stdio fixture upstream, real Redis, SDK clients and raw HTTP.
// - forged tokens (crit naming CR/LF or non-Latin-1 text, odd typ) get a 401 with a well-formed challenge in the
//   gateway's own words, never a 500, and nothing at error level in the log;
// - an API key and an OAuth subject of the same name are two principals (sessions, tasks, rules);
// - RFC 9068: no exp, iat in the future, a typ that is not an access token's: refused; the tolerance is config;
// - a malformed token is refused without the issuer being contacted, even while another request waits on it;
// - each message of a JSON-RPC batch counts against requestsPerSecond, and a batch past it is refused whole;
// - a stored task of a tool the caller may no longer use (auth.access changed) is an unknown task, and its result
//   is not served (tasks/result, tasks/get, task_result, listen streams).
// One file because its groups are one issue item and share its hand-made token helpers (handMade, goodClaims,
// assertRefused).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { before, describe, test } from 'node:test';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { TOKEN_FAULTS } from '../../src/http/access-token.js';
import { startAuthServer, type AuthServer } from '../fixtures/auth-server.js';
import { freePort } from '../fixtures/spawn.js';
import { eventually, type Json, logEntries, suiteScope, type TestGateway, testScope, type TestScope, textOf, whenLogged } from '../helpers/harness.js';
import { sendRev2026, openListen, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';
import { bearer, INITIALIZE, post } from '../helpers/auth-requests.js';
import { oauthGateway } from '../helpers/oauth-gateway.js';
import { sharedRedisStore } from '../helpers/shared-redis.js';

/** Task policy of these tests' OAuth gateways: 2026-07-28 calls become tasks at once. */
const TASKS_AT_ONCE = { defaults: { mode: 'optional', pollIntervalMs: 100, taskAfterMs: 0 } };

const ALICE_KEY = 'alice-key-0123456789abcdef';
const CAROL_KEY = 'carol-key-0123456789abcdef';
const BOB_KEY = 'bob-key-0123456789abcdef-bob';
const FAULT_TEXTS = new Set(Object.values(TOKEN_FAULTS));

/** A token made by hand: any header and claims, and a signature no key made (never looked at before the keys are). */
function handMade(header: Json, claims: Json): string {
  const part = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part(header)}.${part(claims)}.${randomBytes(64).toString('base64url')}`;
}

/** Claims a validator accepts, for `issuer` and `resource` (a hand-made token then fails only at its signature). */
function goodClaims(issuer: string, resource: string): Json {
  const now = Math.floor(Date.now() / 1000);
  return { iss: issuer, aud: resource, sub: 'mallory', iat: now, exp: now + 300 };
}

/** What a refused token must get: 401, a challenge that is the gateway's own words, and the same words in the body. */
function assertRefused(answer: { status: number; headers: Headers; json: unknown }, what: string): void {
  assert.equal(answer.status, 401, `${what}: ${JSON.stringify(answer.json)}`);
  const challenge = answer.headers.get('www-authenticate') ?? '';
  assert.match(challenge, /^Bearer resource_metadata="[^"]+"/, `${what}: ${challenge}`);
  assert.ok(challenge.includes('error="invalid_token"'), `${what}: ${challenge}`);
  const description = /error_description="([^"]*)"/.exec(challenge)?.[1];
  assert.ok(description !== undefined && FAULT_TEXTS.has(description), `${what}: ${challenge}`);
  assert.equal(((answer.json as Json).error as Json).message, description, what);
}

describe('forged tokens: a 401 with a well-formed challenge, never a 500', () => {
  const scope = suiteScope();
  let issuer: AuthServer;
  let gateway: Awaited<ReturnType<TestScope['spawnGateway']>>;
  let resource: string;

  before(async () => {
    issuer = await startAuthServer();
    scope.defer(() => issuer.close());
    const port = await freePort();
    resource = `http://127.0.0.1:${port}/mcp`;
    const upstream = await scope.upstream('stdio');
    gateway = await scope.spawnGateway({
      config: {
        listen: { host: '127.0.0.1', port },
        upstreams: { fx: upstream.config },
        log: { level: 'debug' },
        tasks: { defaults: { mode: 'optional', pollIntervalMs: 100 } },
        auth: { resource, oauth: { issuer: issuer.issuer } },
      },
    });
  });

  test('crit naming CR/LF or non-Latin-1 text, a typ with CR/LF, garbage: each refused in fixed words, logged in detail at debug only', async () => {
    const claims = goodClaims(issuer.issuer, resource);
    const header = { alg: 'RS256', typ: 'at+jwt' };
    const cases: [string, string][] = [
      ['crit with CR/LF', handMade({ ...header, crit: ['x\r\nSet-Cookie: stolen=1'], 'x\r\nSet-Cookie: stolen=1': true }, claims)],
      ['crit beyond Latin-1', handMade({ ...header, crit: ['ünïcødé-🙂'], 'ünïcødé-🙂': 1 }, claims)],
      ['typ with CR/LF', handMade({ ...header, typ: 'at+jwt\r\nX-Injected: 1' }, claims)],
      ['iss with CR/LF', handMade(header, { ...claims, iss: `${issuer.issuer}\r\nX-Injected: 1` })],
      ['not a JWT', 'garbage-that-is-no-key'],
      ['a JWE (five parts)', 'eyJhbGciOiJSU0EtT0FFUCJ9.a.b.c.d'],
      ['forged signature', handMade(header, claims)],
    ];
    for (const [what, token] of cases) {
      const answer = await post(gateway.url, INITIALIZE, bearer(token));
      assertRefused(answer, what);
      assert.ok(![...answer.headers.keys()].some((name) => name === 'set-cookie' || name === 'x-injected'), what);
    }
    await whenLogged(gateway, () => logEntries(gateway).filter((entry) => entry.msg === 'refused token, in detail').length >= cases.length);
    const entries = logEntries(gateway);
    assert.ok(entries.some((entry) => entry.msg === 'refused token, in detail' && String(entry.reason).includes('Set-Cookie')), 'the detail is in the debug log');
    assert.deepEqual(entries.filter((entry) => Number(entry.level) >= 50), [], 'nothing at error level');
  });

  test('the audit log names an OAuth caller by issuer and subject', async (t) => {
    const client = await testScope(t).plainClient(gateway.url, { headers: bearer(await issuer.mint({ sub: 'alice', aud: resource })) });
    const created = await client.request({ method: 'tools/call', params: { name: 'slow', arguments: { ms: 10 }, task: {} } }, CreateTaskResultSchema);
    await whenLogged(gateway, () => logEntries(gateway).some((entry) => entry.audit === 'task.created' && entry.task === created.task.taskId));
    const event = logEntries(gateway).find((entry) => entry.audit === 'task.created' && entry.task === created.task.taskId);
    assert.equal(event?.principal, `oauth:${issuer.issuer}#alice`);
  });
});

describe('an API key and an OAuth subject of the same name are two principals', () => {
  const scope = suiteScope();
  let issuer: AuthServer;
  let gateway: TestGateway;
  let resource: string;

  before(async () => {
    ({ issuer, gateway, resource } = await oauthGateway(scope, undefined, {
      apiKeys: [{ principal: 'alice', key: ALICE_KEY }, { principal: 'carol', key: CAROL_KEY }],
      oauth: {},
      access: [
        { principals: ['key:alice'], tools: ['*'] },
        { principals: ['oauth:alice'], tools: ['greet'] },
        { principals: ['carol'], tools: ['whoami'] },
      ],
    }, TASKS_AT_ONCE));
  });

  const token = (sub: string): Promise<string> => issuer.mint({ sub, aud: resource });

  test('sessions: the key\'s session is unknown to the token of the same name, and the other way round', async () => {
    const aliceToken = await token('alice');
    const ping = { jsonrpc: '2.0', id: 2, method: 'ping' };
    for (const [owner, other] of [[ALICE_KEY, aliceToken], [aliceToken, ALICE_KEY]] as const) {
      const opened = await post(gateway.url, INITIALIZE, bearer(owner));
      assert.equal(opened.status, 200);
      const headers = { 'mcp-session-id': opened.headers.get('mcp-session-id') ?? '', 'mcp-protocol-version': '2025-11-25' };
      assert.equal((await post(gateway.url, ping, { ...headers, ...bearer(owner) })).status, 200);
      assert.equal((await post(gateway.url, ping, { ...headers, ...bearer(other) })).status, 404);
    }
  });

  test('tasks of both revisions: the namesake is told the task does not exist, and does not list it', async (t) => {
    const scope = testScope(t);
    const aliceToken = await token('alice');
    const keyClient = await scope.plainClient(gateway.url, { headers: bearer(ALICE_KEY) });
    const created = await keyClient.request({ method: 'tools/call', params: { name: 'slow', arguments: { ms: 10 }, task: {} } }, CreateTaskResultSchema);
    const tokenClient = await scope.plainClient(gateway.url, { headers: bearer(aliceToken) });
    await assert.rejects(tokenClient.experimental.tasks.getTask(created.task.taskId), /Task not found/);
    assert.ok(!(await tokenClient.experimental.tasks.listTasks()).tasks.some((task) => task.taskId === created.task.taskId));
    // The token may not call slow at all (oauth:alice is granted greet only): a 2026 task made by the key.
    const rev2026Task = await sendRev2026(gateway.url, 'tools/call', { name: 'slow', arguments: { ms: 10 } }, { capabilities: TASKS_CAPABILITIES, headers: bearer(ALICE_KEY) });
    assert.equal(rev2026Task.result?.resultType, 'task', JSON.stringify(rev2026Task.response));
    const foreign = await sendRev2026(gateway.url, 'tasks/get', { taskId: rev2026Task.result?.taskId }, { capabilities: TASKS_CAPABILITIES, headers: bearer(aliceToken) });
    assert.match(String(foreign.error?.message), /Task not found/);
  });

  test('rules: key:alice and oauth:alice are granted apart; a bare name is granted to both kinds', async (t) => {
    const scope = testScope(t);
    const names = async (credential: string): Promise<string[]> =>
      (await (await scope.plainClient(gateway.url, { headers: bearer(credential) })).listTools()).tools.map((tool) => tool.name).sort();
    const keyTools = await names(ALICE_KEY);
    assert.ok(keyTools.includes('crash') && keyTools.includes('greet') && keyTools.length > 3, keyTools.join());
    assert.deepEqual(await names(await token('alice')), ['greet']);
    assert.deepEqual(await names(CAROL_KEY), ['whoami']);
    assert.deepEqual(await names(await token('carol')), ['whoami']);
    assert.deepEqual(await names(await token('key:alice')), [], 'a subject shaped like a qualified name is just a subject');
  });
});

describe('RFC 9068: what an access token must carry', () => {
  const scope = suiteScope();
  let issuer: AuthServer;
  let strict: TestGateway;
  let lenient: TestGateway;
  let resource: string;

  before(async () => {
    ({ issuer, gateway: strict, resource } = await oauthGateway(scope, undefined, { oauth: {} }, TASKS_AT_ONCE));
    // A second gateway trusting the same issuer, for the same resource, with a wider clock tolerance.
    const upstream = await scope.upstream('stdio');
    lenient = await scope.gateway({ upstreams: { fx: upstream.config }, auth: { resource, oauth: { issuer: issuer.issuer, clockToleranceSeconds: 120 } } });
  });

  test('no exp, iat in the future beyond the tolerance, a typ that is not an access token\'s: 401', async () => {
    const now = Math.floor(Date.now() / 1000);
    const cases: [string, Parameters<AuthServer['mint']>[0]][] = [
      ['no exp', { extra: { exp: undefined } }],
      ['iat three years ahead', { extra: { iat: now + 3 * 365 * 86_400 } }],
      ['iat a minute ahead', { extra: { iat: now + 60 } }],
      ['typ of an ID token', { typ: 'id_token+jwt' }],
      ['typ of a DPoP proof', { typ: 'dpop+jwt' }],
      ['typ of a logout token', { typ: 'logout+jwt' }],
    ];
    for (const [what, options] of cases) assertRefused(await post(strict.url, INITIALIZE, bearer(await issuer.mint({ aud: resource, ...options }))), what);
  });

  test('typ at+jwt, application/at+jwt, JWT, or none; iat within the tolerance: accepted', async () => {
    const now = Math.floor(Date.now() / 1000);
    const cases: [string, Parameters<AuthServer['mint']>[0]][] = [
      ['at+jwt', { typ: 'at+jwt' }],
      ['application/at+jwt', { typ: 'application/at+jwt' }],
      ['JWT', { typ: 'JWT' }],
      ['no typ', { typ: null }],
      ['iat 2 s ahead (tolerance 5 s)', { extra: { iat: now + 2 } }],
    ];
    for (const [what, options] of cases) {
      const answer = await post(strict.url, INITIALIZE, bearer(await issuer.mint({ aud: resource, ...options })));
      assert.equal(answer.status, 200, `${what}: ${JSON.stringify(answer.json)}`);
    }
  });

  test('auth.oauth.clockToleranceSeconds: a minute of skew passes where it is allowed', async () => {
    const ahead = await issuer.mint({ aud: resource, extra: { iat: Math.floor(Date.now() / 1000) + 60 } });
    assert.equal((await post(lenient.url, INITIALIZE, bearer(ahead))).status, 200);
    assertRefused(await post(strict.url, INITIALIZE, bearer(ahead)), 'the default tolerance');
  });
});

/**
 * An issuer that accepts connections and never answers, counting them. `release()` closes those open and every
 * later one at once, so what waited on it fails promptly.
 */
async function silentIssuer(scope: TestScope): Promise<{ url: string; connections: () => number; contacted: Promise<void>; release: () => void }> {
  const sockets = new Set<Socket>();
  let released = false;
  let connections = 0;
  let contacted!: () => void;
  const first = new Promise<void>((resolve) => (contacted = resolve));
  const server = createServer((socket) => {
    connections++;
    contacted();
    if (released) return void socket.destroy();
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  scope.defer(() => {
    released = true;
    for (const socket of sockets) socket.destroy();
    return new Promise((resolve) => server.close(resolve));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => connections,
    contacted: first,
    release: () => {
      released = true;
      for (const socket of sockets) socket.destroy();
    },
  };
}

describe('a malformed token is refused without contacting the issuer', () => {
  test('401 at once for every malformed or misdirected token, the issuer never contacted, even while a well-formed one waits on it', async (t) => {
    const scope = testScope(t);
    const hole = await silentIssuer(scope);
    const port = await freePort();
    const resource = `http://127.0.0.1:${port}/mcp`;
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.gateway({ listen: { host: '127.0.0.1', port, path: '/mcp' }, upstreams: { fx: upstream.config }, auth: { resource, oauth: { issuer: hole.url } } });

    const claims = goodClaims(hole.url, resource);
    const header = { alg: 'RS256', typ: 'at+jwt', kid: 'k1' };
    const malformed: [string, string][] = [
      ['not a JWT', 'garbage-that-is-no-key'],
      ['header not JSON', `${Buffer.from('{oops').toString('base64url')}.${Buffer.from('{}').toString('base64url')}.c2ln`],
      ['alg none', handMade({ ...header, alg: 'none' }, claims)],
      ['alg HS256', handMade({ ...header, alg: 'HS256' }, claims)],
      ['crit', handMade({ ...header, crit: ['exp'] }, claims)],
      ['typ of an ID token', handMade({ ...header, typ: 'id_token+jwt' }, claims)],
      ['another issuer', handMade(header, { ...claims, iss: 'https://elsewhere.example' })],
      ['another audience', handMade(header, { ...claims, aud: 'https://elsewhere.example/mcp' })],
      ['no exp', handMade(header, { ...claims, exp: undefined })],
      ['expired', handMade(header, { ...claims, exp: (claims.iat as number) - 3600, iat: (claims.iat as number) - 7200 })],
      ['iat years ahead', handMade(header, { ...claims, iat: (claims.iat as number) + 3 * 365 * 86_400 })],
      ['no subject', handMade(header, { ...claims, sub: undefined })],
    ];
    for (const [what, token] of malformed) assertRefused(await post(gateway.url, INITIALIZE, bearer(token)), what);
    assert.equal(hole.connections(), 0, 'no malformed token made the gateway contact the issuer');

    // A well-formed token has to wait for the issuer's keys; a malformed one sent meanwhile does not wait with it.
    let settled = false;
    const waiting = post(gateway.url, INITIALIZE, bearer(handMade(header, claims))).finally(() => (settled = true));
    await hole.contacted;
    assertRefused(await post(gateway.url, INITIALIZE, bearer(handMade(header, { ...claims, exp: undefined }))), 'no exp, while the issuer hangs');
    assert.equal(settled, false, 'the well-formed token still waits on the issuer');
    hole.release();
    const unverifiable = await waiting;
    assert.equal(unverifiable.status, 503, JSON.stringify(unverifiable.json));
    assert.match(String(((unverifiable.json as Json).error as Json).message), /Cannot verify the token now/);
  });
});

describe('a JSON-RPC batch counts one request per message', () => {
  test('a batch of 20 against requestsPerSecond 10 is refused whole with 429 before anything is forwarded', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio');
    const gateway = await scope.gateway({
      upstreams: { fx: upstream.config },
      auth: {
        resource: 'http://gateway.example/mcp',
        apiKeys: [{ principal: 'batcher', key: ALICE_KEY }, { principal: 'observer', key: BOB_KEY }],
        rateLimits: { requestsPerSecond: 10, rules: [{ principals: ['key:observer'], requestsPerSecond: 1000 }] },
      },
    });
    // The observer counts the calls on the fixture's shared connection.
    const observer = await scope.plainClient(gateway.url, { headers: bearer(BOB_KEY) });
    const whoami = async (): Promise<{ calls: number }> => JSON.parse(textOf(await observer.callTool({ name: 'whoami', arguments: {} }))) as { calls: number };
    const before = await whoami();

    // A 2025-03-26 session: the revision with batches.
    const opened = await post(gateway.url, { ...INITIALIZE, params: { ...INITIALIZE.params, protocolVersion: '2025-03-26' } }, bearer(ALICE_KEY));
    assert.equal(opened.status, 200, JSON.stringify(opened.json));
    const headers = { ...bearer(ALICE_KEY), 'mcp-session-id': opened.headers.get('mcp-session-id') ?? '', 'mcp-protocol-version': '2025-03-26' };
    const small = await post(gateway.url, [1, 2, 3].map((id) => ({ jsonrpc: '2.0', id, method: 'ping' })), headers);
    assert.equal(small.status, 200, JSON.stringify(small.json));
    assert.equal((small.json as unknown as unknown[]).length, 3);

    const batch = Array.from({ length: 20 }, (_, i) => ({ jsonrpc: '2.0', id: 100 + i, method: 'tools/call', params: { name: 'whoami', arguments: {} } }));
    const refused = await post(gateway.url, batch, headers);
    assert.equal(refused.status, 429, JSON.stringify(refused.json));
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
    const error = (refused.json as Json).error as Json;
    assert.match(String(error.message), /Rate limit exceeded: 10 requests per second for 'key:batcher'/);
    assert.equal(typeof (error.data as Json).retryAfterMs, 'number');

    const after = await whoami();
    assert.equal(after.calls, before.calls + 1, 'none of the refused batch reached the upstream');
  });
});

describe('access is checked again when a stored task is read', () => {
  const scope = suiteScope();
  const auth = (access: Json[]): Json => ({
    resource: 'http://gateway.example/mcp',
    apiKeys: [{ principal: 'alice', key: ALICE_KEY }, { principal: 'bob', key: BOB_KEY }],
    access,
  });
  let granting: TestGateway;
  let revoking: Awaited<ReturnType<TestScope['spawnGateway']>>;

  before(async () => {
    // Asked for first, so its keys go last: after both gateways have closed.
    const store = sharedRedisStore(scope, 'revoked');
    const upstream = await scope.upstream('stdio');
    const common = {
      upstreams: { fx: upstream.config },
      store,
      tasks: { defaults: { mode: 'optional', pollIntervalMs: 100, taskAfterMs: 0 }, rules: [{ match: 'slow', plainCalls: 'background' }] },
    };
    granting = await scope.gateway({ ...common, auth: auth([{ principals: ['alice', 'bob'], tools: ['*'] }]) });
    // The same store, later rules: alice loses slow (keeps greet and slow_compute); bob keeps everything.
    revoking = await scope.spawnGateway({
      config: { ...common, log: { level: 'info' }, auth: auth([{ principals: ['key:alice'], tools: ['greet', 'slow_compute'] }, { principals: ['bob'], tools: ['*'] }]) },
    });
  });

  test('tasks/result, tasks/get (both revisions) and task_result answer a revoked tool\'s task like an unknown id', async (t) => {
    const scope = testScope(t);
    // Made and finished where alice may use slow and slow_compute.
    const alice = await scope.plainClient(granting.url, { headers: bearer(ALICE_KEY) });
    const sessionTask = (await alice.request({ method: 'tools/call', params: { name: 'slow', arguments: { ms: 10 }, task: {} } }, CreateTaskResultSchema)).task.taskId;
    assert.match(textOf(await alice.experimental.tasks.getTaskResult(sessionTask, CallToolResultSchema)), /sleptMs/);
    const rev2026Created = await sendRev2026(granting.url, 'tools/call', { name: 'slow', arguments: { ms: 10 } }, { capabilities: TASKS_CAPABILITIES, headers: bearer(ALICE_KEY) });
    const rev2026Task = rev2026Created.result?.taskId as string;
    assert.equal(typeof rev2026Task, 'string', JSON.stringify(rev2026Created.response));
    await eventually(async () => (await sendRev2026(granting.url, 'tasks/get', { taskId: rev2026Task }, { capabilities: TASKS_CAPABILITIES, headers: bearer(ALICE_KEY) })).result?.status === 'completed');
    const plain = await scope.plainClient(granting.url, { headers: bearer(ALICE_KEY) });
    const handle = (await plain.callTool({ name: 'slow', arguments: { ms: 10 } })) as Json;
    const backgroundTask = ((handle._meta as Json)['io.modelcontextprotocol/related-task'] as Json).taskId as string;
    assert.match(textOf(await plain.callTool({ name: 'taskgate_task_result', arguments: { taskId: backgroundTask } })), /sleptMs/);
    const bob = await scope.plainClient(granting.url, { headers: bearer(BOB_KEY) });
    const bobTask = (await bob.request({ method: 'tools/call', params: { name: 'slow', arguments: { ms: 10 }, task: {} } }, CreateTaskResultSchema)).task.taskId;
    await bob.experimental.tasks.getTaskResult(bobTask, CallToolResultSchema);

    // Read where the rules no longer let alice use slow or slow_compute.
    const aliceThere = await scope.plainClient(revoking.url, { headers: bearer(ALICE_KEY) });
    const unknownId = 'f'.repeat(32);
    const unknownAnswer = await aliceThere.experimental.tasks.getTask(unknownId).then(() => 'found', (error: Error) => error.message);
    for (const read of [
      () => aliceThere.experimental.tasks.getTaskResult(sessionTask, CallToolResultSchema),
      () => aliceThere.experimental.tasks.getTask(sessionTask),
      () => aliceThere.experimental.tasks.cancelTask(sessionTask),
    ]) {
      const answer = await read().then(() => 'found', (error: Error) => error.message);
      assert.equal(answer, unknownAnswer, 'answered exactly like an unknown id');
    }
    assert.ok(!(await aliceThere.experimental.tasks.listTasks()).tasks.some((task) => task.taskId === sessionTask));

    const rev2026Read = async (taskId: string) => sendRev2026(revoking.url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES, headers: bearer(ALICE_KEY) });
    const hidden = await rev2026Read(rev2026Task);
    assert.equal(hidden.result, undefined, 'no result inlined');
    assert.deepEqual(hidden.error, (await rev2026Read(unknownId)).error);

    const plainThere = await scope.plainClient(revoking.url, { headers: bearer(ALICE_KEY) });
    const toolRead = async (taskId: string): Promise<Json> => (await plainThere.callTool({ name: 'taskgate_task_result', arguments: { taskId } })) as Json;
    const refused = await toolRead(backgroundTask);
    assert.equal(refused.isError, true);
    assert.equal(textOf(refused).replace(backgroundTask, 'ID'), textOf(await toolRead(unknownId)).replace(unknownId, 'ID'));

    // The same store serves bob's task there, and alice's where her rules still allow it: it is the rules that hide.
    const bobThere = await scope.plainClient(revoking.url, { headers: bearer(BOB_KEY) });
    assert.match(textOf(await bobThere.experimental.tasks.getTaskResult(bobTask, CallToolResultSchema)), /sleptMs/);
    assert.match(textOf(await alice.experimental.tasks.getTaskResult(sessionTask, CallToolResultSchema)), /sleptMs/);
    await whenLogged(revoking, () => logEntries(revoking).some((entry) => entry.audit === 'access.denied' && entry.task === sessionTask));
    const denial = logEntries(revoking).find((entry) => entry.audit === 'access.denied' && entry.task === sessionTask);
    assert.equal(denial?.principal, 'key:alice');
    assert.equal(denial?.name, 'slow');
  });

  test('a listen stream does not carry a task of a revoked tool, while it carries one the caller may still use', async () => {
    const create = async (name: string, args: Json): Promise<string> => {
      const created = await sendRev2026(granting.url, 'tools/call', { name, arguments: args }, { capabilities: TASKS_CAPABILITIES, headers: bearer(ALICE_KEY) });
      assert.equal(created.result?.resultType, 'task', JSON.stringify(created.response));
      return created.result?.taskId as string;
    };
    const revoked = await create('slow', { ms: 600_000 });
    const allowed = await create('slow_compute', { seconds: 600, label: 'listened' });
    const listener = await openListen(revoking.url, { taskIds: [revoked, allowed] }, { capabilities: TASKS_CAPABILITIES, headers: bearer(ALICE_KEY) });
    try {
      await listener.next((event) => event.method === 'notifications/subscriptions/acknowledged');
      // Both end where they run, the revoked one first; their events reach the listening replica in that order.
      for (const taskId of [revoked, allowed]) await sendRev2026(granting.url, 'tasks/cancel', { taskId }, { capabilities: TASKS_CAPABILITIES, headers: bearer(ALICE_KEY) });
      await listener.next((event) => event.method === 'notifications/tasks' && (event.params as Json).taskId === allowed && (event.params as Json).status === 'cancelled');
      assert.ok(!listener.events.some((event) => (event.params as Json | undefined)?.taskId === revoked), JSON.stringify(listener.events));
    } finally {
      listener.close();
    }
  });
});
