// The drain of a replica that was asked to stop (SIGTERM, issue 42): it no longer takes requests (the MCP endpoint
// refuses them with a retry hint, /readyz says 503), and what it is in the middle of gets replicas.drainTimeoutMs to
// finish: task runs whose call reached the upstream, and calls in flight that are no task (a synchronous tools/call
// gets its answer). Runs that have not started are not waited for: the task engine's close hands them over.
import type { Logger } from '../log.js';

/** Work the drain waits for: how much is under way, and a wait until none is. */
export interface Draining {
  readonly busy: number;
  idle(): Promise<void>;
}

export interface DrainParts {
  /** The task engine: beginDrain() stops runs that have not started (and this replica's sweeps for lost tasks). */
  tasks: Draining & { beginDrain(): void };
  /** Upstream calls under way, task runs' and others (upstream/life/calls-in-flight.ts). */
  calls: Draining;
  logger: Logger;
}

/**
 * Waits until no task run and no upstream call is under way, or `timeoutMs` passed. Resolves whether everything
 * finished; what did not is for the task engine's close (handed over or failed) and the upstreams' close (cut).
 */
export async function drainReplica({ tasks, calls, logger }: DrainParts, timeoutMs: number): Promise<boolean> {
  tasks.beginDrain();
  const quiet = (): boolean => tasks.busy === 0 && calls.busy === 0;
  if (quiet()) return true;
  logger.info({ tasks: tasks.busy, calls: calls.busy, timeoutMs }, 'draining: waiting for running tasks and calls in flight');
  if (timeoutMs <= 0) return false;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
  // Each wait ends when its side is idle; both are looked at again, since a call may end a run or a run start a call.
  const untilQuiet = async (): Promise<true> => {
    while (!quiet()) await Promise.all([tasks.idle(), calls.idle()]);
    return true;
  };
  try {
    const drained = await Promise.race([untilQuiet(), timedOut]);
    logger.info(drained ? {} : { tasks: tasks.busy, calls: calls.busy }, drained ? 'drained' : 'drain timed out: the rest is handed over or stopped');
    return drained;
  } finally {
    clearTimeout(timer);
  }
}
