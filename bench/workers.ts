// `--workers 1,2` (issue 43): the http scenario's gateway run as `taskgate serve --workers N`, one target per N, so
// that the report can read how it scales as a ratio (N workers' calls/s over 1 worker's, same run). Several workers
// need the Redis store (the memory store is refused), so every N runs on Redis, 1 included: the ratio compares
// like with like. CPU and RSS are the whole process group's (the primary and its workers).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gatewayYaml, type GatewayCommand } from './gateway-proc.js';
import { httpDriver, type Started } from './measure.js';
import { freePort, startProc, waitHttp, type Proc } from './procs.js';
import { dropPrefix, errorText, q } from './scaleout-common.js';
import { ROOT, type Settings } from './settings.js';
import { connectRedis } from './tasks.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export type WorkersTarget = `taskgate-${number}w`;
export const workersTarget = (workers: number): WorkersTarget => `taskgate-${workers}w`;
export const workersLabel = (workers: number): string => `taskgate (redis, ${workers} worker${workers === 1 ? '' : 's'})`;

/** The number of workers of a target measured by --workers, or undefined for any other target. */
export function workersOf(target: string): number | undefined {
  const m = /^taskgate-(\d+)w$/.exec(target);
  return m?.[1] === undefined ? undefined : Number(m[1]);
}

/** `taskgate serve --workers N` in front of `upstreamUrl`, on a Redis prefix of its own (deleted when it stops). */
export async function startWorkersGateway(s: Settings, gw: GatewayCommand, upstreamUrl: string, dir: string, workers: number): Promise<Started> {
  const redis = await connectRedis(s.redisUrl);
  if (typeof redis === 'string') throw new Error(`--workers runs the gateway on Redis: ${redis}`);
  const port = await freePort();
  const prefix = `taskgate-bench-${workers}w-${process.pid}-${Date.now().toString(36)}`;
  const cfg = join(dir, `taskgate-${workers}w.yaml`);
  writeFileSync(cfg, gatewayYaml(port, 'http', upstreamUrl, undefined, undefined, `{ type: redis, url: ${q(s.redisUrl)}, prefix: ${q(prefix)} }`));
  const proc = startProc(`taskgate --workers ${workers}`, gw.command, [...gw.args, 'serve', '--workers', String(workers), '--config', cfg], {
    cwd: ROOT,
    dropEnvPrefix: 'TASKGATE_',
    env: { OTEL_SDK_DISABLED: 'true' },
  });
  const notes = [gw.how, `serve --workers ${workers}, Redis prefix ${prefix}`];
  const cleanup: Pick<Proc, 'stop'> = {
    async stop() {
      const removed = await dropPrefix(redis, prefix).catch((err: unknown) => `could not delete ${prefix}:*: ${errorText(err)}`);
      notes.push(typeof removed === 'number' ? `${removed} Redis keys deleted afterwards` : removed);
      redis.disconnect();
    },
  };
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitHttp(proc, `${base}/readyz`, 30_000, 200);
    // One worker is a gateway on its own (no primary, no taskgate_workers).
    if (workers > 1) await allListening(proc, base, workers);
  } catch (err) {
    await proc.stop();
    await cleanup.stop();
    throw err;
  }
  const { load, driver } = httpDriver(`http://127.0.0.1:${port}/mcp`, s.clients);
  // No heap probe: forced GCs would reach the primary only, which serves nothing.
  return { driver, rssPid: () => proc.pid, rssOf: workers === 1 ? 'taskgate process' : 'taskgate primary + workers', wholeTree: true, procs: [proc, cleanup], tool: () => load.toolName, notes };
}

/** Until the group's /metrics says every worker listens: one that is still starting would miss the warmup. */
async function allListening(proc: Proc, base: string, workers: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  let last = '';
  while (Date.now() < deadline) {
    if (proc.exited()) throw new Error(`${proc.name} exited:\n${proc.tail()}`);
    try {
      const text = await (await fetch(`${base}/metrics`)).text();
      last = /^taskgate_workers .*$/m.exec(text)?.[0] ?? 'no taskgate_workers';
      if (last === `taskgate_workers ${workers}`) return;
    } catch (err) {
      last = errorText(err);
    }
    await sleep(100);
  }
  throw new Error(`${proc.name}: not every worker listening after 30 s (${last})`);
}
