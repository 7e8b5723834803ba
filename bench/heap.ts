// The heap a measured process retains, read without an inspector: the process runs with heapProbeArgs (the Node
// flags that load heap-probe.mjs) and heapProbeEnv, and measureHeap signals it and reads its answer. RSS alone
// cannot show whether anything is retained per request: V8 grows its heap in steps and gives pages back lazily,
// so RSS after load looks like a leak even when nothing is kept.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './settings.js';

export interface HeapSample {
  /** V8 heap in use after two forced full GCs: what is really retained. */
  usedBytes: number;
  totalBytes: number;
}

/** Where one measured process writes its samples. */
export interface HeapProbe {
  file: string;
}

const POLL_MS = 10;

/** A probe for one process: pass `heapProbeArgs()` before its script and `heapProbeEnv(probe)` in its environment. */
export function heapProbe(): HeapProbe {
  return { file: join(mkdtempSync(join(tmpdir(), 'bench-heap-')), 'heap.json') };
}

/** Node flags that load the probe: gc() exposed (costs nothing until called) and the SIGUSR2 listener. */
export function heapProbeArgs(): string[] {
  return ['--expose-gc', '--import', join(ROOT, 'bench/heap-probe.mjs')];
}

export function heapProbeEnv(probe: HeapProbe): Record<string, string> {
  return { BENCH_HEAP_FILE: probe.file };
}

function lastSample(probe: HeapProbe): (HeapSample & { sample: number }) | undefined {
  try {
    return JSON.parse(readFileSync(probe.file, 'utf8')) as HeapSample & { sample: number };
  } catch {
    return undefined; // none yet, or being written
  }
}

/** Asks process `pid` for a sample and waits for it (its file's sample number moves on). */
export async function measureHeap(pid: number, probe: HeapProbe, timeoutMs = 10_000): Promise<HeapSample> {
  const before = lastSample(probe)?.sample ?? 0;
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const now = lastSample(probe);
    if (now !== undefined && now.sample > before) return { usedBytes: now.usedBytes, totalBytes: now.totalBytes };
    if (Date.now() > deadline) throw new Error(`process ${pid} wrote no heap sample in ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}
