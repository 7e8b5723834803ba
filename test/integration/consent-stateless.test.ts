// Per-user consent on the 2026-07-28 wire (issue 41), from outside: hand-written stateless requests at the gateway's
// MCP endpoint with a bearer token, a browser made of plain HTTP at the links they carry, the front door's issuer
// signing that browser in, a third-party authorization server and the MCP upstream it protects. With the Tasks
// extension the call is a task that waits `input_required` with a URL elicitation and resumes by itself once the user
// connects (or fails when they decline through tasks/update); without it, the revision's input-required answer carries
// the URL elicitation and the retried call runs once connected; no URL elicitation: the link in a tool error; an API
// key: an error without a link.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, type ApplicationInputRequest, type ApplicationInputResult } from '@modelcontextprotocol/ext-tasks/client';
import type { JsonValue } from '@modelcontextprotocol/ext-tasks/core';
import { USER_COOKIE } from '../fixtures/third-party-as.js';
import { consentSetup, type ConsentSetup } from '../helpers/consent-gateway.js';
import { eventually, testScope, textOf, type Json, type TestScope } from '../helpers/harness.js';
import { sendRev2026, STATELESS_VERSION, TASKS_EXTENSION, type Rev2026Response } from '../helpers/stateless-wire.js';

const URL_ELICITATION: Json = { elicitation: { url: {} } };
const URL_ELICITATION_TASKS: Json = { ...URL_ELICITATION, extensions: { [TASKS_EXTENSION]: {} } };
const CONSENT_KEY = 'elicitation-consent';
const API_KEY = 'ci-key-0123456789abcdef';

function show(r: Rev2026Response): string {
  return `HTTP ${r.status}: ${JSON.stringify(r.messages)}`;
}

/** A 2026-07-28 request as `bearer` (a user's access token or an API key), declaring `capabilities`. */
function send(setup: ConsentSetup, bearer: string, method: string, params: Json, capabilities: Json): Promise<Rev2026Response> {
  return sendRev2026(setup.resource, method, params, { capabilities, headers: { authorization: `Bearer ${bearer}` } });
}

/** tasks/get, polled (bounded) until the task has one of `statuses`. */
async function untilTask(setup: ConsentSetup, token: string, taskId: string, statuses: string[]): Promise<Json> {
  let task: Json = {};
  await eventually(async () => {
    const r = await send(setup, token, 'tasks/get', { taskId }, URL_ELICITATION_TASKS);
    assert.equal(r.error, undefined, show(r));
    task = r.result as Json;
    return statuses.includes(String(task.status));
  });
  return task;
}

/** The one URL elicitation of an inputRequests map: its key and params, checked for the shape SEP-1036 gives it. */
function urlElicitationOf(setup: ConsentSetup, inputRequests: unknown): { key: string; url: string; elicitationId: string; message: string } {
  const entries = Object.entries((inputRequests ?? {}) as Record<string, Json>);
  assert.equal(entries.length, 1, JSON.stringify(inputRequests));
  const [key, request] = entries[0] as [string, Json];
  assert.equal(request.method, 'elicitation/create');
  const params = request.params as Json;
  assert.equal(params.mode, 'url');
  assert.match(String(params.url), new RegExp(`^${setup.origin}/connect/[A-Za-z0-9_-]{20,}$`));
  assert.equal(typeof params.elicitationId, 'string');
  assert.ok(String(params.elicitationId).length > 0);
  assert.match(String(params.message), /tp/);
  return { key, url: String(params.url), elicitationId: String(params.elicitationId), message: String(params.message) };
}

/** What a user does with a link: opens it in their browser (signed in at the issuer, `thirdPartyUser` at the third party) and goes on to the end. */
async function connectThrough(setup: ConsentSetup, user: string, link: string, thirdPartyUser: string): Promise<void> {
  const browser = setup.browserOf(user);
  browser.setCookie(setup.thirdParty.issuer, USER_COOKIE, thirdPartyUser);
  const consent = await browser.open(link);
  assert.equal(consent.status, 200, consent.text);
  const done = await browser.follow(consent, /\/authorize\?/);
  assert.equal(done.status, 200, done.text);
  assert.equal(new URL(done.url).pathname, '/oauth/callback');
}

/** The third-party user a whoami result names. */
function whoamiUser(result: unknown): string {
  return (JSON.parse(textOf(result)) as { user: string }).user;
}

/**
 * A Tasks-extension tools/call to the consent upstream as `user`, who has not connected: the task it makes, once it
 * waits `input_required` with the URL elicitation (`asked`).
 */
async function waitingTask(scope: TestScope, user: string): Promise<{ setup: ConsentSetup; token: string; taskId: string; asked: ReturnType<typeof urlElicitationOf> }> {
  const setup = await consentSetup(scope);
  const token = await setup.tokenFor(user);
  const created = await send(setup, token, 'tools/call', { name: 'tp_whoami', arguments: {} }, URL_ELICITATION_TASKS);
  assert.equal(created.result?.resultType, 'task', show(created));
  const taskId = String(created.result?.taskId);
  const waiting = await untilTask(setup, token, taskId, ['input_required', 'completed', 'failed', 'cancelled']);
  assert.equal(waiting.status, 'input_required', JSON.stringify(waiting));
  return { setup, token, taskId, asked: urlElicitationOf(setup, waiting.inputRequests) };
}

describe('per-user consent on 2026-07-28 (issue 41)', () => {
  it('Tasks extension: the task waits input_required with a URL elicitation and resumes by itself, as the user, once they connect', async (t) => {
    const { setup, token, taskId, asked } = await waitingTask(testScope(t), 'alice');
    assert.equal(setup.upstream.counts().toolCallsByUser['alice-gh'] ?? 0, 0, 'nothing ran before the connection');

    // No tasks/update: the connection landing is what resumes the task.
    await connectThrough(setup, 'alice', asked.url, 'alice-gh');
    const done = await untilTask(setup, token, taskId, ['completed', 'failed', 'cancelled']);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(whoamiUser(done.result), 'alice-gh');
    assert.equal('inputRequests' in done, false);
    assert.equal(setup.upstream.counts().toolCallsByUser['alice-gh'], 1);
  });

  it('Tasks extension: declining the URL elicitation through tasks/update fails the task saying the user declined', async (t) => {
    const { setup, token, taskId, asked: { key } } = await waitingTask(testScope(t), 'bob');

    const ack = await send(setup, token, 'tasks/update', { taskId, inputResponses: { [key]: { action: 'decline' } } }, URL_ELICITATION_TASKS);
    assert.deepEqual(ack.result, { resultType: 'complete' }, show(ack));
    const failed = await untilTask(setup, token, taskId, ['completed', 'failed', 'cancelled']);
    assert.equal(failed.status, 'failed', JSON.stringify(failed));
    assert.match(String((failed.error as Json).message), /declined/);
    assert.deepEqual(setup.upstream.counts().toolCallsByUser, {}, 'nothing ran');
  });

  it('Tasks extension: accepting through tasks/update before connecting leaves the task waiting for the connection, then it completes', async (t) => {
    const { setup, token, taskId, asked } = await waitingTask(testScope(t), 'heidi');

    const ack = await send(setup, token, 'tasks/update', { taskId, inputResponses: { [asked.key]: { action: 'accept' } } }, URL_ELICITATION_TASKS);
    assert.deepEqual(ack.result, { resultType: 'complete' }, show(ack));
    const working = await untilTask(setup, token, taskId, ['working', 'completed', 'failed', 'cancelled']);
    assert.equal(working.status, 'working', JSON.stringify(working));
    assert.equal(setup.upstream.counts().toolCallsByUser['heidi-gh'] ?? 0, 0, 'an accepted question is no connection');

    await connectThrough(setup, 'heidi', asked.url, 'heidi-gh');
    const done = await untilTask(setup, token, taskId, ['completed', 'failed', 'cancelled']);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(whoamiUser(done.result), 'heidi-gh');
  });

  it('the ext-tasks library: the application is asked the URL elicitation, the user connects, and the task completes as them', async (t) => {
    const scope = testScope(t);
    const setup = await consentSetup(scope);
    const token = await setup.tokenFor('frank');
    const clientInfo = { name: 'consent-ext-tasks', version: '1.0.0' };
    const client = new Client(clientInfo, { capabilities: URL_ELICITATION, versionNegotiation: { mode: { pin: STATELESS_VERSION } } });
    scope.defer(() => client.close());
    await client.connect(new StreamableHTTPClientTransport(new URL(setup.resource), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    const asked: ApplicationInputRequest[] = [];
    const session = createTaskSessionFromClient(client, {
      endpointId: 'consent-stateless',
      rawDispatch: async (request: JsonValue) => {
        const { method, params = {} } = request as { method: string; params?: Json };
        const { _meta: meta, ...rest } = params;
        const answer = await sendRev2026(setup.resource, method, rest, { meta: meta as Json, headers: { authorization: `Bearer ${token}` } });
        if (answer.error !== undefined) return { kind: 'error' as const, error: answer.error as never };
        return { kind: 'result' as const, result: answer.result as JsonValue };
      },
      v2RequestFraming: { protocolVersion: STATELESS_VERSION, clientInfo, clientCapabilities: URL_ELICITATION_TASKS as Record<string, JsonValue> },
      // What an application does with a URL elicitation: shows the link; here the user opens it and connects.
      onInputRequest: async <T extends ApplicationInputRequest>(request: T): Promise<ApplicationInputResult<T>> => {
        asked.push(request);
        const params = request.params as Json;
        assert.equal(params.mode, 'url');
        await connectThrough(setup, 'frank', String(params.url), 'frank-gh');
        return { action: 'accept' } as unknown as ApplicationInputResult<T>;
      },
    });
    scope.defer(() => session.close());
    const execution = await session.callTool('tp_whoami', {});
    assert.equal(execution.kind, 'task');
    const { outcome } = await execution.settle();
    assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
    assert.equal(whoamiUser((outcome as { result: Json }).result), 'frank-gh');
    assert.equal(asked.length, 1);
    assert.equal(asked[0]?.kind, 'elicitation');
  });

  it('without the extension: the input-required answer carries the URL elicitation; once connected, the retried call runs once', async (t) => {
    const scope = testScope(t);
    const setup = await consentSetup(scope);
    const token = await setup.tokenFor('carol');
    const first = await send(setup, token, 'tools/call', { name: 'tp_whoami', arguments: {} }, URL_ELICITATION);
    assert.equal(first.error, undefined, show(first));
    assert.equal(first.result?.resultType, 'input_required', show(first));
    const asked = urlElicitationOf(setup, first.result?.inputRequests);
    assert.equal(asked.key, CONSENT_KEY);
    assert.equal(setup.upstream.counts().toolCallsByUser['carol-gh'] ?? 0, 0);

    await connectThrough(setup, 'carol', asked.url, 'carol-gh');
    const retried = await send(setup, token, 'tools/call', { name: 'tp_whoami', arguments: {}, inputResponses: { [asked.key]: { action: 'accept' } } }, URL_ELICITATION);
    assert.equal(retried.error, undefined, show(retried));
    assert.equal(retried.result?.resultType, 'complete', show(retried));
    assert.equal(whoamiUser(retried.result), 'carol-gh');
    assert.equal(setup.upstream.counts().toolCallsByUser['carol-gh'], 1, 'the retried call ran once');

    // Disconnected: the next call asks again, with a fresh link.
    const removed = await fetch(`${setup.origin}/connections/tp`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
    assert.equal(removed.status, 204);
    const again = await send(setup, token, 'tools/call', { name: 'tp_whoami', arguments: {} }, URL_ELICITATION);
    assert.equal(again.result?.resultType, 'input_required', show(again));
    assert.notEqual(urlElicitationOf(setup, again.result?.inputRequests).url, asked.url);
    assert.equal(setup.upstream.counts().toolCallsByUser['carol-gh'], 1);
  });

  it('without the extension: a retry that declines the elicitation is an error saying so, and nothing runs', async (t) => {
    const scope = testScope(t);
    const setup = await consentSetup(scope);
    const token = await setup.tokenFor('dave');
    const first = await send(setup, token, 'tools/call', { name: 'tp_whoami', arguments: {} }, URL_ELICITATION);
    assert.equal(first.result?.resultType, 'input_required', show(first));
    const { key } = urlElicitationOf(setup, first.result?.inputRequests);
    const declined = await send(setup, token, 'tools/call', { name: 'tp_whoami', arguments: {}, inputResponses: { [key]: { action: 'decline' } } }, URL_ELICITATION);
    assert.match(String(declined.error?.message), /declined/, show(declined));
    assert.deepEqual(setup.upstream.counts().toolCallsByUser, {});
  });

  it('a client that declared no URL elicitation gets a tool error whose text holds the absolute link, which connects it', async (t) => {
    const scope = testScope(t);
    const setup = await consentSetup(scope);
    const token = await setup.tokenFor('erin');
    const refused = await send(setup, token, 'tools/call', { name: 'tp_whoami', arguments: {} }, {});
    assert.equal(refused.error, undefined, show(refused));
    assert.equal(refused.result?.resultType, 'complete', show(refused));
    assert.equal(refused.result?.isError, true);
    const link = new RegExp(`(${setup.origin}/connect/[A-Za-z0-9_-]+)`).exec(textOf(refused.result))?.[1];
    assert.ok(link !== undefined, textOf(refused.result));

    await connectThrough(setup, 'erin', link, 'erin-gh');
    const ran = await send(setup, token, 'tools/call', { name: 'tp_whoami', arguments: {} }, {});
    assert.equal(ran.result?.isError, undefined, show(ran));
    assert.equal(whoamiUser(ran.result), 'erin-gh');
  });

  it('Tasks extension without URL elicitation: the task ends with the link in a tool error', async (t) => {
    const scope = testScope(t);
    const setup = await consentSetup(scope);
    const token = await setup.tokenFor('grace');
    const tasksOnly: Json = { extensions: { [TASKS_EXTENSION]: {} } };
    const created = await send(setup, token, 'tools/call', { name: 'tp_whoami', arguments: {} }, tasksOnly);
    assert.equal(created.result?.resultType, 'task', show(created));
    const done = await untilTask(setup, token, String(created.result?.taskId), ['completed', 'failed', 'cancelled']);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal((done.result as Json).isError, true);
    assert.match(textOf(done.result), new RegExp(`${setup.origin}/connect/[A-Za-z0-9_-]{20,}`));
    assert.deepEqual(setup.upstream.counts().toolCallsByUser, {});
  });

  it('an API-key caller gets an error and no link, with or without the extension', async (t) => {
    const scope = testScope(t);
    const setup = await consentSetup(scope, { apiKeys: [{ principal: 'ci', key: API_KEY }] });
    for (const capabilities of [URL_ELICITATION, URL_ELICITATION_TASKS, {}]) {
      const refused = await send(setup, API_KEY, 'tools/call', { name: 'tp_whoami', arguments: {} }, capabilities);
      assert.equal(refused.result, undefined, show(refused));
      assert.match(String(refused.error?.message), /sign in with OAuth/, show(refused));
      assert.doesNotMatch(JSON.stringify(refused.messages), /\/connect\//);
    }
    assert.deepEqual(setup.upstream.counts().toolCallsByUser, {});
  });
});
