// A redis-server of a test's own, for tests that stop and restart the task store: loopback, a port of its own,
// its data in a directory of the test's, AOF on and fsynced on every write, so that a restart keeps everything
// Redis acknowledged.
import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { eventually } from './harness.js';

/** redis-server on `port` with its data in `dir`; resolves once it answers PING. */
export async function startRedis(port: number, dir: string): Promise<ChildProcess> {
  return startRedisProcess(port, ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', '']);
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
export async function stopRedis(port: number, child: ChildProcess): Promise<void> {
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
