// Per-user consent across two gateway processes on one Redis (issue 41), from outside: real SDK clients at each
// replica's own port, a browser made of plain HTTP at the public origin, where a small balancer sends it to the
// replica the test picks. A link made on one replica is completed through the other; a task waiting for consent
// resumes when the callback lands elsewhere, and survives a kill -9 of its replica; one refresh per expiry however
// many calls on however many replicas; a disconnect is seen by every replica; no token, code or verifier readable
// in the store or the logs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema, ElicitRequestSchema, GetTaskResultSchema, UrlElicitationRequiredError } from '@modelcontextprotocol/sdk/types.js';
import { consentReplicas, redisContents, type ConsentReplicas, type ReplicaName } from '../helpers/consent-replicas.js';
import { eventually, testScope, textOf, type Json, type TestScope } from '../helpers/harness.js';
import { sendRev2026, TASKS_EXTENSION, type Rev2026Response } from '../helpers/stateless-wire.js';

const URL_ELICITATION_TASKS: Json = { elicitation: { url: {} }, extensions: { [TASKS_EXTENSION]: {} } };

interface UserClient {
  client: Client;
  elicitations: { mode?: string; url?: string; elicitationId?: string }[];
  completed: string[];
}

/** A 2025-11-25 SDK client of `user` at replica `on`'s own port, declaring URL elicitation (and tasks), recording what it is asked and told. */
async function clientAs(scope: TestScope, setup: ConsentReplicas, user: string, on: ReplicaName, options: { tasks?: boolean } = {}): Promise<UserClient> {
  const capabilities: Record<string, unknown> = { elicitation: { url: {} } };
  if (options.tasks === true) capabilities.tasks = { requests: { elicitation: { create: {} } } };
  const client = new Client({ name: `replicas-${user}`, version: '1.0.0' }, { capabilities });
  const connected: UserClient = { client, elicitations: [], completed: [] };
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    connected.elicitations.push(request.params as UserClient['elicitations'][number]);
    return { action: 'accept' };
  });
  client.fallbackNotificationHandler = async (notification) => {
    if (notification.method === 'notifications/elicitation/complete') connected.completed.push(String((notification.params as { elicitationId?: unknown }).elicitationId));
  };
  const token = await setup.tokenFor(user);
  await client.connect(new StreamableHTTPClientTransport(new URL(setup[on].url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  scope.defer(() => client.close());
  return connected;
}

/** The URL elicitation a plain call was refused with (-32042). */
async function consentRefusal(client: Client): Promise<{ url: string; elicitationId: string }> {
  const error = await client.callTool({ name: 'tp_whoami', arguments: {} }).then(
    (result) => assert.fail(`the call ran without a connection: ${JSON.stringify(result)}`),
    (e: unknown) => e,
  );
  assert.ok(error instanceof UrlElicitationRequiredError, `expected -32042, got ${String(error)}`);
  const [elicitation] = error.elicitations;
  assert.ok(elicitation !== undefined && elicitation.mode === 'url');
  return { url: elicitation.url, elicitationId: elicitation.elicitationId };
}

/**
 * The user opens `link` at the public origin, which the balancer sends to replica `through`, and goes on to the end.
 * With `midway`, the authorization server shows its consent page (consent 'page'): `midway` runs while the user
 * reads it (the flow begun, not yet called back), then the user approves.
 */
async function connectThrough(setup: ConsentReplicas, user: string, link: string, through: ReplicaName, midway?: () => Promise<void>): Promise<void> {
  assert.ok(link.startsWith(`${setup.origin}/connect/`), `a link on the public origin: ${link}`);
  setup.route(through);
  const browser = setup.browserOf(user);
  const consent = await browser.open(link);
  assert.equal(consent.status, 200, consent.text);
  let done = await browser.follow(consent, /\/authorize\?/);
  if (midway !== undefined) {
    assert.ok(done.url.startsWith(setup.thirdParty.authorizationEndpoint), done.url);
    await midway();
    done = await browser.submit(done, { decision: 'approve' });
  }
  assert.equal(done.status, 200, done.text);
  assert.equal(done.url.startsWith(`${setup.origin}/oauth/callback?`), true, done.url);
  // Every gateway page of the flow (the link, the front door's login callback, the OAuth callback) went to `through`.
  const gatewayVisits = browser.visits.filter((v) => v.url.startsWith(setup.origin));
  assert.ok(gatewayVisits.length >= 2);
  for (const visit of browser.visits) if (visit.location !== undefined) assert.ok(!visit.location.includes(`:${setup.a.port}/`) && !visit.location.includes(`:${setup.b.port}/`), `a redirect to a replica's own port: ${visit.location}`);
}

/** The third-party user a whoami result names. */
function whoamiUser(result: unknown): string {
  return (JSON.parse(textOf(result)) as { user: string }).user;
}

function show(r: Rev2026Response): string {
  return `HTTP ${r.status}: ${JSON.stringify(r.messages)}`;
}

/** A 2026-07-28 tasks/get of `taskId` at `url` as `token`. */
async function taskAt(url: string, token: string, taskId: string): Promise<Json> {
  const r = await sendRev2026(url, 'tasks/get', { taskId }, { capabilities: URL_ELICITATION_TASKS, headers: { authorization: `Bearer ${token}` } });
  assert.equal(r.error, undefined, show(r));
  return r.result as Json;
}

/** The URL elicitation of a task's inputRequests (one), or undefined. */
function askedOf(task: Json): { url: string; elicitationId: string } | undefined {
  const [request] = Object.values((task.inputRequests ?? {}) as Record<string, Json>);
  const params = request?.params as Json | undefined;
  if (request?.method !== 'elicitation/create' || params?.mode !== 'url') return undefined;
  return { url: String(params.url), elicitationId: String(params.elicitationId) };
}

/**
 * Connects `user` through replica `through` with access tokens of `lifetimeSeconds` at first; from the code exchange
 * on (set the moment it is answered, before the gateway reads the answer), tokens live an hour, so that a refresh
 * after the first token's expiry is the only one. Resolves with the first access token once it has expired.
 */
async function connectWithShortToken(scope: TestScope, setup: ConsentReplicas, user: string, through: ReplicaName, lifetimeSeconds: number, midway?: () => Promise<void>): Promise<string> {
  const { thirdParty, upstream } = setup;
  thirdParty.setExpiresIn(lifetimeSeconds);
  const exchanged = thirdParty.nextRequest((r) => r.path === '/token' && r.form.grant_type === 'authorization_code').then(() => thirdParty.setExpiresIn(3600));
  const token = await setup.tokenFor(user);
  const listed = (await (await fetch(`${setup.origin}/connections`, { headers: { authorization: `Bearer ${token}` } })).json()) as { connections: { connectUrl?: string }[] };
  await connectThrough(setup, user, String(listed.connections[0]?.connectUrl), through, midway);
  await exchanged;
  assert.equal(thirdParty.families().length, 1);
  // The first access token: the one the upstream saw first (the catalog read once the user connected, or a call).
  const probe = await clientAs(scope, setup, user, through);
  assert.equal(whoamiUser(await probe.client.callTool({ name: 'tp_whoami', arguments: {} })), 'octocat');
  const [first] = Object.keys(upstream.counts().requestsByToken);
  assert.ok(first !== undefined);
  await eventually(() => !thirdParty.validate(first).active);
  return first;
}

/**
 * A 2026-07-28 task made on A by `user`, who has not connected, seen asking its URL elicitation (`first`); then A is
 * killed with -9 while the task waits.
 */
async function taskWaitingOnKilledReplica(scope: TestScope, user: string): Promise<{ setup: ConsentReplicas; token: string; taskId: string; first: { url: string; elicitationId: string } }> {
  const setup = await consentReplicas(scope);
  const token = await setup.tokenFor(user);
  const created = await sendRev2026(setup.a.url, 'tools/call', { name: 'tp_whoami', arguments: {} }, { capabilities: URL_ELICITATION_TASKS, headers: { authorization: `Bearer ${token}` } });
  assert.equal(created.result?.resultType, 'task', show(created));
  const taskId = String(created.result?.taskId);
  let first: { url: string; elicitationId: string } | undefined;
  await eventually(async () => (first = askedOf(await taskAt(setup.b.url, token, taskId))) !== undefined);
  assert.ok(first !== undefined);
  process.kill(-setup.a.pid, 'SIGKILL');
  await setup.a.exited;
  return { setup, token, taskId, first };
}

describe('per-user consent across replicas (issue 41)', () => {
  it('a link made on replica A is completed through replica B; the client on A then runs as the user and is told the elicitation completed', async (t) => {
    const scope = testScope(t);
    const setup = await consentReplicas(scope);
    const alice = await clientAs(scope, setup, 'alice', 'a');
    const asked = await consentRefusal(alice.client);
    assert.equal(setup.forwarded().b, 0);

    await connectThrough(setup, 'alice', asked.url, 'b');
    assert.equal(setup.forwarded().a, 0, 'the browser never reached replica A');
    // The SDK client opened its GET stream at A after initializing: the completion crosses replicas to reach it.
    await eventually(() => alice.completed.includes(asked.elicitationId));
    assert.equal(whoamiUser(await alice.client.callTool({ name: 'tp_whoami', arguments: {} })), 'octocat');
    assert.equal(setup.upstream.counts().toolCallsByUser.octocat, 1);
  });

  it('a 2025-11-25 task waiting for consent on A resumes when the callback lands on B and completes as the user', async (t) => {
    const scope = testScope(t);
    const setup = await consentReplicas(scope);
    const dave = await clientAs(scope, setup, 'dave', 'a', { tasks: true });
    const created = await dave.client.request({ method: 'tools/call', params: { name: 'tp_whoami', arguments: {}, task: { ttl: 600_000 } } }, CreateTaskResultSchema);
    const result = dave.client.request({ method: 'tasks/result', params: { taskId: created.task.taskId } }, CallToolResultSchema);
    await eventually(() => dave.elicitations.length > 0);
    const [elicitation] = dave.elicitations;
    assert.equal(elicitation?.mode, 'url');
    assert.equal(setup.upstream.counts().toolCallsByUser.octocat ?? 0, 0, 'nothing ran before the connection');

    await connectThrough(setup, 'dave', String(elicitation?.url), 'b');
    assert.equal(whoamiUser(await result), 'octocat');
    assert.equal(setup.upstream.counts().toolCallsByUser.octocat, 1);
  });

  it('kill -9 of the replica holding a task that waits for consent: the other takes it over, asks again, and completes it once the user connects', async (t) => {
    const { setup, token, taskId, first } = await taskWaitingOnKilledReplica(testScope(t), 'erin');
    // B takes the task over once A's lease has expired and asks again, with a link of its own.
    let task: Json = {};
    let again: { url: string; elicitationId: string } | undefined;
    await eventually(async () => {
      task = await taskAt(setup.b.url, token, taskId);
      again = askedOf(task);
      return ['completed', 'failed', 'cancelled'].includes(String(task.status)) || (again !== undefined && again.elicitationId !== first?.elicitationId);
    });
    assert.equal(task.status, 'input_required', JSON.stringify(task));
    assert.ok(again !== undefined);

    await connectThrough(setup, 'erin', again.url, 'b');
    await eventually(async () => ['completed', 'failed', 'cancelled'].includes(String((task = await taskAt(setup.b.url, token, taskId)).status)));
    assert.equal(task.status, 'completed', JSON.stringify(task));
    assert.equal(whoamiUser(task.result), 'octocat');
  });

  it('a 2025-11-25 client behind the balancer: kill -9 of the replica holding its task waiting for consent; its session goes on at B, which asks again on its tasks/result, and the task completes', async (t) => {
    const scope = testScope(t);
    const setup = await consentReplicas(scope);
    setup.route('a');
    const client = new Client({ name: 'replicas-jo', version: '1.0.0' }, { capabilities: { elicitation: { url: {} }, tasks: { requests: { elicitation: { create: {} } } } } });
    const asked: { url: string; elicitationId: string }[] = [];
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request.params as { url: string; elicitationId: string });
      return { action: 'accept' };
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(setup.resource), { requestInit: { headers: { authorization: `Bearer ${await setup.tokenFor('jo')}` } } }));
    scope.defer(() => client.close());
    const { task } = await client.request({ method: 'tools/call', params: { name: 'tp_whoami', arguments: {}, task: { ttl: 600_000 } } }, CreateTaskResultSchema);
    const lost = client.request({ method: 'tasks/result', params: { taskId: task.taskId } }, CallToolResultSchema).then(
      () => assert.fail('the task ended before anyone connected'),
      (e: unknown) => e,
    );
    await eventually(() => asked.length === 1);
    // Accepted (the user is on the page): the task says what it waits for.
    let waiting: Json = {};
    // The answer's removal and the waiting message are two writes: a poll between them sees the first alone.
    await eventually(async () => {
      waiting = await client.request({ method: 'tasks/get', params: { taskId: task.taskId } }, GetTaskResultSchema);
      return waiting.status === 'working' && waiting.statusMessage !== undefined;
    });
    assert.match(String(waiting.statusMessage), /connect/, JSON.stringify(waiting));

    setup.route('b');
    process.kill(-setup.a.pid, 'SIGKILL');
    await setup.a.exited;
    await lost; // the stream to A broke
    const result = client.request({ method: 'tasks/result', params: { taskId: task.taskId } }, CallToolResultSchema);
    await eventually(() => asked.length === 2);
    assert.notEqual(asked[1]?.elicitationId, asked[0]?.elicitationId);
    await connectThrough(setup, 'jo', String(asked[1]?.url), 'b');
    assert.equal(whoamiUser(await result), 'octocat');
  });

  it('kill -9 of the replica holding a waiting task, and the user connects through the link it made before anyone took the task over: the task runs without asking again', async (t) => {
    const { setup, token, taskId, first } = await taskWaitingOnKilledReplica(testScope(t), 'ivan');
    // The connection lands while nobody holds the task: no wait hears it; whoever takes the task over finds it made.
    await connectThrough(setup, 'ivan', first.url, 'b');
    let task: Json = {};
    await eventually(async () => ['completed', 'failed', 'cancelled'].includes(String((task = await taskAt(setup.b.url, token, taskId)).status)));
    assert.equal(task.status, 'completed', JSON.stringify(task));
    assert.equal(whoamiUser(task.result), 'octocat');
    assert.equal(setup.thirdParty.counts().authorizeRequests, 1, 'the user was not sent to connect again');
  });

  it('one refresh per expiry: 10 concurrent calls on each replica after the token expired, or after the upstream refused it, refresh it once, with no reuse', async (t) => {
    const scope = testScope(t);
    const setup = await consentReplicas(scope);
    await connectWithShortToken(scope, setup, 'frank', 'a', 2);
    const onA = await clientAs(scope, setup, 'frank', 'a');
    const onB = await clientAs(scope, setup, 'frank', 'b');
    // Token requests are held a while: a replica that refreshed without the lock would send its own meanwhile.
    await setup.thirdParty.setMode('slow', { holdMs: 1000 });
    const calls = [onA, onB].flatMap(({ client }) => Array.from({ length: 10 }, () => client.callTool({ name: 'tp_whoami', arguments: {} })));
    const users = (await Promise.all(calls)).map(whoamiUser);
    assert.deepEqual(new Set(users), new Set(['octocat']));
    const counts = setup.thirdParty.counts();
    assert.equal(counts.refreshes, 1, JSON.stringify(counts));
    assert.equal(counts.reuseDetected, 0);
    assert.equal(counts.refreshFailures, 0);
    await setup.thirdParty.setMode('up');

    // The same when the upstream refuses the token before its time (the authorization server expired it): one refresh.
    assert.equal(setup.thirdParty.expireAccessTokens(), 1);
    await setup.thirdParty.setMode('slow', { holdMs: 1000 });
    const again = [onA, onB].flatMap(({ client }) => Array.from({ length: 10 }, () => client.callTool({ name: 'tp_whoami', arguments: {} })));
    assert.deepEqual(new Set((await Promise.all(again)).map(whoamiUser)), new Set(['octocat']));
    const after = setup.thirdParty.counts();
    assert.equal(after.refreshes, 2, JSON.stringify(after));
    assert.equal(after.reuseDetected, 0);
    const [family] = setup.thirdParty.families();
    assert.equal(family?.revoked, false);
    assert.equal(family?.refreshes, 2);
  });

  it('DELETE /connections/tp on A: the next call on B asks for consent again, no cached token served', async (t) => {
    const scope = testScope(t);
    const setup = await consentReplicas(scope);
    const gina = await clientAs(scope, setup, 'gina', 'a');
    await connectThrough(setup, 'gina', (await consentRefusal(gina.client)).url, 'a');
    const onB = await clientAs(scope, setup, 'gina', 'b');
    assert.equal(whoamiUser(await onB.client.callTool({ name: 'tp_whoami', arguments: {} })), 'octocat', 'B served the connection first');
    const before = setup.upstream.counts().toolCallsByUser.octocat;

    const token = await setup.tokenFor('gina');
    const removed = await fetch(`${setup.a.baseUrl}/connections/tp`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
    assert.equal(removed.status, 204);
    const asked = await consentRefusal(onB.client);
    assert.ok(asked.url.startsWith(`${setup.origin}/connect/`));
    assert.equal(setup.upstream.counts().toolCallsByUser.octocat, before, 'nothing reached the upstream after the disconnect');
    assert.equal(setup.thirdParty.families()[0]?.revoked, true, 'the refresh token was revoked at the authorization server');
  });

  it('no token, code, verifier or client secret the authorization server saw is in plaintext in the store or either replica\'s log', async (t) => {
    const scope = testScope(t);
    const setup = await consentReplicas(scope, { logLevel: 'debug' });
    // The store while the flow is under way (state and PKCE verifier kept for the callback, on whichever replica) too.
    setup.thirdParty.setConsent('page');
    let midway = new Map<string, string>();
    await connectWithShortToken(scope, setup, 'hana', 'b', 2, async () => {
      midway = await redisContents(setup.prefix);
    });
    const onA = await clientAs(scope, setup, 'hana', 'a');
    assert.equal(whoamiUser(await onA.client.callTool({ name: 'tp_whoami', arguments: {} })), 'octocat');
    assert.equal(setup.thirdParty.counts().refreshes, 1);
    assert.ok(midway.size > 0, 'the store was read during the flow');
    const stored = await redisContents(setup.prefix);
    assert.ok(stored.size > 0);
    assert.ok([...stored.keys()].some((key) => key.includes('connections')), 'the connection is in the store, sealed');

    // The refresh token the store holds now is sent to the authorization server only when revoked: disconnect to see it.
    const token = await setup.tokenFor('hana');
    assert.equal((await fetch(`${setup.origin}/connections/tp`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } })).status, 204);
    const requests = setup.thirdParty.requests();
    const secrets = new Map<string, string>();
    const keep = (what: string, value: string | undefined): void => {
      if (value !== undefined && value.length >= 8) secrets.set(value, what);
    };
    for (const r of requests) {
      if (r.path === '/token' && r.form.grant_type === 'authorization_code') {
        keep('authorization code', r.form.code);
        keep('code verifier', r.form.code_verifier);
      }
      if (r.path === '/token' && r.form.grant_type === 'refresh_token') keep('refresh token', r.form.refresh_token);
      if (r.path === '/revoke') keep('revoked token', r.form.token);
    }
    for (const accessToken of Object.keys(setup.upstream.counts().requestsByToken)) keep('access token', accessToken);
    for (const client of setup.thirdParty.clients()) keep('registered client secret', client.secret);
    const kinds = new Set(secrets.values());
    for (const kind of ['authorization code', 'code verifier', 'refresh token', 'revoked token', 'access token', 'registered client secret']) assert.ok(kinds.has(kind), `saw no ${kind}: ${[...kinds].join(', ')}`);
    assert.ok([...secrets.values()].filter((k) => k === 'access token').length >= 2, 'the first access token and the refreshed one');

    const logs = { a: setup.a.stdout(), b: setup.b.stdout() };
    assert.ok(logs.a.length > 0 && logs.b.length > 0);
    for (const [secret, what] of secrets) {
      for (const [when, contents] of [['after', stored], ['during the flow', midway]] as const) {
        for (const [key, value] of contents) assert.ok(!key.includes(secret) && !value.includes(secret), `the ${what} in plaintext in the store ${when}, at ${key}`);
      }
      for (const [replica, log] of Object.entries(logs)) assert.ok(!log.includes(secret), `the ${what} in replica ${replica}'s log`);
    }
  });
});
