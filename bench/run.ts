// `npm run bench`: sync tools/call through taskgate vs directly against the same upstream, in one run, reported as
// ratios against the direct baseline measured in that same run (absolute numbers depend on the machine; ratios
// measured side by side much less). With a stdio upstream the two npm peers front the same server too.
// See bench/README.md for what each number means.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { HttpLoad } from './load.js';
import { freePort, rssBytes, startProc, treeRss, waitHttp, type Proc } from './procs.js';
import { everythingEntry, StdioDirect } from './stdio-direct.js';
import { envInt, planFromArgs, planOptions, runPlan, type Driver, type LoadPlan, type PhaseStats } from './stats.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const NODE = process.execPath;
const ENTRY = everythingEntry();

// Targets from the issue; reported, never asserted.
const MIN_THROUGHPUT_VS_DIRECT = 0.8;
const MAX_P50_ADDED_MS = 0.5;
const MIN_THROUGHPUT_VS_BEST_PEER = 1.5;
const MAX_ERROR_RATE = 0.01;
/** RSS counts as flat if it settles within this much of the pre-load steady state. */
const RSS_FLAT_ABS = 8 * 1024 * 1024;
const RSS_FLAT_REL = 0.1;

type Scenario = 'http' | 'stdio';
type TargetName = 'direct' | 'taskgate' | 'supergateway' | 'mcp-proxy';
const ALL_TARGETS: readonly TargetName[] = ['direct', 'taskgate', 'supergateway', 'mcp-proxy'];

interface RssSamples {
  /** Bytes; the measured process alone (the gateway, the peer's own process, the upstream for direct). */
  idle?: number;
  beforeLoad?: number;
  afterLoad?: number;
  settled?: number;
  /** The process and everything it spawned, at the pre-load point (supergateway runs a server per session). */
  treeBeforeLoad?: { bytes: number; processes: number };
  /** Which process was sampled. */
  of: string;
}

interface TargetResult {
  scenario: Scenario;
  target: TargetName;
  label: string;
  ok: boolean;
  error?: string;
  tool?: string;
  warmup?: PhaseStats;
  latency?: PhaseStats;
  throughput?: PhaseStats;
  rss?: RssSamples;
  notes: string[];
}

interface Check {
  scenario: Scenario;
  what: string;
  pass: boolean;
  detail: string;
}

interface Settings extends LoadPlan {
  clients: number;
  settleMs: number;
  scenarios: Scenario[];
  targets: TargetName[];
  smoke: boolean;
  useTsx: boolean;
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
      scenarios: { type: 'string' },
      targets: { type: 'string' },
      tsx: { type: 'boolean', default: false },
    },
  });
  const list = <T extends string>(v: string | undefined, all: readonly T[], flag: string): T[] | undefined => {
    if (v === undefined) return undefined;
    const items = v.split(',').map((s) => s.trim()).filter(Boolean);
    for (const i of items) if (!all.includes(i as T)) throw new Error(`--${flag}: unknown "${i}" (known: ${all.join(', ')})`);
    return items as T[];
  };
  const smoke = values.smoke === true;
  const plan = planFromArgs(
    smoke
      ? { clients: '5', 'warmup-ms': '300', 'latency-ms': '500', 'duration-ms': '1000', ...stripUndefined(values) }
      : values,
  );
  return {
    ...plan,
    smoke,
    settleMs: values['settle-ms'] !== undefined ? Number(values['settle-ms']) : smoke ? 300 : envInt('BENCH_SETTLE_MS', 3000),
    scenarios: list(values.scenarios, ['http', 'stdio'] as const, 'scenarios') ?? (smoke ? ['http'] : ['http', 'stdio']),
    targets: list(values.targets, ALL_TARGETS, 'targets') ?? (smoke ? ['direct', 'taskgate'] : [...ALL_TARGETS]),
    useTsx: values.tsx === true,
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
  const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
  const build = spawnSync(NODE, [tsc, '-p', 'tsconfig.build.json'], { cwd: ROOT, encoding: 'utf8', timeout: 180_000 });
  if (build.status === 0 && existsSync(join(ROOT, 'dist/cli.js'))) {
    return { command: NODE, args: [join(ROOT, 'dist/cli.js')], how: 'node dist/cli.js (built by tsc -p tsconfig.build.json)' };
  }
  const why = (build.stdout + build.stderr).trim().split('\n').slice(0, 5).join('\n    ');
  console.warn(`! tsc -p tsconfig.build.json failed, running the gateway through tsx instead:\n    ${why}`);
  return { ...tsxCmd, how: `${tsxCmd.how} (build failed)` };
}

const q = (s: string): string => JSON.stringify(s); // a JSON string is a valid YAML flow scalar

function gatewayYaml(port: number, scenario: Scenario, upstreamUrl: string | undefined): string {
  const upstream =
    scenario === 'http'
      ? `{ transport: streamable-http, url: ${q(upstreamUrl ?? '')} }`
      : `{ transport: stdio, command: ${q(NODE)}, args: [${q(ENTRY)}, "stdio"] }`;
  return [
    `listen: { host: 127.0.0.1, port: ${port}, path: /mcp }`,
    'store: { type: memory }',
    'log: { level: warn }',
    'upstreams:',
    `  everything: ${upstream}`,
    '',
  ].join('\n');
}

// ---- one target ----

interface Started {
  driver: Driver;
  /** Process whose RSS is sampled, if any. */
  rssPid?: () => number | undefined;
  rssOf: string;
  procs: Proc[];
  tool?: () => string | undefined;
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
  const result: TargetResult = { scenario, target, label, ok: false, notes: [] };
  process.stdout.write(`- ${scenario}: ${label} ... `);
  try {
    await setup(async (started) => {
      try {
        result.notes.push(...started.notes);
        const { rssPid } = started;
        const sample = (): number | undefined => {
          const pid = rssPid?.();
          return pid === undefined ? undefined : rssBytes(pid);
        };
        const rss: RssSamples = { of: started.rssOf, idle: sample() };
        result.rss = rss;
        const run = await runPlan(started.driver, s, {
          beforeLoad: async () => {
            await sleep(s.settleMs);
            rss.beforeLoad = sample();
            const pid = rssPid?.();
            if (pid !== undefined) rss.treeBeforeLoad = treeRss(pid);
          },
          afterLoad: async () => {
            rss.afterLoad = sample();
          },
          afterClose: async () => {
            await sleep(s.settleMs);
            rss.settled = sample();
          },
        });
        Object.assign(result, run);
        const tool = started.tool?.();
        if (tool !== undefined) result.tool = tool;
        result.ok = true;
      } finally {
        for (const p of started.procs) await p.stop();
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

function httpDriver(url: string, clients: number): { load: HttpLoad; driver: Driver } {
  const load = new HttpLoad({ url, clients });
  return { load, driver: load };
}

async function startGateway(
  s: Settings,
  scenario: Scenario,
  gw: GatewayCommand,
  upstreamUrl: string | undefined,
  dir: string,
): Promise<Started> {
  const port = await freePort();
  const cfg = join(dir, `taskgate-${scenario}.yaml`);
  writeFileSync(cfg, gatewayYaml(port, scenario, upstreamUrl));
  const proc = startProc('taskgate', gw.command, [...gw.args, 'serve', '--config', cfg], {
    cwd: ROOT,
    dropEnvPrefix: 'TASKGATE_',
  });
  try {
    await waitHttp(proc, `http://127.0.0.1:${port}/healthz`, 30_000, 200);
  } catch (err) {
    await proc.stop();
    throw err;
  }
  const { load, driver } = httpDriver(`http://127.0.0.1:${port}/mcp`, s.clients);
  return {
    driver,
    rssPid: () => proc.pid,
    rssOf: 'taskgate process',
    procs: [proc],
    tool: () => load.toolName,
    notes: [gw.how],
  };
}

// ---- scenarios ----

/** A fresh upstream per target: server-everything keeps every SSE event of a session in memory, so a second
 * target measured against the first one's upstream would meet a bigger heap and slower GCs. */
async function withHttpUpstream<T>(fn: (url: string, upstream: Proc) => Promise<T>): Promise<T> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/mcp`;
  const upstream = startProc('server-everything streamableHttp', NODE, [ENTRY, 'streamableHttp'], {
    env: { PORT: String(port) },
    keepStdout: false,
  });
  try {
    await waitHttp(upstream, url, 20_000);
    return await fn(url, upstream);
  } finally {
    await upstream.stop();
  }
}

async function httpScenario(s: Settings, gw: GatewayCommand | string, dir: string): Promise<TargetResult[]> {
  const results: TargetResult[] = [];
  if (s.targets.includes('direct')) {
    results.push(
      await measure('http', 'direct', 'direct (server-everything streamableHttp)', s, (run) =>
        withHttpUpstream(async (url, upstream) => {
          const { load, driver } = httpDriver(url, s.clients);
          return run({ driver, rssPid: () => upstream.pid, rssOf: 'upstream', procs: [], tool: () => load.toolName, notes: [] });
        }),
      ),
    );
  }
  if (s.targets.includes('taskgate')) {
    results.push(
      await measure('http', 'taskgate', 'taskgate → streamable-http upstream', s, (run) =>
        withHttpUpstream(async (url) => {
          if (typeof gw === 'string') throw new Error(gw);
          return run(await startGateway(s, 'http', gw, url, dir));
        }),
      ),
    );
  }
  return results;
}

async function stdioScenario(s: Settings, gw: GatewayCommand | string, dir: string): Promise<TargetResult[]> {
  const results: TargetResult[] = [];
  const peerNode = process.env.BENCH_PEER_NODE ?? NODE;
  const serverCmd = `${NODE} ${ENTRY} stdio`;
  if (s.targets.includes('direct')) {
    results.push(
      await measure('stdio', 'direct', 'direct (stdio client, same concurrency)', s, async (run) => {
        const driver = new StdioDirect({ command: NODE, args: [ENTRY, 'stdio'], clients: s.clients });
        await run({ driver, rssPid: () => driver.pid, rssOf: 'upstream', procs: [], notes: [] });
      }),
    );
  }
  if (s.targets.includes('supergateway')) {
    results.push(
      await measure('stdio', 'supergateway', 'supergateway --stateful', s, async (run) => {
        const port = await freePort();
        const proc = startProc('supergateway', peerNode, [
          join(ROOT, 'node_modules/supergateway/dist/index.js'),
          '--stdio', serverCmd,
          '--outputTransport', 'streamableHttp',
          '--stateful',
          '--port', String(port),
          '--logLevel', 'none',
          '--healthEndpoint', '/healthz',
        ]);
        try {
          await waitHttp(proc, `http://127.0.0.1:${port}/healthz`, 30_000, 200);
        } catch (err) {
          await proc.stop();
          throw err;
        }
        const { load, driver } = httpDriver(`http://127.0.0.1:${port}/mcp`, s.clients);
        await run({
          driver,
          rssPid: () => proc.pid,
          rssOf: 'supergateway process (its per-session servers in the tree figure)',
          procs: [proc],
          tool: () => load.toolName,
          notes: ['one stdio server child per session (supergateway stateful design)'],
        });
      }),
    );
  }
  if (s.targets.includes('mcp-proxy')) {
    results.push(
      await measure('stdio', 'mcp-proxy', 'mcp-proxy --server stream', s, async (run) => {
        const port = await freePort();
        const proc = startProc('mcp-proxy', peerNode, [
          join(ROOT, 'node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs'),
          '--port', String(port),
          '--host', '127.0.0.1',
          '--server', 'stream',
          '--', NODE, ENTRY, 'stdio',
        ]);
        try {
          await waitHttp(proc, `http://127.0.0.1:${port}/mcp`, 30_000);
        } catch (err) {
          await proc.stop();
          throw err;
        }
        const { load, driver } = httpDriver(`http://127.0.0.1:${port}/mcp`, s.clients);
        await run({
          driver,
          rssPid: () => proc.pid,
          rssOf: 'mcp-proxy process',
          procs: [proc],
          tool: () => load.toolName,
          notes: ['one shared stdio server child (mcp-proxy multiplexes sessions)'],
        });
      }),
    );
  }
  if (s.targets.includes('taskgate')) {
    results.push(
      await measure('stdio', 'taskgate', 'taskgate → stdio upstream', s, async (run) => {
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

function pad(cells: string[], widths: number[]): string {
  return cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
}

function report(scenario: Scenario, results: TargetResult[], s: Settings): Check[] {
  const checks: Check[] = [];
  const direct = results.find((r) => r.target === 'direct' && r.ok);
  const peers = results.filter((r) => (r.target === 'supergateway' || r.target === 'mcp-proxy') && r.ok);
  const bestPeer = peers.reduce<TargetResult | undefined>(
    (best, r) => ((r.throughput?.callsPerSec ?? 0) > (best?.throughput?.callsPerSec ?? -1) ? r : best),
    undefined,
  );
  const dTput = direct?.throughput?.callsPerSec;
  const dP50 = direct?.latency?.p50Ms;
  const header = ['target', 'calls/s', '×direct', ...(scenario === 'stdio' ? ['×best peer'] : []), 'p50 ms', 'p99 ms', '+p50 ms', 'loaded p50', 'loaded p99', 'errors'];
  const widths = [40, 9, 8, ...(scenario === 'stdio' ? [10] : []), 7, 7, 8, 10, 10, 7];
  const title =
    scenario === 'http'
      ? 'HTTP upstream: server-everything streamableHttp'
      : 'stdio upstream: server-everything stdio';
  console.log(`\n${title} — ${s.clients} clients, ${s.count !== undefined ? `${s.count} calls` : `${s.durationMs} ms`}`);
  console.log('  p50/p99: one client, one call at a time; loaded p50/p99: during the throughput run');
  console.log(pad(header, widths));
  for (const r of results) {
    if (!r.ok || !r.throughput || !r.latency) {
      console.log(pad([r.label, 'FAILED'], widths) + `  ${(r.error ?? '').split('\n')[0]}`);
      continue;
    }
    const t = r.throughput.callsPerSec;
    const row = [
      r.label,
      t.toFixed(0),
      dTput ? (t / dTput).toFixed(2) : '—',
      ...(scenario === 'stdio'
        ? [bestPeer?.throughput && r.target !== 'direct' ? (t / bestPeer.throughput.callsPerSec).toFixed(2) : '—']
        : []),
      ms(r.latency.p50Ms),
      ms(r.latency.p99Ms),
      dP50 !== undefined && r.target !== 'direct' ? (r.latency.p50Ms - dP50 >= 0 ? '+' : '') + ms(r.latency.p50Ms - dP50) : '—',
      ms(r.throughput.p50Ms),
      ms(r.throughput.p99Ms),
      String(r.latency.errors + r.throughput.errors),
    ];
    console.log(pad(row, widths));
    for (const e of [...r.latency.errorSamples, ...r.throughput.errorSamples].slice(0, 3)) console.log(`    error: ${e}`);
  }
  console.log('  RSS MiB (idle → before load → after load → settled after DELETE + pause; tree = with children):');
  for (const r of results) {
    if (!r.rss) continue;
    const x = r.rss;
    const tree = x.treeBeforeLoad && x.treeBeforeLoad.processes > 1
      ? `  tree ${mib(x.treeBeforeLoad.bytes)} in ${x.treeBeforeLoad.processes} processes`
      : '';
    console.log(`    ${r.label.padEnd(40)} ${mib(x.idle)} → ${mib(x.beforeLoad)} → ${mib(x.afterLoad)} → ${mib(x.settled)}  (${x.of})${tree}`);
  }

  const gw = results.find((r) => r.target === 'taskgate');
  if (gw?.ok && gw.throughput && gw.latency) {
    if (dTput !== undefined && dP50 !== undefined) {
      const ratio = gw.throughput.callsPerSec / dTput;
      const added = gw.latency.p50Ms - dP50;
      if (scenario === 'http') {
        checks.push({
          scenario,
          what: `throughput ≥ ${MIN_THROUGHPUT_VS_DIRECT * 100}% of direct`,
          pass: ratio >= MIN_THROUGHPUT_VS_DIRECT,
          detail: `${(ratio * 100).toFixed(1)}% (${gw.throughput.callsPerSec.toFixed(0)} vs ${dTput.toFixed(0)} calls/s)`,
        });
        checks.push({
          scenario,
          what: `p50 adds ≤ ${MAX_P50_ADDED_MS} ms`,
          pass: added <= MAX_P50_ADDED_MS,
          detail: `${added >= 0 ? '+' : ''}${added.toFixed(3)} ms (${ms(gw.latency.p50Ms)} vs ${ms(dP50)} ms)`,
        });
      }
    }
    if (scenario === 'stdio' && bestPeer?.throughput) {
      const ratio = gw.throughput.callsPerSec / bestPeer.throughput.callsPerSec;
      checks.push({
        scenario,
        what: `throughput ≥ ${MIN_THROUGHPUT_VS_BEST_PEER}× better peer`,
        pass: ratio >= MIN_THROUGHPUT_VS_BEST_PEER,
        detail: `${ratio.toFixed(2)}× ${bestPeer.target} (${gw.throughput.callsPerSec.toFixed(0)} vs ${bestPeer.throughput.callsPerSec.toFixed(0)} calls/s)`,
      });
    }
    const r = gw.rss;
    if (r?.beforeLoad !== undefined && r.settled !== undefined) {
      const growth = r.settled - r.beforeLoad;
      const limit = Math.max(RSS_FLAT_ABS, RSS_FLAT_REL * r.beforeLoad);
      const calls = gw.throughput.calls;
      checks.push({
        scenario,
        what: 'gateway RSS flat',
        pass: growth <= limit,
        detail:
          `before ${mib(r.beforeLoad)} MiB, after load ${mib(r.afterLoad)} MiB, settled ${mib(r.settled)} MiB ` +
          `(${growth >= 0 ? '+' : ''}${mib(growth)} MiB, limit ${mib(limit)}; ` +
          `${calls > 0 ? Math.max(0, growth / calls).toFixed(0) : '—'} B/call over ${calls} calls)`,
      });
    }
  }
  return checks;
}

// ---- main ----

async function main(): Promise<void> {
  const s = parseSettings();
  const startedAt = new Date();
  console.log(
    `taskgate bench${s.smoke ? ' (smoke)' : ''}: scenarios ${s.scenarios.join(',')}, targets ${s.targets.join(',')}, ` +
      `${s.clients} clients, warmup ${s.warmupMs} ms, latency ${s.latencyMs} ms, throughput ${s.count ?? s.durationMs}${s.count !== undefined ? ' calls' : ' ms'}, ` +
      `node ${process.version}, ${cpus().length} CPUs`,
  );
  const gw: GatewayCommand | string = s.targets.includes('taskgate') ? gatewayCommand(s.useTsx) : 'not selected';
  const dir = mkdtempSync(join(tmpdir(), 'taskgate-bench-'));
  const results: TargetResult[] = [];
  const checks: Check[] = [];
  try {
    for (const scenario of s.scenarios) {
      const r = scenario === 'http' ? await httpScenario(s, gw, dir) : await stdioScenario(s, gw, dir);
      results.push(...r);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  for (const scenario of s.scenarios) checks.push(...report(scenario, results.filter((r) => r.scenario === scenario), s));

  console.log('\nTargets (reported, not enforced):');
  if (checks.length === 0) console.log('  none evaluated (taskgate not measured)');
  for (const c of checks) console.log(`  [${c.pass ? 'PASS' : 'FAIL'}] ${c.scenario}: ${c.what}: ${c.detail}`);

  const failedToRun = results.filter((r) => !r.ok);
  const tooManyErrors = results.filter((r) => r.ok && errorRate(r) > MAX_ERROR_RATE);
  for (const r of tooManyErrors) console.log(`  [ERR ] ${r.scenario}: ${r.label}: ${(errorRate(r) * 100).toFixed(2)}% errors (> 1%)`);

  const outDir = join(ROOT, 'bench/results');
  mkdirSync(outDir, { recursive: true });
  const file = join(outDir, `${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(
    file,
    `${JSON.stringify(
      {
        startedAt: startedAt.toISOString(),
        host: { node: process.version, cpus: cpus().length, cpuModel: cpus()[0]?.model, totalMemBytes: totalmem() },
        settings: s,
        results,
        checks,
      },
      null,
      2,
    )}\n`,
  );
  console.log(`\nJSON: ${file}`);
  process.exitCode = failedToRun.length > 0 || tooManyErrors.length > 0 ? 1 : 0;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
