// A redis-server of a test's own, for tests that stop, slow down or restart the task store: loopback, a port of its
// own, its data in a directory of the test's, AOF on and fsynced on every write, so that a restart keeps everything
// Redis acknowledged.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../fixtures/spawn.js';
import { eventually, type TestScope } from './harness.js';

/** A running redis-server of the test's own, on a free port with its data in a temporary directory. */
export interface OwnRedis {
  port: number;
  /** `redis://127.0.0.1:<port>`, for `store.url`. */
  url: string;
  /** SHUTDOWN (the AOF flushed), then the process has exited. */
  stop(): Promise<void>;
  /** Starts it again on the same port and directory: what it acknowledged before stop() is there. */
  restart(): Promise<void>;
  /** Stops it if it runs and removes its directory. */
  close(): Promise<void>;
}

/**
 * Starts a redis-server of the test's own. Persistent (AOF, fsync always) unless `volatile`, for a test that only
 * needs the server to itself; `extraArgs` go after the defaults (`--enable-debug-command yes` for DEBUG SLEEP).
 */
export async function startOwnRedis(options: { volatile?: boolean; extraArgs?: readonly string[] } = {}): Promise<OwnRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'taskgate-redis-'));
  const persistence = options.volatile === true ? ['--save', '', '--appendonly', 'no'] : ['--appendonly', 'yes', '--appendfsync', 'always', '--save', ''];
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, ...persistence, ...(options.extraArgs ?? [])];
  let child: ChildProcess;
  try {
    child = await startRedisProcess(port, args);
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stop: () => stopRedis(port, child),
    restart: async () => {
      child = await startRedisProcess(port, args);
    },
    close: async () => {
      await stopRedis(port, child).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** startOwnRedis, closed (stopped, its directory removed) with `scope`: after the gateways started later. */
export async function ownRedis(scope: TestScope, options: Parameters<typeof startOwnRedis>[0] = {}): Promise<OwnRedis> {
  const redis = await startOwnRedis(options);
  scope.defer(() => redis.close());
  return redis;
}

/** redis-server with `args` (a config file first, or only options), listening on `port`; resolves once it answers PING. */
export async function startRedisProcess(port: number, args: readonly string[]): Promise<ChildProcess> {
  const child = spawn('redis-server', args, { stdio: 'ignore' });
  let exited: string | undefined;
  child.once('exit', (code, signal) => (exited = String(code ?? signal)));
  child.once('error', (error) => (exited = error.message));
  const probe = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => undefined);
  try {
    await eventually(async () => {
      // A server that could not start (port taken, bad directory) says so at once instead of after the timeout.
      if (exited !== undefined) throw new Error(`redis-server on port ${port} exited before answering PING (${exited})`);
      try {
        await probe.connect();
        return (await probe.ping()) === 'PONG';
      } catch {
        probe.disconnect();
        return false;
      }
    }, 10_000);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  } finally {
    probe.disconnect();
  }
  return child;
}

/** SHUTDOWN (which flushes the AOF), then waits for the process to exit; SIGKILL if it has not within 10 s. */
async function stopRedis(port: number, child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const client = new Redis({ port, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  await client.call('SHUTDOWN').catch(() => undefined); // the connection drops as the server exits
  client.disconnect();
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}
