// Forward only what the upstream listed (issue 31, item 1; DESIGN invariant 11), from outside: a gateway process
// in front of upstreams that look names up leniently or strictly (test/fixtures/names-server.ts), real SDK clients
// (2025-11-25) and hand-written 2026-07-28 requests. A name that is not, byte for byte, one the upstream listed
// and the selection exposes is unknown, in both revisions, as a task and in a batch, and reaches no upstream; a
// name the upstream adds later works, after list_changed and on a miss without it.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { request } from 'undici';
import { MISS_REFRESH_INTERVAL_MS } from '../../src/gateway/listed-refresh.js';
import { nodeArgs, REPO_ROOT, type GatewayChild } from '../fixtures/spawn.js';
import { eventually, suiteScope, testScope, textOf, type Json } from '../helpers/harness.js';
import { sendRev2026, TASKS_CAPABILITIES, type Rev2026Options } from '../helpers/stateless-wire.js';

const NAMES_FIXTURE = join(REPO_ROOT, 'test/fixtures/names-server.ts');

function namesUpstream(lookup: 'lenient' | 'strict', extra: Json = {}): Json {
  return { transport: 'stdio', command: process.execPath, args: [...nodeArgs(NAMES_FIXTURE), '--lookup', lookup], cwd: REPO_ROOT, isolation: 'shared', ...extra };
}

const HIDDEN = { tools: { exclude: ['secret'] }, prompts: { exclude: ['secret'] }, resources: { exclude: ['test://secret'] } };
/** Spellings of the excluded `secret` a lenient upstream would take for it, and a name nobody listed. */
const VARIANTS = ['SECRET', 'secret ', ' secret', 'Secret', 'ｓｅｃｒｅｔ', 'secret\u0000', 'nowhere'];
const URI_VARIANTS = ['TEST://SECRET', 'test://secret ', 'test://ｓｅｃｒｅｔ', 'test://Secret', 'test://secret', 'test://item/a/b', 'test://item/', 'test://item/1/', 'test://nowhere'];

/** What an upstream was asked for (its own record), read through the gateway. */
async function receivedBy(client: Client, upstream: string): Promise<{ names: string[]; lists: number }> {
  return (await client.callTool({ name: `${upstream}__received`, arguments: {} })).structuredContent as { names: string[]; lists: number };
}

/** Whether a name an upstream received is one of the spellings this suite must keep from it. */
function isRefusedSpelling(name: string): boolean {
  return /secret/.test(name.normalize('NFKC').toLowerCase()) || name.includes('nowhere') || /^test:\/\/item\/(a\/b|1\/|)$/.test(name);
}

/** Mcp-Name as a 2026-07-28 client sends a value that is not plain ASCII or has edge whitespace. */
function mcpName(value: string): Record<string, string> {
  return { 'mcp-name': `=?base64?${Buffer.from(value).toString('base64')}?=` };
}

describe('names an upstream did not list', () => {
  const scope = suiteScope();
  let gateway: GatewayChild;

  before(async () => {
    gateway = await scope.spawnGateway({
      config: {
        upstreams: { len: namesUpstream('lenient', HIDDEN), strict: namesUpstream('strict', HIDDEN) },
        tasks: { rules: [{ match: '*', mode: 'optional', taskAfterMs: 0 }] },
      },
    });
  });

  test('2025-11-25: excluded and unlisted spellings are unknown tools, prompts and resources, plainly and as tasks', async (t) => {
    const { client } = await testScope(t).client(gateway.url);
    assert.match(textOf(await client.callTool({ name: 'strict__echo', arguments: { x: 1 } })), /echo/, 'a listed tool works');
    for (const upstream of ['len', 'strict']) {
      for (const variant of ['secret', ...VARIANTS]) {
        const name = `${upstream}__${variant}`;
        await assert.rejects(client.callTool({ name, arguments: {} }), (error: Error) => error.message.includes(`Unknown tool: ${name}`), JSON.stringify(name));
        await assert.rejects(
          client.request({ method: 'tools/call', params: { name, arguments: {}, task: { ttl: 60_000 } } }, CreateTaskResultSchema),
          (error: Error) => error.message.includes(`Unknown tool: ${name}`),
          `as a task: ${JSON.stringify(name)}`,
        );
        await assert.rejects(client.getPrompt({ name }), (error: Error) => error.message.includes(`Unknown prompt: ${name}`), JSON.stringify(name));
      }
    }
    for (const uri of URI_VARIANTS) await assert.rejects(client.readResource({ uri }), /Resource not found/, JSON.stringify(uri));
    assert.match(JSON.stringify((await client.readResource({ uri: 'test://item/42' })).contents), /resource test:\/\/item\/42/, 'a template expansion is read');
    assert.match(JSON.stringify((await client.getPrompt({ name: 'len__hello' })).messages), /prompt hello/, 'a listed prompt works');
    for (const upstream of ['len', 'strict']) {
      const { names } = await receivedBy(client, upstream);
      assert.deepEqual(names.filter(isRefusedSpelling), [], `upstream ${upstream} received none of them`);
    }
  });

  test('2026-07-28: the same spellings are unknown, plainly, as tasks and as MRTR retries', async () => {
    const calls: [string, Json, Rev2026Options][] = [];
    for (const upstream of ['len', 'strict']) {
      for (const variant of ['secret', ...VARIANTS]) {
        const name = `${upstream}__${variant}`;
        const headers = mcpName(name);
        calls.push(['tools/call', { name, arguments: {} }, { headers }]);
        calls.push(['tools/call', { name, arguments: {} }, { headers, capabilities: TASKS_CAPABILITIES }]);
        calls.push(['tools/call', { name, arguments: {}, inputResponses: {}, requestState: 'forged' }, { headers }]);
        calls.push(['prompts/get', { name }, { headers }]);
      }
    }
    for (const uri of URI_VARIANTS) calls.push(['resources/read', { uri }, { headers: mcpName(uri) }]);
    for (const [method, params, options] of calls) {
      const answer = await sendRev2026(gateway.url, method, params, options);
      const target = String(params.name ?? params.uri);
      const expected = method === 'tools/call' ? `Unknown tool: ${target}` : method === 'prompts/get' ? `Unknown prompt: ${target}` : `Resource not found: ${target}`;
      assert.equal(answer.error?.message, expected, `${method} ${JSON.stringify(target)}: ${JSON.stringify(answer.response)}`);
    }
    const listed = await sendRev2026(gateway.url, 'tools/call', { name: 'strict__echo', arguments: {} });
    assert.equal(listed.error, undefined, 'a listed tool works');
    const received = await sendRev2026(gateway.url, 'tools/call', { name: 'len__received', arguments: {} });
    assert.deepEqual((received.result?.structuredContent as { names: string[] }).names.filter(isRefusedSpelling), []);
  });

  test('a batch: each unlisted spelling is unknown, the listed call beside it is served', async () => {
    const post = async (body: unknown, session?: string): Promise<{ headers: Record<string, unknown>; body: unknown }> => {
      const answer = await request(gateway.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(session === undefined ? {} : { 'mcp-session-id': session }) },
        body: JSON.stringify(body),
      });
      const text = await answer.body.text();
      return { headers: answer.headers, body: text === '' ? undefined : JSON.parse(text) };
    };
    const init = await post({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'batch', version: '1' } } });
    const session = String(init.headers['mcp-session-id']);
    await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, session);
    const batch = [
      { jsonrpc: '2.0', id: 'upper', method: 'tools/call', params: { name: 'len__SECRET', arguments: {} } },
      { jsonrpc: '2.0', id: 'wide', method: 'tools/call', params: { name: 'len__ｓｅｃｒｅｔ', arguments: {} } },
      { jsonrpc: '2.0', id: 'echo', method: 'tools/call', params: { name: 'len__echo', arguments: {} } },
    ];
    const answers = (await post(batch, session)).body as { id: string; result?: Json; error?: { message: string } }[];
    const byId = new Map(answers.map((answer) => [answer.id, answer]));
    assert.equal(byId.get('upper')?.error?.message, 'Unknown tool: len__SECRET');
    assert.equal(byId.get('wide')?.error?.message, 'Unknown tool: len__ｓｅｃｒｅｔ');
    assert.equal(byId.get('echo')?.error, undefined);
  });

  test('misses re-read an upstream\'s lists at most once per interval, however many a client makes', async (t) => {
    const { client } = await testScope(t).client(gateway.url);
    const before = (await receivedBy(client, 'strict')).lists;
    const started = Date.now();
    await Promise.all(Array.from({ length: 50 }, (_, i) => assert.rejects(client.callTool({ name: `strict__missing_${i}`, arguments: {} }), /Unknown tool/)));
    for (let i = 0; i < 50; i++) await assert.rejects(client.callTool({ name: `strict__missing_again_${i}`, arguments: {} }), /Unknown tool/);
    const elapsed = Date.now() - started;
    const refreshes = (await receivedBy(client, 'strict')).lists - before;
    // One tools/list per refresh; a refresh may have begun just before `started`, and one per interval since.
    assert.ok(refreshes <= 2 + Math.floor(elapsed / MISS_REFRESH_INTERVAL_MS), `${refreshes} refreshes in ${elapsed} ms`);
    const { names } = await receivedBy(client, 'strict');
    assert.deepEqual(names.filter((name) => name.startsWith('missing')), [], 'no miss was forwarded');
  });
});

describe('names an upstream adds later', () => {
  const scope = suiteScope();
  let gateway: GatewayChild;

  before(async () => {
    // One upstream per kind: each test's miss is the first its upstream has had (misses re-read lists at most once per interval).
    gateway = await scope.spawnGateway({
      config: {
        upstreams: {
          tools: namesUpstream('strict', { resources: { exclude: ['*'] } }),
          prompts: namesUpstream('strict', { resources: { exclude: ['*'] } }),
          resources: namesUpstream('strict'),
        },
      },
    });
  });

  test('a tool added with list_changed works once the change is announced; one added silently works on its first call', async (t) => {
    const { client, log } = await testScope(t).client(gateway.url);
    await client.callTool({ name: 'tools__add', arguments: { kind: 'tool', name: 'announced', notify: true } });
    await eventually(() => log.notifications.some((n) => n.method === 'notifications/tools/list_changed'), 15_000);
    assert.match(textOf(await client.callTool({ name: 'tools__announced', arguments: {} })), /announced/);
    await client.callTool({ name: 'tools__add', arguments: { kind: 'tool', name: 'silent' } });
    assert.match(textOf(await client.callTool({ name: 'tools__silent', arguments: {} })), /silent/);
    const viaRev2026 = await sendRev2026(gateway.url, 'tools/call', { name: 'tools__silent', arguments: {} });
    assert.equal(viaRev2026.error, undefined);
  });

  test('a prompt and a resource added silently work on their first use, in both revisions', async (t) => {
    const { client } = await testScope(t).client(gateway.url);
    await client.callTool({ name: 'prompts__add', arguments: { kind: 'prompt', name: 'later' } });
    assert.match(JSON.stringify((await client.getPrompt({ name: 'prompts__later' })).messages), /prompt later/);
    await client.callTool({ name: 'resources__add', arguments: { kind: 'resource', name: 'test://later' } });
    const read = await sendRev2026(gateway.url, 'resources/read', { uri: 'test://later' });
    assert.match(JSON.stringify(read.result), /resource test:\/\/later/, JSON.stringify(read.response));
  });
});
