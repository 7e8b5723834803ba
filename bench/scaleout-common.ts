// What the scale-out scenarios (bench/scaleout.ts) share: a Redis of their own, gateway processes on it in front
// of the session fixture over stdio, and the Redis counters they read (memory, commands, CPU).
//
// The scenarios start a private redis-server on a free port (when the binary is there) rather than use the shared
// one: their figures are Redis memory per task and Redis commands per second, and on a Redis other programs use
// (tests, other benches) those counters would include everybody's work. Without the binary they fall back to
// --redis-url under a prefix of their own, and say so.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { heapProbe, heapProbeArgs, heapProbeEnv, type HeapProbe } from './heap.js';
import { cpuMs, freePort, startProc, waitHttp, type Proc } from './procs.js';
import { connectRedis } from './tasks.js';
import { percentile } from './stats.js';

/** A Redis the scenario may use, and how to give it back. */
export interface BenchRedis {
  url: string;
  /** redis-server's pid when it runs on this machine (its CPU is measured), else undefined. */
  pid: number | undefined;
  /** Every key of the scenario starts with this (a private server is empty; a shared one has others' keys). */
  prefix: string;
  /** "private redis-server on port N" or "shared Redis at URL". */
  how: string;
  admin: Redis;
  /** Deletes the prefix's keys (shared Redis: says how many) or stops the server (private); never throws. */
  close(): Promise<string | undefined>;
}

export interface GatewayProc {
  proc: Proc;
  url: string;
  port: number;
  /** Its heap probe, when started with `probeHeap` (to force GCs before sampling memory; heap.ts). */
  heapProbe?: HeapProbe;
}

/** How the gateway is started (run.ts builds it once for every scenario). */
export interface GatewayLaunch {
  command: string;
  args: string[];
  how: string;
}

/** What every part of the scenario is given. */
export interface ScaleoutContext {
  root: string;
  gw: GatewayLaunch;
  dir: string;
  redis: BenchRedis;
  smoke: boolean;
}

/** One part's outcome: printed lines for the report, checks (reported, never asserted), notes, raw figures. */
export interface ScaleoutPart {
  name: string;
  ok: boolean;
  error?: string;
  lines: string[];
  checks: { what: string; pass: boolean; detail: string }[];
  notes: string[];
  data: Record<string, unknown>;
}

export const q = (s: string): string => JSON.stringify(s); // a JSON string is a valid YAML flow scalar
export const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));
export const kib = (bytes: number): string => `${(bytes / 1024).toFixed(2)} KB`;
export const mib = (bytes: number | undefined): string => (bytes === undefined ? '—' : `${(bytes / 1048576).toFixed(1)} MiB`);

/** Long enough that nothing a scenario stores expires while it runs; its keys go afterwards anyway. */
export const TASK_TTL_MS = 3_600_000;

/** A connected client, or the reason it could not connect as an error (tasks.ts makes the client). */
async function connect(url: string): Promise<Redis> {
  const redis = await connectRedis(url);
  if (typeof redis === 'string') throw new Error(redis);
  return redis;
}

/** A private redis-server on a free port (no persistence), or the shared Redis under a fresh prefix. */
export async function benchRedis(sharedUrl: string, name: string): Promise<BenchRedis> {
  const prefix = `taskgate-bench-${name}-${process.pid}-${Date.now().toString(36)}`;
  if (!existsSync('/usr/bin/redis-server') && !existsSync('/usr/local/bin/redis-server')) {
    const admin = await connect(sharedUrl);
    const info = await admin.info('server');
    const pid = Number(/^process_id:(\d+)/m.exec(info)?.[1]);
    const local = ['127.0.0.1', 'localhost'].includes(new URL(sharedUrl).hostname) && existsSync(`/proc/${pid}/stat`);
    return {
      url: sharedUrl,
      pid: local ? pid : undefined,
      prefix,
      how: `shared Redis at ${sharedUrl} (no redis-server binary here): memory and command figures include other clients`,
      admin,
      async close() {
        const removed = await dropPrefix(admin, prefix).catch((err: unknown) => `could not delete ${prefix}:*: ${errorText(err)}`);
        admin.disconnect();
        return typeof removed === 'number' ? `Redis prefix ${prefix}: ${removed} keys deleted afterwards` : removed;
      },
    };
  }
  const port = await freePort();
  const proc = startProc('redis-server', 'redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']);
  const url = `redis://127.0.0.1:${port}`;
  let admin: Redis | undefined;
  for (let i = 0; admin === undefined; i++) {
    try {
      admin = await connect(url);
    } catch (err) {
      if (proc.exited() || i >= 50) {
        await proc.stop();
        throw new Error(`redis-server did not start on port ${port}: ${errorText(err)}\n${proc.tail()}`, { cause: err });
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const ready = admin;
  return {
    url,
    pid: proc.pid,
    prefix,
    how: `private redis-server on port ${port} (nothing else uses it)`,
    admin: ready,
    async close() {
      ready.disconnect();
      await proc.stop();
      return undefined;
    },
  };
}

export async function dropPrefix(redis: Redis, prefix: string): Promise<number> {
  let removed = 0;
  const stream = redis.scanStream({ match: `${prefix}:*`, count: 1000 });
  for await (const keys of stream as AsyncIterable<string[]>) if (keys.length > 0) removed += await redis.unlink(...keys);
  return removed;
}

/** Redis's own memory accounting (INFO memory used_memory), in bytes. */
export async function redisUsedMemory(redis: Redis): Promise<number> {
  return Number(/^used_memory:(\d+)/m.exec(await redis.info('memory'))?.[1]);
}

/** Commands Redis has processed since it started (INFO stats total_commands_processed). */
export async function redisCommands(redis: Redis): Promise<number> {
  return Number(/^total_commands_processed:(\d+)/m.exec(await redis.info('stats'))?.[1]);
}

/** Calls per command name so far (INFO commandstats); commands a Lua script runs are counted under their own names. */
export async function redisCommandCalls(redis: Redis): Promise<Map<string, number>> {
  const calls = new Map<string, number>();
  for (const m of (await redis.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1] as string, Number(m[2]));
  return calls;
}

export interface RedisLoad {
  /** every command Redis executed, those inside Lua scripts included (INFO total_commands_processed) */
  commandsPerSec: number;
  /** the same per command name */
  byCommand: Map<string, number>;
  cpuMsPerSec: number | undefined;
  seconds: number;
}

/** Commands per second and redis-server CPU (ms per second) over a window that ends when `until` resolves. */
export async function redisLoad(r: BenchRedis, until: () => Promise<void>): Promise<RedisLoad> {
  const byCommand0 = await redisCommandCalls(r.admin);
  const commands0 = await redisCommands(r.admin);
  const cpu0 = r.pid === undefined ? undefined : cpuMs(r.pid);
  const t0 = performance.now();
  await until();
  const seconds = (performance.now() - t0) / 1000;
  const cpu1 = r.pid === undefined ? undefined : cpuMs(r.pid);
  // The two INFO calls themselves are counted too; at these rates they do not matter, and are not hidden.
  const commands = (await redisCommands(r.admin)) - commands0;
  const byCommand = new Map<string, number>();
  for (const [name, calls] of await redisCommandCalls(r.admin)) byCommand.set(name, (calls - (byCommand0.get(name) ?? 0)) / seconds);
  return {
    commandsPerSec: commands / seconds,
    byCommand,
    cpuMsPerSec: cpu0 === undefined || cpu1 === undefined ? undefined : (cpu1 - cpu0) / seconds,
    seconds,
  };
}

/**
 * A gateway on the scenario's Redis in front of the session fixture (stdio, so the upstream costs the gateway no
 * connections), tasks optional for every tool. `extra` lines are added at the top level (caps, replicas).
 */
export async function startGateway(ctx: ScaleoutContext, name: string, extra: readonly string[] = [], probeHeap = false): Promise<GatewayProc> {
  const port = await freePort();
  const probe = probeHeap ? heapProbe() : undefined;
  const config = join(ctx.dir, `taskgate-${name}.yaml`);
  writeFileSync(
    config,
    [
      `listen: { host: 127.0.0.1, port: ${port}, path: /mcp }`,
      `store: { type: redis, url: ${q(ctx.redis.url)}, prefix: ${q(ctx.redis.prefix)} }`,
      'log: { level: warn }',
      'upstreams:',
      `  fixture: { transport: stdio, command: ${q(process.execPath)}, args: ["--import", "tsx", ${q(join(ctx.root, 'test/fixtures/session-server.ts'))}, "--transport", "stdio"], cwd: ${q(ctx.root)} }`,
      ...extra,
      '',
    ].join('\n'),
  );
  const nodeArgs = probe === undefined ? [] : heapProbeArgs();
  const proc = startProc(`taskgate (${name})`, ctx.gw.command, [...nodeArgs, ...ctx.gw.args, 'serve', '--config', config], {
    cwd: ctx.root,
    dropEnvPrefix: 'TASKGATE_',
    ...(probe === undefined ? {} : { env: heapProbeEnv(probe) }),
  });
  try {
    await waitHttp(proc, `http://127.0.0.1:${port}/readyz`, 60_000, 200);
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return { proc, url: `http://127.0.0.1:${port}/mcp`, port, ...(probe === undefined ? {} : { heapProbe: probe }) };
}

/** p50 / p99 / max of latencies in ms. */
export function spread(latencies: readonly number[]): { n: number; p50Ms: number; p99Ms: number; maxMs: number } {
  const sorted = Float64Array.from(latencies).sort();
  return { n: sorted.length, p50Ms: percentile(sorted, 0.5), p99Ms: percentile(sorted, 0.99), maxMs: sorted[sorted.length - 1] ?? Number.NaN };
}

/** Runs `fn` over 0..count-1 with at most `inFlight` at once; resolves when all have settled. */
export async function bounded(count: number, inFlight: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, count) }, worker));
}
