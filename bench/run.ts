// `npm run bench`: sync tools/call through taskgate vs directly against the same upstream, in one run, reported as
// ratios against the direct baseline measured in that same run (absolute numbers depend on the machine; ratios
// measured side by side much less). With a stdio upstream the two npm peers front the same server too. The tasks
// scenario (bench/tasks.ts) measures the task path next to a fastify floor and the upstream called directly; the
// scale scenario (bench/scale.ts) lease renewal of 100k held tasks and the takeover of a dead replica's 40k; the
// scaleout scenario (bench/scaleout.ts) tasks in flight, tasks/list depth, two replicas and a dead one (issue 23).
// This file parses the settings (settings.ts), runs the chosen scenarios round after round (http.ts, stdio.ts and
// the three above), reports them (report.ts) and writes the JSON. See bench/README.md for what each number means.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { gatewayCommand, type GatewayCommand } from './gateway-proc.js';
import { httpScenario } from './http.js';
import { errorRate, report, type Summary } from './report.js';
import { reportScale, scaleScenario, type ScaleResult, type ScaleSettings } from './scale.js';
import { reportScaleout, scaleoutScenario, type ScaleoutRound, type ScaleoutSettings } from './scaleout.js';
import { parseSettings, ROOT, type Check, type Settings, type TargetResult } from './settings.js';
import { stdioScenario } from './stdio.js';
import { connectRedis, reportTasks, tasksErrorRates, tasksScenario, type TasksRound, type TasksSettings } from './tasks.js';

/** A target whose calls failed more often than this fails the run (whatever the ratios). */
const MAX_ERROR_RATE = 0.01;

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
      `${s.rounds} round(s), ${s.workers.length > 0 ? `workers ${s.workers.join(',')}, ` : ''}${s.scenarios.includes('tasks') ? `stores ${s.stores.join(',')}, ` : ''}` +
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
  const needsGateway = s.targets.includes('taskgate') || s.workers.length > 0 || s.scenarios.some((x) => x === 'tasks' || x === 'scale' || x === 'scaleout');
  const gw: GatewayCommand | string = needsGateway ? await gatewayCommand(s.useTsx, s.cpuProfDir) : 'not selected';
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
    for (let round = 1; round <= s.rounds; round++) {
      for (const scenario of s.scenarios) {
        if (scenario === 'tasks') tasksRounds.push(await tasksScenario(ROOT, tasksSettings, gw, dir, round, s.rounds));
        else if (scenario === 'scale') scaleResults.push(await scaleScenario(scaleSettings, gw, dir, round, s.rounds));
        else if (scenario === 'scaleout') scaleoutRounds.push(await scaleoutScenario(ROOT, scaleoutSettings, gw, dir, round, s.rounds));
        else results.push(...(scenario === 'http' ? await httpScenario(s, gw, dir, round) : await stdioScenario(s, gw, dir, round)));
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
