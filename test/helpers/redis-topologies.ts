// Redis deployments of a test's own, as operators run them for availability: a Redis Cluster of three masters and
// a Sentinel-managed primary with one replica. Loopback, free ports, a temporary directory, no persistence (a test
// that needs a restart to keep data uses redis-server.ts); `stop()` ends every process and removes the directory.
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort } from '../fixtures/spawn.js';
import { eventually } from './harness.js';
import { startRedisProcess } from './redis-server.js';

const run = promisify(execFile);
/** Forming a cluster or a sentinel set takes a few seconds; past this something is wrong. */
const FORMING_TIMEOUT_MS = 20_000;
const VOLATILE = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];

export interface RedisCluster {
  /** Every master, as `redis://127.0.0.1:<port>` (what `store.cluster.nodes` takes). */
  nodes: string[];
  stop(): Promise<void>;
}

/**
 * Three masters without replicas, the slots split evenly by `redis-cli --cluster create`: every slot rule and
 * cross-node path is exercised with the fewest processes. Each node's cluster bus gets a free port of its own
 * (`cluster-port`) instead of port + 10000, which may be taken or out of range.
 */
export async function startCluster(): Promise<RedisCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'taskgate-cluster-'));
  const children: ChildProcess[] = [];
  const stop = () => stopAll(children, dir);
  try {
    const ports: number[] = [];
    for (let i = 0; i < 3; i++) {
      const [port, busPort] = [await freePort(), await freePort()];
      ports.push(port);
      const args = ['--port', String(port), '--cluster-enabled', 'yes', '--cluster-port', String(busPort), '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', '5000', '--dir', dir, ...VOLATILE];
      children.push(await startRedisProcess(port, args));
    }
    await run('redis-cli', ['--cluster', 'create', ...ports.map((port) => `127.0.0.1:${port}`), '--cluster-yes'], { timeout: FORMING_TIMEOUT_MS });
    await eventually(async () => (await Promise.all(ports.map(clusterOk))).every(Boolean), FORMING_TIMEOUT_MS);
    return { nodes: ports.map((port) => `redis://127.0.0.1:${port}`), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

export interface SentinelSet {
  /** The primary's name as the sentinels monitor it. */
  name: string;
  /** The sentinels, as `redis://127.0.0.1:<port>` (what `store.sentinel.nodes` takes). */
  sentinels: string[];
  primaryPort: number;
  replicaPort: number;
  /** kill -9 of the process serving on `port` (the primary, for a failover). */
  kill(port: number): void;
  /** The port of the primary the sentinels name now. */
  currentPrimaryPort(): Promise<number>;
  /** The sentinels' logs, for a failure message (failover decisions, votes, TILT). */
  logs(): Promise<string>;
  stop(): Promise<void>;
}

/**
 * A primary, one replica and three sentinels with quorum 2: the smallest set that fails over the way production
 * does, by a majority of sentinels agreeing that the primary is down and electing a leader to promote the replica
 * (one sentinel with quorum 1 would skip the agreement and the election). The primary counts as down after 1 s.
 */
export async function startSentinelSet(): Promise<SentinelSet> {
  const name = 'taskgate-primary';
  const dir = await mkdtemp(join(tmpdir(), 'taskgate-sentinel-'));
  const children = new Map<number, ChildProcess>();
  const stop = () => stopAll([...children.values()], dir);
  try {
    const primaryPort = await freePort();
    children.set(primaryPort, await startRedisProcess(primaryPort, ['--port', String(primaryPort), '--dir', dir, ...VOLATILE]));
    const replicaPort = await freePort();
    children.set(replicaPort, await startRedisProcess(replicaPort, ['--port', String(replicaPort), '--dir', dir, '--replicaof', '127.0.0.1', String(primaryPort), ...VOLATILE]));
    const sentinelPorts: number[] = [];
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      sentinelPorts.push(port);
      // A sentinel rewrites its config file as it learns the set, so each gets a file of its own.
      const file = join(dir, `sentinel-${port}.conf`);
      await writeFile(
        file,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `logfile ${join(dir, `sentinel-${port}.log`)}`,
          `sentinel monitor ${name} 127.0.0.1 ${primaryPort} 2`,
          `sentinel down-after-milliseconds ${name} 1000`,
          `sentinel failover-timeout ${name} 5000`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      children.set(port, await startRedisProcess(port, [file, '--sentinel']));
    }
    // Ready when the replica is in sync and every sentinel knows the replica and the two other sentinels: only
    // then can they agree on a failover.
    await eventually(async () => (await infoField(replicaPort, 'replication', 'master_link_status')) === 'up', FORMING_TIMEOUT_MS);
    await eventually(async () => (await Promise.all(sentinelPorts.map((port) => sentinelKnowsAll(port, name)))).every(Boolean), FORMING_TIMEOUT_MS);
    return {
      name,
      sentinels: sentinelPorts.map((port) => `redis://127.0.0.1:${port}`),
      primaryPort,
      replicaPort,
      kill: (port) => children.get(port)?.kill('SIGKILL'),
      currentPrimaryPort: async () => {
        const [, port] = (await onePort(sentinelPorts[0] as number, (redis) => redis.call('SENTINEL', 'get-master-addr-by-name', name))) as [string, string];
        return Number(port);
      },
      logs: async () => (await Promise.all(sentinelPorts.map((port) => readFile(join(dir, `sentinel-${port}.log`), 'utf8').catch(() => '')))).join('\n'),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function stopAll(children: readonly ChildProcess[], dir: string): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL'); // nothing to keep: these servers hold only test data
      await exited;
    }),
  );
  await rm(dir, { recursive: true, force: true });
}

/** One command on a short-lived connection to `port`; failures (a node not up yet) are the caller's to retry. */
async function onePort<T>(port: number, command: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await command(redis);
  } finally {
    redis.disconnect();
  }
}

async function clusterOk(port: number): Promise<boolean> {
  const info = await onePort(port, (redis) => redis.cluster('INFO')).catch(() => '');
  return /^cluster_state:ok\r?$/m.test(String(info));
}

async function infoField(port: number, section: string, field: string): Promise<string | undefined> {
  const info = await onePort(port, (redis) => redis.info(section)).catch(() => '');
  return new RegExp(`^${field}:(.*?)\\r?$`, 'm').exec(info)?.[1];
}

async function sentinelKnowsAll(port: number, name: string): Promise<boolean> {
  return onePort(port, async (redis) => {
    const replicas = (await redis.call('SENTINEL', 'replicas', name)) as unknown[];
    const sentinels = (await redis.call('SENTINEL', 'sentinels', name)) as unknown[];
    return replicas.length === 1 && sentinels.length === 2;
  }).catch(() => false);
}
