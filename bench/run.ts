// `npm run bench`: sync tools/call through taskgate vs directly against the same upstream, in one run, reported as
// ratios against the direct baseline measured in that same run (absolute numbers depend on the machine; ratios
// measured side by side much less). With a stdio upstream the two npm peers front the same server too. The tasks
// scenario (bench/tasks.ts) measures the task path next to a fastify floor and the upstream called directly; the
// scale scenario (bench/scale.ts) lease renewal of 100k held tasks and the takeover of a dead replica's 40k; the
// scaleout scenario (bench/scaleout.ts) tasks in flight, tasks/list depth, two replicas and a dead one (issue 23).
// See bench/README.md for what each number means.
// One file because it is the entry of `npm run bench`: its settings, the http and stdio scenarios and their report all
// read the Settings and TargetResult shapes declared here; the other scenarios already live in their own files
// (tasks.ts, scale.ts, scaleout.ts).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { HttpLoad } from './load.js';
import { cpuMs, freePort, rssBytes, startProc, treeRss, waitHttp, type Proc } from './procs.js';
import { gcAndMeasure } from './inspector.js';
import { startOtlpSink, type OtlpSink } from './otlp-sink.js';
import { reportScale, scaleScenario, type ScaleResult, type ScaleSettings } from './scale.js';
import { ALL_SCALEOUT_PARTS, reportScaleout, scaleoutScenario, type ScaleoutRound, type ScaleoutSettings } from './scaleout.js';
import { everythingEntry, StdioDirect } from './stdio-direct.js';
import { envInt, planFromArgs, planOptions, runPlan, type Driver, type LoadPlan, type PhaseStats } from './stats.js';
import { DEFAULTS } from '../src/config/schema.js';
import {
  ALL_STORES,
  connectRedis,
  reportTasks,
  tasksErrorRates,
  tasksScenario,
  type StoreKind,
  type TasksRound,
  type TasksSettings,
} from './tasks.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const NODE = process.execPath;
const ENTRY = everythingEntry();

// Targets from the issue; reported, never asserted.
const MIN_THROUGHPUT_VS_DIRECT = 0.8;
const MAX_P50_ADDED_MS = 0.5;
const MIN_THROUGHPUT_VS_BEST_PEER = 1.5;
const MAX_ERROR_RATE = 0.01;
/** With --observability: sync throughput with metrics (scraped) and tracing (exported) on, against both off. */
const MIN_THROUGHPUT_OBSERVED = 0.95;
/** How often the observed target's /metrics is scraped during its run (Prometheus' default is 15 s). */
const SCRAPE_EVERY_MS = 1_000;
/** V8 heap (after forced full GCs) may grow this much over the throughput phase; more is retained per request. */
const HEAP_RETAINED_MAX = 2 * 1024 * 1024;
/** RSS (after forced GC) counts as flat if it ends within this much of where it was before the load. */
const RSS_FLAT_ABS = 8 * 1024 * 1024;
const RSS_FLAT_REL = 0.1;
const RSS_SAMPLE_MS = 250;

type Scenario = 'http' | 'stdio';
type ScenarioName = Scenario | 'tasks' | 'scale' | 'scaleout';
const ALL_SCENARIOS: readonly ScenarioName[] = ['http', 'stdio', 'tasks', 'scale', 'scaleout'];
/**
 * With --observability only, next to `taskgate` with both off: metrics scraped (`taskgate-metrics`), and metrics
 * scraped with traces exported (`taskgate-observed`, every trace or a head-sampled share: --trace-ratio).
 */
type TargetName = 'direct' | 'taskgate' | 'taskgate-metrics' | 'taskgate-observed' | 'supergateway' | 'mcp-proxy';
const ALL_TARGETS: readonly TargetName[] = ['direct', 'taskgate', 'supergateway', 'mcp-proxy'];

interface RssSamples {
  /** Bytes; the measured process alone (the gateway, the peer's own process, the upstream for direct). */
  idle?: number;
  beforeLoad?: number;
  afterLoad?: number;
  settled?: number;
  /** The process and everything it spawned, at the pre-load point (supergateway runs a server per session). */
  treeBeforeLoad?: { bytes: number; processes: number };
  /** [ms since the throughput phase started, bytes], every RSS_SAMPLE_MS during it. */
  duringLoad?: [number, number][];
  /** RSS right after the load once full GCs ran (sessions still open). */
  afterLoadGc?: number;
  /**
   * V8 heap in use after forced full GCs (through the inspector): before load and after load with the same
   * sessions open, and after the sessions were deleted. The difference across the load is what it retained.
   */
  heap?: { beforeLoad?: number; afterLoad?: number; settled?: number };
  /** Which process was sampled. */
  of: string;
}

interface TargetResult {
  scenario: Scenario;
  target: TargetName;
  label: string;
  round: number;
  ok: boolean;
  error?: string;
  tool?: string;
  warmup?: PhaseStats;
  latency?: PhaseStats;
  throughput?: PhaseStats;
  rss?: RssSamples;
  /** CPU the sampled process (see rss.of) spent during the throughput phase: noise-robust cost per call. */
  cpu?: { ms: number; usPerCall: number };
  notes: string[];
}

interface Check {
  scenario: ScenarioName;
  what: string;
  pass: boolean;
  detail: string;
}

interface Settings extends LoadPlan {
  clients: number;
  rounds: number;
  settleMs: number;
  scenarios: ScenarioName[];
  targets: TargetName[];
  smoke: boolean;
  useTsx: boolean;
  /** http scenario: also measure the gateway with metrics and tracing on (and the plain one with both off). */
  observability: boolean;
  /** The head-sampling ratio of the traced target (1: every trace). */
  traceRatio: number;
  /** tasks scenario */
  stores: StoreKind[];
  redisUrl: string;
  completionTasks: number;
  finishMs: number;
  /** scale scenario */
  heldTasks: number;
  orphanTasks: number;
  scaleLeaseMs: number;
  /** scaleout scenario (bench/scaleout.ts) */
  scaleout: Omit<ScaleoutSettings, 'smoke' | 'redisUrl'>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const mib = (b: number | undefined): string => (b === undefined ? '—' : (b / 1048576).toFixed(1));
const ms = (v: number | undefined): string => (v === undefined || Number.isNaN(v) ? '—' : v.toFixed(2));

function parseSettings(): Settings {
  const { values } = parseArgs({
    options: {
      ...planOptions,
      smoke: { type: 'boolean', default: false },
      'settle-ms': { type: 'string' },
      rounds: { type: 'string' },
      scenarios: { type: 'string' },
      targets: { type: 'string' },
      tsx: { type: 'boolean', default: false },
      observability: { type: 'boolean', default: false },
      'trace-ratio': { type: 'string' },
      stores: { type: 'string' },
      'redis-url': { type: 'string' },
      'completion-tasks': { type: 'string' },
      'finish-ms': { type: 'string' },
      'held-tasks': { type: 'string' },
      'orphan-tasks': { type: 'string' },
      'lease-ms': { type: 'string' },
      'scaleout-parts': { type: 'string' },
      'inflight-tasks': { type: 'string' },
      'inflight-gets': { type: 'string' },
      'listed-tasks': { type: 'string' },
      'listed-reference': { type: 'string' },
      'list-repeats': { type: 'string' },
      'replica-clients': { type: 'string' },
      'replica-ms': { type: 'string' },
      'replica-rounds': { type: 'string' },
      'takeover-tasks': { type: 'string' },
      'renewal-window-ms': { type: 'string' },
    },
  });
  const list = <T extends string>(v: string | undefined, all: readonly T[], flag: string): T[] | undefined => {
    if (v === undefined) return undefined;
    const items = v.split(',').map((s) => s.trim()).filter(Boolean);
    for (const i of items) if (!all.includes(i as T)) throw new Error(`--${flag}: unknown "${i}" (known: ${all.join(', ')})`);
    return items as T[];
  };
  const smoke = values.smoke === true;
  /** A size flag, or its smoke / full default. */
  const size = (flag: keyof typeof values, smokeSize: number, fullSize: number): number => {
    const v = values[flag];
    return typeof v === 'string' ? Number(v) : smoke ? smokeSize : fullSize;
  };
  const plan = planFromArgs(
    smoke
      ? { clients: '5', 'warmup-ms': '300', 'latency-ms': '500', 'duration-ms': '1000', ...stripUndefined(values) }
      : values,
  );
  return {
    ...plan,
    smoke,
    rounds: Math.max(1, values.rounds !== undefined ? Number(values.rounds) : smoke ? 1 : envInt('BENCH_ROUNDS', 1)),
    settleMs: values['settle-ms'] !== undefined ? Number(values['settle-ms']) : smoke ? 300 : envInt('BENCH_SETTLE_MS', 3000),
    scenarios: list(values.scenarios, ALL_SCENARIOS, 'scenarios') ?? (smoke ? ['http', 'tasks', 'scale'] : [...ALL_SCENARIOS]),
    targets: list(values.targets, ALL_TARGETS, 'targets') ?? (smoke ? ['direct', 'taskgate'] : [...ALL_TARGETS]),
    useTsx: values.tsx === true,
    observability: values.observability === true,
    traceRatio: values['trace-ratio'] !== undefined ? Number(values['trace-ratio']) : 1,
    stores: list(values.stores, ALL_STORES, 'stores') ?? (smoke ? ['redis'] : [...ALL_STORES]),
    redisUrl: values['redis-url'] ?? process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
    completionTasks: values['completion-tasks'] !== undefined ? Number(values['completion-tasks']) : smoke ? 10 : 200,
    finishMs: values['finish-ms'] !== undefined ? Number(values['finish-ms']) : 100,
    heldTasks: values['held-tasks'] !== undefined ? Number(values['held-tasks']) : smoke ? 2_000 : 100_000,
    orphanTasks: values['orphan-tasks'] !== undefined ? Number(values['orphan-tasks']) : smoke ? 2_000 : 40_000,
    scaleLeaseMs: values['lease-ms'] !== undefined ? Number(values['lease-ms']) : smoke ? 1_000 : DEFAULTS.leaseMs,
    scaleout: {
      parts: list(values['scaleout-parts'], ALL_SCALEOUT_PARTS, 'scaleout-parts') ?? [...ALL_SCALEOUT_PARTS],
      inflight: { tasks: size('inflight-tasks', 300, 10_000), gets: size('inflight-gets', 200, 2_000) },
      listing: { small: size('listed-reference', 200, 1_000), large: size('listed-tasks', 5_000, 100_000), repeats: size('list-repeats', 20, 200) },
      replicas: {
        clients: size('replica-clients', 4, 16),
        phase: smoke && values['replica-ms'] === undefined ? { durationMs: 0, count: 300, maxMs: 30_000 } : { durationMs: size('replica-ms', 1_000, 5_000) },
        rounds: size('replica-rounds', 1, 2),
      },
      takeover: { tasks: size('takeover-tasks', 200, 5_000), windowMs: size('renewal-window-ms', 4_000, 20_000) },
    },
  };
}

function stripUndefined(o: Record<string, string | boolean | undefined>): Record<string, string | boolean> {
  return Object.fromEntries(Object.entries(o).filter(([k, v]) => v !== undefined && k !== 'smoke')) as Record<
    string,
    string | boolean
  >;
}

// ---- taskgate ----

interface GatewayCommand {
  command: string;
  args: string[];
  how: string;
}

/** Built JS when it compiles (no tsx transform cost in the measured process), else tsx on the sources. */
function gatewayCommand(useTsx: boolean): GatewayCommand | string {
  if (!existsSync(join(ROOT, 'src/cli.ts'))) return 'src/cli.ts does not exist yet (gateway not written)';
  const tsxCmd = { command: NODE, args: ['--import', 'tsx', join(ROOT, 'src/cli.ts')], how: 'node --import tsx src/cli.ts' };
  if (useTsx) return tsxCmd;
  // The image's own build: tsc, then the files dist/ needs beside the JS (the Redis store's Lua scripts).
  const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, encoding: 'utf8', timeout: 180_000 });
  if (build.status === 0 && existsSync(join(ROOT, 'dist/cli.js'))) {
    return { command: NODE, args: [join(ROOT, 'dist/cli.js')], how: 'node dist/cli.js (built by npm run build)' };
  }
  const why = (build.stdout + build.stderr).trim().split('\n').slice(0, 5).join('\n    ');
  console.warn(`! npm run build failed, running the gateway through tsx instead:\n    ${why}`);
  return { ...tsxCmd, how: `${tsxCmd.how} (build failed)` };
}

const q = (s: string): string => JSON.stringify(s); // a JSON string is a valid YAML flow scalar

/** `metrics` undefined: the default config (metrics on, never scraped). */
function gatewayYaml(port: number, scenario: Scenario, upstreamUrl: string | undefined, metrics?: boolean): string {
  const upstream =
    scenario === 'http'
      ? `{ transport: streamable-http, url: ${q(upstreamUrl ?? '')} }`
      : `{ transport: stdio, command: ${q(NODE)}, args: [${q(ENTRY)}, "stdio"] }`;
  return [
    `listen: { host: 127.0.0.1, port: ${port}, path: /mcp }`,
    'store: { type: memory }',
    'log: { level: warn }',
    ...(metrics === undefined ? [] : [`metrics: { enabled: ${metrics} }`]),
    'upstreams:',
    `  everything: ${upstream}`,
    '',
  ].join('\n');
}

// ---- one target ----

let currentRound = 1;

interface Started {
  driver: Driver;
  /** Process whose RSS is sampled, if any. */
  rssPid?: () => number | undefined;
  rssOf: string;
  /** Stopped, in order, when the target is done: its processes, and anything else that runs beside it. */
  procs: Pick<Proc, 'stop'>[];
  tool?: () => string | undefined;
  /** The measured process's inspector port (it runs with --inspect on loopback) to force GCs before sampling. */
  inspectPort?: number;
  notes: string[];
}

/** Starts what a target needs, hands it to `run`, and tears it down after `run` returned or threw. */
type Setup = (run: (started: Started) => Promise<void>) => Promise<void>;

async function measure(
  scenario: Scenario,
  target: TargetName,
  label: string,
  s: Settings,
  setup: Setup,
): Promise<TargetResult> {
  const result: TargetResult = { scenario, target, label, round: currentRound, ok: false, notes: [] };
  process.stdout.write(`- ${s.rounds > 1 ? `round ${currentRound}, ` : ''}${scenario}: ${label} ... `);
  try {
    await setup(async (started) => {
      try {
        result.notes.push(...started.notes);
        const { rssPid } = started;
        const sample = (): number | undefined => {
          const pid = rssPid?.();
          return pid === undefined ? undefined : rssBytes(pid);
        };
        const cpu = (): number | undefined => {
          const pid = rssPid?.();
          return pid === undefined ? undefined : cpuMs(pid);
        };
        const rss: RssSamples = { of: started.rssOf, idle: sample() };
        result.rss = rss;
        const heap: NonNullable<RssSamples['heap']> = {};
        const { inspectPort } = started;
        /** Full GCs in the measured process; the heap in use after them, or undefined without an inspector. */
        const gc = async (): Promise<number | undefined> => {
          if (inspectPort === undefined) return undefined;
          rss.heap = heap;
          try {
            return (await gcAndMeasure(inspectPort)).usedBytes;
          } catch (err) {
            result.notes.push(`forced GC failed: ${err instanceof Error ? err.message : String(err)}`);
            return undefined;
          }
        };
        let cpuBefore: number | undefined;
        let cpuAfter: number | undefined;
        let sampler: NodeJS.Timeout | undefined;
        const run = await runPlan(started.driver, s, {
          beforeLoad: async () => {
            await sleep(s.settleMs);
            heap.beforeLoad = await gc();
            rss.beforeLoad = sample();
            const pid = rssPid?.();
            if (pid !== undefined) rss.treeBeforeLoad = treeRss(pid);
            cpuBefore = cpu();
            const t0 = Date.now();
            const series: [number, number][] = [];
            rss.duringLoad = series;
            sampler = setInterval(() => {
              const b = sample();
              if (b !== undefined) series.push([Date.now() - t0, b]);
            }, RSS_SAMPLE_MS);
          },
          afterLoad: async () => {
            clearInterval(sampler);
            cpuAfter = cpu();
            rss.afterLoad = sample();
            heap.afterLoad = await gc();
            if (inspectPort !== undefined) rss.afterLoadGc = sample();
          },
          afterClose: async () => {
            await sleep(s.settleMs);
            heap.settled = await gc();
            rss.settled = sample();
          },
        });
        Object.assign(result, run);
        if (cpuBefore !== undefined && cpuAfter !== undefined && run.throughput.calls > 0) {
          const used = cpuAfter - cpuBefore;
          result.cpu = { ms: used, usPerCall: (used * 1000) / run.throughput.calls };
        }
        const tool = started.tool?.();
        if (tool !== undefined) result.tool = tool;
        result.ok = true;
      } finally {
        const before = started.notes.length;
        for (const p of started.procs) await p.stop();
        // What the stopped parts noted on their way out (the observer's scrapes and spans).
        result.notes.push(...started.notes.slice(before));
      }
    });
    const t = result.throughput;
    const l = result.latency;
    if (t && l) {
      console.log(`${t.callsPerSec.toFixed(0)} calls/s, p50 ${ms(l.p50Ms)} ms, errors ${t.errors + l.errors}`);
    }
  } catch (err) {
    result.ok = false;
    result.error = err instanceof Error ? err.message : String(err);
    console.log(`FAILED\n    ${result.error.split('\n').join('\n    ')}`);
  }
  return result;
}

/** Loopback only; nothing attaches to it except gcAndMeasure at the sampling points, between phases. */
const inspectFlag = (port: number): string => `--inspect=127.0.0.1:${port}`;

function httpDriver(url: string, clients: number): { load: HttpLoad; driver: Driver } {
  const load = new HttpLoad({ url, clients });
  return { load, driver: load };
}

/**
 * How the gateway is observed: `undefined` as configured by default; `off` with metrics and tracing off; `on` with
 * metrics scraped every SCRAPE_EVERY_MS and traces exported to a loopback OTLP sink.
 */
type Observation = undefined | 'off' | { traceRatio: number | undefined };

async function startGateway(
  s: Settings,
  scenario: Scenario,
  gw: GatewayCommand,
  upstreamUrl: string | undefined,
  dir: string,
  observation?: Observation,
): Promise<Started> {
  const port = await freePort();
  const inspectPort = await freePort();
  const cfg = join(dir, `taskgate-${scenario}.yaml`);
  writeFileSync(cfg, gatewayYaml(port, scenario, upstreamUrl, observation === undefined ? undefined : observation !== 'off'));
  const args = [inspectFlag(inspectPort), ...gw.args, 'serve', '--config', cfg];
  const traceRatio = observation === undefined || observation === 'off' ? undefined : observation.traceRatio;
  const scraped = observation !== undefined && observation !== 'off';
  const sink = traceRatio !== undefined ? await startOtlpSink() : undefined;
  // The standard sampler variables: every trace, or a head-sampled share of them (what busy deployments run).
  const sampler = (ratio: number): Record<string, string> =>
    ratio >= 1 ? { OTEL_TRACES_SAMPLER: 'parentbased_always_on' } : { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: String(ratio) };
  const tracingEnv: Record<string, string> =
    sink === undefined || traceRatio === undefined
      ? { OTEL_SDK_DISABLED: 'true' }
      : { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_SERVICE_NAME: 'taskgate-bench', OTEL_SDK_DISABLED: 'false', ...sampler(traceRatio) };
  const proc = startProc('taskgate', gw.command, args, {
    cwd: ROOT,
    dropEnvPrefix: 'TASKGATE_',
    env: tracingEnv,
  });
  try {
    await waitHttp(proc, `http://127.0.0.1:${port}/readyz`, 30_000, 200);
  } catch (err) {
    await proc.stop();
    throw err;
  }
  const { load, driver } = httpDriver(`http://127.0.0.1:${port}/mcp`, s.clients);
  const procs: Pick<Proc, 'stop'>[] = [proc];
  const notes = [gw.how];
  if (scraped) {
    procs.push(observer(`http://127.0.0.1:${port}/metrics`, sink, notes));
    notes.push(`metrics scraped every ${SCRAPE_EVERY_MS} ms${sink === undefined ? '' : ', traces exported to a loopback OTLP sink'}`);
  }
  return { driver, rssPid: () => proc.pid, rssOf: 'taskgate process', procs, tool: () => load.toolName, inspectPort, notes };
}

/**
 * Scrapes /metrics like Prometheus while the target runs; stopped with the target's processes, when it notes what
 * was scraped and how many spans arrived (a run where tracing exported nothing measured nothing).
 */
function observer(metricsUrl: string, sink: OtlpSink | undefined, notes: string[]): Pick<Proc, 'stop'> {
  let scrapes = 0;
  let failures = 0;
  const timer = setInterval(() => {
    fetch(metricsUrl)
      .then(async (response) => {
        await response.text();
        if (response.ok) scrapes++;
        else failures++;
      })
      .catch(() => failures++);
  }, SCRAPE_EVERY_MS);
  return {
    async stop() {
      clearInterval(timer); // stopped after the gateway, whose shutdown flushed its last spans to the sink
      notes.push(`${scrapes} scrapes (${failures} failed)${sink === undefined ? '' : `, ${sink.spans()} spans received`}`);
      await sink?.close();
    },
  };
}

// ---- scenarios ----

/** A fresh upstream per target: server-everything keeps every SSE event of a session in memory, so a second
 * target measured against the first one's upstream would meet a bigger heap and slower GCs. */
async function withHttpUpstream<T>(fn: (url: string, upstream: Proc, inspectPort: number) => Promise<T>): Promise<T> {
  const port = await freePort();
  const inspectPort = await freePort();
  const url = `http://127.0.0.1:${port}/mcp`;
  const upstream = startProc('server-everything streamableHttp', NODE, [inspectFlag(inspectPort), ENTRY, 'streamableHttp'], {
    env: { PORT: String(port) },
    keepStdout: false,
  });
  try {
    await waitHttp(upstream, url, 20_000);
    return await fn(url, upstream, inspectPort);
  } finally {
    await upstream.stop();
  }
}

async function httpScenario(s: Settings, gw: GatewayCommand | string, dir: string): Promise<TargetResult[]> {
  const results: TargetResult[] = [];
  if (s.targets.includes('direct')) {
    results.push(
      await measure('http', 'direct', 'direct', s, (run) =>
        withHttpUpstream(async (url, upstream, inspectPort) => {
          const { load, driver } = httpDriver(url, s.clients);
          return run({
            driver,
            rssPid: () => upstream.pid,
            rssOf: 'upstream',
            procs: [],
            tool: () => load.toolName,
            inspectPort,
            notes: [],
          });
        }),
      ),
    );
  }
  if (s.targets.includes('taskgate')) {
    const label = s.observability ? 'taskgate (unobserved)' : 'taskgate';
    results.push(
      await measure('http', 'taskgate', label, s, (run) =>
        withHttpUpstream(async (url) => {
          if (typeof gw === 'string') throw new Error(gw);
          return run(await startGateway(s, 'http', gw, url, dir, s.observability ? 'off' : undefined));
        }),
      ),
    );
    if (s.observability) {
      const share = s.traceRatio >= 1 ? '' : ` ${Math.round(s.traceRatio * 100)}%`;
      const observed = [
        { target: 'taskgate-metrics' as const, label: 'taskgate (metrics)', traceRatio: undefined },
        { target: 'taskgate-observed' as const, label: `taskgate (metrics+traces${share})`, traceRatio: s.traceRatio },
      ];
      for (const { target, label: observedLabel, traceRatio } of observed) {
        results.push(
          await measure('http', target, observedLabel, s, (run) =>
            withHttpUpstream(async (url) => {
              if (typeof gw === 'string') throw new Error(gw);
              return run(await startGateway(s, 'http', gw, url, dir, { traceRatio }));
            }),
          ),
        );
      }
    }
  }
  return results;
}

async function stdioScenario(s: Settings, gw: GatewayCommand | string, dir: string): Promise<TargetResult[]> {
  const results: TargetResult[] = [];
  const peerNode = process.env.BENCH_PEER_NODE ?? NODE;
  const serverCmd = `${NODE} ${ENTRY} stdio`;
  if (s.targets.includes('direct')) {
    results.push(
      await measure('stdio', 'direct', 'direct (stdio client)', s, async (run) => {
        const driver = new StdioDirect({ command: NODE, args: [ENTRY, 'stdio'], clients: s.clients });
        await run({ driver, rssPid: () => driver.pid, rssOf: 'upstream', procs: [], notes: [] });
      }),
    );
  }
  /** An npm peer fronting the same stdio server over Streamable HTTP, measured like every other target. */
  const peer = async (
    target: 'supergateway' | 'mcp-proxy',
    label: string,
    args: (port: number) => string[],
    readyUrl: (port: number) => string,
    readyStatus: number | undefined,
    note: string,
  ): Promise<void> => {
    if (!s.targets.includes(target)) return;
    results.push(
      await measure('stdio', target, label, s, async (run) => {
        const port = await freePort();
        const inspectPort = await freePort();
        const proc = startProc(target, peerNode, [inspectFlag(inspectPort), ...args(port)]);
        try {
          await waitHttp(proc, readyUrl(port), 30_000, readyStatus);
        } catch (err) {
          await proc.stop();
          throw err;
        }
        const { load, driver } = httpDriver(`http://127.0.0.1:${port}/mcp`, s.clients);
        await run({
          driver,
          rssPid: () => proc.pid,
          rssOf: `${target} process`,
          procs: [proc],
          tool: () => load.toolName,
          inspectPort,
          notes: [note],
        });
      }),
    );
  };
  await peer(
    'supergateway',
    'supergateway --stateful',
    (port) => [
      join(ROOT, 'node_modules/supergateway/dist/index.js'),
      '--stdio', serverCmd,
      '--outputTransport', 'streamableHttp',
      '--stateful',
      '--port', String(port),
      '--logLevel', 'none',
      '--healthEndpoint', '/healthz',
    ],
    (port) => `http://127.0.0.1:${port}/healthz`,
    200,
    'one stdio server child per session (supergateway stateful design)',
  );
  await peer(
    'mcp-proxy',
    'mcp-proxy',
    (port) => [
      join(ROOT, 'node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs'),
      '--port', String(port),
      '--host', '127.0.0.1',
      '--server', 'stream',
      '--', NODE, ENTRY, 'stdio',
    ],
    (port) => `http://127.0.0.1:${port}/mcp`,
    undefined,
    'one shared stdio server child (mcp-proxy multiplexes sessions)',
  );
  if (s.targets.includes('taskgate')) {
    results.push(
      await measure('stdio', 'taskgate', 'taskgate', s, async (run) => {
        if (typeof gw === 'string') throw new Error(gw);
        await run(await startGateway(s, 'stdio', gw, undefined, dir));
      }),
    );
  }
  return results;
}

// ---- report ----

function errorRate(r: TargetResult): number {
  const phases = [r.latency, r.throughput].filter((p): p is PhaseStats => p !== undefined);
  const errors = phases.reduce((n, p) => n + p.errors, 0);
  const total = phases.reduce((n, p) => n + p.errors + p.calls, 0);
  return total > 0 ? errors / total : 0;
}

function median(values: number[]): number {
  const v = values.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (v.length === 0) return Number.NaN;
  const mid = v.length >> 1;
  return v.length % 2 === 1 ? (v[mid] ?? Number.NaN) : ((v[mid - 1] ?? 0) + (v[mid] ?? 0)) / 2;
}

/** One target over all rounds: medians, so one round disturbed by other work on the machine does not decide. */
interface Summary {
  scenario: Scenario;
  target: TargetName;
  label: string;
  rounds: number;
  failedRounds: number;
  error?: string;
  callsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  loadedP50Ms: number;
  loadedP99Ms: number;
  cpuUsPerCall: number;
  errors: number;
  errorSamples: string[];
}

function summarize(results: TargetResult[]): Summary[] {
  const out: Summary[] = [];
  for (const r of results) {
    if (out.some((x) => x.scenario === r.scenario && x.target === r.target)) continue;
    const all = results.filter((x) => x.scenario === r.scenario && x.target === r.target);
    const ok = all.filter((x) => x.ok && x.throughput && x.latency);
    const pick = (f: (x: TargetResult) => number | undefined): number =>
      median(ok.map((x) => f(x) ?? Number.NaN));
    const failed = all.find((x) => !x.ok);
    out.push({
      scenario: r.scenario,
      target: r.target,
      label: r.label,
      rounds: ok.length,
      failedRounds: all.length - ok.length,
      ...(failed?.error !== undefined ? { error: failed.error } : {}),
      callsPerSec: pick((x) => x.throughput?.callsPerSec),
      p50Ms: pick((x) => x.latency?.p50Ms),
      p99Ms: pick((x) => x.latency?.p99Ms),
      loadedP50Ms: pick((x) => x.throughput?.p50Ms),
      loadedP99Ms: pick((x) => x.throughput?.p99Ms),
      cpuUsPerCall: pick((x) => x.cpu?.usPerCall),
      errors: ok.reduce((n, x) => n + (x.latency?.errors ?? 0) + (x.throughput?.errors ?? 0), 0),
      errorSamples: [...new Set(ok.flatMap((x) => [...(x.latency?.errorSamples ?? []), ...(x.throughput?.errorSamples ?? [])]))],
    });
  }
  return out;
}

function pad(cells: string[], widths: number[]): string {
  return cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
}

const signed = (v: number, digits = 2): string => (Number.isNaN(v) ? '—' : `${v >= 0 ? '+' : ''}${v.toFixed(digits)}`);

function report(scenario: Scenario, results: TargetResult[], s: Settings): { checks: Check[]; summaries: Summary[] } {
  const checks: Check[] = [];
  const summaries = summarize(results);
  const usable = summaries.filter((x) => x.rounds > 0);
  const direct = usable.find((x) => x.target === 'direct');
  const peers = usable.filter((x) => x.target === 'supergateway' || x.target === 'mcp-proxy');
  const bestPeer = peers.reduce<Summary | undefined>((b, x) => (x.callsPerSec > (b?.callsPerSec ?? -1) ? x : b), undefined);
  const stdio = scenario === 'stdio';
  const header = ['target', 'calls/s', '×direct', ...(stdio ? ['×best peer'] : []), 'p50 ms', 'p99 ms', '+p50 ms', 'loaded p50', 'loaded p99', 'CPU µs/call', 'errors'];
  const widths = [24, 8, 8, ...(stdio ? [10] : []), 7, 7, 8, 10, 10, 11, 6];
  const title = stdio ? 'stdio upstream: server-everything stdio' : 'HTTP upstream: server-everything streamableHttp';
  const amount = s.count !== undefined ? `${s.count} calls` : `${s.durationMs} ms`;
  console.log(`\n${title} — ${s.clients} clients, ${amount}${s.rounds > 1 ? `, median of ${s.rounds} rounds` : ''}`);
  console.log('  p50/p99: one client, one call at a time. loaded p50/p99: during the throughput run.');
  console.log("  CPU µs/call: the measured process's own CPU during the throughput run (upstream for direct).");
  console.log(pad(header, widths));
  for (const x of summaries) {
    if (x.rounds === 0) {
      console.log(`${pad([x.label, 'FAILED'], widths)}  ${(x.error ?? '').split('\n')[0]}`);
      continue;
    }
    const row = [
      x.label,
      x.callsPerSec.toFixed(0),
      direct ? (x.callsPerSec / direct.callsPerSec).toFixed(2) : '—',
      ...(stdio ? [bestPeer && x.target !== 'direct' ? (x.callsPerSec / bestPeer.callsPerSec).toFixed(2) : '—'] : []),
      ms(x.p50Ms),
      ms(x.p99Ms),
      direct && x.target !== 'direct' ? signed(x.p50Ms - direct.p50Ms) : '—',
      ms(x.loadedP50Ms),
      ms(x.loadedP99Ms),
      Number.isNaN(x.cpuUsPerCall) ? '—' : x.cpuUsPerCall.toFixed(0),
      String(x.errors),
    ];
    console.log(pad(row, widths));
    if (x.failedRounds > 0) console.log(`    ${x.failedRounds} round(s) failed: ${(x.error ?? '').split('\n')[0]}`);
    for (const e of x.errorSamples.slice(0, 3)) console.log(`    error: ${e}`);
  }
  console.log('  memory MiB: RSS idle → before load → after load → settled (sessions deleted, pause, GC);');
  console.log('             heap = V8 heap in use after forced GC, same points; tree = RSS with child processes');
  for (const r of results) {
    if (!r.rss) continue;
    const x = r.rss;
    const tree =
      x.treeBeforeLoad && x.treeBeforeLoad.processes > 1
        ? `, tree ${mib(x.treeBeforeLoad.bytes)} in ${x.treeBeforeLoad.processes} processes`
        : '';
    const label = s.rounds > 1 ? `${r.label} #${r.round}` : r.label;
    const h = x.heap;
    const heap = h ? `; heap ${mib(h.beforeLoad)} → ${mib(h.afterLoad)} → ${mib(h.settled)}` : '';
    console.log(
      `    ${label.padEnd(28)} ${mib(x.idle)} → ${mib(x.beforeLoad)} → ${mib(x.afterLoad)} → ${mib(x.settled)}${heap}  (${x.of}${tree})`,
    );
  }

  const gw = usable.find((x) => x.target === 'taskgate');
  if (!gw) return { checks, summaries };
  for (const observed of usable.filter((x) => x.target === 'taskgate-metrics' || x.target === 'taskgate-observed')) {
    const ratio = observed.callsPerSec / gw.callsPerSec;
    const notes = results.filter((r) => r.target === observed.target).flatMap((r) => r.notes.filter((n) => n.includes('scrapes')));
    checks.push({
      scenario,
      what: `throughput with ${observed.label.replace(/^taskgate \((.*)\)$/, '$1')} ≥ ${MIN_THROUGHPUT_OBSERVED}× without`,
      pass: ratio >= MIN_THROUGHPUT_OBSERVED,
      detail:
        `${ratio.toFixed(3)}× (${observed.callsPerSec.toFixed(0)} vs ${gw.callsPerSec.toFixed(0)} calls/s; ` +
        `CPU ${observed.cpuUsPerCall.toFixed(0)} vs ${gw.cpuUsPerCall.toFixed(0)} µs/call; ${notes.join('; ')})`,
    });
  }
  if (direct && !stdio) {
    const ratio = gw.callsPerSec / direct.callsPerSec;
    const added = gw.p50Ms - direct.p50Ms;
    checks.push({
      scenario,
      what: `throughput ≥ ${MIN_THROUGHPUT_VS_DIRECT * 100}% of direct`,
      pass: ratio >= MIN_THROUGHPUT_VS_DIRECT,
      detail: `${(ratio * 100).toFixed(1)}% (${gw.callsPerSec.toFixed(0)} vs ${direct.callsPerSec.toFixed(0)} calls/s)`,
    });
    checks.push({
      scenario,
      what: `p50 adds ≤ ${MAX_P50_ADDED_MS} ms`,
      pass: added <= MAX_P50_ADDED_MS,
      detail: `${signed(added, 3)} ms (${ms(gw.p50Ms)} vs ${ms(direct.p50Ms)} ms, one client)`,
    });
  }
  if (stdio && bestPeer) {
    const ratio = gw.callsPerSec / bestPeer.callsPerSec;
    checks.push({
      scenario,
      what: `throughput ≥ ${MIN_THROUGHPUT_VS_BEST_PEER}× the better peer`,
      pass: ratio >= MIN_THROUGHPUT_VS_BEST_PEER,
      detail: `${ratio.toFixed(2)}× ${bestPeer.target} (${gw.callsPerSec.toFixed(0)} vs ${bestPeer.callsPerSec.toFixed(0)} calls/s)`,
    });
  }
  // The worst round decides; a leak shows in every round, noise in one. A smoke run is far too short for the
  // heap to reach its working size: its memory numbers are printed, not judged.
  const gwRounds = results.filter((r) => r.target === 'taskgate' && r.ok && r.rss);
  if (!s.smoke && gwRounds.length > 0) {
    let heapWorst: { r: TargetResult; growth: number } | undefined;
    let rssWorst: { r: TargetResult; growth: number; limit: number } | undefined;
    for (const r of gwRounds) {
      const h = r.rss?.heap;
      if (h?.beforeLoad !== undefined && h.afterLoad !== undefined) {
        const growth = h.afterLoad - h.beforeLoad;
        if (!heapWorst || growth > heapWorst.growth) heapWorst = { r, growth };
      }
      const x = r.rss;
      if (x?.beforeLoad !== undefined && x.settled !== undefined) {
        const growth = x.settled - x.beforeLoad;
        const limit = Math.max(RSS_FLAT_ABS, RSS_FLAT_REL * x.beforeLoad);
        if (!rssWorst || growth - limit > rssWorst.growth - rssWorst.limit) rssWorst = { r, growth, limit };
      }
    }
    if (heapWorst) {
      const { r, growth } = heapWorst;
      const calls = r.throughput?.calls ?? 0;
      checks.push({
        scenario,
        what: 'gateway retains nothing per call',
        pass: growth <= HEAP_RETAINED_MAX,
        detail:
          `heap after forced GC ${mib(r.rss?.heap?.beforeLoad)} → ${mib(r.rss?.heap?.afterLoad)} MiB across ${calls} calls ` +
          `(${signed(growth / 1048576, 2)} MiB, ${calls > 0 ? (growth / calls).toFixed(1) : '—'} B/call; limit ${mib(HEAP_RETAINED_MAX)} MiB); ` +
          `${mib(r.rss?.heap?.settled)} MiB after sessions deleted`,
      });
    }
    if (rssWorst) {
      const { r, growth, limit } = rssWorst;
      checks.push({
        scenario,
        what: 'gateway RSS flat',
        pass: growth <= limit,
        detail:
          `before load ${mib(r.rss?.beforeLoad)} MiB, after ${mib(r.rss?.afterLoad)}, settled ${mib(r.rss?.settled)} ` +
          `(${signed(growth / 1048576, 1)} MiB, limit ${mib(limit)})`,
      });
    }
  }
  return { checks, summaries };
}

// ---- main ----

/**
 * A smoke run (CI) without a Redis server still proves the task path end to end, on the memory store; the full
 * run insists on Redis (its target is the point) and reports it as failed when Redis is missing.
 */
async function smokeWithoutRedis(s: Settings): Promise<void> {
  if (!s.smoke || !s.scenarios.includes('tasks') || !s.stores.includes('redis')) return;
  const redis = await connectRedis(s.redisUrl);
  if (typeof redis !== 'string') {
    redis.disconnect();
    return;
  }
  console.log(`! ${redis}; the smoke run measures the task path on the memory store instead`);
  s.stores = [...new Set([...s.stores.filter((x) => x !== 'redis'), 'memory' as const])];
  // Leases across replicas need a store they share: without Redis there is nothing to measure.
  if (s.scenarios.includes('scale')) {
    console.log('! the smoke run skips the scale scenario (it needs Redis)');
    s.scenarios = s.scenarios.filter((x) => x !== 'scale');
  }
}

async function main(): Promise<void> {
  const s = parseSettings();
  const startedAt = new Date();
  console.log(
    `taskgate bench${s.smoke ? ' (smoke)' : ''}: scenarios ${s.scenarios.join(',')}, targets ${s.targets.join(',')}, ` +
      `${s.clients} clients, warmup ${s.warmupMs} ms, latency ${s.latencyMs} ms, throughput ${s.count ?? s.durationMs}${s.count !== undefined ? ' calls' : ' ms'}, ` +
      `${s.rounds} round(s), ${s.scenarios.includes('tasks') ? `stores ${s.stores.join(',')}, ` : ''}` +
      `${s.scenarios.includes('scale') ? `scale ${s.heldTasks} held / ${s.orphanTasks} orphans / leaseMs ${s.scaleLeaseMs}, ` : ''}` +
      `${s.scenarios.includes('scaleout') ? `scaleout ${s.scaleout.parts.join(',')} (${s.scaleout.inflight.tasks} in flight, ${s.scaleout.listing.large} listed, ${s.scaleout.takeover.tasks} on the dead replica), ` : ''}node ${process.version}, ${cpus().length} CPUs`,
  );
  const load = loadavg();
  if ((load[0] ?? 0) > cpus().length * 0.5) {
    console.log(
      `! load average ${load.map((x) => x.toFixed(2)).join(' ')} on ${cpus().length} CPUs: other work is running; ` +
        'ratios will be noisier (consider --rounds 3)',
    );
  }
  const needsGateway = s.targets.includes('taskgate') || s.scenarios.some((x) => x === 'tasks' || x === 'scale' || x === 'scaleout');
  const gw: GatewayCommand | string = needsGateway ? gatewayCommand(s.useTsx) : 'not selected';
  await smokeWithoutRedis(s);
  const tasksSettings: TasksSettings = {
    clients: s.clients,
    warmupMs: s.warmupMs,
    latencyMs: s.latencyMs,
    durationMs: s.durationMs,
    ...(s.count !== undefined ? { count: s.count } : {}),
    smoke: s.smoke,
    stores: s.stores,
    redisUrl: s.redisUrl,
    completionTasks: s.completionTasks,
    finishMs: s.finishMs,
  };
  const scaleSettings: ScaleSettings = {
    smoke: s.smoke,
    redisUrl: s.redisUrl,
    heldTasks: s.heldTasks,
    orphanTasks: s.orphanTasks,
    leaseMs: s.scaleLeaseMs,
    renewalRounds: s.smoke ? 3 : 5,
  };
  const dir = mkdtempSync(join(tmpdir(), 'taskgate-bench-'));
  const results: TargetResult[] = [];
  const tasksRounds: TasksRound[] = [];
  const scaleResults: ScaleResult[] = [];
  const scaleoutRounds: ScaleoutRound[] = [];
  const scaleoutSettings: ScaleoutSettings = { smoke: s.smoke, redisUrl: s.redisUrl, ...s.scaleout };
  const checks: Check[] = [];
  const summaries: Summary[] = [];
  try {
    // Rounds interleave the targets (A B C, A B C) so that a slow spell on a shared machine hits all of them.
    for (currentRound = 1; currentRound <= s.rounds; currentRound++) {
      for (const scenario of s.scenarios) {
        if (scenario === 'tasks') tasksRounds.push(await tasksScenario(ROOT, tasksSettings, gw, dir, currentRound, s.rounds));
        else if (scenario === 'scale') scaleResults.push(await scaleScenario(scaleSettings, gw, dir, currentRound, s.rounds));
        else if (scenario === 'scaleout') scaleoutRounds.push(await scaleoutScenario(ROOT, scaleoutSettings, gw, dir, currentRound, s.rounds));
        else results.push(...(scenario === 'http' ? await httpScenario(s, gw, dir) : await stdioScenario(s, gw, dir)));
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  let tasksOut: ReturnType<typeof reportTasks> | undefined;
  for (const scenario of s.scenarios) {
    if (scenario === 'tasks') {
      tasksOut = reportTasks(tasksRounds, tasksSettings, s.rounds);
      checks.push(...tasksOut.checks);
      continue;
    }
    if (scenario === 'scale') {
      checks.push(...reportScale(scaleResults, scaleSettings));
      continue;
    }
    if (scenario === 'scaleout') {
      checks.push(...reportScaleout(scaleoutRounds, typeof gw === 'string' ? gw : gw.how));
      continue;
    }
    const out = report(scenario, results.filter((r) => r.scenario === scenario), s);
    checks.push(...out.checks);
    summaries.push(...out.summaries);
  }

  // A smoke run only proves the targets still run end to end: a second of five clients says nothing about them.
  console.log(s.smoke ? '\nTargets (smoke run: too short to judge; shown for information only):' : '\nTargets (reported, not enforced):');
  if (checks.length === 0) console.log('  none evaluated (taskgate not measured)');
  const verdict = (pass: boolean): string => (s.smoke ? 'info' : pass ? 'PASS' : 'FAIL');
  for (const c of checks) console.log(`  [${verdict(c.pass)}] ${c.scenario}: ${c.what}: ${c.detail}`);

  const failedToRun = [
    ...results.filter((r) => !r.ok),
    ...(tasksOut?.summary.failed ?? []),
    ...scaleResults.filter((r) => !r.ok),
    ...scaleoutRounds.flatMap((r) => r.parts.filter((p) => !p.ok)),
  ];
  const tooManyErrors = results.filter((r) => r.ok && errorRate(r) > MAX_ERROR_RATE);
  for (const r of tooManyErrors) console.log(`  [ERR ] ${r.scenario}: ${r.label}: ${(errorRate(r) * 100).toFixed(2)}% errors (> 1%)`);
  const tasksTooManyErrors = tasksErrorRates(tasksRounds, MAX_ERROR_RATE);
  for (const line of tasksTooManyErrors) console.log(`  [ERR ] ${line}`);

  const outDir = join(ROOT, 'bench/results');
  mkdirSync(outDir, { recursive: true });
  const file = join(outDir, `${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(
    file,
    `${JSON.stringify(
      {
        startedAt: startedAt.toISOString(),
        host: { node: process.version, cpus: cpus().length, cpuModel: cpus()[0]?.model, totalMemBytes: totalmem() },
        loadAvgAtStart: load,
        settings: s,
        summaries,
        checks,
        results,
        ...(s.scenarios.includes('tasks') ? { tasks: { summary: tasksOut?.summary, rounds: tasksRounds } } : {}),
        ...(s.scenarios.includes('scale') ? { scale: { rounds: scaleResults } } : {}),
        ...(s.scenarios.includes('scaleout') ? { scaleout: { rounds: scaleoutRounds } } : {}),
      },
      null,
      2,
    )}\n`,
  );
  console.log(`\nJSON: ${file}`);
  process.exitCode = failedToRun.length > 0 || tooManyErrors.length > 0 || tasksTooManyErrors.length > 0 ? 1 : 0;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
