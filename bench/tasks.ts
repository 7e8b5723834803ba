// The task path (MCP 2025-11-25 tasks) through taskgate, measured in one run next to two references on the same
// machine: a fastify hello-world floor and the upstream called directly. See bench/README.md, "The tasks scenario".
//
//   creation    one client: tools/call with params.task until the CreateTaskResult arrives (the task is stored)
//   tasks/get   one client, then every client (own session each) polling its own tasks
//   completion  tasks/result waiting on a running upstream call: upstream finished → tasks/result answered,
//               timed against the fixture's own clock (finish_at returns performance.timeOrigin + now())
// One file because it is one scenario of `npm run bench`, from its targets and phases to its report, which all read the
// row types declared at its top; what it shares with the other scenarios lives in load.ts, procs.ts and stats.ts.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { startAuthServer } from '../test/fixtures/auth-server.js';
import { HttpLoad, McpHttp, resolveTool, wallMs, type McpSession } from './load.js';
import { cpuMs, freePort, startProc, waitHttp, waitListening, type Proc } from './procs.js';
import { median, percentile, runPhase, type PhaseSpec, type PhaseStats } from './stats.js';

export type StoreKind = 'redis' | 'memory';
export const ALL_STORES: readonly StoreKind[] = ['redis', 'memory'];

/** Targets from the issues; reported, never asserted. */
export const MIN_TASKS_GET_PER_SEC = 5000;
/** tasks/get with auth on (an OAuth access token, verified once and remembered) against auth off, same run. */
export const MIN_AUTH_TASKS_GET_RATIO = 0.8;
export const MAX_RESULT_DELAY_P50_MS = 5;
/** tasks/get (Redis store) against a fastify hello-world floor, req/s at the same clients, same run (issue 43). */
export const MIN_TASKS_GET_VS_FLOOR = 0.7;
/** Upstream completion → waiting tasks/result answered, p50, over the direct sync call's (issue 43). */
export const MAX_RESULT_OVER_DIRECT_MS = 0.5;

/** Long enough that nothing the bench created expires mid-run; the Redis keys are deleted afterwards anyway. */
const TASK_TTL_MS = 300_000;
/** The running task each client polls; cancelled when the phase is over, long before this. */
const SLOW_TASK_MS = 120_000;
/**
 * Clients waiting on tasks/result at once. Their calls are staggered by finishMs / this, so completions never
 * coincide (each takes the gateway about a millisecond) while the phase takes a quarter of the time of one client.
 */
const COMPLETION_CLIENTS = 4;
const SMOKE_COMPLETION_CLIENTS = 2;
const TASK_STATUSES = new Set(['working', 'input_required', 'completed', 'failed', 'cancelled']);

export interface TasksSettings {
  clients: number;
  warmupMs: number;
  latencyMs: number;
  durationMs: number;
  count?: number;
  smoke: boolean;
  stores: StoreKind[];
  redisUrl: string;
  /** tasks (and sync calls) timed in each completion phase */
  completionTasks: number;
  /** how long finish_at runs before it completes */
  finishMs: number;
}

/** How the gateway is started (run.ts builds it once for every scenario). */
export interface GatewayLaunch {
  command: string;
  args: string[];
  how: string;
}

/** One kind of request: its unloaded latency (one client) and, for some, its throughput at every client. */
export interface LoadRow {
  key: string;
  label: string;
  latency?: PhaseStats;
  loaded?: PhaseStats;
  /** CPU of the measured process (and of redis-server) during the loaded phase, per request. */
  cpuUsPerReq?: number;
  redisCpuUsPerReq?: number;
}

/** Time from the upstream's completion (its clock) to the client reading the answer (same clock basis). */
export interface DelayRow {
  key: string;
  label: string;
  n: number;
  p50Ms: number;
  p99Ms: number;
  minMs: number;
  maxMs: number;
  meanMs: number;
  /** answers that came as an SSE stream / as plain JSON */
  sse: number;
  json: number;
  /** tasks/result sent only after the upstream had already finished: nothing was waited for; not counted */
  notWaiting: number;
  /** delays below zero: the two processes' clocks disagree (counted in, shown so it cannot hide) */
  negative: number;
  /** the whole phase: calls, errors, elapsed */
  phase: PhaseStats;
}

export interface TasksTarget {
  key: 'floor' | 'direct' | StoreKind | 'redis-auth';
  label: string;
  ok: boolean;
  error?: string;
  notes: string[];
  rows: LoadRow[];
  delays: DelayRow[];
}

export interface TasksRound {
  round: number;
  targets: TasksTarget[];
}

export interface TasksCheck {
  scenario: 'tasks';
  what: string;
  pass: boolean;
  detail: string;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const q = (s: string): string => JSON.stringify(s); // a JSON string is a valid YAML flow scalar
const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** Phase lengths: durations in the full run; in --smoke a few dozen requests each, so CI only proves it runs. */
function specs(s: TasksSettings): { warmup: PhaseSpec; latency: PhaseSpec; load: PhaseSpec } {
  if (s.smoke) {
    return {
      warmup: { durationMs: 0, count: 20, maxMs: 10_000 },
      latency: { durationMs: 0, count: 30, maxMs: 10_000 },
      load: { durationMs: 0, count: 100, maxMs: 10_000 },
    };
  }
  return {
    warmup: { durationMs: s.warmupMs },
    latency: { durationMs: s.latencyMs },
    load: s.count !== undefined ? { durationMs: s.durationMs, count: s.count } : { durationMs: s.durationMs },
  };
}

// ---- result checks: a response counts only if it is what the protocol says ----

function object(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error(`${what} is not an object: ${JSON.stringify(v)?.slice(0, 200)}`);
  return v as Record<string, unknown>;
}

/** CreateTaskResult: `{ task: { taskId, status, ttl, pollInterval, createdAt, lastUpdatedAt } }`. */
export function createdTaskId(result: unknown): string {
  const task = object(object(result, 'tools/call result').task, 'CreateTaskResult.task');
  if (typeof task.taskId !== 'string' || task.taskId === '') throw new Error(`CreateTaskResult without taskId: ${JSON.stringify(task)}`);
  if (typeof task.status !== 'string' || !TASK_STATUSES.has(task.status)) throw new Error(`CreateTaskResult with status ${String(task.status)}`);
  if (typeof task.createdAt !== 'string' || typeof task.lastUpdatedAt !== 'string') throw new Error('CreateTaskResult without timestamps');
  return task.taskId;
}

export function taskStatus(result: unknown, taskId: string): string {
  const task = object(result, 'tasks/get result');
  if (task.taskId !== taskId) throw new Error(`tasks/get answered for ${String(task.taskId)}, asked for ${taskId}`);
  if (typeof task.status !== 'string' || !TASK_STATUSES.has(task.status)) throw new Error(`tasks/get: status ${String(task.status)}`);
  return task.status;
}

/** finish_at's answer, also as tasks/result relays it (then with the related-task marker for this task). */
function completedAt(result: unknown, taskId?: string): number {
  const r = object(result, 'finish_at result');
  if (r.isError === true) throw new Error(`tool error: ${JSON.stringify(r.content)?.slice(0, 200)}`);
  const at = object(r.structuredContent, 'finish_at structuredContent').completedAtMs;
  if (typeof at !== 'number' || !Number.isFinite(at)) throw new Error('finish_at result without completedAtMs');
  if (taskId !== undefined) {
    const related = object(r._meta, 'tasks/result _meta')['io.modelcontextprotocol/related-task'];
    if (object(related, 'related-task').taskId !== taskId) throw new Error(`tasks/result related-task is not ${taskId}`);
  }
  return at;
}

function checkEcho(result: unknown): void {
  const r = object(result, 'tools/call result');
  const first: unknown = Array.isArray(r.content) ? r.content[0] : undefined;
  const text = typeof first === 'object' && first !== null ? (first as { text?: unknown }).text : undefined;
  if (r.isError === true || typeof text !== 'string' || !text.includes('hi')) throw new Error(`unexpected echo result: ${JSON.stringify(r).slice(0, 200)}`);
}

// ---- processes ----

function startFixture(root: string): { proc: Proc; url: Promise<string> } {
  const proc = startProc('session fixture (streamable-http)', process.execPath, [
    '--import', 'tsx', join(root, 'test/fixtures/session-server.ts'),
    '--transport', 'streamable-http', '--port', '0', '--host', '127.0.0.1',
  ], { cwd: root });
  return { proc, url: waitListening(proc, 30_000) };
}

async function withProc<T>(start: { proc: Proc; url: Promise<string> }, fn: (url: string, proc: Proc) => Promise<T>): Promise<T> {
  try {
    return await fn(await start.url, start.proc);
  } finally {
    await start.proc.stop();
  }
}

function gatewayYaml(port: number, store: StoreKind, s: TasksSettings, prefix: string, upstreamUrl: string, issuer?: string): string {
  return [
    ...(issuer === undefined ? [] : [`auth: { resource: ${q(`http://127.0.0.1:${port}/mcp`)}, oauth: { issuer: ${q(issuer)} } }`]),
    `listen: { host: 127.0.0.1, port: ${port}, path: /mcp }`,
    store === 'redis' ? `store: { type: redis, url: ${q(s.redisUrl)}, prefix: ${q(prefix)} }` : 'store: { type: memory }',
    'log: { level: warn }',
    'upstreams:',
    `  fixture: { transport: streamable-http, url: ${q(upstreamUrl)} }`,
    'tasks: { defaults: { mode: optional, pollIntervalMs: 100 } }',
    '',
  ].join('\n');
}

// ---- Redis ----

/** A client for checks and cleanup, or why Redis cannot be used. */
export async function connectRedis(url: string): Promise<Redis | string> {
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 1, enableOfflineQueue: false, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.ping();
    return redis;
  } catch (err) {
    redis.disconnect();
    return `Redis not reachable at ${url}: ${errorText(err)}`;
  }
}

/** redis-server's pid when it runs on this machine (its CPU is part of what a tasks/get costs). */
async function localRedisPid(redis: Redis, url: string): Promise<number | undefined> {
  const host = new URL(url).hostname;
  if (!['127.0.0.1', 'localhost', '[::1]', '::1'].includes(host)) return undefined;
  const info = await redis.info('server');
  const pid = Number(/^process_id:(\d+)/m.exec(info)?.[1]);
  return Number.isInteger(pid) && existsSync(`/proc/${pid}/stat`) ? pid : undefined;
}

/** Deletes every key under the run's prefix; returns how many there were. */
async function dropPrefix(redis: Redis, prefix: string): Promise<number> {
  let removed = 0;
  const stream = redis.scanStream({ match: `${prefix}:*`, count: 1000 });
  for await (const keys of stream as AsyncIterable<string[]>) {
    if (keys.length > 0) removed += await redis.unlink(...keys);
  }
  return removed;
}

// ---- phases ----

interface DelaySample {
  delayMs?: number;
  sse: boolean;
  notWaiting?: boolean;
}

function delayRow(key: string, label: string, samples: DelaySample[], phase: PhaseStats): DelayRow {
  const delays = samples.flatMap((x) => (x.delayMs === undefined ? [] : [x.delayMs]));
  const sorted = Float64Array.from(delays).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    key,
    label,
    n: sorted.length,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    minMs: sorted[0] ?? Number.NaN,
    maxMs: sorted[sorted.length - 1] ?? Number.NaN,
    meanMs: sorted.length > 0 ? sum / sorted.length : Number.NaN,
    sse: samples.filter((x) => x.sse).length,
    json: samples.filter((x) => !x.sse).length,
    notWaiting: samples.filter((x) => x.notWaiting === true).length,
    negative: delays.filter((d) => d < 0).length,
    phase,
  };
}

/**
 * finish_at {ms} on `sessions` at once, staggered: sync (the answer is the call's response) or as a task (the
 * answer is tasks/result, sent right after the CreateTaskResult and so waiting while the upstream still runs).
 */
async function completionPhase(
  http: McpHttp,
  sessions: McpSession[],
  tool: string,
  s: TasksSettings,
  asTask: boolean,
  key: string,
  label: string,
): Promise<DelayRow> {
  const samples: DelaySample[] = [];
  const started = new Set<number>();
  const spec: PhaseSpec = { durationMs: 0, count: s.completionTasks, maxMs: Math.max(30_000, (s.completionTasks * (s.finishMs + 50)) / sessions.length * 3) };
  const args = { name: tool, arguments: { ms: s.finishMs } };
  const phase = await runPhase(sessions.length, spec, async (w) => {
    const session = sessions[w];
    if (!session) throw new Error(`no session ${w}`);
    if (!started.has(w)) {
      started.add(w);
      await sleep((w * s.finishMs) / sessions.length);
    }
    if (!asTask) {
      const r = await http.rpcTimed(session, 'tools/call', args);
      samples.push({ delayMs: r.atMs - completedAt(r.result), sse: r.sse });
      return;
    }
    const taskId = createdTaskId(await http.rpc(session, 'tools/call', { ...args, task: { ttl: TASK_TTL_MS } }));
    const sentAt = wallMs();
    const r = await http.rpcTimed(session, 'tasks/result', { taskId });
    const done = completedAt(r.result, taskId);
    if (sentAt >= done) samples.push({ sse: r.sse, notWaiting: true });
    else samples.push({ delayMs: r.atMs - done, sse: r.sse });
  });
  return delayRow(key, label, samples, phase);
}

/** A driver's usual sequence (warmup, one client, all clients) with the process's CPU over the loaded phase. */
async function loadRow(
  key: string,
  label: string,
  s: TasksSettings,
  run: (spec: PhaseSpec, clients: number) => Promise<PhaseStats>,
  pids: { main?: number; redis?: number },
): Promise<LoadRow> {
  const sp = specs(s);
  await run(sp.warmup, s.clients);
  const latency = await run(sp.latency, 1);
  const before = { main: pids.main === undefined ? undefined : cpuMs(pids.main), redis: pids.redis === undefined ? undefined : cpuMs(pids.redis) };
  const loaded = await run(sp.load, s.clients);
  const row: LoadRow = { key, label, latency, loaded };
  const per = (pid: number | undefined, b: number | undefined): number | undefined => {
    const a = pid === undefined ? undefined : cpuMs(pid);
    return a === undefined || b === undefined || loaded.calls === 0 ? undefined : ((a - b) * 1000) / loaded.calls;
  };
  const main = per(pids.main, before.main);
  if (main !== undefined) row.cpuUsPerReq = main;
  const redis = per(pids.redis, before.redis);
  if (redis !== undefined) row.redisCpuUsPerReq = redis;
  return row;
}

// ---- targets ----

/** fastify: one POST route, tiny JSON; measured with the same HTTP driver as every other target. */
async function floorTarget(root: string, s: TasksSettings, target: TasksTarget): Promise<void> {
  const port = await freePort();
  const proc = startProc('fastify floor', process.execPath, ['--import', 'tsx', join(root, 'bench/floor-server.ts'), '--port', String(port)], { cwd: root });
  await withProc({ proc, url: waitListening(proc, 20_000) }, async (url) => {
    const load = new HttpLoad({ url, clients: s.clients, tool: 'echo' });
    try {
      await load.open();
      target.rows.push(await loadRow('floor', 'fastify floor: POST → tiny JSON', s, (spec, n) => load.run(spec, n), { main: proc.pid }));
    } finally {
      await load.close();
    }
  });
  target.notes.push('node --import tsx bench/floor-server.ts (fastify, logger off)');
}

/** The upstream without the gateway: a sync echo (throughput) and finish_at (completion → response). */
async function directTarget(root: string, s: TasksSettings, target: TasksTarget): Promise<void> {
  await withProc(startFixture(root), async (url, proc) => {
    const load = new HttpLoad({ url, clients: s.clients, tool: 'echo' });
    try {
      await load.open();
      target.rows.push(await loadRow('direct-echo', 'direct upstream: sync echo', s, (spec, n) => load.run(spec, n), { main: proc.pid }));
    } finally {
      await load.close();
    }
    const http = new McpHttp(url, COMPLETION_CLIENTS);
    const sessions = await http.openSessions(s.smoke ? SMOKE_COMPLETION_CLIENTS : COMPLETION_CLIENTS);
    try {
      target.delays.push(await completionPhase(http, sessions, 'finish_at', s, false, 'direct-sync', 'direct upstream: sync tools/call'));
    } finally {
      await http.deleteSessions(sessions);
      await http.close();
    }
  });
  target.notes.push('CPU µs/req: the fixture process');
}

async function storeTarget(
  root: string,
  s: TasksSettings,
  store: StoreKind,
  gw: GatewayLaunch,
  dir: string,
  redis: Redis | undefined,
  target: TasksTarget,
  auth = false,
): Promise<void> {
  const prefix = `taskgate-bench-${process.pid}-${Date.now().toString(36)}`;
  const redisPid = redis !== undefined ? await localRedisPid(redis, s.redisUrl) : undefined;
  // With auth: a local authorization server, and every client sends one access token it issued (as a client
  // would for the token's lifetime): the gateway verifies it once and remembers it.
  const issuer = auth ? await startAuthServer() : undefined;
  try {
    await withProc(startFixture(root), async (upstreamUrl) => {
      const port = await freePort();
      const cfg = join(dir, `taskgate-tasks-${store}${auth ? '-auth' : ''}.yaml`);
      writeFileSync(cfg, gatewayYaml(port, store, s, prefix, upstreamUrl, issuer?.issuer));
      const proc = startProc('taskgate', gw.command, [...gw.args, 'serve', '--config', cfg], { cwd: root, dropEnvPrefix: 'TASKGATE_' });
      try {
        await waitHttp(proc, `http://127.0.0.1:${port}/readyz`, 30_000, 200);
        const headers: Record<string, string> =
          issuer === undefined ? {} : { authorization: `Bearer ${await issuer.mint({ sub: 'bench', aud: `http://127.0.0.1:${port}/mcp`, expiresInSeconds: 3_600 })}` };
        await measureStore(`http://127.0.0.1:${port}/mcp`, s, store, proc.pid, redisPid, target, headers);
      } finally {
        await proc.stop();
      }
    });
  } finally {
    await issuer?.close();
    if (redis !== undefined) {
      const removed = await dropPrefix(redis, prefix).catch((err: unknown) => {
        target.notes.push(`could not delete Redis keys ${prefix}:*: ${errorText(err)}`);
        return undefined;
      });
      if (removed !== undefined) target.notes.push(`Redis prefix ${prefix}: ${removed} keys deleted afterwards`);
    }
  }
  target.notes.push(gw.how, `CPU µs/req: the gateway process${redisPid !== undefined ? ' + redis-server' : ''}`);
}

async function measureStore(
  url: string,
  s: TasksSettings,
  store: StoreKind,
  gatewayPid: number,
  redisPid: number | undefined,
  target: TasksTarget,
  headers: Record<string, string> = {},
): Promise<void> {
  const sp = specs(s);
  const http = new McpHttp(url, s.clients, undefined, headers);
  const label = `${store}${headers.authorization === undefined ? '' : ', auth'}`;
  const sessions = await http.openSessions(s.clients);
  const first = sessions[0];
  if (!first) throw new Error('no sessions');
  try {
    const echo = await resolveTool(http, first, 'echo');
    const finishAt = await resolveTool(http, first, 'finish_at');
    const slow = await resolveTool(http, first, 'slow');
    const session = (w: number): McpSession => {
      const x = sessions[w];
      if (!x) throw new Error(`no session ${w}`);
      return x;
    };
    const createTask = async (w: number, name: string, args: object): Promise<string> =>
      createdTaskId(await http.rpc(session(w), 'tools/call', { name, arguments: args, task: { ttl: TASK_TTL_MS } }));
    const getTask = async (w: number, taskId: string): Promise<string> => taskStatus(await http.rpc(session(w), 'tasks/get', { taskId }), taskId);

    // Warmup of both paths at full concurrency: JIT, pools, the store's connections.
    await runPhase(s.clients, sp.warmup, async (w) => {
      await getTask(w, await createTask(w, echo, { message: 'hi' }));
    });

    // Reference inside the gateway: the same one-client call, sync, through the proxy path.
    const syncEcho = await runPhase(1, sp.latency, async (w) => {
      checkEcho(await http.rpc(session(w), 'tools/call', { name: echo, arguments: { message: 'hi' } }));
    });
    target.rows.push({ key: 'sync-echo', label: `taskgate (${label}): sync echo`, latency: syncEcho });

    // 1. creation: the CreateTaskResult comes only after the task is stored.
    const creation = await runPhase(1, sp.latency, async (w) => {
      await createTask(w, echo, { message: 'hi' });
    });
    target.rows.push({ key: 'create', label: `taskgate (${label}): tools/call + task`, latency: creation });

    // 3. completion → result, and the same tool sync through the gateway as its reference.
    const n = s.smoke ? SMOKE_COMPLETION_CLIENTS : COMPLETION_CLIENTS;
    const waiting = sessions.slice(0, n);
    target.delays.push(await completionPhase(http, waiting, finishAt, s, false, 'gateway-sync', `taskgate (${label}): sync tools/call`));
    target.delays.push(await completionPhase(http, waiting, finishAt, s, true, 'tasks-result', `taskgate (${label}): tasks/result`));

    // 2. tasks/get: every client polls its own two tasks in turn, one still running and one completed.
    const owned = await Promise.all(
      sessions.map(async (_, w) => [await createTask(w, slow, { ms: SLOW_TASK_MS }), await createTask(w, echo, { message: 'hi' })] as const),
    );
    const deadline = Date.now() + 10_000;
    for (const [w, [, done]] of owned.entries()) {
      while ((await getTask(w, done)) !== 'completed') {
        if (Date.now() > deadline) throw new Error(`echo task ${done} not completed after 10 s`);
        await sleep(20);
      }
    }
    const turn = sessions.map(() => 0);
    const row = await loadRow(
      'tasks-get',
      `taskgate (${label}): tasks/get`,
      s,
      (spec, clients) =>
        runPhase(clients, spec, async (w) => {
          const ids = owned[w];
          if (!ids) throw new Error(`no tasks for client ${w}`);
          const taskId = ids[(turn[w] = (turn[w] ?? 0) + 1) % 2] as string;
          await getTask(w, taskId);
        }),
      { main: gatewayPid, ...(redisPid !== undefined ? { redis: redisPid } : {}) },
    );
    target.rows.push(row);

    // The running tasks end here: their upstream calls stop and the tasks are cancelled, as a client would.
    let stillRunning = 0;
    let cancelFailures = 0;
    await Promise.all(
      owned.map(async ([running], w) => {
        try {
          const r = object(await http.rpc(session(w), 'tasks/cancel', { taskId: running }), 'tasks/cancel result');
          if (r.status !== 'cancelled') cancelFailures++;
          else stillRunning++;
        } catch {
          cancelFailures++;
        }
      }),
    );
    if (cancelFailures > 0) target.notes.push(`${cancelFailures} of ${owned.length} running tasks could not be cancelled afterwards`);
    else target.notes.push(`${stillRunning} polled tasks were still running at the end and were cancelled`);
  } finally {
    const closed = await http.deleteSessions(sessions);
    if (closed.failed > 0) target.notes.push(`${closed.failed} sessions could not be deleted`);
    await http.close();
  }
}

/** Every target of the tasks scenario, one after the other; a failing target is recorded and the rest still run. */
export async function tasksScenario(
  root: string,
  s: TasksSettings,
  gw: GatewayLaunch | string,
  dir: string,
  round: number,
  roundCount: number,
): Promise<TasksRound> {
  const targets: TasksTarget[] = [];
  const measure = async (key: TasksTarget['key'], label: string, fn: (t: TasksTarget) => Promise<void>): Promise<void> => {
    const target: TasksTarget = { key, label, ok: false, notes: [], rows: [], delays: [] };
    targets.push(target);
    process.stdout.write(`- ${roundCount > 1 ? `round ${round}, ` : ''}tasks: ${label} ... `);
    try {
      await fn(target);
      target.ok = true;
      const main = target.rows.find((r) => r.loaded !== undefined);
      const delay = target.delays.at(-1);
      const parts = [
        ...(main?.loaded ? [`${main.loaded.callsPerSec.toFixed(0)} req/s (${main.key})`] : []),
        ...(delay ? [`${delay.key} p50 ${delay.p50Ms.toFixed(2)} ms`] : []),
      ];
      console.log(parts.join(', ') || 'done');
    } catch (err) {
      target.error = errorText(err);
      console.log(`FAILED\n    ${target.error.split('\n').join('\n    ')}`);
    }
  };

  await measure('floor', 'fastify floor', (t) => floorTarget(root, s, t));
  await measure('direct', 'direct upstream (session fixture)', (t) => directTarget(root, s, t));
  for (const store of s.stores) {
    let redis: Redis | undefined;
    if (store === 'redis') {
      const r = await connectRedis(s.redisUrl);
      if (typeof r === 'string') {
        const target: TasksTarget = { key: 'redis', label: 'taskgate, Redis store', ok: false, error: r, notes: [], rows: [], delays: [] };
        targets.push(target);
        console.log(`- ${roundCount > 1 ? `round ${round}, ` : ''}tasks: taskgate, Redis store ... FAILED\n    ${r}`);
        continue;
      }
      redis = r;
    }
    try {
      await measure(store, `taskgate, ${store === 'redis' ? 'Redis' : 'memory'} store`, async (t) => {
        if (typeof gw === 'string') throw new Error(gw);
        await storeTarget(root, s, store, gw, dir, redis, t);
      });
      if (store === 'redis') {
        await measure('redis-auth', 'taskgate, Redis store, auth on (OAuth token)', async (t) => {
          if (typeof gw === 'string') throw new Error(gw);
          await storeTarget(root, s, store, gw, dir, redis, t, true);
        });
      }
    } finally {
      redis?.disconnect();
    }
  }
  return { round, targets };
}

// ---- report ----


/** Numbers shown in the tables: medians over the rounds that produced them. */
export interface TasksSummaryRow {
  target: TasksTarget['key'];
  key: string;
  label: string;
  rounds: number;
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  loadedP50Ms: number;
  loadedP99Ms: number;
  cpuUsPerReq: number;
  redisCpuUsPerReq: number;
  errors: number;
  errorSamples: string[];
}

export interface TasksDelaySummary {
  target: TasksTarget['key'];
  key: string;
  label: string;
  rounds: number;
  n: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  sse: number;
  json: number;
  notWaiting: number;
  negative: number;
  errors: number;
  errorSamples: string[];
}

export interface TasksSummary {
  rows: TasksSummaryRow[];
  delays: TasksDelaySummary[];
  failed: { target: string; error: string }[];
}

export function summarizeTasks(rounds: TasksRound[]): TasksSummary {
  const rows: TasksSummaryRow[] = [];
  const delays: TasksDelaySummary[] = [];
  const failed: { target: string; error: string }[] = [];
  const all = rounds.flatMap((r) => r.targets);
  for (const t of all) if (!t.ok) failed.push({ target: t.label, error: t.error ?? 'failed' });
  const ok = all.filter((t) => t.ok);
  for (const t of ok) {
    for (const r of t.rows) {
      if (rows.some((x) => x.target === t.key && x.key === r.key)) continue;
      const same = ok.filter((x) => x.key === t.key).flatMap((x) => x.rows.filter((y) => y.key === r.key));
      const pick = (f: (x: LoadRow) => number | undefined): number => median(same.map((x) => f(x) ?? Number.NaN));
      rows.push({
        target: t.key,
        key: r.key,
        label: r.label,
        rounds: same.length,
        reqPerSec: pick((x) => x.loaded?.callsPerSec),
        p50Ms: pick((x) => x.latency?.p50Ms),
        p99Ms: pick((x) => x.latency?.p99Ms),
        loadedP50Ms: pick((x) => x.loaded?.p50Ms),
        loadedP99Ms: pick((x) => x.loaded?.p99Ms),
        cpuUsPerReq: pick((x) => x.cpuUsPerReq),
        redisCpuUsPerReq: pick((x) => x.redisCpuUsPerReq),
        errors: same.reduce((n, x) => n + (x.latency?.errors ?? 0) + (x.loaded?.errors ?? 0), 0),
        errorSamples: [...new Set(same.flatMap((x) => [...(x.latency?.errorSamples ?? []), ...(x.loaded?.errorSamples ?? [])]))],
      });
    }
    for (const d of t.delays) {
      if (delays.some((x) => x.target === t.key && x.key === d.key)) continue;
      const same = ok.filter((x) => x.key === t.key).flatMap((x) => x.delays.filter((y) => y.key === d.key));
      const sum = (f: (x: DelayRow) => number): number => same.reduce((n, x) => n + f(x), 0);
      delays.push({
        target: t.key,
        key: d.key,
        label: d.label,
        rounds: same.length,
        n: sum((x) => x.n),
        p50Ms: median(same.map((x) => x.p50Ms)),
        p99Ms: median(same.map((x) => x.p99Ms)),
        maxMs: Math.max(...same.map((x) => x.maxMs)),
        sse: sum((x) => x.sse),
        json: sum((x) => x.json),
        notWaiting: sum((x) => x.notWaiting),
        negative: sum((x) => x.negative),
        errors: sum((x) => x.phase.errors),
        errorSamples: [...new Set(same.flatMap((x) => x.phase.errorSamples))],
      });
    }
  }
  return { rows, delays, failed };
}

function pad(cells: string[], widths: number[]): string {
  return cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
}
const ms = (v: number): string => (Number.isNaN(v) ? '—' : v.toFixed(2));
const signed = (v: number): string => (Number.isNaN(v) ? '—' : `${v >= 0 ? '+' : ''}${v.toFixed(2)}`);
const int = (v: number): string => (Number.isNaN(v) ? '—' : Math.round(v).toLocaleString('en-US'));

export function reportTasks(rounds: TasksRound[], s: TasksSettings, roundCount: number): { summary: TasksSummary; checks: TasksCheck[] } {
  const summary = summarizeTasks(rounds);
  const checks: TasksCheck[] = [];
  const sp = specs(s);
  const amount = (p: PhaseSpec): string => (p.count !== undefined ? `${p.count} requests` : `${p.durationMs} ms`);
  const n = s.smoke ? SMOKE_COMPLETION_CLIENTS : COMPLETION_CLIENTS;
  console.log(
    `\nTasks (2025-11-25) — session fixture over streamable-http; ${s.clients} clients; one client ${amount(sp.latency)}, ` +
      `loaded ${amount(sp.load)}${roundCount > 1 ? `; median of ${roundCount} rounds` : ''}`,
  );
  console.log('  p50/p99: one client, one request at a time. loaded: every client (own session), closed loop.');
  console.log('  CPU µs/req: the measured process during the loaded run (+ redis-server for the Redis store).');
  const widths = [40, 8, 7, 7, 10, 10, 12, 6];
  console.log(pad(['request', 'req/s', 'p50 ms', 'p99 ms', 'loaded p50', 'loaded p99', 'CPU µs/req', 'errors'], widths));
  const floor = summary.rows.find((x) => x.key === 'floor');
  for (const x of summary.rows) {
    const cpu = Number.isNaN(x.cpuUsPerReq) ? '—' : `${x.cpuUsPerReq.toFixed(0)}${Number.isNaN(x.redisCpuUsPerReq) ? '' : ` + ${x.redisCpuUsPerReq.toFixed(0)}`}`;
    console.log(pad([x.label, int(x.reqPerSec), ms(x.p50Ms), ms(x.p99Ms), ms(x.loadedP50Ms), ms(x.loadedP99Ms), cpu, String(x.errors)], widths));
    for (const e of x.errorSamples.slice(0, 3)) console.log(`    error: ${e}`);
  }
  // Task requests are answered by the gateway and its store alone: the floor is their reference. A sync call also
  // waits for the upstream: the direct call is its reference.
  const directEcho = summary.rows.find((x) => x.key === 'direct-echo');
  for (const x of summary.rows.filter((r) => r.target === 'redis' || r.target === 'memory' || r.target === 'redis-auth')) {
    const ref = x.key === 'sync-echo' ? directEcho : floor;
    if (!ref) continue;
    const parts = [`p50 ${signed(x.p50Ms - ref.p50Ms)} ms`];
    if (!Number.isNaN(x.reqPerSec)) parts.unshift(`${((x.reqPerSec / ref.reqPerSec) * 100).toFixed(0)}% of its req/s`);
    console.log(`    vs ${ref === floor ? 'floor' : 'direct echo'}: ${x.label}: ${parts.join(', ')}`);
  }

  console.log(
    `\nCompletion → answer: finish_at {ms: ${s.finishMs}}, ${s.completionTasks} calls per row, ${n} clients staggered`,
  );
  console.log('  delay = answer read by the client − completedAtMs taken in the upstream (both performance.timeOrigin + now());');
  console.log('  tasks/result is sent right after the CreateTaskResult and waits while the tool runs. +p50: over the direct call.');
  const dw = [40, 6, 7, 7, 7, 8, 12, 6];
  console.log(pad(['answer', 'n', 'p50 ms', 'p99 ms', 'max ms', '+p50 ms', 'SSE / JSON', 'errors'], dw));
  const directSync = summary.delays.find((x) => x.key === 'direct-sync');
  for (const d of summary.delays) {
    const added = directSync && d !== directSync ? signed(d.p50Ms - directSync.p50Ms) : '—';
    console.log(pad([d.label, String(d.n), ms(d.p50Ms), ms(d.p99Ms), ms(d.maxMs), added, `${d.sse} / ${d.json}`, String(d.errors)], dw));
    if (d.notWaiting > 0) console.log(`    ${d.notWaiting} tasks/result requests were sent after the upstream had finished (not counted)`);
    if (d.negative > 0) console.log(`    ${d.negative} negative delays: the processes' clocks disagree by that much`);
    for (const e of d.errorSamples.slice(0, 3)) console.log(`    error: ${e}`);
  }
  for (const r of rounds) {
    for (const t of r.targets) {
      if (!t.ok) console.log(`  ${t.label}${roundCount > 1 ? ` #${r.round}` : ''}: FAILED: ${(t.error ?? '').split('\n')[0]}`);
      else if (r.round === 1) for (const note of t.notes) console.log(`  ${t.label}: ${note}`);
    }
  }

  const get = summary.rows.find((x) => x.target === 'redis' && x.key === 'tasks-get');
  if (get) {
    checks.push({
      scenario: 'tasks',
      what: `tasks/get ≥ ${MIN_TASKS_GET_PER_SEC.toLocaleString('en-US')} req/s (Redis store)`,
      pass: get.reqPerSec >= MIN_TASKS_GET_PER_SEC,
      detail:
        `${int(get.reqPerSec)} req/s at ${s.clients} clients, loaded p50 ${ms(get.loadedP50Ms)} ms` +
        (floor ? ` (fastify floor ${int(floor.reqPerSec)} req/s)` : ''),
    });
  }
  if (get && floor) {
    checks.push({
      scenario: 'tasks',
      what: `tasks/get ≥ ${MIN_TASKS_GET_VS_FLOOR * 100}% of the fastify floor's req/s (Redis store, same run)`,
      pass: get.reqPerSec >= MIN_TASKS_GET_VS_FLOOR * floor.reqPerSec,
      detail: `${((get.reqPerSec / floor.reqPerSec) * 100).toFixed(1)}% (${int(get.reqPerSec)} vs ${int(floor.reqPerSec)} req/s)`,
    });
  }
  const authGet = summary.rows.find((x) => x.target === 'redis-auth' && x.key === 'tasks-get');
  if (get && authGet) {
    checks.push({
      scenario: 'tasks',
      what: `tasks/get with auth on ≥ ${MIN_AUTH_TASKS_GET_RATIO * 100}% of auth off (Redis store, same run)`,
      pass: authGet.reqPerSec >= MIN_AUTH_TASKS_GET_RATIO * get.reqPerSec,
      detail: `${((authGet.reqPerSec / get.reqPerSec) * 100).toFixed(1)}% (${int(authGet.reqPerSec)} vs ${int(get.reqPerSec)} req/s)`,
    });
  }
  const wait = summary.delays.find((x) => x.target === 'redis' && x.key === 'tasks-result');
  if (wait) {
    const direct = summary.delays.find((x) => x.key === 'direct-sync');
    checks.push({
      scenario: 'tasks',
      what: `tasks/result returns within ${MAX_RESULT_DELAY_P50_MS} ms (p50) of upstream completion (Redis store)`,
      pass: wait.p50Ms <= MAX_RESULT_DELAY_P50_MS,
      detail:
        `p50 ${ms(wait.p50Ms)} ms, p99 ${ms(wait.p99Ms)} ms over ${wait.n} tasks` +
        (direct ? ` (direct sync call: p50 ${ms(direct.p50Ms)} ms)` : ''),
    });
    if (direct) {
      const added = wait.p50Ms - direct.p50Ms;
      checks.push({
        scenario: 'tasks',
        what: `tasks/result answers ≤ ${MAX_RESULT_OVER_DIRECT_MS} ms (p50) after the direct sync call would (Redis store)`,
        pass: added <= MAX_RESULT_OVER_DIRECT_MS,
        detail: `${signed(added)} ms (p50 ${ms(wait.p50Ms)} vs ${ms(direct.p50Ms)} ms)`,
      });
    }
  }
  return { summary, checks };
}

/** Rows whose errors exceed `maxRate` of their requests. */
export function tasksErrorRates(rounds: TasksRound[], maxRate: number): string[] {
  const out: string[] = [];
  for (const t of rounds.flatMap((r) => r.targets)) {
    const phases = [...t.rows.flatMap((r) => [r.latency, r.loaded]), ...t.delays.map((d) => d.phase)].filter(
      (p): p is PhaseStats => p !== undefined,
    );
    const errors = phases.reduce((n, p) => n + p.errors, 0);
    const total = phases.reduce((n, p) => n + p.errors + p.calls, 0);
    if (total > 0 && errors / total > maxRate) out.push(`tasks: ${t.label}: ${((errors / total) * 100).toFixed(2)}% errors (> ${maxRate * 100}%)`);
  }
  return out;
}
