// One target of the http or stdio scenario measured: started by its setup, driven through the load plan (warm-up,
// latency with one client, throughput with all), its RSS, heap (after forced GCs) and CPU sampled between phases.
import { measureHeap, type HeapProbe } from './heap.js';
import { HttpLoad } from './load.js';
import { cpuMs, rssBytes, treeCpuMs, treeRss, type Proc } from './procs.js';
import type { RssSamples, Scenario, Settings, TargetName, TargetResult } from './settings.js';
import { runPlan, type Driver } from './stats.js';
import { ms } from './report.js';

const RSS_SAMPLE_MS = 250;

const sleep = (millis: number): Promise<void> => new Promise((r) => setTimeout(r, millis));

export interface Started {
  driver: Driver;
  /** Process whose RSS is sampled, if any. */
  rssPid?: () => number | undefined;
  rssOf: string;
  /** Sample RSS and CPU of that process and its descendants together (a gateway primary and its workers). */
  wholeTree?: boolean;
  /** Stopped, in order, when the target is done: its processes, and anything else that runs beside it. */
  procs: Pick<Proc, 'stop'>[];
  tool?: () => string | undefined;
  /** The measured process (rssPid) loads heap-probe.mjs (heap.ts): its heap is read after forced GCs. */
  heapProbe?: HeapProbe;
  notes: string[];
}

/** Starts what a target needs, hands it to `run`, and tears it down after `run` returned or threw. */
export type Setup = (run: (started: Started) => Promise<void>) => Promise<void>;

export async function measure(
  scenario: Scenario,
  target: TargetName,
  label: string,
  s: Settings,
  round: number,
  setup: Setup,
): Promise<TargetResult> {
  const result: TargetResult = { scenario, target, label, round, ok: false, notes: [] };
  process.stdout.write(`- ${s.rounds > 1 ? `round ${round}, ` : ''}${scenario}: ${label} ... `);
  try {
    await setup(async (started) => {
      try {
        result.notes.push(...started.notes);
        const { rssPid } = started;
        const sample = (): number | undefined => {
          const pid = rssPid?.();
          return pid === undefined ? undefined : started.wholeTree === true ? treeRss(pid).bytes : rssBytes(pid);
        };
        const cpu = (): number | undefined => {
          const pid = rssPid?.();
          return pid === undefined ? undefined : started.wholeTree === true ? treeCpuMs(pid) : cpuMs(pid);
        };
        const rss: RssSamples = { of: started.rssOf, idle: sample() };
        result.rss = rss;
        const heap: NonNullable<RssSamples['heap']> = {};
        const { heapProbe } = started;
        /** Full GCs in the measured process; the heap in use after them, or undefined without a probe. */
        const gc = async (): Promise<number | undefined> => {
          const pid = rssPid?.();
          if (heapProbe === undefined || pid === undefined) return undefined;
          rss.heap = heap;
          try {
            return (await measureHeap(pid, heapProbe)).usedBytes;
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
            if (heapProbe !== undefined) rss.afterLoadGc = sample();
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

/** `headers`: sent with every request (the front's API key when the gateway has `auth`). */
export function httpDriver(url: string, clients: number, headers?: Record<string, string>): { load: HttpLoad; driver: Driver } {
  const load = new HttpLoad({ url, clients, ...(headers !== undefined ? { headers } : {}) });
  return { load, driver: load };
}
