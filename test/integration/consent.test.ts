// Per-user consent through the gateway (issue 41), from outside: real SDK clients at the MCP endpoint, a browser made
// of plain HTTP at the links they are given, the front door's issuer signing that browser in, a third-party
// authorization server and the MCP upstream it protects. What a caller without a connection gets in each shape of
// client, the link's single user, a task that waits for the connection and resumes, the connections API.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema, McpError, UrlElicitationRequiredError } from '@modelcontextprotocol/sdk/types.js';
import { consentSetup, type ConsentSetup } from '../helpers/consent-gateway.js';
import { eventually, testScope, textOf, type TestScope } from '../helpers/harness.js';

interface Connected {
  client: Client;
  elicitations: { mode?: string; url?: string; elicitationId?: string; message?: string }[];
  completed: string[];
}

/** An SDK client as `user`, declaring URL elicitation (or not), recording what the gateway asks and tells it. */
async function clientAs(scope: TestScope, setup: ConsentSetup, user: string, options: { url?: boolean; tasks?: boolean } = {}): Promise<Connected> {
  const token = await setup.tokenFor(user);
  const capabilities: Record<string, unknown> = options.url === false ? {} : { elicitation: { url: {} } };
  if (options.tasks === true) capabilities.tasks = { requests: { elicitation: { create: {} } } };
  const client = new Client({ name: `consent-${user}`, version: '1.0.0' }, { capabilities });
  const connected: Connected = { client, elicitations: [], completed: [] };
  if (options.url !== false) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      connected.elicitations.push(request.params as Connected['elicitations'][number]);
      return { action: 'accept' };
    });
  }
  client.fallbackNotificationHandler = async (notification) => {
    if (notification.method === 'notifications/elicitation/complete') connected.completed.push(String((notification.params as { elicitationId?: unknown }).elicitationId));
  };
  await client.connect(new StreamableHTTPClientTransport(new URL(setup.resource), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  scope.defer(() => client.close());
  return connected;
}

/** The URL elicitation a plain call was refused with (-32042). */
async function consentRefusal(client: Client, tool = 'tp_whoami'): Promise<{ url: string; elicitationId: string; message: string }> {
  const error = await client.callTool({ name: tool, arguments: {} }).then(
    () => assert.fail('the call ran without a connection'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof UrlElicitationRequiredError, `expected -32042, got ${String(error)}`);
  const [elicitation] = error.elicitations;
  assert.ok(elicitation !== undefined && elicitation.mode === 'url');
  return { url: elicitation.url, elicitationId: elicitation.elicitationId, message: error.message };
}

/** What a user does with a link: open it in their browser, read the consent page, go on, come back connected. */
async function connectThrough(setup: ConsentSetup, user: string, link: string): Promise<{ consentPage: string; done: string }> {
  const browser = setup.browserOf(user);
  const consent = await browser.open(link);
  assert.equal(consent.status, 200, consent.text);
  const done = await browser.follow(consent, new RegExp(`^${setup.thirdParty.authorizationEndpoint.replace(/[.?*+^$()[\]{}|\\]/g, '\\$&')}`));
  assert.equal(done.status, 200, done.text);
  return { consentPage: consent.text, done: done.text };
}

describe('per-user consent (issue 41)', () => {
  it('a 2025-11-25 plain call without a connection gets -32042 with an absolute link; once the user connects, calls run as them', async (t) => {
    const scope = testScope(t);
    const setup = await consentSetup(scope, { authorizationCode: { scopes: ['repo', 'read:user'] } });
    const alice = await clientAs(scope, setup, 'alice');
    const asked = await consentRefusal(alice.client);
    assert.match(asked.url, new RegExp(`^${setup.origin}/connect/[A-Za-z0-9_-]{20,}$`));
    // Calling again (or a flood of calls) before connecting gets the same open link, not a new stored one per call.
    const again = await Promise.all(Array.from({ length: 20 }, () => consentRefusal(alice.client)));
    assert.deepEqual(new Set(again.map((a) => a.url)), new Set([asked.url]));
    assert.equal(setup.upstream.counts().toolCallsByUser.octocat ?? 0, 0, 'nothing ran');

    const { consentPage } = await connectThrough(setup, 'alice', asked.url);
    const asHost = new URL(setup.thirdParty.issuer).host;
    assert.ok(consentPage.includes('tp') && consentPage.includes(asHost) && consentPage.includes('repo'), consentPage);
    await eventually(() => alice.completed.includes(asked.elicitationId));

    const result = await alice.client.callTool({ name: 'tp_whoami', arguments: {} });
    assert.match(textOf(result), /octocat/);
  });

  it("another user's browser opening the link connects nothing: 403, nothing sent to the authorization server, the link still works for its user", async (t) => {
    const scope = testScope(t);
    const setup = await consentSetup(scope);
    const alice = await clientAs(scope, setup, 'alice');
    const asked = await consentRefusal(alice.client);
    setup.thirdParty.resetCounts();
    const bob = setup.browserOf('bob');
    const page = await bob.open(asked.url);
    assert.equal(page.status, 403, page.text);
    assert.equal(setup.thirdParty.counts().authorizeRequests, 0);
    assert.equal(setup.thirdParty.counts().codeExchanges, 0);
    await connectThrough(setup, 'alice', asked.url);
    assert.match(textOf(await alice.client.callTool({ name: 'tp_whoami', arguments: {} })), /octocat/);
  });

  it('a client that declared no URL elicitation gets a tool error whose text holds the absolute link', async (t) => {
    const scope = testScope(t);
    const setup = await consentSetup(scope);
    const plain = await clientAs(scope, setup, 'carol', { url: false });
    const result = await plain.client.callTool({ name: 'tp_whoami', arguments: {} });
    assert.equal(result.isError, true);
    const link = /(http:\/\/127\.0\.0\.1:\d+\/connect\/[A-Za-z0-9_-]+)/.exec(textOf(result))?.[1];
    assert.ok(link !== undefined, textOf(result));
    await connectThrough(setup, 'carol', link);
    assert.match(textOf(await plain.client.callTool({ name: 'tp_whoami', arguments: {} })), /octocat/);
  });

  it('a task started before the user connected asks with a URL elicitation and resumes by itself when they do', async (t) => {
    const scope = testScope(t);
    const setup = await consentSetup(scope);
    const dave = await clientAs(scope, setup, 'dave', { tasks: true });
    const created = await dave.client.request(
      { method: 'tools/call', params: { name: 'tp_whoami', arguments: {}, task: { ttl: 600_000 } } },
      (await import('@modelcontextprotocol/sdk/types.js')).CreateTaskResultSchema,
    );
    const taskId = created.task.taskId;
    // tasks/result blocks until the task ends; on the way it delivers the task's input request (the URL elicitation).
    const result = dave.client.request({ method: 'tasks/result', params: { taskId } }, CallToolResultSchema);
    await eventually(() => dave.elicitations.length > 0);
    const [elicitation] = dave.elicitations;
    assert.equal(elicitation?.mode, 'url');
    await connectThrough(setup, 'dave', String(elicitation?.url));
    assert.match(textOf(await result), /octocat/);
  });

  it('GET /connections lists the caller\'s own; DELETE forgets it and the next call asks again; an API-key caller gets no link', async (t) => {
    const scope = testScope(t);
    const setup = await consentSetup(scope, { apiKeys: [{ principal: 'ci', key: 'ci-key-0123456789abcdef' }] });
    const erin = await clientAs(scope, setup, 'erin');
    const token = await setup.tokenFor('erin');
    const list = async () => (await (await fetch(`${setup.origin}/connections`, { headers: { authorization: `Bearer ${token}` } })).json()) as { connections: { upstream: string; connected: boolean; connectUrl?: string }[] };
    const before = await list();
    assert.equal(before.connections.length, 1);
    assert.equal(before.connections[0]?.connected, false);
    assert.match(String(before.connections[0]?.connectUrl), /\/connect\//);
    await connectThrough(setup, 'erin', String(before.connections[0]?.connectUrl));
    assert.equal((await list()).connections[0]?.connected, true);
    assert.match(textOf(await erin.client.callTool({ name: 'tp_whoami', arguments: {} })), /octocat/);

    const removed = await fetch(`${setup.origin}/connections/tp`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
    assert.equal(removed.status, 204);
    assert.equal((await fetch(`${setup.origin}/connections/tp`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } })).status, 404);
    await consentRefusal(erin.client);
    assert.ok(setup.thirdParty.counts().revocations >= 1);

    const ci = new Client({ name: 'ci', version: '1.0.0' }, { capabilities: { elicitation: { url: {} } } });
    await ci.connect(new StreamableHTTPClientTransport(new URL(setup.resource), { requestInit: { headers: { authorization: 'Bearer ci-key-0123456789abcdef' } } }));
    scope.defer(() => ci.close());
    const refused = await ci.callTool({ name: 'tp_whoami', arguments: {} }).then(
      (r) => textOf(r),
      (e: unknown) => (e instanceof UrlElicitationRequiredError ? assert.fail('an API key got a link') : String(e)),
    );
    assert.match(refused, /sign in with OAuth/);
    assert.doesNotMatch(refused, /\/connect\//);
  });

  it('refuses a replayed callback and one without the browser that started the flow', async (t) => {
    const scope = testScope(t);
    const setup = await consentSetup(scope, { thirdParty: { consent: 'page' } });
    const frank = await clientAs(scope, setup, 'frank');
    const asked = await consentRefusal(frank.client);
    const browser = setup.browserOf('frank');
    const consent = await browser.open(asked.url);
    // The authorization server's page: approve, and catch the redirect to the callback instead of following it.
    const authorize = /href="([^"]+)"/.exec(consent.text)?.[1]?.replace(/&amp;/g, '&');
    assert.ok(authorize !== undefined);
    const approvePage = await browser.open(authorize);
    const approved = await fetch(new URL((/action="([^"]*)"/.exec(approvePage.text)?.[1] ?? '').replace(/&amp;/g, '&'), approvePage.url), {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams([...approvePage.text.matchAll(/name="([^"]+)" value="([^"]*)"/g)].map((m) => [m[1] ?? '', (m[2] ?? '').replace(/&amp;/g, '&')]).concat([['decision', 'approve']])).toString(),
    });
    const callback = approved.headers.get('location');
    assert.ok(callback !== null && callback.startsWith(`${setup.origin}/oauth/callback`), String(callback));
    // Without the state cookie (another browser): refused, nothing exchanged.
    const foreign = await fetch(callback, { redirect: 'manual' });
    assert.ok(foreign.status >= 400 && foreign.status < 500, String(foreign.status));
    assert.equal(setup.thirdParty.counts().codeExchanges, 0);
    // The flow is used up: the right browser coming late is refused too, and a fresh link is needed.
    const late = await browser.open(callback);
    assert.ok(late.status >= 400 && late.status < 500, String(late.status));
    assert.equal(setup.thirdParty.counts().codeExchanges, 0);
    await assert.rejects(frank.client.callTool({ name: 'tp_whoami', arguments: {} }), (e: unknown) => e instanceof McpError && e.code === -32042);
  });
});
