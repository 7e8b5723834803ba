// Config hot reload against real things: the gateway in-process (RunningGateway.reload) and as the CLI process
// (file watch, SIGHUP), real fixture upstreams, real SDK clients and hand-written 2026-07-28 requests. Every
// wait is for an event, a notification or a log line, bounded only against hangs.
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import type { GatewayEventMap } from '../../src/events.js';
import { fixtureCommand, freePort, GATEWAY_CLI_PATH, nodeArgs, REPO_ROOT, startChild, waitForHttp200, type ChildHandle } from '../fixtures/spawn.js';
import { createdTaskId, SessionWire } from '../helpers/session-wire.js';
import { logEntries, testScope, textOf, type Json, type TestGateway, type TestScope } from '../helpers/harness.js';
import { sendRev2026, openListen } from '../helpers/stateless-wire.js';
import { bounded as boundedBy, nextEvent as announced } from '../helpers/waits.js';

const HANG_MS = 30_000;

/** Rejects when `promise` has not settled within HANG_MS: protects against hangs, asserts nothing about time. */
function bounded<T>(promise: Promise<T>, what: string): Promise<T> {
  return boundedBy(promise, what, HANG_MS);
}

/** The full test config as startTestGateway builds it, parsed: what a reload is given. */
function configOf(config: Json, drainTimeoutMs = 0): ReturnType<typeof parseConfig> {
  const full = {
    listen: { host: '127.0.0.1', port: 0, path: '/mcp' },
    store: { type: 'memory' },
    log: { level: process.env.TEST_LOG_LEVEL ?? 'silent' },
    replicas: { drainTimeoutMs },
    ...config,
  };
  return parseConfig(stringify(full), 'test.yaml', {});
}

function stdioUpstream(prefix: string): Json {
  const { command, args, cwd } = fixtureCommand('stdio');
  return { transport: 'stdio', command, args, cwd, prefix };
}

/** The next `name` event the gateway emits. */
function nextEvent<K extends keyof GatewayEventMap>(gateway: TestGateway, name: K): Promise<GatewayEventMap[K]> {
  return bounded(announced(gateway.events, name), name);
}

/**
 * A 2025-11-25 SDK client whose GET stream is known to be open (the gateway answered it), so a notification
 * sent after `ready` reaches it; `toolsChanged()` resolves at the next tools/list_changed.
 */
async function rev2025Client(scope: TestScope, url: string, headers: Record<string, string> = {}): Promise<{ client: Client; ready: Promise<void>; toolsChanged(): Promise<void> }> {
  let opened!: () => void;
  const ready = new Promise<void>((resolve) => (opened = resolve));
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers },
    fetch: async (input, init) => {
      const response = await fetch(input, init);
      if ((init?.method ?? 'GET') === 'GET' && response.status === 200) opened();
      return response;
    },
  });
  const client = new Client({ name: 'reload-test', version: '1.0.0' }, { capabilities: {} });
  const waiters: (() => void)[] = [];
  client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
    for (const wake of waiters.splice(0)) wake();
  });
  await client.connect(transport);
  scope.defer(() => client.close());
  return {
    client,
    ready: bounded(ready, 'the GET stream'),
    toolsChanged: () => bounded(new Promise<void>((resolve) => waiters.push(resolve)), 'tools/list_changed'),
  };
}

async function toolNames(client: Client): Promise<string[]> {
  return (await client.listTools()).tools.map((tool) => tool.name);
}

/**
 * The client's tool names once `wanted` accepts them, listed again at each tools/list_changed: upstreams join in the
 * background, each with its own list_changed.
 */
async function toolNamesOnceChanged(rev2025Side: { client: Client; toolsChanged(): Promise<void> }, first: Promise<void>, wanted: (names: string[]) => boolean): Promise<string[]> {
  await first;
  for (;;) {
    const next = rev2025Side.toolsChanged();
    const names = await toolNames(rev2025Side.client);
    if (wanted(names)) {
      next.catch(() => undefined); // no further change is awaited
      return names;
    }
    await next;
  }
}

describe('config reload (in-process)', () => {
  test('an added upstream connects, and clients of both revisions are told their tool list changed', async (t) => {
    const scope = testScope(t);
    const config = { upstreams: { a: stdioUpstream('a_') } };
    const gateway = await scope.gateway(config);
    const rev2025Side = await rev2025Client(scope, gateway.url);
    await rev2025Side.ready;
    const listen = await openListen(gateway.url, { toolsListChanged: true }, { id: 'reload-listen' });
    scope.defer(() => listen.close());
    await listen.next((e) => e.method === 'notifications/subscriptions/acknowledged');
    assert.ok(!(await toolNames(rev2025Side.client)).includes('b_echo'));

    const changed = rev2025Side.toolsChanged();
    const reloaded = nextEvent(gateway, 'config.reloaded');
    const result = await gateway.reload(configOf({ upstreams: { ...config.upstreams, b: stdioUpstream('b_') } }));
    assert.deepEqual(result.changes, ["upstream 'b' added"]);
    assert.deepEqual((await reloaded).changes, ["upstream 'b' added"]);
    await changed;
    await listen.next((e) => e.method === 'notifications/tools/list_changed', HANG_MS);

    const names = await toolNames(rev2025Side.client);
    assert.ok(names.includes('a_echo') && names.includes('b_echo'), names.join(', '));
    assert.equal(textOf(await rev2025Side.client.callTool({ name: 'b_echo', arguments: { message: 'hi' } })).includes('hi'), true);
    const rev2026List = await sendRev2026(gateway.url, 'tools/list');
    assert.ok((rev2026List.result?.tools as Json[]).some((tool) => tool.name === 'b_echo'));
  });

  test('names the running upstreams show colliding refuse the whole reload: the running config keeps serving', async (t) => {
    const scope = testScope(t);
    const config = { upstreams: { a: stdioUpstream('a_') }, tasks: { defaults: { mode: 'optional' } } };
    const gateway = await scope.gateway(config);
    const before = (await sendRev2026(gateway.url, 'tools/list')).result?.tools as Json[];
    const rejected = nextEvent(gateway, 'config.rejected');
    // `a`'s catalog is known: renaming `greet` onto `echo` collides. The policy change that comes with it must not apply either.
    const next = configOf({ upstreams: { a: { ...stdioUpstream('a_'), tools: { overrides: { greet: { name: 'echo' } } } } }, tasks: { defaults: { mode: 'required' } } });
    await assert.rejects(gateway.reload(next), /collide/);
    assert.match((await rejected).error, /tool 'a_echo' is offered twice by upstream 'a'/);
    assert.deepEqual((await sendRev2026(gateway.url, 'tools/list')).result?.tools, before);
    const rev2025Side = await rev2025Client(scope, gateway.url);
    const slow = (await rev2025Side.client.listTools()).tools.find((tool) => tool.name === 'a_slow');
    assert.equal(slow?.execution?.taskSupport, 'optional');
  });

  test('an added upstream whose names collide is refused when its catalog is known; the others keep serving', async (t) => {
    const scope = testScope(t);
    const config = { upstreams: { a: stdioUpstream('a_') } };
    const gateway = await scope.gateway(config);
    const before = (await sendRev2026(gateway.url, 'tools/list')).result?.tools as Json[];
    const rejected = nextEvent(gateway, 'config.rejected');
    // `b` exposes the same names as `a`, which only its catalog shows: the reload applies, `b` never joins.
    const result = await gateway.reload(configOf({ upstreams: { a: stdioUpstream('a_'), b: stdioUpstream('a_') } }));
    assert.deepEqual(result.changes, ["upstream 'b' added"]);
    assert.match((await rejected).error, /upstream 'b' is not admitted, its names collide: .*tool 'a_echo' is offered by both upstream 'a' and upstream 'b'/);
    assert.deepEqual((await sendRev2026(gateway.url, 'tools/list')).result?.tools, before);
    const ready = (await (await fetch(`${gateway.url.replace(/\/mcp$/, '')}/readyz`)).json()) as { upstreams: Json[] };
    const b = ready.upstreams.find((u) => u.name === 'b');
    assert.equal(b?.state, 'refused');
    assert.match(String(b?.error), /offered by both upstream 'a' and upstream 'b'/);
  });

  test('a removed upstream leaves the lists at once; its running task fails with a message naming the removal', async (t) => {
    const scope = testScope(t);
    const config = { upstreams: { a: stdioUpstream('a_'), b: stdioUpstream('b_') }, tasks: { defaults: { mode: 'optional' } } };
    const gateway = await scope.gateway({ ...config, replicas: { drainTimeoutMs: 500 } });
    const wire = new SessionWire();
    await wire.initialize(gateway.url);
    const created = await wire.request(gateway.url, 'tools/call', { name: 'b_slow', arguments: { ms: 600_000 }, task: { ttl: 600_000 } });
    const taskId = createdTaskId(created);

    await gateway.reload(configOf({ upstreams: { a: config.upstreams.a }, tasks: config.tasks }, 500));
    const call = await wire.request(gateway.url, 'tools/call', { name: 'b_echo', arguments: { message: 'x' } });
    assert.match(String((call.error as Json | undefined)?.message), /Unknown tool: b_echo/);

    // tasks/result waits for the task to end: the drain, then the failure.
    await bounded(wire.request(gateway.url, 'tasks/result', { taskId }), 'the task to end');
    const task = (await wire.request(gateway.url, 'tasks/get', { taskId })).result as Json;
    assert.equal(task.status, 'failed');
    assert.match(String(task.statusMessage), /Upstream 'b' was removed from the gateway's configuration \(config reload\)/);
  });

  test('an added API key works at once, and a changed access rule applies to the next request', async (t) => {
    const scope = testScope(t);
    const alice = 'alice-key-0123456789abcdef';
    const bob = 'bob-key-0123456789abcdefgh';
    const auth = { resource: 'http://gateway.example/mcp', apiKeys: [{ principal: 'alice', key: alice }], access: [{ principals: ['alice'], tools: ['a_echo'] }] };
    const config = { upstreams: { a: stdioUpstream('a_') }, auth };
    const gateway = await scope.gateway(config);
    const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });
    const asAlice = await rev2025Client(scope, gateway.url, bearer(alice));
    assert.deepEqual((await toolNames(asAlice.client)).filter((name) => name.startsWith('a_')), ['a_echo']);
    assert.equal((await sendRev2026(gateway.url, 'tools/list', {}, { headers: bearer(bob) })).status, 401);

    await asAlice.ready;
    const changed = asAlice.toolsChanged();
    const result = await gateway.reload(configOf({ ...config, auth: { ...auth, apiKeys: [...auth.apiKeys, { principal: 'bob', key: bob }], access: [{ principals: ['alice', 'bob'], tools: ['a_echo', 'a_slow'] }] } }));
    assert.deepEqual(result.changes, ['auth.access changed', 'auth.apiKeys changed']);
    await changed;
    assert.deepEqual((await toolNames(asAlice.client)).filter((name) => name.startsWith('a_')).sort(), ['a_echo', 'a_slow']);
    const asBob = await sendRev2026(gateway.url, 'tools/list', {}, { headers: bearer(bob) });
    assert.equal(asBob.status, 200);
    assert.ok((asBob.result?.tools as Json[]).some((tool) => tool.name === 'a_slow'));
  });

  test('a rule a reload adds holds the next call of a tool whose policy every earlier call had read', async (t) => {
    // Each tool's policy is resolved once and kept (task-policies.ts): kept across a reload, an approval rule added
    // to stop a tool would let it run on.
    const scope = testScope(t);
    const alice = 'alice-key-0123456789abcdef';
    const auth = { resource: 'http://gateway.example/mcp', apiKeys: [{ principal: 'alice', key: alice }, { principal: 'approver', key: 'approver-key-0123456789abcd' }] };
    const config = { upstreams: { a: stdioUpstream('a_') }, auth };
    const gateway = await scope.gateway(config);
    const { client } = await rev2025Client(scope, gateway.url, { authorization: `Bearer ${alice}` });
    for (const text of ['one', 'two']) assert.equal(textOf(await client.callTool({ name: 'a_echo', arguments: { text } })), JSON.stringify({ text }), 'run as a plain call');

    const result = await gateway.reload(configOf({ ...config, tasks: { rules: [{ match: 'a_echo', approval: { approvers: ['approver'], timeoutMs: 600_000 } }] } }));
    assert.ok(result.changes.includes('tasks.rules changed'), result.changes.join(', '));
    const held = nextEvent(gateway, 'task.created');
    const answer = await client.callTool({ name: 'a_echo', arguments: { text: 'three' } });
    assert.equal((await held).tool, 'a_echo', 'the call became a task held for approval');
    assert.notEqual(textOf(answer), JSON.stringify({ text: 'three' }), 'the upstream did not run it');
  });
});

/** Waits for a log line of the gateway process that `match` accepts (pino JSON on stdout). */
async function logLine(gateway: ChildHandle, match: (entry: Json) => boolean, after = 0): Promise<Json> {
  const find = (): Json | undefined => logEntries(gateway).slice(after).find(match);
  return bounded(new Promise<Json>((resolve, reject) => {
    const check = (): void => {
      const found = find();
      if (found === undefined) return;
      gateway.child.stdout?.off('data', onData);
      resolve(found);
    };
    const onData = (): void => void setImmediate(check);
    gateway.child.stdout?.on('data', onData);
    void gateway.exited.then((code) => reject(new Error(`gateway exited (${code}): ${gateway.stderr()}`)));
    check();
  }), 'a log line');
}

/** Replaces the file the way editors save: a new file renamed over the old one. */
function save(path: string, text: string): void {
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

describe('config reload (the CLI: file changes and SIGHUP)', () => {
  test('editing config/taskgate.example.yaml adds an upstream; a broken edit is refused; SIGHUP reloads', async (t) => {
    const scope = testScope(t);
    const dir = mkdtempSync(join(tmpdir(), 'taskgate-reload-'));
    scope.defer(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'taskgate.yaml');
    copyFileSync(join(REPO_ROOT, 'config/taskgate.example.yaml'), path);
    const port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, TASKGATE_PORT: String(port) };
    for (const key of ['TASKGATE_CONFIG', 'TASKGATE_REDIS_URL', 'TASKGATE_LOG_LEVEL']) delete env[key];
    const gateway = startChild(process.execPath, [...nodeArgs(GATEWAY_CLI_PATH), 'serve', '--config', path], { env, cwd: REPO_ROOT });
    scope.defer(() => gateway.kill());
    await waitForHttp200(`http://127.0.0.1:${port}/healthz`, { timeoutMs: HANG_MS, abort: gateway.exited });
    const url = `http://127.0.0.1:${port}/mcp`;
    await logLine(gateway, (e) => e.msg === 'upstream connected' && e.upstream === 'everything');

    const rev2025Side = await rev2025Client(scope, url);
    await rev2025Side.ready;
    assert.ok((await toolNames(rev2025Side.client)).includes('echo'));

    // Add the fixture as a second upstream: both now get "<name>__" prefixes.
    const { command, args, cwd } = fixtureCommand('stdio');
    const original = readFileSync(path, 'utf8');
    const added = original.replace(/^upstreams:\n/m, `upstreams:\n  fixture:\n    transport: stdio\n    command: ${JSON.stringify(command)}\n    args: ${JSON.stringify(args)}\n    cwd: ${JSON.stringify(cwd)}\n`);
    assert.notEqual(added, original);
    let changed = rev2025Side.toolsChanged();
    save(path, added);
    const reloaded = await logLine(gateway, (e) => e.msg === 'config reloaded');
    assert.ok((reloaded.changes as string[]).includes("upstream 'fixture' added"), JSON.stringify(reloaded));
    let names = await toolNamesOnceChanged(rev2025Side, changed, (listed) => listed.includes('fixture__slow') && listed.includes('everything__echo'));
    assert.ok(names.includes('fixture__slow') && names.includes('everything__echo'), names.join(', '));

    // A broken edit: logged with where it is broken, and the running config keeps serving.
    const seen = logEntries(gateway).length;
    save(path, `${added}\nlisten:\n  port: [unclosed\n`);
    const rejected = await logLine(gateway, (e) => typeof e.msg === 'string' && e.msg.startsWith('config rejected'), seen);
    assert.match(String(rejected.msg), /taskgate\.yaml:\d+:\d+/);
    assert.equal(rejected.trigger, 'file changed');
    names = await toolNames(rev2025Side.client);
    assert.ok(names.includes('fixture__slow'), names.join(', '));

    // SIGHUP reads the file again without it changing: still broken, refused again, now for SIGHUP.
    const beforeHup = logEntries(gateway).length;
    process.kill(gateway.pid, 'SIGHUP');
    const hup = await logLine(gateway, (e) => typeof e.msg === 'string' && e.msg.startsWith('config rejected'), beforeHup);
    assert.equal(hup.trigger, 'SIGHUP');

    // The original file again: the fixture drains away and clients are told.
    const beforeRevert = logEntries(gateway).length;
    changed = rev2025Side.toolsChanged();
    save(path, original);
    await logLine(gateway, (e) => e.msg === 'config reloaded' && (e.changes as string[]).includes("upstream 'fixture' removed"), beforeRevert);
    names = await toolNamesOnceChanged(rev2025Side, changed, (listed) => listed.includes('echo'));
    assert.ok(names.includes('echo') && !names.some((name) => name.startsWith('fixture__')), names.join(', '));
    assert.equal(gateway.child.exitCode, null);
  });
});
