/**
 * `npm run test:conformance`: the official MCP conformance suite (server scenarios) run in these setups:
 *   direct     2025-11-25 scenarios against the legacy fixture over Streamable HTTP (the baseline),
 *   gw-http    2025-11-25 scenarios through the gateway fronting that fixture over Streamable HTTP,
 *   gw-stdio   2025-11-25 scenarios through the gateway fronting the fixture as a stdio child,
 *   gw-dual    ONE gateway (dual-era.yaml) fronting the modern fixture (2026-07-28 and 2025-11-25 on one
 *              endpoint) and a tasks-only legacy fixture made into tasks by YAML policy: first the scenarios
 *              of `conformance server --requirements 2026-07-28` (scored, tasks-* extension and pending),
 *              then the 2025-11-25 scenarios again, on the same gateway process.
 * Passes iff every 2025-11-25 scenario that passes directly also passes through the gateway in every gateway
 * setup, and every 2026-07-28 scenario passes through gw-dual. A scenario passes when it has checks and none is
 * a FAILURE or a WARNING. Scenarios listed in expected-failures.yaml must fail directly too (each says why there).
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
  spawnModernFixture,
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
  runScenarios,
  skippedBySuite,
  type RequiredScenario,
  type ScenarioResult,
  type ScenarioRun,
} from './suite.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const LEGACY_SPEC = '2025-11-25';
const MODERN_SPEC = '2026-07-28';
// A normal run takes ~2 minutes on 2 cores (182 scenario runs of ~1 s, up to 6 s for tasks-*); this only bounds a hang.
const TOTAL_BUDGET_MS = 360_000;
// Above the CLI's own 30 s per-scenario limit, so that a slow scenario still reports its checks.
const SCENARIO_TIMEOUT_MS = 40_000;
// Scenarios run two at a time where that is safe, one at a time for the timing-sensitive tasks-* ones.
const CONCURRENCY = 2;

const SETUPS = ['direct', 'gw-http', 'gw-stdio', 'gw-dual'] as const;
type Setup = (typeof SETUPS)[number];
type Results = Map<string, ScenarioResult>;

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

function loadExpectedFailures(): Set<string> {
  const doc = parseYaml(readFileSync(join(HERE, 'expected-failures.yaml'), 'utf8')) as { server?: unknown } | null;
  const list = doc?.server ?? [];
  if (!Array.isArray(list)) throw new Error('expected-failures.yaml: `server` must be a list of scenario names');
  return new Set(list.map(String));
}

function run(url: string, specVersion: string, node: string, force = false): ScenarioRun {
  return { node, url, specVersion, force, timeoutMs: SCENARIO_TIMEOUT_MS, deadline };
}

/** gw-dual's gateway config: dual-era.yaml with the fixtures' URLs filled in (listen port: a free one, by spawnGateway). */
function dualEraConfig(modernUrl: string, legacyUrl: string): Record<string, unknown> {
  const cfg = parseYaml(readFileSync(join(HERE, 'dual-era.yaml'), 'utf8')) as { upstreams?: Record<string, { url?: unknown }> };
  const { modern, legacy } = cfg.upstreams ?? {};
  if (modern?.url !== '${MODERN_URL}' || legacy?.url !== '${LEGACY_URL}') {
    throw new Error('dual-era.yaml: expected upstreams.modern.url "${MODERN_URL}" and upstreams.legacy.url "${LEGACY_URL}"');
  }
  modern.url = modernUrl;
  legacy.url = legacyUrl;
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

/** direct, gw-http, gw-stdio: the 2025-11-25 scenarios against the legacy fixture, without and with the gateway. */
async function runLegacySetups(
  setups: Setup[],
  node: string,
  scenarios: string[],
  resultsDir: string,
  children: ChildHandle[],
): Promise<{ bySetup: Map<Setup, Results>; gateways: Map<Setup, GatewayRun> }> {
  const bySetup = new Map<Setup, Results>();
  const gateways = new Map<Setup, GatewayRun>();
  const fixture = await spawnFixture({ transport: 'streamable-http' });
  children.push(fixture);
  const fixtureUrl = fixture.url ?? '';
  process.stderr.write(`fixture at ${fixtureUrl}\n`);

  if (setups.includes('direct')) {
    bySetup.set('direct', await runScenarios('direct', run(fixtureUrl, LEGACY_SPEC, node), scenarios, join(resultsDir, 'direct')));
  }

  const stdio = fixtureCommand('stdio');
  const upstreams: Partial<Record<Setup, Record<string, unknown>>> = {
    'gw-http': { transport: 'streamable-http', url: fixtureUrl },
    'gw-stdio': { transport: 'stdio', command: stdio.command, args: stdio.args, cwd: stdio.cwd },
  };
  // The two gateway setups are independent (own gateway, own upstream connection): run them side by side.
  await Promise.all(
    setups
      .filter((s) => s === 'gw-http' || s === 'gw-stdio')
      .map(async (setup) => {
        const gw = await startGateway(setup, { upstreams: { fixture: upstreams[setup] } }, children);
        gateways.set(setup, gw);
        if (!gw.gateway) {
          bySetup.set(setup, allWith(scenarios, 'error', 'gateway did not start'));
          return;
        }
        bySetup.set(setup, await runScenarios(setup, run(gw.gateway.url, LEGACY_SPEC, node), scenarios, join(resultsDir, setup)));
        writeFileSync(join(resultsDir, `${setup}.gateway-stderr.log`), gw.gateway.stderr());
      }),
  );
  return { bySetup, gateways };
}

/**
 * gw-dual: one gateway in front of both fixtures. The 2026-07-28 requirement set first (the tasks-* extension
 * scenarios one at a time and alone, since they measure how long calls take to become tasks), then the
 * 2025-11-25 scenarios on the same gateway process.
 */
async function runDualEra(
  node: string,
  modernScenarios: RequiredScenario[],
  legacyScenarios: string[],
  resultsDir: string,
  children: ChildHandle[],
): Promise<{ modern: Results; legacy: Results; gw: GatewayRun }> {
  const [modernFixture, legacyFixture] = await Promise.all([
    spawnModernFixture(),
    spawnFixture({ transport: 'streamable-http', tools: 'tasks' }),
  ]);
  children.push(modernFixture, legacyFixture);
  process.stderr.write(`[gw-dual] modern fixture at ${modernFixture.url}, tasks-only legacy fixture at ${legacyFixture.url ?? ''}\n`);
  const names = modernScenarios.map((s) => s.name);
  const gw = await startGateway('gw-dual', dualEraConfig(modernFixture.url, legacyFixture.url ?? ''), children);
  if (!gw.gateway) {
    return { modern: allWith(names, 'error', 'gateway did not start'), legacy: allWith(legacyScenarios, 'error', 'gateway did not start'), gw };
  }
  const url = gw.gateway.url;
  const modernRun = run(url, MODERN_SPEC, node, true); // --force, as --requirements does: tasks-* are extensions
  const outModern = join(resultsDir, `gw-dual-${MODERN_SPEC}`);
  const timingSensitive = modernScenarios.filter((s) => s.kind === 'extension').map((s) => s.name);
  const rest = names.filter((s) => !timingSensitive.includes(s));
  const first = await runScenarios(`gw-dual ${MODERN_SPEC}`, modernRun, rest, outModern, CONCURRENCY);
  const tasks = await runScenarios(`gw-dual ${MODERN_SPEC}`, modernRun, timingSensitive, outModern, 1);
  const modern = new Map(names.map((s) => [s, (first.get(s) ?? tasks.get(s)) as ScenarioResult]));
  const legacy = await runScenarios(
    `gw-dual ${LEGACY_SPEC}`,
    run(url, LEGACY_SPEC, node),
    legacyScenarios,
    join(resultsDir, `gw-dual-${LEGACY_SPEC}`),
    CONCURRENCY,
  );
  writeFileSync(join(resultsDir, 'gw-dual.gateway-stderr.log'), gw.gateway.stderr());
  writeFileSync(join(resultsDir, 'gw-dual.modern-fixture-stderr.log'), modernFixture.stderr());
  writeFileSync(join(resultsDir, 'gw-dual.legacy-fixture-stderr.log'), legacyFixture.stderr());
  return { modern, legacy, gw };
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

function tally(label: string, results: Results | undefined, expected: Set<string>): Tally {
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
  const expected = loadExpectedFailures();
  const node = await conformanceNode();
  const dual = opts.setups.includes('gw-dual');
  const legacyListed = await listSpecScenarios(node, LEGACY_SPEC);
  const modernListed = dual ? await listRequirementScenarios(node, MODERN_SPEC) : [];
  const unknown = opts.scenarios.filter((s) => !legacyListed.includes(s) && !modernListed.some((m) => m.name === s));
  if (unknown.length > 0) throw new Error(`unknown scenario(s): ${unknown.join(', ')}`);
  const picked = (s: string): boolean => opts.scenarios.length === 0 || opts.scenarios.includes(s);
  const legacyScenarios = legacyListed.filter(picked);
  const modernScenarios = modernListed.filter((m) => picked(m.name));

  const resultsDir = mkdtempSync(join(tmpdir(), 'taskgate-conformance-'));
  process.stderr.write(`results in ${resultsDir}\n`);
  const children: ChildHandle[] = [];
  let bySetup = new Map<Setup, Results>();
  const gateways = new Map<Setup, GatewayRun>();
  let modern: Results | undefined;
  try {
    if (opts.setups.some((s) => s !== 'gw-dual') && legacyScenarios.length > 0) {
      const r = await runLegacySetups(opts.setups, node, legacyScenarios, resultsDir, children);
      bySetup = r.bySetup;
      for (const [s, g] of r.gateways) gateways.set(s, g);
      // The legacy setups' children are done: end them so that they do not compete with gw-dual for the CPU.
      await Promise.allSettled(children.splice(0).map((c) => c.kill()));
    }
    if (dual) {
      const r = await runDualEra(node, modernScenarios, legacyScenarios, resultsDir, children);
      bySetup.set('gw-dual', r.legacy);
      modern = r.modern;
      gateways.set('gw-dual', r.gw);
    }
  } finally {
    await Promise.allSettled(children.map((c) => c.kill()));
  }

  // ---- report ---------------------------------------------------------------------------------------------
  const out: string[] = [];
  const problems: string[] = [];
  if (legacyScenarios.length > 0) {
    const columns = opts.setups.map((s) => ({ name: s, results: bySetup.get(s) }));
    const note = (s: string): string =>
      (expected.has(s) ? ' (expected failure)' : '') +
      (opts.setups.some((st) => skippedBySuite(bySetup.get(st)?.get(s))) ? ' (skipped by the suite itself: only SKIPPED checks)' : '');
    out.push(table(`MCP conformance, server scenarios of spec ${LEGACY_SPEC} (gw-dual: on the same gateway after ${MODERN_SPEC})`, legacyScenarios, columns, note));
  }
  if (modern) {
    const kind = new Map(modernScenarios.map((m) => [m.name, m.kind]));
    const note = (s: string): string =>
      (kind.get(s) === 'required' ? '' : ` (${kind.get(s)}, not scored by the suite)`) +
      (skippedBySuite(modern?.get(s)) ? ' (skipped by the suite itself: only SKIPPED checks)' : '');
    out.push(table(`MCP conformance, --requirements ${MODERN_SPEC} server scenarios`, modernScenarios.map((m) => m.name), [{ name: 'gw-dual', results: modern }], note));
  }

  const direct = bySetup.get('direct');
  for (const [s, r] of direct ?? []) {
    if (r.status !== 'pass' && !expected.has(s)) problems.push(`direct: ${s} fails against the fixture itself and is not in expected-failures.yaml`);
    if (r.status === 'pass' && expected.has(s)) problems.push(`direct: ${s} passes now; remove it from expected-failures.yaml`);
  }

  // Rows through the gateway are what this runner is about; with only the baseline selected, count those.
  const counted = opts.setups.some((s) => s !== 'direct') ? opts.setups.filter((s) => s !== 'direct') : opts.setups;
  const tallies: Tally[] = [];
  const baseline = counted.includes('direct') ? undefined : tally('direct (not counted)', direct, expected);
  for (const setup of counted) {
    if (setup === 'gw-dual' && modern) tallies.push(tally(`gw-dual ${MODERN_SPEC}`, modern, new Set()));
    if (bySetup.has(setup)) tallies.push(tally(setup === 'gw-dual' ? `gw-dual ${LEGACY_SPEC}` : setup, bySetup.get(setup), expected));
  }

  const details = [
    ...opts.setups.filter((s) => s !== 'gw-dual').flatMap((s) => nonPassing(s, bySetup.get(s))),
    ...nonPassing(`gw-dual ${MODERN_SPEC}`, modern),
    ...nonPassing(`gw-dual ${LEGACY_SPEC}`, bySetup.get('gw-dual')),
  ];
  console.log(`\n${out.join('\n\n')}`);
  if (details.length > 0) console.log(`\nNon-passing checks:\n${details.join('\n')}`);
  const startErrors = [...gateways.values()].flatMap((g) => (g.startError ? [g.startError] : []));
  for (const e of startErrors) console.log(`\n${e.length > 4000 ? `${e.slice(0, 4000)}…` : e}`);
  for (const [setup, { gateway }] of gateways) {
    const results = [...(bySetup.get(setup)?.values() ?? []), ...(setup === 'gw-dual' ? (modern?.values() ?? []) : [])];
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
  for (const t of [...(baseline ? [baseline] : []), ...tallies].filter((t) => t.scenarios > 0)) {
    const exp = t.expected.length > 0 ? `, ${t.expected.length} expected failure(s) not counted: ${t.expected.join(', ')}` : '';
    const skip = t.skippedBySuite > 0 ? `, ${t.skippedBySuite} of them skipped by the suite itself` : '';
    console.log(`${t.label.padEnd(22)} ${t.passed}/${t.scenarios} scenarios passed${skip}, ${t.failed} failed (${t.checks} successful checks)${exp}`);
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
