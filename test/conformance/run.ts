/**
 * `npm run test:conformance`: the official MCP conformance suite (server scenarios, spec 2025-11-25) run
 *   direct     against the legacy fixture over Streamable HTTP (the baseline),
 *   gw-http    through the gateway fronting that fixture over Streamable HTTP,
 *   gw-stdio   through the gateway fronting the fixture as a stdio child.
 * Passes iff every scenario that passes directly also passes through the gateway in both setups.
 * Scenarios listed in expected-failures.yaml must fail directly too (each says why there).
 *
 * Options: --setups direct,gw-http,gw-stdio   --scenario <name> (repeatable)   --keep (keep the results dir)
 * The suite needs Node >= 22: it runs on this Node if new enough, else on $CONFORMANCE_NODE, else on `npx -y node@24`.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { REPO_ROOT, fixtureCommand, spawnFixture, spawnGateway, type ChildHandle, type GatewayChild } from '../fixtures/spawn.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const CONFORMANCE_CLI = join(REPO_ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const SPEC_VERSION = '2025-11-25';
const TOTAL_BUDGET_MS = 230_000;
const SCENARIO_TIMEOUT_MS = 30_000;

const SETUPS = ['direct', 'gw-http', 'gw-stdio'] as const;
type Setup = (typeof SETUPS)[number];
type Status = 'pass' | 'warn' | 'fail' | 'timeout' | 'error' | 'skipped';

interface Check {
  id: string;
  name: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | string;
  description?: string;
  errorMessage?: string;
  details?: unknown;
}

interface ScenarioResult {
  status: Status;
  checks: Check[];
  note?: string;
  ms: number;
}

const execFileP = promisify(execFile);
const started = Date.now();
const remaining = (): number => TOTAL_BUDGET_MS - (Date.now() - started);

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
  return { setups: setups.length > 0 ? setups : [...SETUPS], scenarios, keep };
}

async function conformanceNode(): Promise<string> {
  if (process.env.CONFORMANCE_NODE) return process.env.CONFORMANCE_NODE;
  if (Number(process.versions.node.split('.')[0]) >= 22) return process.execPath;
  const { stdout } = await execFileP('npx', ['-y', 'node@24', '-p', 'process.execPath'], { cwd: REPO_ROOT, timeout: 120_000 });
  const path = stdout.trim().split('\n').pop()?.trim();
  if (!path || !existsSync(path)) throw new Error(`could not locate a Node 24 binary via npx (got "${stdout}")`);
  return path;
}

async function listScenarios(node: string): Promise<string[]> {
  const { stdout } = await execFileP(node, [CONFORMANCE_CLI, 'list', '--server', '--spec-version', SPEC_VERSION], { cwd: REPO_ROOT });
  const names: string[] = [];
  for (const line of stdout.split('\n')) {
    const m = /^\s+- (\S+)/.exec(line);
    if (m?.[1]) names.push(m[1]);
  }
  if (names.length === 0) throw new Error(`conformance list returned no server scenarios:\n${stdout}`);
  return names;
}

function loadExpectedFailures(): Set<string> {
  const doc = parseYaml(readFileSync(join(HERE, 'expected-failures.yaml'), 'utf8')) as { server?: unknown } | null;
  const list = doc?.server ?? [];
  if (!Array.isArray(list)) throw new Error('expected-failures.yaml: `server` must be a list of scenario names');
  return new Set(list.map(String));
}

function findChecks(dir: string): Check[] | undefined {
  if (!existsSync(dir)) return undefined;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) {
      const found = findChecks(p);
      if (found) return found;
    } else if (entry.name === 'checks.json') {
      return JSON.parse(readFileSync(p, 'utf8')) as Check[];
    }
  }
  return undefined;
}

function statusOf(checks: Check[]): Status {
  if (checks.length === 0) return 'error';
  if (checks.some((c) => c.status === 'FAILURE')) return 'fail';
  if (checks.some((c) => c.status === 'WARNING')) return 'warn';
  return 'pass';
}

/** One scenario in its own conformance process, so that a hang costs one scenario and not the whole run. */
async function runScenario(node: string, url: string, scenario: string, outDir: string): Promise<ScenarioResult> {
  const t0 = Date.now();
  const timeoutMs = Math.min(SCENARIO_TIMEOUT_MS, remaining());
  if (timeoutMs < 2000) return { status: 'skipped', checks: [], note: 'time budget exhausted', ms: 0 };
  mkdirSync(outDir, { recursive: true });
  const child = spawn(node, [CONFORMANCE_CLI, 'server', '--url', url, '--scenario', scenario, '-o', outDir], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, timeoutMs);
  await new Promise<void>((res) => child.once('close', () => res()));
  clearTimeout(timer);
  writeFileSync(join(outDir, 'output.txt'), output);
  const ms = Date.now() - t0;
  if (timedOut) return { status: 'timeout', checks: [], note: `no result within ${timeoutMs} ms`, ms };
  const checks = findChecks(outDir);
  if (!checks) return { status: 'error', checks: [], note: `no checks.json; output:\n${output.slice(-1500)}`, ms };
  return { status: statusOf(checks), checks, ms };
}

async function runSetup(
  setup: Setup,
  node: string,
  url: string,
  scenarios: string[],
  resultsDir: string,
): Promise<Map<string, ScenarioResult>> {
  const results = new Map<string, ScenarioResult>();
  for (const s of scenarios) {
    const r = await runScenario(node, url, s, join(resultsDir, setup, s));
    results.set(s, r);
    process.stderr.write(`  [${setup}] ${s}: ${r.status} (${(r.ms / 1000).toFixed(1)}s)\n`);
  }
  return results;
}

function allFailed(scenarios: string[], status: Status, note: string): Map<string, ScenarioResult> {
  return new Map(scenarios.map((s) => [s, { status, checks: [], note, ms: 0 }]));
}

function gatewayConfig(upstream: Record<string, unknown>): Record<string, unknown> {
  return {
    listen: { host: '127.0.0.1', path: '/mcp' }, // port: a free one, chosen by spawnGateway
    store: { type: 'memory' },
    log: { level: 'warn' },
    upstreams: { fixture: upstream },
  };
}

async function runThroughGateway(
  setup: Exclude<Setup, 'direct'>,
  upstream: Record<string, unknown>,
  node: string,
  scenarios: string[],
  resultsDir: string,
  children: ChildHandle[],
): Promise<{ results: Map<string, ScenarioResult>; gateway?: GatewayChild; startError?: string }> {
  let gateway: GatewayChild;
  try {
    gateway = await spawnGateway({ config: gatewayConfig(upstream), timeoutMs: Math.min(30_000, remaining()) });
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    return { results: allFailed(scenarios, 'error', 'gateway did not start'), startError: msg };
  }
  children.push(gateway);
  process.stderr.write(`[${setup}] gateway at ${gateway.url}\n`);
  const results = await runSetup(setup, node, gateway.url, scenarios, resultsDir);
  writeFileSync(join(resultsDir, `${setup}.gateway-stderr.log`), gateway.stderr());
  return { results, gateway };
}

const CELL: Record<Status, string> = {
  pass: 'pass',
  warn: 'WARN',
  fail: 'FAIL',
  timeout: 'TIMEOUT',
  error: 'ERROR',
  skipped: 'skipped',
};

function clip(s: string, n: number): string {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length > n ? `${one.slice(0, n)}…` : one;
}

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  const expected = loadExpectedFailures();
  const node = await conformanceNode();
  const listed = await listScenarios(node);
  const unknown = opts.scenarios.filter((s) => !listed.includes(s));
  if (unknown.length > 0) throw new Error(`unknown scenario(s): ${unknown.join(', ')}`);
  const scenarios = opts.scenarios.length > 0 ? opts.scenarios : listed;
  const resultsDir = mkdtempSync(join(tmpdir(), 'taskgate-conformance-'));
  const children: ChildHandle[] = [];
  const bySetup = new Map<Setup, Map<string, ScenarioResult>>();
  const problems: string[] = [];
  const startErrors: string[] = [];
  const gateways: Array<{ setup: Setup; gw: GatewayChild }> = [];

  try {
    const fixture = await spawnFixture({ transport: 'streamable-http' });
    children.push(fixture);
    const fixtureUrl = fixture.url ?? '';
    process.stderr.write(`fixture at ${fixtureUrl}; results in ${resultsDir}\n`);

    if (opts.setups.includes('direct')) {
      bySetup.set('direct', await runSetup('direct', node, fixtureUrl, scenarios, resultsDir));
    }

    const stdio = fixtureCommand('stdio');
    const upstreams: Record<Exclude<Setup, 'direct'>, Record<string, unknown>> = {
      'gw-http': { transport: 'streamable-http', url: fixtureUrl },
      'gw-stdio': { transport: 'stdio', command: stdio.command, args: stdio.args, cwd: stdio.cwd },
    };
    const gwSetups = opts.setups.filter((s): s is Exclude<Setup, 'direct'> => s !== 'direct');
    // The two gateway setups are independent (own gateway, own upstream connection): run them side by side.
    const runs = await Promise.all(
      gwSetups.map(async (setup) => ({ setup, ...(await runThroughGateway(setup, upstreams[setup], node, scenarios, resultsDir, children)) })),
    );
    for (const r of runs) {
      bySetup.set(r.setup, r.results);
      if (r.gateway) gateways.push({ setup: r.setup, gw: r.gateway });
      if (r.startError) startErrors.push(`[${r.setup}] gateway failed to start:\n${r.startError}`);
    }
  } finally {
    await Promise.allSettled(children.map((c) => c.kill()));
  }

  // ---- report -------------------------------------------------------------------------------------------
  const setups = opts.setups;
  const width = Math.max(...scenarios.map((s) => s.length), 8) + 2;
  const lines: string[] = [];
  lines.push(`${'scenario'.padEnd(width)}${setups.map((s) => s.padEnd(10)).join('')}`);
  for (const s of scenarios) {
    const mark = expected.has(s) ? ' (expected failure)' : '';
    lines.push(`${s.padEnd(width)}${setups.map((st) => CELL[bySetup.get(st)?.get(s)?.status ?? 'skipped'].padEnd(10)).join('')}${mark}`);
  }

  const direct = bySetup.get('direct');
  if (direct) {
    for (const s of scenarios) {
      const ok = direct.get(s)?.status === 'pass';
      if (!ok && !expected.has(s)) problems.push(`direct: ${s} fails against the fixture itself and is not in expected-failures.yaml`);
      if (ok && expected.has(s)) problems.push(`direct: ${s} passes now; remove it from expected-failures.yaml`);
    }
  }

  let passed = 0;
  let failed = 0;
  const expectedRows: string[] = [];
  // Rows through the gateway are what this runner is about; with only the baseline selected, count those.
  const counted = setups.some((s) => s !== 'direct') ? setups.filter((s) => s !== 'direct') : setups;
  for (const setup of counted) {
    for (const s of scenarios) {
      const r = bySetup.get(setup)?.get(s);
      if (r?.status === 'pass') passed++;
      else if (expected.has(s)) expectedRows.push(`${s}@${setup}`);
      else failed++;
    }
  }

  const details: string[] = [];
  for (const setup of setups) {
    for (const s of scenarios) {
      const r = bySetup.get(setup)?.get(s);
      if (!r || r.status === 'pass' || (setup !== 'direct' && r.status === 'error' && r.note === 'gateway did not start')) continue;
      details.push(`[${setup}] ${s}: ${CELL[r.status]}${r.note ? ` — ${clip(r.note, 600)}` : ''}`);
      for (const c of r.checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING')) {
        const detail = c.details === undefined ? '' : `  details: ${clip(JSON.stringify(c.details), 500)}`;
        details.push(`    ${c.status} ${c.id}: ${c.errorMessage ?? c.description ?? ''}${detail}`);
      }
    }
  }

  console.log(`\nMCP conformance (server scenarios, spec ${SPEC_VERSION})\n`);
  console.log(lines.join('\n'));
  if (details.length > 0) console.log(`\nNon-passing checks:\n${details.join('\n')}`);
  for (const e of startErrors) console.log(`\n${e.length > 4000 ? `${e.slice(0, 4000)}…` : e}`);
  for (const { setup, gw } of gateways) {
    const tail = gw.stderr().trim().split('\n').slice(-15).join('\n');
    if (tail && setup !== 'direct' && [...(bySetup.get(setup)?.values() ?? [])].some((r) => r.status !== 'pass')) {
      console.log(`\n[${setup}] gateway stderr (last lines; full log in ${join(resultsDir, `${setup}.gateway-stderr.log`)}):\n${tail}`);
    }
  }
  if (problems.length > 0) console.log(`\nBaseline problems:\n  ${problems.join('\n  ')}`);
  const ok = failed === 0 && problems.length === 0 && startErrors.length === 0;
  if (ok && !opts.keep) rmSync(resultsDir, { recursive: true, force: true });
  else console.log(`\nResults kept in ${resultsDir}`);
  if (expectedRows.length > 0) console.log(`(${expectedRows.length} expected-failure rows not counted: ${expectedRows.join(', ')})`);
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
