// Starting, probing and stopping the processes a bench run measures. Every child leads its own process group so
// that stopping it also stops what it spawned (supergateway's per-session servers) and nothing outlives the run.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { request } from 'undici';

export interface Proc {
  name: string;
  child: ChildProcess;
  pid: number;
  /** Last few KB of stdout/stderr, for the failure message when a target does not come up. */
  tail(): string;
  exited(): boolean;
  stop(): Promise<void>;
}

export interface StartOptions {
  env?: Record<string, string>;
  /** Inherited variables with this prefix are dropped (TASKGATE_* would override the bench's gateway config). */
  dropEnvPrefix?: string;
  cwd?: string;
  /** Keep stdout (default). `false` discards it: server-everything logs a line per HTTP request there. */
  keepStdout?: boolean;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export function startProc(name: string, command: string, args: readonly string[], opts: StartOptions = {}): Proc {
  const inherited = Object.entries(process.env).filter(
    ([k]) => opts.dropEnvPrefix === undefined || !k.startsWith(opts.dropEnvPrefix),
  );
  const child = spawn(command, [...args], {
    cwd: opts.cwd,
    env: { ...Object.fromEntries(inherited), ...opts.env },
    stdio: ['ignore', opts.keepStdout === false ? 'ignore' : 'pipe', 'pipe'],
    detached: true,
  });
  let tail = '';
  const keep = (chunk: Buffer): void => {
    tail = (tail + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exited = true;
      resolve();
    });
    child.once('error', (err) => {
      keep(Buffer.from(`spawn error: ${err.message}\n`));
      exited = true;
      resolve();
    });
  });
  const signalGroup = (sig: NodeJS.Signals): void => {
    if (child.pid === undefined) return;
    try {
      process.kill(-child.pid, sig);
    } catch {
      // group already gone
    }
  };
  return {
    name,
    child,
    pid: child.pid ?? -1,
    tail: () => tail,
    exited: () => exited,
    async stop() {
      if (!exited) {
        signalGroup('SIGTERM');
        await Promise.race([exit, sleep(8000)]);
      }
      // Children of the leader (per-session servers) may outlive it; the group kill reaches them too.
      signalGroup('SIGKILL');
    },
  };
}

/**
 * Polls `url` until it answers with `okStatus` (or, when undefined, with any HTTP status at all: a server that
 * answers 400 to a bare GET is listening). Fails fast if the process exits.
 */
export async function waitHttp(proc: Proc, url: string, timeoutMs: number, okStatus?: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    if (proc.exited()) throw new Error(`${proc.name} exited before it was ready:\n${proc.tail()}`);
    try {
      const res = await request(url, { method: 'GET', headersTimeout: 1000, bodyTimeout: 1000 });
      await res.body.dump();
      if (okStatus === undefined || res.statusCode === okStatus) return;
      last = `HTTP ${res.statusCode}`;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    await sleep(100);
  }
  throw new Error(`${proc.name} not ready at ${url} after ${timeoutMs} ms (${last}):\n${proc.tail()}`);
}

/** Resident set size of one process in bytes (VmRSS), or undefined if it is gone. */
export function rssBytes(pid: number): number | undefined {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m?.[1] !== undefined ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** A process and all its descendants (supergateway's per-session servers, a gateway's workers), from /proc. */
function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // Field 4 (ppid) follows the parenthesised command name, which may itself contain spaces.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(entry));
      children.set(ppid, list);
    } catch {
      // raced with an exiting process
    }
  }
  const tree: number[] = [];
  const stack = [pid];
  while (stack.length > 0) {
    const p = stack.pop() as number;
    tree.push(p);
    stack.push(...(children.get(p) ?? []));
  }
  return tree;
}

/** RSS of a process and all its descendants, and how many processes that is (supergateway runs one per session). */
export function treeRss(pid: number): { bytes: number; processes: number } {
  let bytes = 0;
  let processes = 0;
  for (const p of processTree(pid)) {
    const rss = rssBytes(p);
    if (rss !== undefined) {
      bytes += rss;
      processes++;
    }
  }
  return { bytes, processes };
}

/** CPU (user+system, ms) of a process and its descendants so far; undefined if the process itself is gone. */
export function treeCpuMs(pid: number): number | undefined {
  const own = cpuMs(pid);
  if (own === undefined) return undefined;
  return processTree(pid).reduce((sum, p) => sum + (p === pid ? own : (cpuMs(p) ?? 0)), 0);
}

let ticksPerSec: number | undefined;
/** User+system CPU time a process has used so far, in ms, or undefined if it is gone. */
export function cpuMs(pid: number): number | undefined {
  if (ticksPerSec === undefined) {
    const out = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout;
    ticksPerSec = Number.parseInt(out ?? '', 10) || 100;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // utime and stime are fields 14 and 15; counted from after the parenthesised command name (field 2).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? (ticks * 1000) / ticksPerSec : undefined;
  } catch {
    return undefined;
  }
}

/** Waits for the `LISTENING <url>` line a server prints on stdout once ready (the fixture, the floor) and returns the URL. */
export async function waitListening(proc: Proc, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const m = /^LISTENING (\S+)$/m.exec(proc.tail());
    if (m?.[1] !== undefined) return m[1];
    if (proc.exited()) throw new Error(`${proc.name} exited before it was ready:\n${proc.tail()}`);
    await sleep(50);
  }
  throw new Error(`${proc.name} printed no LISTENING line within ${timeoutMs} ms:\n${proc.tail()}`);
}
