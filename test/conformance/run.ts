/**
 * `npm run test:conformance`: the official MCP conformance suite (server scenarios), in two versions: the
 * newest released 0.1.x and the 0.2 alpha (the only one with 2026-07-28 scenarios), run in these setups:
 *   direct     2025-11-25 scenarios against the session fixture over Streamable HTTP (the baseline),
 *   gw-http    2025-11-25 scenarios through the gateway fronting that fixture over Streamable HTTP,
 *   gw-stdio   2025-11-25 scenarios through the gateway fronting the fixture as a stdio child,
 *   gw-dual    ONE gateway (dual-era.yaml) fronting the stateless fixture (2026-07-28 and 2025-11-25 on one
 *              endpoint) and a tasks-only session fixture made into tasks by YAML policy: first the alpha's
 *              scenarios of `conformance server --requirements 2026-07-28` (scored, tasks-* extension and
 *              pending), then the 2025-11-25 scenarios again, on the same gateway process.
 * Each suite runs its own 2025-11-25 scenario list in every setup; the two suites run side by side, and so do direct,
 * gw-http and gw-stdio (no process shared); gw-dual runs after them, alone. Each list (a suite's 2025-11-25 list in
 * one setup, the 2026-07-28 requirement set) runs in ONE conformance process, which runs its scenarios one after
 * another; the scenarios it did not report (it hung on one, or one threw) then run one per process, as with --scenario.
 * Passes iff, for each suite, every 2025-11-25 scenario that passes directly also passes through the gateway in
 * every gateway setup, and every 2026-07-28 scenario passes through gw-dual. A scenario passes when it has checks
 * and none is a FAILURE or a WARNING. expected-failures.yaml lists, per suite version, scenarios that fail
 * directly too, each with its reason; it must name every installed version.
 *
 * Options: --setups direct,gw-http,gw-stdio,gw-dual   --scenario <name> (repeatable)   --keep (keep the results dir)
 * The suite needs Node >= 22: it runs on this Node if new enough, else on $CONFORMANCE_NODE, else on `npx -y node@24`.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import {
  fixtureCommand,
  spawnFixture,
  spawnGateway,
  spawnStatelessFixture,
  type ChildHandle,
  type GatewayChild,
} from '../fixtures/spawn.js';
import {
  CELL,
  allWith,
  clip,
  conformanceNode,
  listRequirementScenarios,
  listSpecScenarios,
  installedSuites,
  runBatchThenAlone,
  skippedBySuite,
  type ConformanceSuite,
  type RequiredScenario,
  type ScenarioResult,
  type ScenarioRun,
} from './suite.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const REV2025_SPEC = '2025-11-25';
const REV2026_SPEC = '2026-07-28';
// A normal run takes ~40 s on 2 cores (9 CLI processes, each running one scenario list: 310 scenario runs of well
// under 1 s, up to 6 s for tasks-*); this only bounds hangs (each then costs a scenario limit in its list's process
// and again alone), with room for `npm test`'s heavy lane, which runs beside it.
const TOTAL_BUDGET_MS = 900_000;
// Above the CLI's own 30 s per-scenario limit, so that a slow scenario still reports its checks; in a process
// running a whole list, the longest wait for the next scenario's result before the process counts as hung.
const SCENARIO_TIMEOUT_MS = 40_000;
// Scenarios run two at a time where that is safe, one at a time for the timing-sensitive tasks-* ones.
const CONCURRENCY = 2;

const SETUPS = ['direct', 'gw-http', 'gw-stdio', 'gw-dual'] as const;
type Setup = (typeof SETUPS)[number];
type Results = Map<string, ScenarioResult>;

/** One suite's 2025-11-25 scenarios, the ones expected to fail (with why), and what each setup gave. */
interface Rev2025Leg {
  suite: ConformanceSuite;
  scenarios: string[];
  /** The CLI arguments that run exactly `scenarios` in one process; none when --scenario picked a few. */
  select?: string[];
  expected: Map<string, string>;
  bySetup: Map<Setup, Results>;
}

const started = Date.now();
const deadline = started + TOTAL_BUDGET_MS;
const remaining = (): number => deadline - Date.now();

function parseArgs(argv: string[]): { setups: Setup[]; scenarios: string[]; keep: boolean } {
  const setups: Setup[] = [];
  const scenarios: string[] = [];
  let keep = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--setups') {
      for (const s of (argv[++i] ?? '').split(',')) {
        if (!(SETUPS as readonly string[]).includes(s)) throw new Error(`unknown setup "${s}" (use ${SETUPS.join(', ')})`);
        setups.push(s as Setup);
      }
    } else if (a === '--scenario') scenarios.push(argv[++i] ?? '');
    else if (a === '--keep') keep = true;
    else throw new Error(`unknown argument ${a}`);
  }
  return { setups: setups.length > 0 ? SETUPS.filter((s) => setups.includes(s)) : [...SETUPS], scenarios, keep };
}

/**
 * expected-failures.yaml: `server.<suite version>` is a list of `{ scenario, reason }`. Every installed version
 * must have an entry (an empty list at least), so that bumping a suite means looking at its failures again.
 */
function loadExpectedFailures(suites: ConformanceSuite[]): Map<string, Map<string, string>> {
  const doc = parseYaml(readFileSync(join(HERE, 'expected-failures.yaml'), 'utf8')) as { server?: Record<string, unknown> } | null;
  const out = new Map<string, Map<string, string>>();
  for (const { version } of suites) {
    const list = doc?.server?.[version];
    if (!Array.isArray(list)) throw new Error(`expected-failures.yaml: server."${version}" must be a list (empty if nothing fails directly)`);
    const entries = new Map<string, string>();
    for (const entry of list as Array<{ scenario?: unknown; reason?: unknown }>) {
      if (typeof entry?.scenario !== 'string' || typeof entry.reason !== 'string' || entry.reason.trim() === '') {
        throw new Error(`expected-failures.yaml: each entry of server."${version}" needs a scenario and a reason (got ${JSON.stringify(entry)})`);
      }
      entries.set(entry.scenario, entry.reason);
    }
    out.set(version, entries);
  }
  return out;
}

function run(url: string, specVersion: string, node: string, suite: ConformanceSuite, force = false): ScenarioRun {
  return { node, suite, url, specVersion, force, timeoutMs: SCENARIO_TIMEOUT_MS, deadline };
}

/**
 * Each suite's 2025-11-25 scenarios in one setup, the suites side by side (each on its own scenario at a time),
 * except through a shared stdio child: it cannot tell which session a log line belongs to while calls of two
 * sessions run on it, and drops such lines (docs/upstreams.md, "Upstream isolation"), which tools-call-with-logging counts.
 */
async function runLegs(setup: Setup, label: string, url: string, node: string, legs: Rev2025Leg[], resultsDir: string): Promise<void> {
  const runLeg = async (leg: Rev2025Leg): Promise<void> => {
    const results = await runBatchThenAlone(`${label} ${leg.suite.version}`, run(url, REV2025_SPEC, node, leg.suite), {
      select: leg.select,
      groups: [{ scenarios: leg.scenarios, concurrency: 1 }],
      outRoot: join(resultsDir, leg.suite.version, label),
    });
    leg.bySetup.set(setup, results);
  };
  if (setup === 'gw-stdio') {
    for (const leg of legs) await runLeg(leg);
    return;
  }
  await Promise.all(legs.map(runLeg));
}

/** gw-dual's gateway config: dual-era.yaml with the fixtures' URLs filled in (listen port: a free one, by spawnGateway). */
function dualEraConfig(rev2026Url: string, rev2025Url: string): Record<string, unknown> {
  const cfg = parseYaml(readFileSync(join(HERE, 'dual-era.yaml'), 'utf8')) as { upstreams?: Record<string, { url?: unknown }> };
  const { rev2026Side, rev2025Side } = cfg.upstreams ?? {};
  if (rev2026Side?.url !== '${REV2026_URL}' || rev2025Side?.url !== '${REV2025_URL}') {
    throw new Error('dual-era.yaml: expected upstreams.rev2026Side.url "${REV2026_URL}" and upstreams.rev2025Side.url "${REV2025_URL}"');
  }
  rev2026Side.url = rev2026Url;
  rev2025Side.url = rev2025Url;
  return cfg;
}

interface GatewayRun {
  gateway?: GatewayChild;
  startError?: string;
}

async function startGateway(setup: Setup, config: Record<string, unknown>, children: ChildHandle[]): Promise<GatewayRun> {
  try {
    const gateway = await spawnGateway({ config, timeoutMs: Math.min(30_000, remaining()) });
    children.push(gateway);
    process.stderr.write(`[${setup}] gateway at ${gateway.url}\n`);
    return { gateway };
  } catch (e) {
    return { startError: `[${setup}] gateway failed to start:\n${e instanceof Error ? e.message : String(e)}` };
  }
}

/**
 * direct, gw-http, gw-stdio: each suite's 2025-11-25 scenarios against the session fixture, without and with the
 * gateway. The three setups share no process (direct and gw-http each talk to a fixture of their own), so they run
 * side by side: a scenario spends most of its time waiting (the whole run keeps about half a core busy), and one
 * setup after another took most of the run's wall time.
 */
async function runRev2025Setups(
  setups: Setup[],
  node: string,
  legs: Rev2025Leg[],
  resultsDir: string,
  children: ChildHandle[],
): Promise<Map<Setup, GatewayRun>> {
  const gateways = new Map<Setup, GatewayRun>();
  const httpFixture = async (setup: Setup): Promise<string | undefined> => {
    if (!setups.includes(setup)) return undefined;
    const fixture = await spawnFixture({ transport: 'streamable-http' });
    children.push(fixture);
    process.stderr.write(`[${setup}] fixture at ${fixture.url ?? ''}\n`);
    return fixture.url ?? '';
  };
  const [directUrl, upstreamUrl] = await Promise.all([httpFixture('direct'), httpFixture('gw-http')]);

  const stdio = fixtureCommand('stdio');
  const upstreams: Partial<Record<Setup, Record<string, unknown>>> = {
    'gw-http': { transport: 'streamable-http', url: upstreamUrl },
    'gw-stdio': { transport: 'stdio', command: stdio.command, args: stdio.args, cwd: stdio.cwd },
  };
  await Promise.all(
    setups
      .filter((s) => s !== 'gw-dual')
      .map(async (setup) => {
        if (setup === 'direct') {
          await runLegs('direct', 'direct', directUrl ?? '', node, legs, resultsDir);
          return;
        }
        const gw = await startGateway(setup, { upstreams: { fixture: upstreams[setup] } }, children);
        gateways.set(setup, gw);
        if (!gw.gateway) {
          for (const leg of legs) leg.bySetup.set(setup, allWith(leg.scenarios, 'error', 'gateway did not start'));
          return;
        }
        await runLegs(setup, setup, gw.gateway.url, node, legs, resultsDir);
        writeFileSync(join(resultsDir, `${setup}.gateway-stderr.log`), gw.gateway.stderr());
      }),
  );
  return gateways;
}

/**
 * gw-dual: one gateway in front of both fixtures. The alpha's 2026-07-28 requirement set first (the tasks-*
 * extension scenarios one at a time and alone, since they measure how long calls take to become tasks), then
 * each suite's 2025-11-25 scenarios on the same gateway process.
 */
async function runDualEra(
  node: string,
  alpha: ConformanceSuite,
  rev2026: { scenarios: RequiredScenario[]; select?: string[] },
  legs: Rev2025Leg[],
  resultsDir: string,
  children: ChildHandle[],
): Promise<{ rev2026Side: Results; gw: GatewayRun }> {
  const [rev2026Fixture, rev2025Fixture] = await Promise.all([
    spawnStatelessFixture(),
    spawnFixture({ transport: 'streamable-http', tools: 'tasks' }),
  ]);
  children.push(rev2026Fixture, rev2025Fixture);
  process.stderr.write(`[gw-dual] stateless fixture at ${rev2026Fixture.url}, tasks-only session fixture at ${rev2025Fixture.url ?? ''}\n`);
  const names = rev2026.scenarios.map((s) => s.name);
  const gw = await startGateway('gw-dual', dualEraConfig(rev2026Fixture.url, rev2025Fixture.url ?? ''), children);
  if (!gw.gateway) {
    for (const leg of legs) leg.bySetup.set('gw-dual', allWith(leg.scenarios, 'error', 'gateway did not start'));
    return { rev2026Side: allWith(names, 'error', 'gateway did not start'), gw };
  }
  const url = gw.gateway.url;
  const rev2026Run = run(url, REV2026_SPEC, node, alpha, true); // --force, as --requirements does: tasks-* are extensions
  const outRev2026 = join(resultsDir, alpha.version, `gw-dual-${REV2026_SPEC}`);
  const timingSensitive = rev2026.scenarios.filter((s) => s.kind === 'extension').map((s) => s.name);
  const rest = names.filter((s) => !timingSensitive.includes(s));
  const byName = await runBatchThenAlone(`gw-dual ${REV2026_SPEC}`, rev2026Run, {
    select: rev2026.select,
    groups: [
      { scenarios: rest, concurrency: CONCURRENCY },
      { scenarios: timingSensitive, concurrency: 1 },
    ],
    outRoot: outRev2026,
  });
  const rev2026Side = new Map(names.map((s) => [s, byName.get(s) as ScenarioResult]));
  await runLegs('gw-dual', `gw-dual-${REV2025_SPEC}`, url, node, legs, resultsDir);
  writeFileSync(join(resultsDir, 'gw-dual.gateway-stderr.log'), gw.gateway.stderr());
  writeFileSync(join(resultsDir, 'gw-dual.rev2026-fixture-stderr.log'), rev2026Fixture.stderr());
  writeFileSync(join(resultsDir, 'gw-dual.rev2025-fixture-stderr.log'), rev2025Fixture.stderr());
  return { rev2026Side, gw };
}

// ---- report -----------------------------------------------------------------------------------------------

function table(title: string, scenarios: string[], columns: Array<{ name: string; results?: Results }>, note: (s: string) => string): string {
  const width = Math.max(...scenarios.map((s) => s.length), 8) + 2;
  const lines = [title, '', `${'scenario'.padEnd(width)}${columns.map((c) => c.name.padEnd(10)).join('')}`];
  for (const s of scenarios) {
    lines.push(`${s.padEnd(width)}${columns.map((c) => CELL[c.results?.get(s)?.status ?? 'skipped'].padEnd(10)).join('')}${note(s)}`);
  }
  return lines.join('\n');
}

function nonPassing(label: string, results: Results | undefined): string[] {
  const out: string[] = [];
  for (const [s, r] of results ?? []) {
    if (r.status === 'pass' || r.note === 'gateway did not start') continue;
    out.push(`[${label}] ${s}: ${CELL[r.status]}${r.note ? ` — ${clip(r.note, 600)}` : ''}`);
    for (const c of r.checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING')) {
      const detail = c.details === undefined ? '' : `  details: ${clip(JSON.stringify(c.details), 500)}`;
      out.push(`    ${c.status} ${c.id}: ${c.errorMessage ?? c.description ?? ''}${detail}`);
    }
  }
  return out;
}

interface Tally {
  label: string;
  scenarios: number;
  passed: number;
  failed: number;
  expected: string[];
  checks: number;
  skippedBySuite: number;
}

function tally(label: string, results: Results | undefined, expected: ReadonlyMap<string, string>): Tally {
  const t: Tally = { label, scenarios: 0, passed: 0, failed: 0, expected: [], checks: 0, skippedBySuite: 0 };
  for (const [s, r] of results ?? []) {
    t.scenarios++;
    if (skippedBySuite(r)) t.skippedBySuite++;
    t.checks += r.checks.filter((c) => c.status === 'SUCCESS').length;
    if (r.status === 'pass') t.passed++;
    else if (expected.has(s)) t.expected.push(s);
    else t.failed++;
  }
  return t;
}

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  const { alpha, released } = installedSuites();
  const suites = [released, alpha];
  const expectedBySuite = loadExpectedFailures(suites);
  const node = await conformanceNode();
  const dual = opts.setups.includes('gw-dual');
  const listed = await Promise.all(suites.map((suite) => listSpecScenarios(node, suite, REV2025_SPEC)));
  const rev2026Listed = dual ? await listRequirementScenarios(node, alpha, REV2026_SPEC) : [];
  const known = (s: string): boolean => listed.some((l) => l.includes(s)) || rev2026Listed.some((m) => m.name === s);
  const unknown = opts.scenarios.filter((s) => !known(s));
  if (unknown.length > 0) throw new Error(`unknown scenario(s): ${unknown.join(', ')}`);
  const picked = (s: string): boolean => opts.scenarios.length === 0 || opts.scenarios.includes(s);
  // Without --scenario, each list runs in one CLI process (what the list came from, as `server` selects it).
  const whole = opts.scenarios.length === 0;
  const legs: Rev2025Leg[] = suites
    .map((suite, i) => ({
      suite,
      scenarios: (listed[i] ?? []).filter(picked),
      select: whole ? ['--suite', 'all', '--spec-version', REV2025_SPEC] : undefined,
      expected: expectedBySuite.get(suite.version) ?? new Map<string, string>(),
      bySetup: new Map<Setup, Results>(),
    }))
    .filter((leg) => leg.scenarios.length > 0);
  const rev2026Scenarios = rev2026Listed.filter((m) => picked(m.name));

  const resultsDir = mkdtempSync(join(tmpdir(), 'taskgate-conformance-'));
  process.stderr.write(`results in ${resultsDir}\nsuites: ${suites.map((s) => s.version).join(', ')}\n`);
  const children: ChildHandle[] = [];
  const gateways = new Map<Setup, GatewayRun>();
  let rev2026Side: Results | undefined;
  try {
    if (opts.setups.some((s) => s !== 'gw-dual') && legs.length > 0) {
      for (const [s, g] of await runRev2025Setups(opts.setups, node, legs, resultsDir, children)) gateways.set(s, g);
      // The 2025-11-25 setups' children are done: end them so that they do not compete with gw-dual for the CPU.
      await Promise.allSettled(children.splice(0).map((c) => c.kill()));
    }
    if (dual) {
      const rev2026 = { scenarios: rev2026Scenarios, select: whole ? ['--requirements', REV2026_SPEC] : undefined };
      const r = await runDualEra(node, alpha, rev2026, legs, resultsDir, children);
      rev2026Side = r.rev2026Side;
      gateways.set('gw-dual', r.gw);
    }
  } finally {
    await Promise.allSettled(children.map((c) => c.kill()));
  }

  // ---- report ---------------------------------------------------------------------------------------------
  const out: string[] = [];
  const problems: string[] = [];
  for (const leg of legs) {
    const columns = opts.setups.map((s) => ({ name: s, results: leg.bySetup.get(s) }));
    const note = (s: string): string =>
      (leg.expected.has(s) ? ` (expected failure: ${leg.expected.get(s) ?? ''})` : '') +
      (opts.setups.some((st) => skippedBySuite(leg.bySetup.get(st)?.get(s))) ? ' (skipped by the suite itself: only SKIPPED checks)' : '');
    out.push(table(`MCP conformance ${leg.suite.version}, server scenarios of spec ${REV2025_SPEC} (gw-dual: on the same gateway after ${REV2026_SPEC})`, leg.scenarios, columns, note));
  }
  if (rev2026Side) {
    const kind = new Map(rev2026Scenarios.map((m) => [m.name, m.kind]));
    const note = (s: string): string =>
      (kind.get(s) === 'required' ? '' : ` (${kind.get(s)}, not scored by the suite)`) +
      (skippedBySuite(rev2026Side?.get(s)) ? ' (skipped by the suite itself: only SKIPPED checks)' : '');
    out.push(table(`MCP conformance ${alpha.version}, --requirements ${REV2026_SPEC} server scenarios`, rev2026Scenarios.map((m) => m.name), [{ name: 'gw-dual', results: rev2026Side }], note));
  }

  for (const leg of legs) {
    for (const [s, r] of leg.bySetup.get('direct') ?? []) {
      const where = `direct (${leg.suite.version})`;
      if (r.status !== 'pass' && !leg.expected.has(s)) problems.push(`${where}: ${s} fails against the fixture itself and is not in expected-failures.yaml`);
      if (r.status === 'pass' && leg.expected.has(s)) problems.push(`${where}: ${s} passes now; remove it from expected-failures.yaml`);
    }
  }

  // Rows through the gateway are what this runner is about; with only the baseline selected, count those.
  const counted = opts.setups.some((s) => s !== 'direct') ? opts.setups.filter((s) => s !== 'direct') : opts.setups;
  const tallies: Tally[] = [];
  const baselines = counted.includes('direct') ? [] : legs.map((leg) => tally(`direct ${leg.suite.version} (not counted)`, leg.bySetup.get('direct'), leg.expected));
  for (const setup of counted) {
    if (setup === 'gw-dual' && rev2026Side) tallies.push(tally(`gw-dual ${REV2026_SPEC} ${alpha.version}`, rev2026Side, new Map()));
    for (const leg of legs) {
      if (leg.bySetup.has(setup)) tallies.push(tally(`${setup === 'gw-dual' ? `gw-dual ${REV2025_SPEC}` : setup} ${leg.suite.version}`, leg.bySetup.get(setup), leg.expected));
    }
  }

  const details = [
    ...legs.flatMap((leg) => opts.setups.filter((s) => s !== 'gw-dual').flatMap((s) => nonPassing(`${s} ${leg.suite.version}`, leg.bySetup.get(s)))),
    ...nonPassing(`gw-dual ${REV2026_SPEC} ${alpha.version}`, rev2026Side),
    ...legs.flatMap((leg) => nonPassing(`gw-dual ${REV2025_SPEC} ${leg.suite.version}`, leg.bySetup.get('gw-dual'))),
  ];
  console.log(`\n${out.join('\n\n')}`);
  if (details.length > 0) console.log(`\nNon-passing checks:\n${details.join('\n')}`);
  const startErrors = [...gateways.values()].flatMap((g) => (g.startError ? [g.startError] : []));
  for (const e of startErrors) console.log(`\n${e.length > 4000 ? `${e.slice(0, 4000)}…` : e}`);
  for (const [setup, { gateway }] of gateways) {
    const results = [...legs.flatMap((leg) => [...(leg.bySetup.get(setup)?.values() ?? [])]), ...(setup === 'gw-dual' ? (rev2026Side?.values() ?? []) : [])];
    const tail = gateway?.stderr().trim().split('\n').slice(-15).join('\n');
    if (tail && results.some((r) => r.status !== 'pass')) {
      console.log(`\n[${setup}] gateway stderr (last lines; full log in ${join(resultsDir, `${setup}.gateway-stderr.log`)}):\n${tail}`);
    }
  }
  if (problems.length > 0) console.log(`\nBaseline problems:\n  ${problems.join('\n  ')}`);

  const passed = tallies.reduce((n, t) => n + t.passed, 0);
  const failed = tallies.reduce((n, t) => n + t.failed, 0);
  const ok = failed === 0 && problems.length === 0 && startErrors.length === 0;
  if (ok && !opts.keep) rmSync(resultsDir, { recursive: true, force: true });
  else console.log(`\nResults kept in ${resultsDir}`);
  console.log('');
  const width = Math.max(...[...baselines, ...tallies].map((t) => t.label.length), 22);
  for (const t of [...baselines, ...tallies].filter((t) => t.scenarios > 0)) {
    const exp = t.expected.length > 0 ? `, ${t.expected.length} expected failure(s) not counted: ${t.expected.join(', ')}` : '';
    const skip = t.skippedBySuite > 0 ? `, ${t.skippedBySuite} of them skipped by the suite itself` : '';
    console.log(`${t.label.padEnd(width)} ${t.passed}/${t.scenarios} scenarios passed${skip}, ${t.failed} failed (${t.checks} successful checks)${exp}`);
  }
  console.log(`wall time ${((Date.now() - started) / 1000).toFixed(0)} s`);
  console.log(`${passed} passed, ${failed} failed`);
  return ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
    console.log('0 passed, 1 failed');
    process.exit(1);
  },
);
