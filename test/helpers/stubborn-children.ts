// What the tests of stdio children that will not stop share (test/fixtures/stubborn-child.mjs): the pid files the
// children write, whether a process (or its process group) still runs, and a bound against hangs. Every wait is for
// a file or an exit, bounded against hangs (waits.ts).
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, watch } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../fixtures/spawn.js';
import { bounded } from './waits.js';

export const STUBBORN = join(REPO_ROOT, 'test/fixtures/stubborn-child.mjs');

/** A process's state, parent and process group, from /proc; undefined once it is gone. */
export function procStat(pid: number): { state: string; ppid: number; pgrp: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const [state = '', ppid = '0', pgrp = '0'] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state, ppid: Number(ppid), pgrp: Number(pgrp) };
  } catch {
    return undefined;
  }
}

/** Whether a process runs: a zombie (dead, not yet reaped by whoever inherited it) does not. */
export function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = procStat(pid);
  return stat !== undefined && stat.state !== 'Z';
}

/** Live processes that are children of this one, or in the process group of one of `groups`. */
export function processesOf(groups: readonly number[]): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => {
      const stat = procStat(pid);
      return stat !== undefined && stat.state !== 'Z' && (stat.ppid === process.pid || groups.includes(stat.pgrp));
    });
}

/** What a stubborn child writes to its pid file once started. */
export interface ChildPids {
  pid: number;
  grandchild?: number;
}

export interface PidFiles {
  path(name: string): string;
  /** The pids a child wrote, once it has (the file is renamed into place whole). */
  read(name: string): Promise<ChildPids>;
  written(name: string): boolean;
  remove(): void;
}

/** A directory of pid files; each stubborn child writes its own once started. */
export function pidFiles(prefix: string): PidFiles {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const path = (name: string): string => join(dir, `${name}.json`);
  return {
    path,
    written: (name) => existsSync(path(name)),
    remove: () => rmSync(dir, { recursive: true, force: true }),
    read: (name) =>
      bounded(
        new Promise<ChildPids>((resolve) => {
          const done = (): boolean => {
            if (!existsSync(path(name))) return false;
            watcher.close();
            resolve(JSON.parse(readFileSync(path(name), 'utf8')) as ChildPids);
            return true;
          };
          const watcher = watch(dir, () => void done());
          // Written between the look and the watch: no event would come.
          done();
        }),
        `the pid file of ${name}`,
      ),
  };
}

/** Every process a stubborn child started is gone, and so is its process group; leftovers are killed. */
export function assertGone(pids: ChildPids, what: string): void {
  const group = processesOf([pids.pid]).filter((pid) => procStat(pid)?.pgrp === pids.pid);
  const left = [...new Set([pids.pid, pids.grandchild, ...group])].filter((pid): pid is number => pid !== undefined && running(pid));
  for (const pid of left) process.kill(pid, 'SIGKILL');
  assert.deepEqual(left, [], `${what}: processes left running`);
}
