// Every way a gateway stops takes the same way down (src/lifecycle.ts) and leaves nothing of it behind: a listen that
// fails (the port is taken), a start that fails later (upstream names collide: StartupConfigError) and close() after
// a normal start. Nothing behind means: no process of its stdio children (nor of their process groups), no timer
// and no socket or other handle of this process (process.getActiveResourcesInfo() as before the start), and no
// connection at the shared Redis (CLIENT LIST, by the connection name the store's URL gives them). Every wait is
// for an event, a file or a process exit, bounded only against hangs.
import assert from 'node:assert/strict';
import { createHook } from 'node:async_hooks';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { createLogger } from '../../src/log.js';
import { startGateway, StartupConfigError, type RunningGateway } from '../../src/taskgate.js';
import { eventually, type Json } from '../helpers/harness.js';
import { redisTestPrefix, TEST_REDIS_URL } from '../helpers/shared-redis.js';
import { assertGone, pidFiles, processesOf, running, STUBBORN } from '../helpers/stubborn-children.js';
import { bounded } from '../helpers/waits.js';

const PREFIX = redisTestPrefix('lifecycle-teardown');

/** A stdio upstream that ignores SIGTERM and starts a grandchild that does too; `prefix: ''` exposes `ping` as is. */
function stubborn(pidFile: string, extra: Json = {}): Json {
  return { transport: 'stdio', command: process.execPath, args: [STUBBORN, '--pid-file', pidFile, '--ignore-sigterm', '--grandchild'], stopGraceMs: 200, ...extra };
}

/** The shared Redis's URL with a connection name of this test's own, which CLIENT LIST shows for each connection. */
function namedRedisUrl(connectionName: string): string {
  const url = new URL(TEST_REDIS_URL);
  url.searchParams.set('connectionName', connectionName);
  return url.toString();
}

function gatewayConfig(connectionName: string, port: number, upstreams: Json): ReturnType<typeof parseConfig> {
  const full = {
    listen: { host: '127.0.0.1', port, path: '/mcp' },
    store: { type: 'redis', url: namedRedisUrl(connectionName), prefix: PREFIX },
    log: { level: process.env.TEST_LOG_LEVEL ?? 'silent' },
    replicas: { drainTimeoutMs: 0 },
    upstreams,
  };
  return parseConfig(stringify(full), 'teardown.yaml', {});
}

/**
 * What this process holds, by kind and count: sockets, servers, child processes, pipes, referenced timers. Not
 * immediates: each runs once in the loop's next turn (the one being looked from is counted or not by chance).
 */
function resources(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const kind of process.getActiveResourcesInfo()) if (kind !== 'Immediate') counts[kind] = (counts[kind] ?? 0) + 1;
  return counts;
}

/**
 * A full turn of the event loop, through its close phase: a handle being closed (a server, a file watcher) is still
 * listed until then. (An immediate runs before that phase of its turn; one queued from it runs after.)
 */
const loopTurn = (): Promise<void> => new Promise((resolve) => setImmediate(() => setImmediate(resolve)));

interface Holdings {
  resources: Record<string, number>;
  /** Child processes of this one (the TypeScript loader's, for one). */
  children: number[];
  /** Timers created from here on that are neither cleared nor done, with where each was set. */
  timers: Map<number, string>;
  stopWatching(): void;
}

/**
 * What this process holds before a gateway starts; and from then on every timer set, until it is cleared or has
 * fired: getActiveResourcesInfo() lists no unref'd timer, and one that runs forever is a leak too.
 */
async function holdings(): Promise<Holdings> {
  await loopTurn();
  const timers = new Map<number, string>();
  const hook = createHook({
    init: (id, type) => {
      if (type !== 'Timeout') return;
      const frames = (new Error('set here').stack ?? '').split('\n').slice(1).filter((frame) => !frame.includes('node:') && !frame.includes('AsyncHook.init'));
      timers.set(id, frames.slice(0, 4).join('\n'));
    },
    destroy: (id) => void timers.delete(id),
  }).enable();
  return { resources: resources(), children: processesOf([]), timers, stopWatching: () => void hook.disable() };
}

let admin: Redis;
/** Connections the shared Redis holds under `name`. */
async function redisConnections(name: string): Promise<number> {
  const list = (await admin.client('LIST')) as string;
  return list.split('\n').filter((line) => line.includes(` name=${name} `)).length;
}

/** A fresh connection name: the connections of one gateway only. */
const connectionName = (): string => `taskgate-teardown-${process.pid}-${randomBytes(4).toString('hex')}`;

/** Nothing of the gateway is left: its Redis connections close (the server drops them after QUIT), the rest at once. */
async function assertNothingLeft(name: string, held: Holdings, what: string): Promise<void> {
  await loopTurn();
  held.stopWatching();
  assert.deepEqual([...held.timers.values()], [], `${what}: timers left pending`);
  assert.deepEqual(resources(), held.resources, `${what}: timers, sockets or handles left in this process`);
  assert.deepEqual(processesOf([]), held.children, `${what}: child processes left`);
  await eventually(async () => (await redisConnections(name)) === 0, 10_000).catch(async () => {
    assert.fail(`${what}: ${await redisConnections(name)} Redis connection(s) named ${name} left open`);
  });
}

describe('one way down, nothing left behind', () => {
  before(async () => {
    admin = new Redis(TEST_REDIS_URL);
    await admin.ping();
  });
  after(async () => {
    await admin.quit();
  });

  test('a listen that fails (the port is taken) rejects, and leaves no child, timer, socket or Redis connection', async () => {
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const pids = pidFiles('taskgate-teardown-');
    try {
      const name = connectionName();
      const config = gatewayConfig(name, (taken.address() as AddressInfo).port, { stubborn: stubborn(pids.path('stubborn')) });
      const held = await holdings();
      await assert.rejects(bounded(startGateway(config, createLogger(config.log, { pretty: false })), 'the start to fail'), (error: NodeJS.ErrnoException) => {
        assert.equal(error.code, 'EADDRINUSE');
        return true;
      });
      await assertNothingLeft(name, held, 'after a failed listen');
      // Its upstreams connect only once it listens: the child never started, or it is gone.
      if (pids.written('stubborn')) assertGone(await pids.read('stubborn'), 'after a failed listen');
    } finally {
      pids.remove();
      await new Promise((resolve) => taken.close(resolve));
    }
  });

  test('a start that fails later (upstream names collide) rejects with StartupConfigError and leaves nothing behind', async () => {
    const pids = pidFiles('taskgate-teardown-');
    try {
      const name = connectionName();
      const config = gatewayConfig(name, 0, { first: stubborn(pids.path('first'), { prefix: '' }), second: stubborn(pids.path('second'), { prefix: '' }) });
      const held = await holdings();
      let listened: RunningGateway | undefined;
      await assert.rejects(
        bounded(startGateway(config, createLogger(config.log, { pretty: false }), { onListening: (gateway) => (listened = gateway) }), 'the start to fail'),
        (error: Error) => {
          assert.ok(error instanceof StartupConfigError, String(error));
          assert.match(error.message, /upstream names collide/);
          return true;
        },
      );
      assert.ok(listened !== undefined, 'it listened before its upstreams connected');
      // Both children started (their catalogs are how the collision is known): both are gone, with their grandchildren.
      const [first, second] = await Promise.all([pids.read('first'), pids.read('second')]);
      assertGone(first, 'the first colliding child');
      assertGone(second, 'the second colliding child');
      await assertNothingLeft(name, held, 'after colliding names');
      await assert.rejects(fetch(listened.url), 'nothing listens any more');
    } finally {
      pids.remove();
    }
  });

  test('close() after a normal start leaves nothing behind', async () => {
    const pids = pidFiles('taskgate-teardown-');
    try {
      const name = connectionName();
      const config = gatewayConfig(name, 0, { stubborn: stubborn(pids.path('stubborn')) });
      const held = await holdings();
      const gateway = await bounded(startGateway(config, createLogger(config.log, { pretty: false })), 'the start');
      const child = await pids.read('stubborn');
      assert.ok(running(child.pid), 'the child runs while the gateway does');
      assert.ok((await redisConnections(name)) > 0, 'the gateway holds Redis connections under its name while it runs');
      assert.notDeepEqual(resources(), held.resources, 'the gateway holds sockets and timers while it runs');
      await bounded(gateway.close(), 'close');
      assertGone(child, 'after close');
      await assertNothingLeft(name, held, 'after close');
      await bounded(gateway.close(), 'a second close');
    } finally {
      pids.remove();
    }
  });
});
