// Scale-out, part 4: a dead replica with the DEFAULT lease (issue 23), and what holding leases costs Redis.
// Two gateway processes share one Redis; neither config sets replicas.leaseMs, so both run with its default. Every
// task holds a ticket of its principal's maxTasksPerPrincipal semaphore, as by default (clients without auth count
// as one principal, so the cap is raised to let N tasks in).
//
//   renewal cost   Redis commands/s and redis-server CPU over a window while both replicas are idle, then over an
//                  equal window while replica A holds N running tasks (the session fixture's `slow`, created through
//                  A's HTTP front); the difference, scaled to 1,000 tasks, is what keeping them leased costs
//                  (the replica's heartbeat does not grow with its tasks; their slot tickets' renewals do)
//   takeover       A is killed with SIGKILL holding those N tasks (no drain, no goodbye); timed from the kill until
//                  every one of them is terminal, watched through the store's events and then confirmed one by one
//                  with tasks/get on replica B
import { DEFAULTS } from '../src/config/schema.js';
import { Redis } from 'ioredis';
import { redisKeys } from '../src/store/redis-keys.js';
import { RedisTaskStore } from '../src/store/redis-task-store.js';
import { batches } from '../src/store/task-store.js';
import { McpHttp, resolveTool, type McpSession } from './load.js';
import { untilAllEnded } from './scale.js';
import { createdTaskId } from './tasks.js';
import { bounded, errorText, redisLoad, startGateway, TASK_TTL_MS, type GatewayProc, type ScaleoutContext, type ScaleoutPart } from './scaleout-common.js';

/** Target from the issue; reported, never asserted. */
export const MAX_DEAD_REPLICA_MS = 5_000;
const CREATE_IN_FLIGHT = 200;
const SESSIONS = 10;
const SLOW_MS = 3_600_000;
/** The takeover is reported as failed after this long rather than waited for forever. */
const GIVE_UP_MS = 120_000;
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

export interface TakeoverSettings {
  /** running tasks the dying replica holds */
  tasks: number;
  /** each Redis load window (idle, then holding) */
  windowMs: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * How long until the liveness of the replica that runs `ids` runs out, by Redis's clock (negative: already out),
 * and how many of them are leased to a replica at all.
 */
async function leaseLeftMs(redis: Redis, prefix: string, ids: readonly string[]): Promise<{ leftMs: number; leased: number }> {
  const keys = redisKeys(prefix);
  const [seconds, micros] = await redis.time();
  const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  const owners = new Set<string>();
  let leased = 0;
  for (const batch of batches(ids)) {
    for (const owner of await redis.hmget(keys.runningOwners(), ...batch)) {
      if (owner === null) continue;
      leased++;
      owners.add(owner);
    }
  }
  let last = 0;
  for (const owner of owners) last = Math.max(last, Number((await redis.zscore(keys.replicasAlive(), owner)) ?? 0));
  return { leftMs: last - now, leased };
}

export async function takeoverPart(ctx: ScaleoutContext, s: TakeoverSettings): Promise<ScaleoutPart> {
  const part: ScaleoutPart = { name: 'takeover', ok: false, lines: [], checks: [], notes: [], data: {} };
  const store = new RedisTaskStore(new Redis(ctx.redis.url, { maxRetriesPerRequest: 1, commandTimeout: 60_000 }), ctx.redis.prefix);
  const config = [`tasks: { defaults: { mode: optional, maxTasksPerPrincipal: ${s.tasks + 100} } }`, `replicas: { maxRunningTasks: ${Math.max(DEFAULTS.maxRunningTasks, s.tasks + 100)} }`];
  const gateways: GatewayProc[] = [];
  const https: McpHttp[] = [];
  let watching: ReturnType<typeof untilAllEnded> | undefined;
  try {
    await store.ready();
    gateways.push(await startGateway(ctx, 'takeover-a', config), await startGateway(ctx, 'takeover-b', config));
    const [a, b] = gateways as [GatewayProc, GatewayProc];
    const viaA = new McpHttp(a.url, CREATE_IN_FLIGHT, 60_000);
    const viaB = new McpHttp(b.url, 50, 60_000);
    https.push(viaA, viaB);
    const sessions = await viaA.openSessions(SESSIONS);
    const slow = await resolveTool(viaA, sessions[0] as McpSession, 'slow');

    // ---- renewal cost: the same window idle, then holding N ----
    const idle = await redisLoad(ctx.redis, () => sleep(s.windowMs));
    const ids: string[] = [];
    await bounded(s.tasks, CREATE_IN_FLIGHT, async (i) => {
      const result = await viaA.rpc(sessions[i % SESSIONS] as McpSession, 'tools/call', { name: slow, arguments: { ms: SLOW_MS }, task: { ttl: TASK_TTL_MS } });
      ids.push(createdTaskId(result));
    });
    const before = await leaseLeftMs(ctx.redis.admin, ctx.redis.prefix, ids);
    if (before.leased !== ids.length) throw new Error(`${before.leased} of ${ids.length} tasks are leased after creation`);
    const holding = await redisLoad(ctx.redis, () => sleep(s.windowMs));
    const perThousand = (v: number, w: number): number => ((v - w) * 1000) / ids.length;
    const commandsPer1k = perThousand(holding.commandsPerSec, idle.commandsPerSec);
    const topCommands = [...holding.byCommand]
      .map(([name, perSec]) => [name, perThousand(perSec, idle.byCommand.get(name) ?? 0)] as const)
      .filter(([name, per1k]) => per1k > 0.05 && name !== 'info')
      .sort((x, y) => y[1] - x[1])
      .slice(0, 5);
    const cpuPer1k = holding.cpuMsPerSec === undefined || idle.cpuMsPerSec === undefined ? undefined : perThousand(holding.cpuMsPerSec, idle.cpuMsPerSec);

    // ---- takeover: SIGKILL A, watch every task end, confirm on B ----
    watching = untilAllEnded(store, ids);
    const atKill = await leaseLeftMs(ctx.redis.admin, ctx.redis.prefix, ids);
    const killedAt = performance.now();
    process.kill(a.proc.pid, 'SIGKILL');
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      watching.done,
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), GIVE_UP_MS);
      }),
    ]);
    clearTimeout(timer);
    if (outcome === undefined) throw new Error(`the dead replica's ${ids.length} tasks were not all terminal within ${GIVE_UP_MS / 1000} s of the kill`);
    const allEndedMs = outcome.lastAt - killedAt;
    const seen = new Map<string, number>();
    let unfinished = 0;
    await bounded(ids.length, 50, async (i) => {
      const taskId = ids[i] as string;
      try {
        const task = (await viaB.rpc(sessions[i % SESSIONS] as McpSession, 'tasks/get', { taskId })) as { status?: string; statusMessage?: string };
        const status = String(task.status);
        if (!TERMINAL.has(status)) unfinished++;
        const key = `${status}: ${task.statusMessage ?? ''}`.slice(0, 120);
        seen.set(key, (seen.get(key) ?? 0) + 1);
      } catch (err) {
        unfinished++;
        const key = `error: ${errorText(err)}`.slice(0, 120);
        seen.set(key, (seen.get(key) ?? 0) + 1);
      }
    });
    const plain = (l: typeof idle): object => ({ ...l, byCommand: Object.fromEntries(l.byCommand) });
    part.data = { settings: s, leaseMs: DEFAULTS.leaseMs, idle: plain(idle), holding: plain(holding), commandsPer1k, topCommands: Object.fromEntries(topCommands), cpuPer1k, leaseLeftAtKillMs: atKill.leftMs, allEndedMs, firstEndedMs: outcome.firstAt - killedAt, onB: Object.fromEntries(seen) };
    const sec = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;
    part.lines.push(
      `a replica killed (SIGKILL) holding ${ids.length.toLocaleString('en')} running tasks: all terminal ${sec(allEndedMs)} after the kill ` +
        `(its liveness ran out ${sec(Math.max(0, atKill.leftMs))} after the kill; first ended at ${sec(outcome.firstAt - killedAt)}); default leaseMs ${DEFAULTS.leaseMs}`,
      `as replica B answers tasks/get afterwards: ${[...seen].map(([k, n]) => `${n.toLocaleString('en')} × ${k}`).join('; ')}`,
      `Redis while one replica holds ${ids.length.toLocaleString('en')} running tasks: ${holding.commandsPerSec.toFixed(0)} commands/s, redis-server CPU ` +
        `${holding.cpuMsPerSec === undefined ? '—' : `${holding.cpuMsPerSec.toFixed(1)} ms/s`}; both replicas idle: ${idle.commandsPerSec.toFixed(0)} commands/s, ` +
        `${idle.cpuMsPerSec === undefined ? '—' : `${idle.cpuMsPerSec.toFixed(1)} ms/s`} (windows of ${(s.windowMs / 1000).toFixed(0)} s)`,
      `lease renewal per 1,000 running tasks: ${commandsPer1k.toFixed(1)} Redis commands/s, ${cpuPer1k === undefined ? '—' : `${cpuPer1k.toFixed(2)} ms/s`} redis-server CPU; ` +
        `by command (per 1,000 tasks, per s): ${topCommands.map(([name, n]) => `${name} ${n.toFixed(1)}`).join(', ') || '—'}`,
    );
    part.notes.push(
      `renewal cost = (holding − idle) × 1,000 / ${ids.length}; Redis counts the commands a Lua script runs as well as the script call (INFO commandstats gives the split)`,
    );
    part.checks.push({
      what: `a dead replica's tasks terminal within ${MAX_DEAD_REPLICA_MS / 1000} s with the default lease (${DEFAULTS.leaseMs} ms)`,
      pass: unfinished === 0 && allEndedMs <= MAX_DEAD_REPLICA_MS,
      detail: `${sec(allEndedMs)} for ${ids.length.toLocaleString('en')} tasks; ${unfinished} not terminal on replica B`,
    });
    part.ok = true;
  } finally {
    watching?.stop();
    for (const h of https) await h.close();
    // The killed replica's group still holds its stdio upstream: stop() ends the whole group.
    for (const g of gateways) await g.proc.stop();
    await store.close();
  }
  return part;
}
