// Shared by the HTTP load generator and the stdio driver so both baselines are measured by the same clock,
// the same phase rules and the same percentile definition; otherwise the ratios would compare methods, not targets.

export interface PhaseSpec {
  /** Stop issuing new calls after this long (ignored when `count` is set). */
  durationMs: number;
  /** Issue exactly this many calls in total instead of running for a duration. */
  count?: number;
  /** With `count`: stop issuing calls after this long anyway (default COUNT_PHASE_MAX_MS). */
  maxMs?: number;
}

/** A count-bounded phase still ends after this long, so a stalled target cannot hold the run. */
export const COUNT_PHASE_MAX_MS = 120_000;

export interface PhaseStats {
  calls: number;
  errors: number;
  elapsedMs: number;
  callsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  maxMs: number;
  /** A few distinct error messages, to tell a broken target from a slow one. */
  errorSamples: string[];
}

/** One call; resolves when the response has been checked, rejects on any failure. */
export type CallFn = (worker: number) => Promise<void>;

const MAX_ERROR_SAMPLES = 5;

/** Nearest-rank percentile on an ascending array. */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(p * sorted.length)));
  return sorted[rank - 1] ?? Number.NaN;
}

/** The median of `values`, ignoring NaN (a round that measured nothing); NaN when none is left. */
export function median(values: number[]): number {
  const v = values.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (v.length === 0) return Number.NaN;
  const mid = v.length >> 1;
  return v.length % 2 === 1 ? (v[mid] ?? Number.NaN) : ((v[mid - 1] ?? 0) + (v[mid] ?? 0)) / 2;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `concurrency` closed-loop workers: each issues its next call only when the previous one finished, so the
 * number of requests in flight is exactly the number of clients. Latency covers request start to checked response.
 */
export async function runPhase(concurrency: number, spec: PhaseSpec, call: CallFn): Promise<PhaseStats> {
  const latencies: number[] = [];
  const errorSamples = new Set<string>();
  let errors = 0;
  let issued = 0;
  const start = process.hrtime.bigint();
  const limitMs = spec.count !== undefined ? (spec.maxMs ?? COUNT_PHASE_MAX_MS) : spec.durationMs;
  const deadline = start + BigInt(Math.round(limitMs * 1e6));
  const more = (): boolean =>
    process.hrtime.bigint() < deadline && (spec.count === undefined || issued < spec.count);

  const worker = async (w: number): Promise<void> => {
    while (more()) {
      issued++;
      const t0 = process.hrtime.bigint();
      try {
        await call(w);
        latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
      } catch (err) {
        errors++;
        if (errorSamples.size < MAX_ERROR_SAMPLES) errorSamples.add(err instanceof Error ? err.message : String(err));
        // A dead target would otherwise turn this loop into a hot spin of instant failures.
        await sleep(10);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  const elapsedMs = Number(process.hrtime.bigint() - start) / 1e6;

  const sorted = Float64Array.from(latencies).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    calls: sorted.length,
    errors,
    elapsedMs,
    callsPerSec: elapsedMs > 0 ? (sorted.length * 1000) / elapsedMs : 0,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    meanMs: sorted.length > 0 ? sum / sorted.length : Number.NaN,
    maxMs: sorted.length > 0 ? (sorted[sorted.length - 1] ?? Number.NaN) : Number.NaN,
    errorSamples: [...errorSamples],
  };
}

/** The result a target must produce for `echo {message:"hi"}`; anything else counts as an error. */
export function checkEchoResult(result: unknown): void {
  if (typeof result !== 'object' || result === null) throw new Error('tools/call result is not an object');
  const r = result as { isError?: unknown; content?: unknown };
  if (r.isError === true) throw new Error(`tool error: ${JSON.stringify(r.content).slice(0, 200)}`);
  if (!Array.isArray(r.content)) throw new Error('tools/call result has no content array');
  const first: unknown = r.content[0];
  const text = typeof first === 'object' && first !== null ? (first as { text?: unknown }).text : undefined;
  if (typeof text !== 'string' || !text.includes('hi')) {
    throw new Error(`unexpected echo content: ${JSON.stringify(r.content).slice(0, 200)}`);
  }
}

let nextRequestId = 1;
/**
 * Process-wide JSON-RPC ids: never reused, not even across clients, because both npm peers hang when two
 * concurrent requests share an id, and a gateway that maps ids must not be given an easy case either.
 */
export function uniqueId(): number {
  return nextRequestId++;
}

/** What run.ts needs from a client side: the HTTP load generator and the stdio driver both provide it. */
export interface Driver {
  /** Sessions opened (HTTP) or child started and initialized (stdio). */
  open(): Promise<void>;
  /** A closed-loop phase on the first `clients` workers (default: all). */
  run(spec: PhaseSpec, clients?: number): Promise<PhaseStats>;
  /** Ends sessions / the child. Never throws. */
  close(): Promise<unknown>;
}

export interface LoadRun {
  warmup: PhaseStats;
  /** One client, one call at a time: the per-call latency with nothing queued in front of it. */
  latency: PhaseStats;
  /** All clients at once: throughput (and latency under load). */
  throughput: PhaseStats;
}

export interface LoadPlan {
  warmupMs: number;
  durationMs: number;
  latencyMs: number;
  /** Measured calls for the throughput phase instead of `durationMs`. */
  count?: number;
}

/** Points in the sequence where run.ts samples the target's RSS. */
export interface PlanHooks {
  /** After warmup and the latency phase: the steady state that the load is compared against. */
  beforeLoad?: () => Promise<void>;
  /** Right after the throughput phase, sessions still open. */
  afterLoad?: () => Promise<void>;
  /** After the sessions were deleted. */
  afterClose?: () => Promise<void>;
}

/**
 * The client-side sequence for every target: warmup at full concurrency (JIT, pools, heap growth), then the
 * unloaded per-call latency with one client, then throughput with all clients.
 */
export async function runPlan(driver: Driver, plan: LoadPlan, hooks: PlanHooks = {}): Promise<LoadRun> {
  let closed = false;
  await driver.open();
  try {
    const warmup = await driver.run({ durationMs: plan.warmupMs });
    const latency = await driver.run({ durationMs: plan.latencyMs }, 1);
    await hooks.beforeLoad?.();
    const throughput = await driver.run(
      plan.count !== undefined ? { durationMs: plan.durationMs, count: plan.count } : { durationMs: plan.durationMs },
    );
    await hooks.afterLoad?.();
    closed = true;
    await driver.close();
    await hooks.afterClose?.();
    return { warmup, latency, throughput };
  } finally {
    if (!closed) await driver.close();
  }
}

export function envInt(name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number.parseInt(v, 10);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(v)}`);
  return n;
}

/** Flags shared by load.ts and stdio-direct.ts when run on their own; flags win over BENCH_* env. */
export function planFromArgs(values: Record<string, string | boolean | undefined>): LoadPlan & { clients: number } {
  const num = (flag: string, env: string, fallback: number): number => {
    const v = values[flag];
    return typeof v === 'string' ? Number(v) : envInt(env, fallback);
  };
  const count = values.count;
  return {
    clients: num('clients', 'BENCH_CLIENTS', 50),
    warmupMs: num('warmup-ms', 'BENCH_WARMUP_MS', 2000),
    durationMs: num('duration-ms', 'BENCH_DURATION_MS', 8000),
    latencyMs: num('latency-ms', 'BENCH_LATENCY_MS', 2000),
    ...(typeof count === 'string' ? { count: Number(count) } : {}),
  };
}

export const planOptions = {
  clients: { type: 'string' },
  'warmup-ms': { type: 'string' },
  'duration-ms': { type: 'string' },
  'latency-ms': { type: 'string' },
  count: { type: 'string' },
} as const;
