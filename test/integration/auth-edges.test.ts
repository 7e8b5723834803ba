// Identity edges (issue 20, item 6), each against real parts: a gateway process or an in-process gateway, the
// local OAuth authorization server fixture, a stdio fixture upstream, real Redis, SDK clients and raw HTTP.
// - an API key and an OAuth subject of the same name are two principals (sessions, tasks, rules);
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { startAuthServer, type AuthServer } from '../fixtures/auth-server.js';
import { freePort } from '../fixtures/spawn.js';
import { modern, suiteScope, testScope, TASKS_CAPABILITIES, type Json, type TestGateway, type TestScope } from './harness.js';

const ALICE_KEY = 'alice-key-0123456789abcdef';
const CAROL_KEY = 'carol-key-0123456789abcdef';
const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

/** A raw POST, for what an SDK client would hide (status codes, WWW-Authenticate). */
async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; json: unknown }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, json: /^[[{]/.test(text) ? JSON.parse(text) : undefined };
}

/** An SDK client of the 2025-11-25 revision sending `headers` with every request. */
async function legacyClient(scope: TestScope, url: string, headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'auth-edges', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  scope.defer(() => client.close());
  return client;
}

/** A local authorization server and an in-process gateway trusting it, `resource` the gateway's own URL. */
async function oauthGateway(scope: TestScope, auth: Json & { oauth?: Json }, tasks: Json = { defaults: { mode: 'optional', pollIntervalMs: 100, taskAfterMs: 0 } }): Promise<{ issuer: AuthServer; gateway: TestGateway; resource: string }> {
  const issuer = await startAuthServer();
  scope.defer(() => issuer.close());
  const port = await freePort();
  const resource = `http://127.0.0.1:${port}/mcp`;
  const upstream = await scope.upstream('stdio');
  const gateway = await scope.gateway({
    listen: { host: '127.0.0.1', port, path: '/mcp' },
    upstreams: { fx: upstream.config },
    tasks,
    auth: { ...auth, resource, oauth: { ...auth.oauth, issuer: issuer.issuer } },
  });
  return { issuer, gateway, resource };
}

describe('an API key and an OAuth subject of the same name are two principals', () => {
  const scope = suiteScope();
  let issuer: AuthServer;
  let gateway: TestGateway;
  let resource: string;

  before(async () => {
    ({ issuer, gateway, resource } = await oauthGateway(scope, {
      apiKeys: [{ principal: 'alice', key: ALICE_KEY }, { principal: 'carol', key: CAROL_KEY }],
      oauth: {},
      access: [
        { principals: ['key:alice'], tools: ['*'] },
        { principals: ['oauth:alice'], tools: ['greet'] },
        { principals: ['carol'], tools: ['whoami'] },
      ],
    }));
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
    const keyClient = await legacyClient(scope, gateway.url, bearer(ALICE_KEY));
    const created = await keyClient.request({ method: 'tools/call', params: { name: 'slow', arguments: { ms: 10 }, task: {} } }, CreateTaskResultSchema);
    const tokenClient = await legacyClient(scope, gateway.url, bearer(aliceToken));
    await assert.rejects(tokenClient.experimental.tasks.getTask(created.task.taskId), /Task not found/);
    assert.ok(!(await tokenClient.experimental.tasks.listTasks()).tasks.some((task) => task.taskId === created.task.taskId));
    // The token may not call slow at all (oauth:alice is granted greet only): a 2026 task made by the key.
    const modernTask = await modern(gateway.url, 'tools/call', { name: 'slow', arguments: { ms: 10 } }, { capabilities: TASKS_CAPABILITIES, headers: bearer(ALICE_KEY) });
    assert.equal(modernTask.result?.resultType, 'task', JSON.stringify(modernTask.response));
    const foreign = await modern(gateway.url, 'tasks/get', { taskId: modernTask.result?.taskId }, { capabilities: TASKS_CAPABILITIES, headers: bearer(aliceToken) });
    assert.match(String(foreign.error?.message), /Task not found/);
  });

  test('rules: key:alice and oauth:alice are granted apart; a bare name is granted to both kinds', async (t) => {
    const scope = testScope(t);
    const names = async (credential: string): Promise<string[]> =>
      (await (await legacyClient(scope, gateway.url, bearer(credential))).listTools()).tools.map((tool) => tool.name).sort();
    const keyTools = await names(ALICE_KEY);
    assert.ok(keyTools.includes('crash') && keyTools.includes('greet') && keyTools.length > 3, keyTools.join());
    assert.deepEqual(await names(await token('alice')), ['greet']);
    assert.deepEqual(await names(CAROL_KEY), ['whoami']);
    assert.deepEqual(await names(await token('carol')), ['whoami']);
    assert.deepEqual(await names(await token('key:alice')), [], 'a subject shaped like a qualified name is just a subject');
  });
});
