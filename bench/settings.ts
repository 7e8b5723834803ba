// The settings of `npm run bench` (its flags, each with a smoke and a full default) and the shapes every scenario's
// results share: what the http and stdio scenarios measure per target (TargetResult) and the targets the report
// judges (Check). bench/README.md says what each flag and number means.
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DEFAULTS } from '../src/config/schema.js';
import { ALL_SCALEOUT_PARTS, type ScaleoutSettings } from './scaleout.js';
import { everythingEntry } from './stdio-direct.js';
import { envInt, planFromArgs, planOptions, type LoadPlan, type PhaseStats } from './stats.js';
import { ALL_STORES, type StoreKind } from './tasks.js';
import type { WorkersTarget } from './workers.js';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const NODE = process.execPath;
/** server-everything's entry: the upstream of the http and stdio scenarios. */
export const ENTRY = everythingEntry();

export type Scenario = 'http' | 'stdio';
export type ScenarioName = Scenario | 'tasks' | 'scale' | 'scaleout';
export const ALL_SCENARIOS: readonly ScenarioName[] = ['http', 'stdio', 'tasks', 'scale', 'scaleout'];
/**
 * With --observability only, next to `taskgate` with both off: metrics scraped (`taskgate-metrics`), and metrics
 * scraped with traces exported (`taskgate-observed`, every trace or a head-sampled share: --trace-ratio). With
 * --credentials only, next to `taskgate` with static headers: the upstream's `auth` (bench/credentials.ts).
 */
export type TargetName =
  | 'direct'
  | 'taskgate'
  | 'taskgate-metrics'
  | 'taskgate-observed'
  | 'taskgate-clientCredentials'
  | 'taskgate-signedIdentity'
  | 'supergateway'
  | 'mcp-proxy'
  | WorkersTarget;
export const ALL_TARGETS: readonly TargetName[] = ['direct', 'taskgate', 'supergateway', 'mcp-proxy'];

export interface RssSamples {
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
   * V8 heap in use after forced full GCs (through the heap probe, heap.ts): before load and after load with the same
   * sessions open, and after the sessions were deleted. The difference across the load is what it retained.
   */
  heap?: { beforeLoad?: number; afterLoad?: number; settled?: number };
  /** Which process was sampled. */
  of: string;
}

export interface TargetResult {
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

export interface Check {
  scenario: ScenarioName;
  what: string;
  pass: boolean;
  detail: string;
}

export interface Settings extends LoadPlan {
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
  /**
   * http scenario: also measure the gateway authenticating to the upstream with clientCredentials and with
   * signedIdentity, next to static headers; all three behind one API-key front.
   */
  credentials: boolean;
  /** http scenario: also measure `serve --workers N` on Redis for each N (bench/workers.ts); empty: not. */
  workers: number[];
  /** Where every gateway process of the run writes a V8 CPU profile when it exits (`--cpu-prof`); none: not profiled. */
  cpuProfDir: string | undefined;
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

export function parseSettings(): Settings {
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
      credentials: { type: 'boolean', default: false },
      workers: { type: 'string' },
      'cpu-prof': { type: 'string' },
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
    credentials: values.credentials === true,
    workers: workerCounts(values.workers),
    cpuProfDir: values['cpu-prof'] ?? process.env.BENCH_CPU_PROF,
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

/** `--workers 1,2`: the worker counts to measure, each a positive integer, in the order given. */
function workerCounts(value: string | undefined): number[] {
  if (value === undefined) return [];
  const counts = value.split(',').map((x) => x.trim()).filter(Boolean).map(Number);
  for (const n of counts) if (!Number.isSafeInteger(n) || n < 1) throw new Error(`--workers: expected positive integers, e.g. 1,2 (got "${value}")`);
  return [...new Set(counts)];
}

function stripUndefined(o: Record<string, string | boolean | undefined>): Record<string, string | boolean> {
  return Object.fromEntries(Object.entries(o).filter(([k, v]) => v !== undefined && k !== 'smoke')) as Record<
    string,
    string | boolean
  >;
}
