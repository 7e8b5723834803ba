// The gateway listens before its upstreams are up, and no stdio child outlives it: real child processes that ignore
// SIGTERM (with a grandchild that does too) or never finish initialize, stopped by gateway close (in-process), by
// SIGTERM to a gateway process, and by a config reload; and a reload's credentials apply without waiting for an
// upstream that never initializes. Every wait is for an event, a file or a process exit, bounded only against hangs.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import type { GatewayEventMap } from '../../src/events.js';
import { startGateway, type RunningGateway } from '../../src/taskgate.js';
import { createLogger } from '../../src/log.js';
import { freePort } from '../fixtures/spawn.js';
import { testScope, type Json, type TestScope } from '../helpers/harness.js';
import { sendRev2026 } from '../helpers/stateless-wire.js';
import { assertGone, pidFiles as pidDirectory, running, STUBBORN, type PidFiles } from '../helpers/stubborn-children.js';
import { bounded, HANG_MS, nextEvent as announced } from '../helpers/waits.js';

/** The test's pid files, removed with its scope. */
function pidFiles(scope: TestScope): PidFiles {
  const files = pidDirectory('taskgate-lifecycle-');
  scope.defer(() => files.remove());
  return files;
}

const ALICE = 'alice-key-0123456789abcdef';
const BOB = 'bob-key-0123456789abcdefgh';


function stubborn(pidFile: string, flags: string[], extra: Json = {}): Json {
  return { transport: 'stdio', command: process.execPath, args: [STUBBORN, '--pid-file', pidFile, ...flags], stopGraceMs: 200, ...extra };
}

function gatewayConfig(config: Json): ReturnType<typeof parseConfig> {
  const full = { listen: { host: '127.0.0.1', port: 0, path: '/mcp' }, store: { type: 'memory' }, log: { level: process.env.TEST_LOG_LEVEL ?? 'silent' }, replicas: { drainTimeoutMs: 0 }, ...config };
  return parseConfig(stringify(full), 'test.yaml', {});
}

/** The gateway's next `name` event for which `match` holds. */
function nextEvent<K extends keyof GatewayEventMap>(gateway: RunningGateway, name: K, match: (payload: GatewayEventMap[K]) => boolean = () => true): Promise<GatewayEventMap[K]> {
  return bounded(announced(gateway.events, name, match), name);
}

async function readiness(url: string): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${new URL(url).origin}/readyz`);
  return { status: response.status, body: (await response.json()) as Json };
}

describe('start-up: listening before the upstreams', () => {
  test('healthz answers while a stdio child is stuck in initialize; readyz is 503 naming it; close stops it', async (t) => {
    const scope = testScope(t);
    const pids = pidFiles(scope);
    const config = gatewayConfig({
      upstreams: {
        stuck: stubborn(pids.path('stuck'), ['--never-initialize', '--ignore-sigterm', '--grandchild'], { initializeTimeoutMs: HANG_MS * 2 }),
        fine: stubborn(pids.path('fine'), []),
      },
    });
    let listening!: (gateway: RunningGateway) => void;
    // Heard from the moment it listens: 'fine' may connect before the test reads anything.
    let fineUp!: Promise<unknown>;
    const listened = new Promise<RunningGateway>((resolve) => (listening = (gateway) => {
      fineUp = nextEvent(gateway, 'upstream.up', (e) => e.upstream === 'fine');
      resolve(gateway);
    }));
    const started = startGateway(config, createLogger(config.log, { pretty: false }), { onListening: listening });
    const gateway = await bounded(listened, 'the gateway to listen');
    scope.defer(() => gateway.close());
    const stuck = await pids.read('stuck');
    // Only the stuck one keeps the replica from being ready (on a busy machine 'fine' may still be connecting).
    await fineUp;

    const health = await fetch(`${new URL(gateway.url).origin}/healthz`);
    assert.equal(health.status, 200);
    const ready = await readiness(gateway.url);
    assert.equal(ready.status, 503);
    assert.deepEqual(ready.body.initializing, ['stuck']);
    assert.match(String(ready.body.reason), /upstream 'stuck' still initializing/);
    assert.equal((ready.body.upstreams as Json[]).find((u) => u.name === 'stuck')?.state, 'starting');

    // Stopped while it starts: startGateway settles, and nothing of the stuck child (nor its grandchild) is left.
    await gateway.close();
    await bounded(started, 'startGateway to settle');
    assertGone(stuck, 'the child stuck in initialize');
    assertGone(await pids.read('fine'), 'the child that had started');
  });

  test('an initialize that times out stops the child, the start goes on, and the upstream is retried', async (t) => {
    const scope = testScope(t);
    const pids = pidFiles(scope);
    const config = gatewayConfig({
      upstreams: { stuck: stubborn(pids.path('stuck'), ['--never-initialize', '--ignore-sigterm'], { initializeTimeoutMs: 300, restart: { initialDelayMs: 60_000, maxDelayMs: 60_000 } }) },
    });
    const gateway = await bounded(startGateway(config, createLogger(config.log, { pretty: false })), 'the start');
    scope.defer(() => gateway.close());
    // The child may not have come as far as writing its pid file within 300 ms; if it did, it is gone now.
    if (pids.written('stuck')) assertGone(await pids.read('stuck'), 'the child whose initialize timed out');
    const ready = await readiness(gateway.url);
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
    const upstream = (ready.body.upstreams as Json[]).find((u) => u.name === 'stuck');
    assert.equal(upstream?.state, 'down');
    assert.match(String(upstream?.error), /did not finish initialize within initializeTimeoutMs \(300 ms\)/);
  });
});

describe('stdio children never outlive the gateway', () => {
  test('close: a child that ignores SIGTERM, and its grandchild, are killed after stopGraceMs', async (t) => {
    const scope = testScope(t);
    const pids = pidFiles(scope);
    const config = gatewayConfig({ upstreams: { stubborn: stubborn(pids.path('stubborn'), ['--ignore-sigterm', '--grandchild']) } });
    const gateway = await startGateway(config, createLogger(config.log, { pretty: false }));
    scope.defer(() => gateway.close());
    const child = await pids.read('stubborn');
    assert.ok(running(child.pid) && child.grandchild !== undefined && running(child.grandchild));
    const answer = await sendRev2026(gateway.url, 'tools/call', { name: 'ping', arguments: {} });
    assert.deepEqual(answer.result?.content, [{ type: 'text', text: 'pong' }]);
    await gateway.close();
    assertGone(child, 'after close');
  });

  test('SIGTERM to a gateway process: no process of its children remains once it exits', async (t) => {
    const scope = testScope(t);
    const pids = pidFiles(scope);
    const gateway = await scope.spawnGateway({
      listeningOnly: true,
      config: {
        log: { level: 'info' },
        upstreams: {
          stuck: stubborn(pids.path('stuck'), ['--never-initialize', '--ignore-sigterm'], { initializeTimeoutMs: HANG_MS * 2 }),
          stubborn: stubborn(pids.path('stubborn'), ['--ignore-sigterm', '--grandchild']),
        },
      },
    });
    const [stuck, child] = await Promise.all([pids.read('stuck'), pids.read('stubborn')]);
    process.kill(gateway.pid, 'SIGTERM');
    assert.equal(await bounded(gateway.exited, 'the gateway to exit'), 0);
    assertGone(stuck, 'the child stuck in initialize');
    assertGone(child, 'the child that ignores SIGTERM');
    assert.match(gateway.stdout(), /"msg":"stopped"/);
  });

  test('a reload that removes them stops a child stuck in initialize and one that ignores SIGTERM', async (t) => {
    const scope = testScope(t);
    const pids = pidFiles(scope);
    const keep = stubborn(pids.path('keep'), [], { prefix: 'keep__' });
    const gone = stubborn(pids.path('gone'), ['--ignore-sigterm', '--grandchild']);
    const gateway = await scope.gateway({ upstreams: { keep, gone } });
    const child = await pids.read('gone');

    // An upstream added by one reload and still initializing is abandoned by the next that removes it.
    const stuckConfig = stubborn(pids.path('stuck'), ['--never-initialize', '--ignore-sigterm'], { initializeTimeoutMs: HANG_MS * 2 });
    await gateway.reload(gatewayConfig({ upstreams: { keep, gone, stuck: stuckConfig } }));
    const stuck = await pids.read('stuck');
    const stopped = Promise.all([nextEvent(gateway, 'upstream.stopped', (e) => e.upstream === 'gone'), nextEvent(gateway, 'upstream.stopped', (e) => e.upstream === 'stuck')]);
    const result = await gateway.reload(gatewayConfig({ upstreams: { keep } }));
    assert.deepEqual(result.changes.sort(), ["upstream 'gone' removed", "upstream 'stuck' removed"]);
    await stopped;
    assertGone(child, 'the removed child that ignores SIGTERM');
    assertGone(stuck, 'the removed child stuck in initialize');
    const answer = await sendRev2026(gateway.url, 'tools/call', { name: 'keep__ping', arguments: {} });
    assert.deepEqual(answer.result?.content, [{ type: 'text', text: 'pong' }]);
  });
});

describe('security configuration applies at once', () => {
  test('a reload that removes a key and adds a never-initializing upstream refuses the key on the next request', async (t) => {
    const scope = testScope(t);
    const pids = pidFiles(scope);
    const port = await freePort();
    const bearer = (key: string): { headers: Record<string, string> } => ({ headers: { authorization: `Bearer ${key}` } });
    const keep = stubborn(pids.path('keep'), [], { prefix: 'keep__' });
    const auth = { resource: `http://127.0.0.1:${port}/mcp`, apiKeys: [{ principal: 'alice', key: ALICE }, { principal: 'bob', key: BOB }] };
    const base = { listen: { host: '127.0.0.1', port, path: '/mcp' }, upstreams: { keep }, auth };
    const gateway = await scope.gateway(base);
    assert.equal((await sendRev2026(gateway.url, 'tools/list', {}, bearer(BOB))).status, 200);

    // One write: bob's key goes, an upstream that never answers initialize comes.
    const stuck = stubborn(pids.path('stuck'), ['--never-initialize'], { initializeTimeoutMs: HANG_MS * 2 });
    const reloaded = nextEvent(gateway, 'config.reloaded');
    const result = await gateway.reload(gatewayConfig({ ...base, upstreams: { keep, stuck }, auth: { ...auth, apiKeys: [auth.apiKeys[0]] } }));
    await reloaded;
    assert.deepEqual(result.changes.sort(), ['auth.apiKeys changed', "upstream 'stuck' added"]);
    assert.equal((await sendRev2026(gateway.url, 'tools/list', {}, bearer(BOB))).status, 401);
    assert.equal((await sendRev2026(gateway.url, 'tools/list', {}, bearer(ALICE))).status, 200);
    const firstStuck = await pids.read('stuck');
    const ready = await readiness(gateway.url);
    assert.equal(ready.status, 200, 'an upstream a reload adds does not take the replica out of rotation');
    assert.equal((ready.body.upstreams as Json[]).find((u) => u.name === 'stuck')?.state, 'starting');

    // A second write right after: it applies without waiting behind the first one's upstream (still initializing).
    const stuckAgain = stubborn(pids.path('stuck'), ['--never-initialize'], { initializeTimeoutMs: HANG_MS * 2 + 1 });
    const superseded = nextEvent(gateway, 'upstream.stopped', (e) => e.upstream === 'stuck');
    const second = await gateway.reload(gatewayConfig({ ...base, upstreams: { keep, stuck: stuckAgain }, auth: { ...auth, apiKeys: [auth.apiKeys[1]] } }));
    assert.deepEqual(second.changes.sort(), ['auth.apiKeys changed', "upstream 'stuck' changed (initializeTimeoutMs)"]);
    assert.equal((await sendRev2026(gateway.url, 'tools/list', {}, bearer(ALICE))).status, 401);
    assert.equal((await sendRev2026(gateway.url, 'tools/list', {}, bearer(BOB))).status, 200);
    // The newest file wins: the first file's upstream, still initializing, is stopped.
    await superseded;
    assertGone(firstStuck, 'the superseded upstream still initializing');
  });
});
