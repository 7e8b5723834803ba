// Loaded into a measured Node process (`--expose-gc --import bench/heap-probe.mjs`, see heap.ts): on SIGUSR2 it
// runs two full GCs and writes the heap then in use to the file named by BENCH_HEAP_FILE. It replaces the
// inspector the bench used to attach for the same figure: a process started with --inspect measured a third more
// CPU per call than the same build without it, which no figure of the bench may include.
import { writeFileSync } from 'node:fs';
import process from 'node:process';

const file = process.env.BENCH_HEAP_FILE;
const gc = globalThis.gc;
if (file !== undefined && file !== '' && typeof gc === 'function') {
  let sample = 0;
  // A signal listener does not keep the process alive, and nothing here runs until the bench asks.
  process.on('SIGUSR2', () => {
    gc(); // the second catches what the first only made unreachable
    gc();
    const { heapUsed, heapTotal } = process.memoryUsage();
    writeFileSync(file, JSON.stringify({ sample: ++sample, usedBytes: heapUsed, totalBytes: heapTotal }));
  });
}
