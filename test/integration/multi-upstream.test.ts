// Several upstreams behind one endpoint, and what happens when one of them is missing or dies.
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createRequire } from 'node:module';
import { before, describe, test } from 'node:test';
import { request } from 'undici';
import { parseConfig } from '../../src/config/load.js';
import { startGateway, StartupConfigError } from '../../src/taskgate.js';
import { createLogger } from '../../src/log.js';
import { stringify } from 'yaml';
import { freePort, startChild } from '../fixtures/spawn.js';
import { suiteScope, testScope, textOf, type TestGateway } from '../helpers/harness.js';

function whoami(result: unknown): { transport: string; pid: number; instanceId: string } {
  return JSON.parse(textOf(result)) as { transport: string; pid: number; instanceId: string };
}

describe('three upstreams (stdio + streamable-http + sse) with prefixes', () => {
  const scope = suiteScope();
  let gateway: TestGateway;
  let upstreams: Record<string, unknown>;

  before(async () => {
    const [a, b, c] = await Promise.all([scope.upstream('stdio'), scope.upstream('streamable-http'), scope.upstream('sse')]);
    upstreams = { local: a.config, remote: b.config, old: { ...c.config, prefix: 'legacy.' } };
    gateway = await scope.gateway({ upstreams });
  });

  test('tools and prompts are exposed under each upstream prefix and routed back', async (t) => {
    const { client } = await testScope(t).client(gateway.url);
    const names = new Set<string>();
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor });
      for (const tool of page.tools) names.add(tool.name);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    for (const name of ['local__whoami', 'remote__whoami', 'legacy.whoami']) assert.ok(names.has(name), name);
    assert.ok(!names.has('whoami'));

    assert.equal(whoami(await client.callTool({ name: 'local__whoami', arguments: {} })).transport, 'stdio');
    assert.equal(whoami(await client.callTool({ name: 'remote__whoami', arguments: {} })).transport, 'streamable-http');
    assert.equal(whoami(await client.callTool({ name: 'legacy.whoami', arguments: {} })).transport, 'sse');

    const prompts: string[] = [];
    cursor = undefined;
    do {
      const page = await client.listPrompts(cursor === undefined ? {} : { cursor });
      prompts.push(...page.prompts.map((p) => p.name));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    for (const name of ['local__test_simple_prompt', 'remote__test_simple_prompt', 'legacy.test_simple_prompt']) assert.ok(prompts.includes(name), name);
    const prompt = await client.getPrompt({ name: 'legacy.test_simple_prompt' });
    assert.ok(prompt.messages.length > 0);
  });

  test('a plain list (first page only, as most hosts read) shows every upstream, in upstream order', async (t) => {
    const { client } = await testScope(t).client(gateway.url);
    const tools = await client.listTools();
    assert.equal(tools.nextCursor, undefined);
    const names = tools.tools.map((t) => t.name);
    for (const name of ['local__whoami', 'remote__whoami', 'legacy.whoami']) assert.ok(names.includes(name), name);
    const firstOf = (prefix: string): number => names.findIndex((n) => n.startsWith(prefix));
    assert.ok(firstOf('local__') < firstOf('remote__') && firstOf('remote__') < firstOf('legacy.'), 'upstream order');
    const prompts = await client.listPrompts();
    assert.equal(prompts.nextCursor, undefined);
    for (const name of ['local__test_simple_prompt', 'remote__test_simple_prompt', 'legacy.test_simple_prompt']) {
      assert.ok(prompts.prompts.some((p) => p.name === name), name);
    }
    const resources = await client.listResources();
    assert.equal(resources.nextCursor, undefined);
    const templates = await client.listResourceTemplates();
    assert.equal(templates.nextCursor, undefined);
  });

  test('past lists.pageSize, signed cursors go on where each page stopped: the same items in the same order', async (t) => {
    const scope = testScope(t);
    const small = await scope.gateway({ upstreams, lists: { pageSize: 7 } });
    const whole = await scope.client(gateway.url);
    const paged = await scope.client(small.url);
    const expected = (await whole.client.listTools()).tools.map((t) => t.name);
    const names: string[] = [];
    const cursors: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await paged.client.listTools(cursor === undefined ? {} : { cursor });
      assert.ok(page.tools.length <= 7);
      names.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor;
      if (cursor !== undefined) cursors.push(cursor);
    } while (cursor !== undefined && cursors.length < 50);
    assert.deepEqual(names, expected);
    assert.ok(cursors.length >= 3, `${cursors.length} cursors`);

    const url = small.url;
    const headers = { 'mcp-session-id': String(paged.transport.sessionId), 'mcp-protocol-version': '2025-11-25', 'content-type': 'application/json', accept: 'application/json' };
    const ask = async (method: string, params: Record<string, unknown>): Promise<{ error?: { code: number; message: string } }> => {
      const answer = await request(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
      return (await answer.body.json()) as { error?: { code: number; message: string } };
    };
    const first = cursors[0] as string;
    const [payload, signature] = first.split('.') as [string, string];
    const forged = Buffer.from(JSON.stringify({ upstream: 'remote', skip: 0 })).toString('base64url');
    for (const bad of [`${forged}.${signature}`, `${payload}.${signature.slice(1)}x`, 'not-a-cursor', Buffer.from('{"upstream":"remote"}').toString('base64url')]) {
      const refused = await ask('tools/list', { cursor: bad });
      assert.equal(refused.error?.code, -32602, `${bad}: ${JSON.stringify(refused)}`);
    }
    const crossed = await ask('prompts/list', { cursor: first });
    assert.equal(crossed.error?.code, -32602, 'a tools/list cursor does not continue prompts/list');
  });

  test('each client session gets its own upstream session on HTTP transports', async (t) => {
    const scope = testScope(t);
    const one = await scope.client(gateway.url);
    const two = await scope.client(gateway.url);
    const a = JSON.parse(textOf(await one.client.callTool({ name: 'remote__whoami', arguments: {} }))) as { sessionId: string };
    const b = JSON.parse(textOf(await two.client.callTool({ name: 'remote__whoami', arguments: {} }))) as { sessionId: string };
    assert.notEqual(a.sessionId, b.sessionId);
  });
});

describe('name collisions', () => {
  test('two upstreams exposing the same tool name stop the start, naming both', async (t) => {
    const scope = testScope(t);
    const [a, b] = await Promise.all([scope.upstream('streamable-http'), scope.upstream('sse')]);
    const config = parseConfig(
      stringify({
        listen: { host: '127.0.0.1', port: 0 },
        log: { level: 'silent' },
        upstreams: { first: { ...a.config, prefix: '' }, second: { ...b.config, prefix: '' } },
      }),
      'collide.yaml',
      {},
    );
    await assert.rejects(startGateway(config, createLogger(config.log, { pretty: false })), (error: Error) => {
      assert.ok(error instanceof StartupConfigError);
      assert.match(error.message, /tool 'echo' is offered by both upstream 'first' and upstream 'second'/);
      return true;
    });
  });
});

describe('faults', () => {
  test('an unreachable HTTP upstream gives its calls a clear error; the others keep serving', async (t) => {
    const scope = testScope(t);
    const good = await scope.upstream('streamable-http');
    const deadPort = await freePort();
    const gateway = await scope.gateway({
      upstreams: { good: good.config, down: { transport: 'streamable-http', url: `http://127.0.0.1:${deadPort}/mcp`, connectTimeoutMs: 1000 } },
    });
    const { client } = await scope.client(gateway.url);
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === 'good__echo'));
    const ok = await client.callTool({ name: 'good__echo', arguments: { x: 1 } });
    assert.deepEqual(ok.structuredContent, { x: 1 });
    await assert.rejects(client.callTool({ name: 'down__echo', arguments: {} }), /Upstream 'down' is unavailable/);
    const ready = await request(`${gateway.origin}/readyz`);
    const body = (await ready.body.json()) as { upstreams: { name: string; state: string; error?: string }[] };
    const down = body.upstreams.find((u) => u.name === 'down');
    assert.equal(down?.state, 'down');
    assert.match(down?.error ?? '', /ECONNREFUSED|connect/);
  });

  test('a stdio upstream killed mid-call fails that call naming the upstream, and is restarted', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio', { restart: { initialDelayMs: 100, maxDelayMs: 1000 } });
    const gateway = await scope.gateway({ upstreams: { fx: upstream.config } });
    const caller = await scope.client(gateway.url);
    const killer = await scope.client(gateway.url);
    const before = whoami(await caller.client.callTool({ name: 'whoami', arguments: {} }));
    const longCall = caller.client.callTool({ name: 'slow', arguments: { ms: 10_000 } }).then(
      () => undefined,
      (error: Error) => error,
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    await assert.rejects(killer.client.callTool({ name: 'crash', arguments: {} }), /Upstream 'fx'/);
    const error = await longCall;
    assert.match(error?.message ?? 'the call succeeded', /Upstream 'fx' is unavailable: the process exited with code 1/);
    // Restarted with backoff: poll (bounded) until it answers again.
    let after: { pid: number } | undefined;
    for (let i = 0; i < 100 && after === undefined; i++) {
      try {
        after = whoami(await caller.client.callTool({ name: 'whoami', arguments: {} }));
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    assert.ok(after, 'the upstream answers again after its restart');
    assert.notEqual(after.pid, before.pid);
  });
});

describe('@modelcontextprotocol/server-everything over stdio', () => {
  test('lists and calls its tools through the gateway', async (t) => {
    const require = createRequire(import.meta.url);
    const entry = require.resolve('@modelcontextprotocol/server-everything/dist/index.js');
    const scope = testScope(t);
    const gateway = await scope.gateway({ upstreams: { everything: { transport: 'stdio', command: process.execPath, args: [entry, 'stdio'] } } });
    const { client } = await scope.client(gateway.url);
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === 'echo'));
    const result = await client.callTool({ name: 'echo', arguments: { message: 'through taskgate' } });
    assert.match(textOf(result), /through taskgate/);
    const sum = await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } });
    assert.match(textOf(sum), /5/);
  });
});

describe('HTTP upstream dropping mid-call', () => {
  test('a call whose upstream dies mid-call fails with an error naming the upstream', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('streamable-http');
    const gateway = await scope.gateway({ upstreams: { remote: upstream.config } });
    const { client } = await scope.client(gateway.url);
    const call = client.callTool({ name: 'slow', arguments: { ms: 10_000 } }).then(
      () => undefined,
      (error: Error) => error,
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    await upstream.child?.kill(0);
    const error = await call;
    assert.match(error?.message ?? 'the call succeeded', /Upstream 'remote' (lost the call|is unavailable)/);
  });
});

describe('readiness reflects the store', () => {
  test('Redis reachable: ready; Redis unreachable: 503 with the reason, while /healthz stays 200', async (t) => {
    const scope = testScope(t);
    const fixture = await scope.upstream('streamable-http');
    const deadPort = await freePort();
    const up = await scope.gateway({ store: { type: 'redis', url: 'redis://127.0.0.1:6379', prefix: `taskgate-test-${process.pid}` }, upstreams: { fx: fixture.config } });
    const down = await scope.gateway({ store: { type: 'redis', url: `redis://127.0.0.1:${deadPort}` }, upstreams: { fx: fixture.config } });
    const ready = await request(`${up.origin}/readyz`);
    assert.equal(ready.statusCode, 200);
    assert.deepEqual(((await ready.body.json()) as { store: unknown }).store, { type: 'redis', ok: true });

    const notReady = await request(`${down.origin}/readyz`);
    assert.equal(notReady.statusCode, 503);
    const body = (await notReady.body.json()) as { ready: boolean; store: { ok: boolean; error: string } };
    assert.equal(body.ready, false);
    assert.equal(body.store.ok, false);
    assert.ok(body.store.error.length > 0);
    const health = await request(`${down.origin}/healthz`);
    assert.equal(health.statusCode, 200);
    await health.body.dump();
  });
});

describe('one rule for the client capabilities upstreams see', () => {
  test('server-everything lists the same tools over stdio and Streamable HTTP to a client that declares nothing', async (t) => {
    const scope = testScope(t);
    const require = createRequire(import.meta.url);
    const entry = require.resolve('@modelcontextprotocol/server-everything/dist/index.js');
    const port = await freePort();
    const http = startChild(process.execPath, [entry, 'streamableHttp'], { env: { ...process.env, PORT: String(port) } });
    scope.defer(() => http.kill());
    const deadline = Date.now() + 20_000;
    while (!/listening|running/i.test(http.stderr() + http.stdout()) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    const gateway = await scope.gateway({
      upstreams: {
        piped: { transport: 'stdio', command: process.execPath, args: [entry, 'stdio'] },
        served: { transport: 'streamable-http', url: `http://127.0.0.1:${port}/mcp` },
      },
    });
    const client = new Client({ name: 'declares-nothing', version: '1.0.0' }, { capabilities: {} });
    await client.connect(new StreamableHTTPClientTransport(new URL(gateway.url)));
    scope.defer(() => client.close());
    const names = (await client.listTools()).tools.map((t) => t.name);
    const of = (prefix: string): string[] => names.filter((n) => n.startsWith(prefix)).map((n) => n.slice(prefix.length)).sort();
    assert.ok(of('piped__').length > 0);
    assert.deepEqual(of('served__'), of('piped__'));
    // The tool that asks the client is listed for both, and refused for both, since this client cannot answer.
    assert.ok(of('piped__').includes('trigger-elicitation-request'));
    for (const name of ['piped__trigger-elicitation-request', 'served__trigger-elicitation-request']) {
      const outcome = await client.callTool({ name, arguments: {} }).then((r) => JSON.stringify(r), (e: Error) => e.message);
      assert.match(outcome, /does not support elicitation|elicitation/i, `${name}: ${outcome}`);
    }
  });

});
