/**
 * Helpers of run.ts around the official conformance CLI (`@modelcontextprotocol/conformance`): the suites
 * installed, finding a Node they run on, listing scenarios, running a whole list in one process (with a watchdog)
 * or one scenario per process with a time limit, reading their checks.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../fixtures/spawn.js';

const execFileP = promisify(execFile);

/**
 * The CLI's environment: Node's on-disk compile cache (NODE_COMPILE_CACHE, read by Node >= 22.1, which the suite
 * needs anyway), since a run starts the CLI's 860 kB bundle a dozen times (more when scenarios run alone) and would otherwise
 * compile it each time.
 * Node checks each entry against the file's content and its own version, so a cache an older run left is never wrong.
 */
const CLI_ENV: NodeJS.ProcessEnv = { ...process.env, NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? join(tmpdir(), 'taskgate-conformance-compile-cache') };

/** One installed version of the conformance suite. */
export interface ConformanceSuite {
  /** Its package version, as reports and expected-failures.yaml name it. */
  version: string;
  /** The CLI's entry point. */
  cli: string;
}

/**
 * The suites every run uses: the 0.2 alpha (the only one with 2026-07-28 scenarios) and the newest released 0.1.x
 * (what implementers run today; it sends requests the alpha does not, such as a session's MCP-Protocol-Version
 * other than the negotiated one). Two versions of one package: the released one is installed under an npm alias.
 */
export function installedSuites(): { alpha: ConformanceSuite; released: ConformanceSuite } {
  return { alpha: suiteAt('@modelcontextprotocol/conformance'), released: suiteAt('@modelcontextprotocol/conformance-0.1') };
}

function suiteAt(folder: string): ConformanceSuite {
  const root = join(REPO_ROOT, 'node_modules', folder);
  const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
  return { version, cli: join(root, 'dist/index.js') };
}

export type Status = 'pass' | 'warn' | 'fail' | 'timeout' | 'error' | 'skipped';

export interface Check {
  id: string;
  name: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | 'SKIPPED' | string;
  description?: string;
  errorMessage?: string;
  details?: unknown;
}

export interface ScenarioResult {
  status: Status;
  checks: Check[];
  note?: string;
  ms: number;
}

export const CELL: Record<Status, string> = {
  pass: 'pass',
  warn: 'WARN',
  fail: 'FAIL',
  timeout: 'TIMEOUT',
  error: 'ERROR',
  skipped: 'skipped',
};

export function clip(s: string, n: number): string {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length > n ? `${one.slice(0, n)}…` : one;
}

/** The suite needs Node >= 22: this Node if new enough, else $CONFORMANCE_NODE, else one fetched by `npx -y node@24`. */
export async function conformanceNode(): Promise<string> {
  if (process.env.CONFORMANCE_NODE) return process.env.CONFORMANCE_NODE;
  if (Number(process.versions.node.split('.')[0]) >= 22) return process.execPath;
  const { stdout } = await execFileP('npx', ['-y', 'node@24', '-p', 'process.execPath'], { cwd: REPO_ROOT, timeout: 120_000 });
  const path = stdout.trim().split('\n').pop()?.trim();
  if (!path || !existsSync(path)) throw new Error(`could not locate a Node 24 binary via npx (got "${stdout}")`);
  return path;
}

async function cli(node: string, suite: ConformanceSuite, args: string[]): Promise<string> {
  const { stdout } = await execFileP(node, [suite.cli, ...args], { cwd: REPO_ROOT, env: CLI_ENV });
  return stdout;
}

/** `conformance list --server --spec-version <v>`: every server scenario applicable at that revision, active and pending. */
export async function listSpecScenarios(node: string, suite: ConformanceSuite, specVersion: string): Promise<string[]> {
  const stdout = await cli(node, suite, ['list', '--server', '--spec-version', specVersion]);
  const names: string[] = [];
  for (const line of stdout.split('\n')) {
    const m = /^\s+- (\S+)/.exec(line);
    if (m?.[1]) names.push(m[1]);
  }
  if (names.length === 0) throw new Error(`conformance list returned no server scenarios:\n${stdout}`);
  return names;
}

/** Why a scenario of a requirement set runs: scored (`required`) or only reported (`extension`, `pending`, ...). */
export interface RequiredScenario {
  name: string;
  kind: string;
}

/**
 * The server scenarios `conformance server --requirements <revision>` runs: the scored ones, then those it runs
 * and reports but never scores (extensions such as tasks-*, pending ones). Parsed from
 * `conformance list --server --requirements <revision>`, whose format is
 *   Server scenarios (test against a server):
 *     - name
 *   (blank line, Client scenarios ...)
 *   Run and reported, but never scored:
 *     extension (16):
 *       - name [server|client]
 */
export async function listRequirementScenarios(node: string, suite: ConformanceSuite, revision: string): Promise<RequiredScenario[]> {
  const stdout = await cli(node, suite, ['list', '--server', '--requirements', revision]);
  const out: RequiredScenario[] = [];
  let section: 'server' | 'client' | 'not-scored' | undefined;
  let reason = '';
  for (const line of stdout.split('\n')) {
    if (/^Server scenarios/.test(line)) section = 'server';
    else if (/^Client scenarios/.test(line)) section = 'client';
    else if (/^Run and reported, but never scored/.test(line)) section = 'not-scored';
    else if (section === 'server') {
      const m = /^\s+- (\S+)\s*$/.exec(line);
      if (m?.[1]) out.push({ name: m[1], kind: 'required' });
    } else if (section === 'not-scored') {
      const r = /^\s+([a-z][\w-]*) \(\d+\):\s*$/.exec(line);
      if (r?.[1]) reason = r[1];
      const m = /^\s+- (\S+) \[server\]\s*$/.exec(line);
      if (m?.[1]) out.push({ name: m[1], kind: reason });
    }
  }
  if (!out.some((s) => s.kind === 'required')) throw new Error(`conformance list --requirements ${revision} listed no server scenarios:\n${stdout}`);
  return out;
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

/**
 * A scenario passes when it has checks and none is a FAILURE or a WARNING (the tool's own baseline rule). One the
 * suite skips itself (only SKIPPED checks, e.g. tasks-status-notifications in 0.2.0-alpha.12) passes too; the
 * report marks it.
 */
function statusOf(checks: Check[]): Status {
  if (checks.length === 0) return 'error';
  if (checks.some((c) => c.status === 'FAILURE')) return 'fail';
  if (checks.some((c) => c.status === 'WARNING')) return 'warn';
  return 'pass';
}

export interface ScenarioRun {
  node: string;
  suite: ConformanceSuite;
  url: string;
  /** The wire revision the scenario runs at (`--spec-version`). */
  specVersion: string;
  /** `--force`: run scenarios not on that revision's timeline too (extensions such as tasks-*), as `--requirements` does. */
  force?: boolean;
  /** Kill the scenario's process after this long (the CLI's own per-scenario limit is 30 s). */
  timeoutMs: number;
  /** Epoch ms after which no scenario starts any more. */
  deadline: number;
}

/** One scenario in its own conformance process, so that a hang costs one scenario and not the whole run. */
export async function runScenario(run: ScenarioRun, scenario: string, outDir: string): Promise<ScenarioResult> {
  const t0 = Date.now();
  const timeoutMs = Math.min(run.timeoutMs, run.deadline - t0);
  if (timeoutMs < 2000) return { status: 'skipped', checks: [], note: 'time budget exhausted', ms: 0 };
  mkdirSync(outDir, { recursive: true });
  const args = [run.suite.cli, 'server', '--url', run.url, '--scenario', scenario, '--spec-version', run.specVersion, '-o', outDir];
  if (run.force) args.push('--force');
  const child = spawn(run.node, args, { cwd: REPO_ROOT, env: CLI_ENV, stdio: ['ignore', 'pipe', 'pipe'] });
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

/** Which scenario a folder the CLI wrote in a batch holds: `server-<scenario>-<ISO time with : and . as ->`. */
const BATCH_FOLDER = /^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/;
/** The line the CLI prints before each scenario of a batch. */
const BATCH_MARKER = /^=== Running scenario: (\S+) ===$/m;

/**
 * Many scenarios in ONE conformance process (`conformance server --url U <select> -o <outRoot>`, without
 * --scenario): the CLI runs them one after another, each as it would alone, and writes each one's checks.json to
 * `<outRoot>/server-<scenario>-<time>`. A process start costs ~0.6 CPU s: one per scenario took 180 of the run's 205 CPU s.
 * Returns the scenarios of `wanted` that the batch reported; the caller runs the rest on their own. A watchdog
 * kills the batch when a scenario gives no result within the per-scenario limit (a hang): what it had not
 * reported by then is left to the caller. Scenarios of the batch outside `wanted` are ignored.
 */
export async function runBatch(
  label: string,
  run: ScenarioRun,
  select: string[],
  wanted: string[],
  outRoot: string,
): Promise<Map<string, ScenarioResult>> {
  const results = new Map<string, ScenarioResult>();
  if (run.deadline - Date.now() < 2000 || wanted.length === 0) return results;
  mkdirSync(outRoot, { recursive: true });
  const child = spawn(run.node, [run.suite.cli, 'server', '--url', run.url, ...select, '-o', outRoot], { cwd: REPO_ROOT, env: CLI_ENV, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  // The scenario running now (its marker seen, its result not yet read), where its output starts, and since when.
  let current: { name: string; from: number; t0: number } | undefined;
  let hung: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  const arm = (): void => {
    clearTimeout(timer);
    const ms = Math.min(run.timeoutMs, run.deadline - Date.now());
    timer = setTimeout(() => {
      hung = current?.name ?? '(before its first scenario)';
      child.kill('SIGKILL');
    }, Math.max(0, ms));
  };
  const finish = (end: number): void => {
    if (!current) return;
    const { name, from, t0 } = current;
    current = undefined;
    if (!wanted.includes(name)) return;
    const dir = batchFolder(outRoot, name);
    const checks = dir ? findChecks(dir) : undefined;
    if (!dir || !checks) return; // not reported (it threw, or the batch was killed): the caller runs it alone
    writeFileSync(join(dir, 'output.txt'), output.slice(from, end));
    const r: ScenarioResult = { status: statusOf(checks), checks, ms: Date.now() - t0 };
    results.set(name, r);
    process.stderr.write(`  [${label}] ${name}: ${r.status} (${(r.ms / 1000).toFixed(1)}s, in one process)\n`);
  };
  let scanned = 0;
  const onData = (c: Buffer): void => {
    output += c.toString();
    // Markers are whole lines; look only at complete lines not scanned yet.
    const upTo = output.lastIndexOf('\n') + 1;
    for (const line of output.slice(scanned, upTo).split('\n')) {
      const m = BATCH_MARKER.exec(line);
      if (!m?.[1]) continue;
      const at = output.indexOf(line, scanned);
      finish(at);
      current = { name: m[1], from: at, t0: Date.now() };
      arm();
    }
    scanned = Math.max(scanned, upTo);
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  arm();
  await new Promise<void>((res) => child.once('close', () => res()));
  clearTimeout(timer);
  if (!hung) finish(output.length);
  writeFileSync(join(outRoot, 'batch-output.txt'), output);
  const missing = wanted.filter((s) => !results.has(s));
  if (hung) process.stderr.write(`  [${label}] one process: ${hung} gave no result within ${run.timeoutMs} ms; killed it\n`);
  if (missing.length > 0) process.stderr.write(`  [${label}] not reported by the one process, run alone: ${missing.join(', ')}\n`);
  return results;
}

/** The folder a batch wrote for `scenario` (the newest, should it appear twice). */
function batchFolder(outRoot: string, scenario: string): string | undefined {
  const names = readdirSync(outRoot).filter((n) => BATCH_FOLDER.exec(n)?.[1] === scenario);
  const last = names.sort().pop();
  return last === undefined ? undefined : join(outRoot, last);
}

/** A list of scenarios run one by one, `concurrency` processes at a time. */
export interface ScenarioGroup {
  scenarios: string[];
  concurrency: number;
}

/**
 * The scenarios of `groups`: all in one conformance process first when `select` (the CLI arguments that pick
 * them) is given, then each one the batch did not report in a process of its own, group after group (as
 * runScenarios). Results come back in the order of the groups' scenarios.
 */
export async function runBatchThenAlone(
  label: string,
  run: ScenarioRun,
  opts: { select?: string[]; groups: ScenarioGroup[]; outRoot: string },
): Promise<Map<string, ScenarioResult>> {
  const all = opts.groups.flatMap((g) => g.scenarios);
  const results = opts.select ? await runBatch(label, run, opts.select, all, join(opts.outRoot, 'batch')) : new Map<string, ScenarioResult>();
  for (const g of opts.groups) {
    const missing = g.scenarios.filter((s) => !results.has(s));
    for (const [s, r] of await runScenarios(label, run, missing, opts.outRoot, g.concurrency)) results.set(s, r);
  }
  return new Map(all.map((s) => [s, results.get(s) as ScenarioResult]));
}

/**
 * Runs `scenarios` with at most `concurrency` conformance processes at a time; results are under
 * `<outRoot>/<scenario>` and come back in the order of `scenarios`. Progress goes to stderr.
 */
export async function runScenarios(
  label: string,
  run: ScenarioRun,
  scenarios: string[],
  outRoot: string,
  concurrency = 1,
): Promise<Map<string, ScenarioResult>> {
  const results = new Map<string, ScenarioResult>();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < scenarios.length) {
      const s = scenarios[next++] as string;
      const r = await runScenario(run, s, join(outRoot, s));
      results.set(s, r);
      process.stderr.write(`  [${label}] ${s}: ${r.status} (${(r.ms / 1000).toFixed(1)}s)\n`);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, scenarios.length)) }, worker));
  return new Map(scenarios.map((s) => [s, results.get(s) as ScenarioResult]));
}

/** True when the suite itself skipped the scenario: it reported only SKIPPED (or INFO) checks, no SUCCESS. */
export function skippedBySuite(r: ScenarioResult | undefined): boolean {
  return r?.status === 'pass' && r.checks.some((c) => c.status === 'SKIPPED') && !r.checks.some((c) => c.status === 'SUCCESS');
}

export function allWith(scenarios: string[], status: Status, note: string): Map<string, ScenarioResult> {
  return new Map(scenarios.map((s) => [s, { status, checks: [], note, ms: 0 }]));
}
