// Tool selection per upstream (issue 23): what each upstream exposes, under which names, through real SDK clients
// (2025-11-25) and hand-written 2026-07-28 requests, in front of the real fixture upstream.
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { startGateway, StartupConfigError } from '../../src/taskgate.js';
import { createLogger } from '../../src/log.js';
import { fixtureCommand, spawnStatelessFixture } from '../fixtures/spawn.js';
import { eventually, suiteScope, testScope, textOf, type Json, type TestGateway, type TestScope } from '../helpers/harness.js';
import { sendRev2026 } from '../helpers/stateless-wire.js';

const SELECTION = {
  tools: {
    exclude: ['crash', 'fail_*'],
    overrides: {
      greet: { name: 'hello', title: 'Hello', description: 'Greets by name' },
      whoami: { name: 'who' },
      dynamic_tool: { name: 'dyn' },
    },
  },
  prompts: { exclude: ['test_prompt_with_*'] },
  resources: { exclude: ['test://static-binary', 'test://template/*'] },
};

/** Calls the upstream `a` has run on the gateway's one connection to it (the fixture counts every tool call). */
async function upstreamCalls(client: Client): Promise<number> {
  return (JSON.parse(textOf(await client.callTool({ name: 'a__who', arguments: {} }))) as { calls: number }).calls;
}

async function toolNames(client: Client): Promise<string[]> {
  return (await client.listTools()).tools.map((tool) => tool.name);
}

describe('tool selection per upstream', () => {
  const scope = suiteScope();
  let gateway: TestGateway;

  before(async () => {
    const [a, b] = await Promise.all([scope.upstream('stdio'), scope.upstream('stdio')]);
    gateway = await scope.gateway({
      upstreams: { a: { ...a.config, ...SELECTION }, b: { ...b.config, tools: { include: ['whoami', 'gree?'] }, resources: { exclude: ['*'] } } },
      tasks: { rules: [{ match: 'a__hello', mode: 'required' }], taskTools: { enabled: true } },
    });
  });

  test('lists show what is included, renamed tools under their new name (prefixed) with their title and description', async (t) => {
    const { client } = await testScope(t).client(gateway.url);
    const tools = (await client.listTools()).tools;
    const names = tools.map((tool) => tool.name);
    for (const name of ['a__hello', 'a__who', 'a__slow', 'b__whoami', 'b__greet']) assert.ok(names.includes(name), name);
    for (const name of ['a__greet', 'a__whoami', 'a__crash', 'a__fail_tool', 'b__slow', 'b__crash']) assert.ok(!names.includes(name), name);
    assert.equal(names.filter((name) => name.startsWith('b__')).length, 2, 'b includes only whoami and greet');
    const hello = tools.find((tool) => tool.name === 'a__hello');
    assert.equal(hello?.title, 'Hello');
    assert.equal(hello?.description, 'Greets by name');
    assert.deepEqual(Object.keys(hello?.inputSchema.properties ?? {}), ['name'], 'the upstream\'s schema stays');
    assert.equal(tools.find((tool) => tool.name === 'b__greet')?.description, 'Sync-only: returns "Hello, {name}!"');
  });

  test('2025-11-25: excluded and renamed-away names are unknown, answered by the gateway without reaching the upstream', async (t) => {
    const { client } = await testScope(t).client(gateway.url);
    const refusal = (name: string) => client.callTool({ name, arguments: {} }).then(() => assert.fail(`${name} was answered`), (error: Error & { code?: number }) => error);
    const unknown = await refusal('nowhere');
    assert.match(unknown.message, /Unknown tool: nowhere/);
    const before = await upstreamCalls(client);
    // `crash` would end the upstream and `greet`/`whoami` count on its connection: none of them went there.
    for (const name of ['a__crash', 'a__fail_tool', 'a__greet', 'a__whoami', 'b__slow']) {
      const refused = await refusal(name);
      assert.equal(refused.code, unknown.code, name);
      assert.equal(refused.message.replace(name, 'X'), unknown.message.replace('nowhere', 'X'), name);
    }
    assert.equal(await upstreamCalls(client), before + 1, 'only the second a__who reached upstream a');
  });

  test('2025-11-25: a renamed tool is called by its new name and reaches the upstream under its own', async (t) => {
    const { client } = await testScope(t).client(gateway.url);
    assert.equal(textOf(await client.callTool({ name: 'b__greet', arguments: { name: 'Bo' } })), 'Hello, Bo!');
    const who = JSON.parse(textOf(await client.callTool({ name: 'a__who', arguments: {} }))) as { transport: string };
    assert.equal(who.transport, 'stdio');
  });

  test('task policy matches the exposed name; the task reports it', async (t) => {
    const { client } = await testScope(t).client(gateway.url);
    const hello = (await client.listTools()).tools.find((tool) => tool.name === 'a__hello');
    assert.equal(hello?.execution?.taskSupport, 'required', 'the rule for a__hello applies to the renamed greet');
    // Sent as it is: the SDK itself refuses to call a tool listed as task-only.
    const plain = await client.request({ method: 'tools/call', params: { name: 'a__hello', arguments: { name: 'Ada' } } }, CallToolResultSchema).then(() => undefined, (error: Error & { code?: number }) => error);
    assert.equal(plain?.code, -32601, 'a required tool called without a task');

    const created = (await client.request(
      { method: 'tools/call', params: { name: 'a__hello', arguments: { name: 'Ada' }, task: {} } },
      CreateTaskResultSchema.passthrough(),
    )) as unknown as { task: { taskId: string } };
    const result = await client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
    assert.equal(textOf(result), 'Hello, Ada!');
    const listed = await client.callTool({ name: 'taskgate_task_list', arguments: {} });
    const tasks = (listed.structuredContent as { tasks: { taskId: string; tool: string }[] }).tasks;
    assert.equal(tasks.find((task) => task.taskId === created.task.taskId)?.tool, 'a__hello');
  });

  test('2026-07-28: the same names are listed, routed and refused', async () => {
    const listed = await sendRev2026(gateway.url, 'tools/list');
    const names = (listed.result?.tools as Json[]).map((tool) => tool.name);
    assert.ok(names.includes('a__who') && names.includes('a__hello') && !names.includes('a__greet') && !names.includes('a__crash'));
    assert.equal((listed.result?.tools as Json[]).find((tool) => tool.name === 'a__hello')?.title, 'Hello');

    const who = await sendRev2026(gateway.url, 'tools/call', { name: 'a__who', arguments: {} });
    const before = (JSON.parse(textOf(who.result)) as { calls: number }).calls;
    const unknown = await sendRev2026(gateway.url, 'tools/call', { name: 'nowhere', arguments: {} });
    assert.match(String(unknown.error?.message), /Unknown tool: nowhere/);
    for (const name of ['a__crash', 'a__greet', 'a__whoami', 'b__fail_tool']) {
      const refused = await sendRev2026(gateway.url, 'tools/call', { name, arguments: {} });
      assert.equal(refused.error?.code, unknown.error?.code, name);
      assert.equal(refused.error?.message.replace(name, 'X'), unknown.error?.message.replace('nowhere', 'X'), name);
    }
    const after = await sendRev2026(gateway.url, 'tools/call', { name: 'a__who', arguments: {} });
    assert.equal((JSON.parse(textOf(after.result)) as { calls: number }).calls, before + 1);
  });

  test('prompts and resources: excluded ones are absent, and getting or reading them is unknown', async (t) => {
    const { client } = await testScope(t).client(gateway.url);
    const prompts = (await client.listPrompts()).prompts.map((p) => p.name);
    assert.ok(prompts.includes('a__test_simple_prompt'));
    assert.ok(!prompts.some((name) => name.startsWith('a__test_prompt_with_')), prompts.join());
    assert.ok(prompts.includes('b__test_prompt_with_arguments'), 'b keeps its prompts');
    const unknownPrompt = await client.getPrompt({ name: 'nowhere' }).then(() => undefined, (error: Error) => error);
    const excludedPrompt = await client.getPrompt({ name: 'a__test_prompt_with_image' }).then(() => undefined, (error: Error) => error);
    assert.equal(excludedPrompt?.message.replace('a__test_prompt_with_image', 'X'), unknownPrompt?.message.replace('nowhere', 'X'));

    const uris = (await client.listResources()).resources.map((r) => r.uri);
    assert.ok(uris.includes('test://static-text'));
    assert.ok(!uris.includes('test://static-binary'));
    const templates = (await client.listResourceTemplates()).resourceTemplates.map((r) => r.uriTemplate);
    assert.ok(!templates.includes('test://template/{id}/data'));
    assert.match(JSON.stringify((await client.readResource({ uri: 'test://static-text' })).contents), /static text resource/);
    for (const uri of ['test://static-binary', 'test://template/7/data']) {
      const refused = await client.readResource({ uri }).then(() => undefined, (error: Error) => error);
      assert.match(String(refused?.message), /Resource not found/, uri);
    }
    const rev2026Read = await sendRev2026(gateway.url, 'resources/read', { uri: 'test://static-binary' });
    assert.match(String(rev2026Read.error?.message), /Resource not found/);
    const rev2026Prompt = await sendRev2026(gateway.url, 'prompts/get', { name: 'a__test_prompt_with_image' });
    assert.match(String(rev2026Prompt.error?.message), /Unknown prompt: a__test_prompt_with_image/);
  });

  test('the upstream\'s tools/list_changed refresh keeps applying the selection', async (t) => {
    const { client, log } = await testScope(t).client(gateway.url);
    const changed = log.notifications.length;
    await client.callTool({ name: 'a__change_tools', arguments: { action: 'add' } });
    await eventually(() => log.notifications.slice(changed).some((n) => n.method === 'notifications/tools/list_changed'));
    const names = await toolNames(client);
    assert.ok(names.includes('a__dyn') && !names.includes('a__dynamic_tool'), names.join());
    assert.equal(textOf(await client.callTool({ name: 'a__dyn', arguments: {} })), 'dynamic tool says hi');
    await client.callTool({ name: 'a__change_tools', arguments: { action: 'remove' } });
  });
});

describe('tool selection with one upstream and no prefix', () => {
  test('an excluded name is answered by the gateway, not passed on as every other name is', async (t) => {
    const scope = testScope(t);
    const a = await scope.upstream('stdio');
    const gateway = await scope.gateway({ upstreams: { a: { ...a.config, tools: { exclude: ['crash', 'greet'] } } } });
    const { client } = await scope.client(gateway.url);
    const calls = async () => (JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} }))) as { calls: number }).calls;
    const before = await calls();
    for (const name of ['crash', 'greet']) {
      const refused = await client.callTool({ name, arguments: { name: 'x' } }).then(() => undefined, (error: Error & { code?: number }) => error);
      assert.equal(refused?.code, -32602, name);
      assert.match(String(refused?.message), new RegExp(`Unknown tool: ${name}$`));
    }
    assert.equal(await calls(), before + 1);
    const names = await toolNames(client);
    assert.ok(names.includes('whoami') && !names.includes('crash') && !names.includes('greet'));
  });
});

describe('tool selection in front of a 2026-07-28 upstream', () => {
  test('renamed tools reach the upstream under their own name (its Mcp-Name and Mcp-Param-* checks pass); excluded ones never do', async (t) => {
    const scope = testScope(t);
    const upstream = await spawnStatelessFixture({ rev2026Only: true });
    scope.defer(() => upstream.kill());
    const gateway = await scope.gateway({
      upstreams: {
        m: {
          url: upstream.url,
          prefix: 'm_',
          tools: { include: ['rev2026_*', 'test_mcp_param_header'], exclude: ['rev2026_ask'], overrides: { rev2026_echo: { name: 'echo' }, test_mcp_param_header: { name: 'regional' } } },
        },
      },
    });
    const listed = await sendRev2026(gateway.url, 'tools/list');
    assert.deepEqual((listed.result?.tools as Json[]).map((tool) => tool.name).sort(), ['m_echo', 'm_regional']);

    const echoed = await sendRev2026(gateway.url, 'tools/call', { name: 'm_echo', arguments: { text: 'hi' } });
    assert.equal(textOf(echoed.result), 'hi');
    const regional = await sendRev2026(gateway.url, 'tools/call', { name: 'm_regional', arguments: { region: 'eu' } }, { headers: { 'mcp-param-region': 'eu' } });
    assert.equal(textOf(regional.result), 'region=eu priority=-');
    for (const name of ['m_rev2026_echo', 'm_rev2026_ask', 'm_test_simple_text']) {
      const refused = await sendRev2026(gateway.url, 'tools/call', { name, arguments: {} });
      assert.equal(refused.error?.code, -32602, name);
      assert.equal(refused.error?.message, `Unknown tool: ${name}`);
    }

    const { client } = await scope.client(gateway.url);
    assert.deepEqual((await toolNames(client)).sort(), ['m_echo', 'm_regional']);
    assert.equal(textOf(await client.callTool({ name: 'm_echo', arguments: { text: '2025-11-25 hi' } })), '2025-11-25 hi');
  });
});

const ALICE_KEY = 'alice-key-0123456789abcdef';
const BOB_KEY = 'bob-key-0123456789abcdef-bob';

async function clientWithKey(scope: TestScope, url: string, key: string): Promise<Client> {
  const client = new Client({ name: 'tool-selection-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  scope.defer(() => client.close());
  return client;
}

describe('tool selection and access rules', () => {
  test('access rules match the exposed (renamed) name, never the upstream\'s', async (t) => {
    const scope = testScope(t);
    const a = await scope.upstream('stdio');
    const gateway = await scope.gateway({
      upstreams: { a: { ...a.config, prefix: 'a__', tools: { overrides: { greet: { name: 'hello' } } } } },
      auth: {
        resource: 'http://gateway.example/mcp',
        apiKeys: [{ principal: 'alice', key: ALICE_KEY }, { principal: 'bob', key: BOB_KEY }],
        access: [{ principals: ['alice'], tools: ['a__hello'] }, { principals: ['bob'], tools: ['a__greet', 'a__whoami'] }],
      },
    });
    const alice = await clientWithKey(scope, gateway.url, ALICE_KEY);
    const bob = await clientWithKey(scope, gateway.url, BOB_KEY);
    assert.deepEqual(await toolNames(alice), ['a__hello']);
    assert.deepEqual(await toolNames(bob), ['a__whoami'], 'a rule naming the old name grants nothing');
    assert.equal(textOf(await alice.callTool({ name: 'a__hello', arguments: { name: 'Al' } })), 'Hello, Al!');
    const denied = await bob.callTool({ name: 'a__hello', arguments: { name: 'Bo' } }).then(() => undefined, (error: Error) => error);
    assert.match(String(denied?.message), /Unknown tool: a__hello/);
    const rev2026Alice = await sendRev2026(gateway.url, 'tools/call', { name: 'a__hello', arguments: { name: 'Al' } }, { headers: { authorization: `Bearer ${ALICE_KEY}` } });
    assert.equal(textOf(rev2026Alice.result), 'Hello, Al!');
  });
});

describe('tool selection collisions', () => {
  test('a rename onto another tool of the same upstream stops the start, naming both tools', async (t) => {
    const scope = testScope(t);
    const a = await scope.upstream('streamable-http');
    const config = parseConfig(
      stringify({
        listen: { host: '127.0.0.1', port: 0 },
        log: { level: 'silent' },
        upstreams: { a: { ...a.config, tools: { overrides: { greet: { name: 'whoami' } } } } },
      }),
      'collide.yaml',
      {},
    );
    await assert.rejects(startGateway(config, createLogger(config.log, { pretty: false })), (error: Error) => {
      assert.ok(error instanceof StartupConfigError);
      assert.match(error.message, /tool 'whoami' is offered twice by upstream 'a' \(its tools '(greet|whoami)' and '(greet|whoami)'\)/);
      return true;
    });
  });

  test('a rename onto another upstream\'s exposed name is a collision of the two upstreams', async (t) => {
    const scope = testScope(t);
    const [a, b] = await Promise.all([scope.upstream('streamable-http'), scope.upstream('sse')]);
    const config = parseConfig(
      stringify({
        listen: { host: '127.0.0.1', port: 0 },
        log: { level: 'silent' },
        upstreams: {
          a: { ...a.config, prefix: 'x_', tools: { include: ['greet'], overrides: { greet: { name: 'b_whoami' } } } },
          b: { ...b.config, prefix: 'x_b_', tools: { include: ['whoami'] } },
        },
      }),
      'collide.yaml',
      {},
    );
    await assert.rejects(startGateway(config, createLogger(config.log, { pretty: false })), (error: Error) => {
      assert.ok(error instanceof StartupConfigError);
      assert.match(error.message, /tool 'x_b_whoami' is offered by both upstream 'a' and upstream 'b'/);
      return true;
    });
  });
});

/** A client whose GET stream is open (so a list_changed sent after this resolves reaches it), counting list_changed. */
async function listeningClient(scope: TestScope, url: string): Promise<{ client: Client; toolsChanged(): Promise<void> }> {
  let opened!: () => void;
  const ready = new Promise<void>((resolve) => (opened = resolve));
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    fetch: async (input, init) => {
      const response = await fetch(input, init);
      if ((init?.method ?? 'GET') === 'GET' && response.status === 200) opened();
      return response;
    },
  });
  const client = new Client({ name: 'tool-selection-reload', version: '1.0.0' }, { capabilities: {} });
  const waiters: (() => void)[] = [];
  client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
    for (const wake of waiters.splice(0)) wake();
  });
  await client.connect(transport);
  scope.defer(() => client.close());
  await ready;
  return { client, toolsChanged: () => new Promise<void>((resolve) => waiters.push(resolve)) };
}

describe('tool selection on config reload', () => {
  test('a changed selection applies to the running upstream (not reconnected) and clients are told the list changed', async (t) => {
    const scope = testScope(t);
    const { command, args, cwd } = fixtureCommand('stdio');
    const upstream = { transport: 'stdio', command, args, cwd, prefix: 'a_' };
    const base = {
      listen: { host: '127.0.0.1', port: 0, path: '/mcp' },
      store: { type: 'memory' },
      log: { level: 'silent' },
      replicas: { drainTimeoutMs: 0 },
    };
    const gateway = await scope.gateway({ upstreams: { a: upstream } });
    const { client, toolsChanged } = await listeningClient(scope, gateway.url);
    const whoami = async (name: string) => JSON.parse(textOf(await client.callTool({ name, arguments: {} }))) as { pid: number; connection: number; calls: number };
    const before = await whoami('a_whoami');

    const changed = toolsChanged();
    const next = parseConfig(stringify({ ...base, upstreams: { a: { ...upstream, tools: { exclude: ['crash'], overrides: { whoami: { name: 'who' } } } } } }), 'test.yaml', {});
    const result = await gateway.reload(next);
    assert.deepEqual(result.changes, ["upstream 'a' selection changed (tools)"]);
    await changed;

    const names = await toolNames(client);
    assert.ok(names.includes('a_who') && !names.includes('a_whoami') && !names.includes('a_crash'), names.join(', '));
    const refused = await client.callTool({ name: 'a_crash', arguments: {} }).then(() => undefined, (error: Error) => error);
    assert.match(String(refused?.message), /Unknown tool: a_crash/);
    const after = await whoami('a_who');
    assert.deepEqual([after.pid, after.connection, after.calls], [before.pid, before.connection, before.calls + 1], 'the same upstream connection, and nothing else reached it');
  });

  test('a reload whose renames would collide is refused and the running selection stays', async (t) => {
    const scope = testScope(t);
    const { command, args, cwd } = fixtureCommand('stdio');
    const upstream = { transport: 'stdio', command, args, cwd, prefix: 'a_' };
    const gateway = await scope.gateway({ upstreams: { a: upstream } });
    const next = parseConfig(stringify({ log: { level: 'silent' }, upstreams: { a: { ...upstream, tools: { overrides: { greet: { name: 'whoami' } } } } } }), 'test.yaml', {});
    await assert.rejects(gateway.reload(next), /tool 'a_whoami' is offered twice by upstream 'a'/);
    const { client } = await testScope(t).client(gateway.url);
    const names = await toolNames(client);
    assert.ok(names.includes('a_greet') && names.includes('a_whoami'));
  });
});
