// Scale-out, part 3: tasks/get across two replicas on one Redis (issue 23), next to one replica in the same run.
// Two gateway processes share the Redis prefix. Every client has a 2025-11-25 session and two completed tasks:
//
//   one replica    sessions opened and tasks created on replica A, every tasks/get sent to A (B runs, idle)
//   two replicas   half the clients are A's, half B's; each client's tasks/get goes to the replica that did NOT
//                  create its tasks (sessions and tasks live in the store: any replica answers)
//
// Both phases run the same closed loop (every client one request at a time), alternated `rounds` times so that a
// slow spell of the shared machine hits both. With both replicas on one small machine they compete for the same
// cores as each other and as the load generator: the ratio says what the store path costs, not what two hosts give.
import { cpus } from 'node:os';
import { McpHttp, type McpSession } from './load.js';
import { cpuMs } from './procs.js';
import { runPhase, type PhaseSpec, type PhaseStats } from './stats.js';
import { createdTaskId, taskStatus } from './tasks.js';
import { startGateway, TASK_TTL_MS, type GatewayProc, type ScaleoutContext, type ScaleoutPart } from './scaleout-common.js';

export interface ReplicasSettings {
  clients: number;
  /** per measured phase: a duration, or a request count */
  phase: PhaseSpec;
  /** one-replica / two-replica pairs */
  rounds: number;
}

interface Reader {
  session: McpSession;
  /** the replica the tasks are read on */
  via: McpHttp;
  tasks: string[];
}

const TASKS_PER_CLIENT = 2;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A client of `home`: its session and completed tasks, made there. */
async function clientOf(home: McpHttp, echo: string): Promise<{ session: McpSession; tasks: string[] }> {
  const session = await home.openSession();
  const tasks: string[] = [];
  for (let i = 0; i < TASKS_PER_CLIENT; i++) {
    tasks.push(createdTaskId(await home.rpc(session, 'tools/call', { name: echo, arguments: { message: 'hi' }, task: { ttl: TASK_TTL_MS } })));
  }
  const deadline = Date.now() + 30_000;
  for (const taskId of tasks) {
    while (taskStatus(await home.rpc(session, 'tasks/get', { taskId }), taskId) !== 'completed') {
      if (Date.now() > deadline) throw new Error(`echo task ${taskId} not completed after 30 s`);
      await sleep(20);
    }
  }
  return { session, tasks };
}

function phase(readers: Reader[], spec: PhaseSpec): Promise<PhaseStats> {
  const turn = readers.map(() => 0);
  return runPhase(readers.length, spec, async (w) => {
    const r = readers[w] as Reader;
    const taskId = r.tasks[(turn[w] = (turn[w] ?? 0) + 1) % r.tasks.length] as string;
    if (taskStatus(await r.via.rpc(r.session, 'tasks/get', { taskId }), taskId) !== 'completed') throw new Error(`task ${taskId} is not completed`);
  });
}

export async function replicasPart(ctx: ScaleoutContext, s: ReplicasSettings): Promise<ScaleoutPart> {
  const part: ScaleoutPart = { name: 'replicas', ok: false, lines: [], checks: [], notes: [], data: {} };
  const gateways: GatewayProc[] = [];
  const https: McpHttp[] = [];
  try {
    gateways.push(await startGateway(ctx, 'replica-a', ['tasks: { defaults: { mode: optional } }']));
    gateways.push(await startGateway(ctx, 'replica-b', ['tasks: { defaults: { mode: optional } }']));
    const [a, b] = gateways.map((g) => new McpHttp(g.url, s.clients, 30_000)) as [McpHttp, McpHttp];
    https.push(a, b);
    const probe = await a.openSession();
    const tools = (await a.rpc(probe, 'tools/list', {})) as { tools?: { name: string }[] };
    const echo = tools.tools?.map((t) => t.name).find((n) => n === 'echo' || n.endsWith('echo'));
    if (echo === undefined) throw new Error('no echo tool behind the gateway');

    const one: Reader[] = [];
    const two: Reader[] = [];
    for (let w = 0; w < s.clients; w++) {
      one.push({ ...(await clientOf(a, echo)), via: a });
      const home = w % 2 === 0 ? a : b;
      two.push({ ...(await clientOf(home, echo)), via: home === a ? b : a });
    }
    // Warm both replicas' tasks/get path (JIT, the store connections) before anything is timed.
    await phase(two, { durationMs: 0, count: s.clients * 20, maxMs: 30_000 });
    await phase(one, { durationMs: 0, count: s.clients * 20, maxMs: 30_000 });

    const runs: { one: PhaseStats; two: PhaseStats; cpuOneMs: number; cpuTwoMs: number }[] = [];
    const cpu = (): number => gateways.reduce((n, g) => n + (cpuMs(g.proc.pid) ?? 0), 0) + (ctx.redis.pid === undefined ? 0 : (cpuMs(ctx.redis.pid) ?? 0));
    for (let r = 0; r < s.rounds; r++) {
      let c0 = cpu();
      const oneStats = await phase(one, s.phase);
      const cpuOneMs = cpu() - c0;
      c0 = cpu();
      const twoStats = await phase(two, s.phase);
      runs.push({ one: oneStats, two: twoStats, cpuOneMs, cpuTwoMs: cpu() - c0 });
    }
    const median = (v: number[]): number => [...v].sort((x, y) => x - y)[v.length >> 1] ?? Number.NaN;
    const rate = (k: 'one' | 'two'): number => median(runs.map((x) => x[k].callsPerSec));
    const p = (k: 'one' | 'two', f: 'p50Ms' | 'p99Ms'): number => median(runs.map((x) => x[k][f]));
    const cpuPerReq = (k: 'one' | 'two'): number => median(runs.map((x) => ((k === 'one' ? x.cpuOneMs : x.cpuTwoMs) * 1000) / Math.max(1, x[k].calls)));
    const errors = runs.reduce((n, x) => n + x.one.errors + x.two.errors, 0);
    const samples = [...new Set(runs.flatMap((x) => [...x.one.errorSamples, ...x.two.errorSamples]))].slice(0, 2);
    const ratio = rate('two') / rate('one');
    part.data = { settings: s, runs };
    const row = (k: 'one' | 'two', label: string): string =>
      `${label}: ${rate(k).toFixed(0)} req/s, loaded p50/p99 ${p(k, 'p50Ms').toFixed(2)}/${p(k, 'p99Ms').toFixed(2)} ms, ` +
      `CPU ${cpuPerReq(k).toFixed(0)} µs/req (gateways + redis-server)`;
    part.lines.push(
      `tasks/get on 2 replicas ${ratio.toFixed(2)}× of 1 replica (${s.clients} clients, median of ${s.rounds} alternated rounds; ${errors} errors${samples.map((e) => `: ${e}`).join('')})`,
      row('one', '1 replica (A creates, A answers)'),
      row('two', '2 replicas (each task read on the replica that did not create it)'),
    );
    part.notes.push(`${s.clients} clients × ${TASKS_PER_CLIENT} completed echo tasks per phase; both replicas and the load generator share this machine's ${cpus().length} CPUs`);
    part.checks.push({
      what: 'tasks/get across 2 replicas (read where not created): every answer right, throughput next to 1 replica',
      pass: errors === 0,
      detail: `${ratio.toFixed(2)}× (${rate('two').toFixed(0)} vs ${rate('one').toFixed(0)} req/s), p99 ${p('two', 'p99Ms').toFixed(2)} vs ${p('one', 'p99Ms').toFixed(2)} ms; ${errors} errors`,
    });
    part.ok = true;
  } finally {
    for (const h of https) await h.close();
    for (const g of gateways) await g.proc.stop();
  }
  return part;
}
