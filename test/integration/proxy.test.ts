// Transparent proxying through the gateway, with the SDK v1 client in front and the fixture upstream behind
// each of the three transports.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { CallToolResultSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import type { FixtureTransport } from '../fixtures/spawn.js';
import { eventually, suiteScope, testScope, textOf, type TestGateway } from '../helpers/harness.js';

for (const transport of ['stdio', 'streamable-http', 'sse'] as FixtureTransport[]) {
  describe(`proxy over ${transport}`, () => {
    const scope = suiteScope();
    let gateway: TestGateway;

    before(async () => {
      const upstream = await scope.upstream(transport);
      gateway = await scope.gateway({ upstreams: { fixture: upstream.config } });
    });

    test('initialize declares the union of upstream capabilities', async (t) => {
      const { client } = await testScope(t).client(gateway.url);
      const caps = client.getServerCapabilities();
      assert.ok(caps?.tools);
      assert.ok(caps?.prompts);
      assert.equal(caps?.resources?.subscribe, true);
      assert.ok(caps?.logging);
      assert.ok(caps?.completions);
      assert.equal(client.getServerVersion()?.name, 'taskgate');
    });

    test('tools/list passes tools through under their own names (single upstream: no prefix)', async (t) => {
      const { client } = await testScope(t).client(gateway.url);
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      for (const name of ['echo', 'slow', 'test_simple_text', 'ask_twice']) assert.ok(names.includes(name), name);
      const echo = tools.find((t) => t.name === 'echo');
      assert.equal(echo?.description?.startsWith('Echoes its arguments'), true);
    });

    test('results pass through unchanged: structuredContent, _meta and unknown fields survive', async (t) => {
      const { client } = await testScope(t).client(gateway.url);
      const result = (await client.request(
        { method: 'tools/call', params: { name: 'echo', arguments: { hello: 'world', n: 1 } } },
        CallToolResultSchema.passthrough(),
      )) as Record<string, unknown>;
      assert.deepEqual(result.structuredContent, { hello: 'world', n: 1 });
      assert.deepEqual(result.fixtureExtra, { preserved: true });
      assert.ok((result._meta as Record<string, unknown>)['fixture.taskgate.dev/echo']);
    });

    test('tool errors (isError) and JSON-RPC errors come back as the upstream sent them', async (t) => {
      const { client } = await testScope(t).client(gateway.url);
      const failed = await client.callTool({ name: 'fail_tool', arguments: { message: 'nope' } });
      assert.equal(failed.isError, true);
      await assert.rejects(client.callTool({ name: 'jsonrpc_error', arguments: {} }), (error: { code: number; data: unknown }) => {
        assert.equal(error.code, -32042);
        assert.deepEqual(error.data, { why: 'fixture' });
        return true;
      });
    });

    test('progress reaches the client with its own progressToken', async (t) => {
      const { client } = await testScope(t).client(gateway.url);
      const seen: { progress: number; total?: number }[] = [];
      const result = await client.callTool({ name: 'slow', arguments: { ms: 60, steps: 3 } }, undefined, {
        onprogress: (progress) => seen.push(progress),
      });
      assert.equal(result.isError, undefined);
      assert.deepEqual(seen.map((p) => p.progress), [1, 2, 3]);
    });

    test('elicitation (two at once), sampling and roots requests are relayed to the calling client', async (t) => {
      const { client, log } = await testScope(t).client(gateway.url);
      const asked = await client.callTool({ name: 'ask_twice', arguments: {} });
      assert.match(textOf(asked), /answer to First question\?/);
      assert.match(textOf(asked), /answer to Second question\?/);
      assert.equal(log.elicitations.length, 2);
      const sampled = await client.callTool({ name: 'sample', arguments: { prompt: 'hi' } });
      assert.match(textOf(sampled), /sampled by the test client/);
      const roots = await client.callTool({ name: 'list_roots', arguments: {} });
      assert.match(textOf(roots), /file:\/\/\/workspace/);
    });

    test('logging/setLevel filters the session\'s log notifications', async (t) => {
      const { client, log } = await testScope(t).client(gateway.url);
      await client.setLoggingLevel('warning');
      await client.callTool({ name: 'log_burst', arguments: {} });
      await eventually(() => log.notifications.filter((n) => n.method === 'notifications/message').length >= 2);
      const levels = log.notifications.filter((n) => n.method === 'notifications/message').map((n) => (n.params as { level: string }).level);
      assert.deepEqual(levels.sort(), ['error', 'warning']);
    });

    test('resources: list, read, templates, subscribe and updates', async (t) => {
      const { client } = await testScope(t).client(gateway.url);
      const { resources } = await client.listResources();
      assert.ok(resources.length > 0);
      const first = resources[0]!;
      const read = await client.readResource({ uri: first.uri });
      assert.ok(read.contents.length > 0);
      const { resourceTemplates } = await client.listResourceTemplates();
      assert.ok(resourceTemplates.length > 0);

      const updates: string[] = [];
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => {
        updates.push(n.params.uri);
      });
      const watched = 'test://watched-resource';
      await client.subscribeResource({ uri: watched });
      // The GET stream carries notifications unrelated to a request.
      await new Promise((resolve) => setTimeout(resolve, 200));
      await client.callTool({ name: 'touch_resource', arguments: { uri: watched } });
      await eventually(() => updates.includes(watched));
      await client.unsubscribeResource({ uri: watched });
    });

    test('list_changed notifications are forwarded and the new list is served', async (t) => {
      const { client, log } = await testScope(t).client(gateway.url);
      await new Promise((resolve) => setTimeout(resolve, 200)); // let the client open its GET stream
      await client.callTool({ name: 'change_tools', arguments: { action: 'add' } });
      await eventually(() => log.notifications.some((n) => n.method === 'notifications/tools/list_changed'));
      assert.ok((await client.listTools()).tools.some((t) => t.name === 'dynamic_tool'));
      await client.callTool({ name: 'change_tools', arguments: { action: 'remove' } });
      await eventually(async () => !(await client.listTools()).tools.some((t) => t.name === 'dynamic_tool'));
    });

    test('prompts and completion are routed to the upstream', async (t) => {
      const { client } = await testScope(t).client(gateway.url);
      const { prompts } = await client.listPrompts();
      assert.ok(prompts.some((p) => p.name === 'test_prompt_with_arguments'));
      const prompt = await client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'a', arg2: 'b' } });
      assert.ok(prompt.messages.length > 0);
      const completion = await client.complete({ ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' }, argument: { name: 'arg1', value: 'x' } });
      assert.ok(Array.isArray(completion.completion.values));
    });

    test('client cancellation reaches the upstream', async (t) => {
      const { client } = await testScope(t).client(gateway.url);
      const abort = new AbortController();
      const call = client.callTool({ name: 'slow', arguments: { ms: 5000 } }, undefined, { signal: abort.signal });
      await new Promise((resolve) => setTimeout(resolve, 300));
      abort.abort('test cancels');
      await assert.rejects(call);
      // The upstream records cancellations it received; ask it (bounded) until it reports this one.
      let cancelled: unknown[] = [];
      for (let i = 0; i < 50 && cancelled.length === 0; i++) {
        const who = JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} }))) as { cancelled: unknown[] };
        cancelled = who.cancelled;
        if (cancelled.length === 0) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.ok(cancelled.length > 0, 'the upstream saw notifications/cancelled');
    });
  });
}
