// The gateway the bench and stress scripts measure: dist/cli.js, built once per run however many scripts ask.
// CI runs `bench:smoke` and `stress:smoke` side by side in `npm test`'s last step, once its first built dist/; each used to
// run `npm run build` again, and the two builds wrote the same files at once (one failed with ENOENT on a Lua
// script it was copying, and that script then measured the gateway through tsx instead).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'dist/cli.js');

/** A build that ran this long was abandoned by a killed process: its lock no longer holds anyone out. */
const STALE_LOCK_MS = 5 * 60_000;
const BUILD_TIMEOUT_MS = 180_000;

export interface BuiltCli {
  /** The built entry point, or why there is none (the caller decides whether tsx may stand in). */
  cli?: string;
  how: string;
  failure?: string;
}

/**
 * `TEST_SPAWN_BUILD=1` (what `npm test` sets for every step after its first, which builds dist/ and dist-test/)
 * promises a dist/ built from these sources in this run: used as it is, and its absence is an error, never a
 * reason to fall back to tsx. Otherwise one `npm run build` under a lock: a script that finds another one building
 * waits for it and uses what it built (the same sources) instead of writing the same files at the same time.
 */
export async function builtCli(): Promise<BuiltCli> {
  if (process.env.TEST_SPAWN_BUILD === '1') {
    if (existsSync(CLI)) return { cli: CLI, how: 'node dist/cli.js (built by this run)' };
    return { how: 'no dist/cli.js', failure: 'TEST_SPAWN_BUILD=1 but dist/cli.js does not exist: run npm run build first' };
  }
  const lock = join(tmpdir(), `taskgate-build-${createHash('sha1').update(ROOT).digest('hex').slice(0, 12)}.lock`);
  if (!(await acquire(lock))) {
    // Someone else built while we waited: theirs is this checkout's build too.
    if (existsSync(CLI)) return { cli: CLI, how: 'node dist/cli.js (built by a script running beside this one)' };
    return { how: 'no dist/cli.js', failure: 'the build of the script running beside this one left no dist/cli.js' };
  }
  try {
    const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, encoding: 'utf8', timeout: BUILD_TIMEOUT_MS });
    if (build.status === 0 && existsSync(CLI)) return { cli: CLI, how: 'node dist/cli.js (built by npm run build)' };
    return { how: 'npm run build failed', failure: (build.stdout + build.stderr).trim().split('\n').slice(0, 5).join('\n    ') };
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** True when this process took the lock; false when it waited for another holder to let go. */
async function acquire(lock: string): Promise<boolean> {
  let waited = false;
  for (;;) {
    try {
      mkdirSync(lock); // atomic: exactly one of the racing scripts creates it
      if (!waited) return true;
      rmSync(lock, { recursive: true, force: true }); // the build waited for is over: nothing left to hold
      return false;
    } catch {
      if (Date.now() - lockTime(lock) > STALE_LOCK_MS) rmSync(lock, { recursive: true, force: true });
      waited = true;
      // A lock directory has nothing to watch for its removal; the build it waits for takes seconds.
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

function lockTime(lock: string): number {
  try {
    return statSync(lock).mtimeMs;
  } catch {
    return Date.now(); // just removed: not stale, the next mkdir takes it
  }
}
