// One gateway process per core (`taskgate serve --workers N|auto`, TASKGATE_WORKERS): what the command line
// decides before anything starts, and what a worker does differently from a gateway on its own. The primary, which
// forks and watches the workers, is src/workers-primary.ts.
//
// Each worker is a complete gateway and a replica of its own on the shared Redis store, as separate containers
// would be: leases, sessions and tasks already work across replicas. node:cluster shares the listening port between
// them (the primary accepts and hands connections round-robin).
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import type { GatewayConfig } from './config/types.js';

export const WORKERS_ENV = 'TASKGATE_WORKERS';
/**
 * Set by the primary in its workers' environment: a cluster worker forked by something else (pm2's cluster mode) is
 * a gateway on its own, which obeys SIGINT and serves its own /metrics.
 */
export const WORKER_MARK_ENV = 'TASKGATE_CLUSTER_WORKER';
const ourWorker = cluster.isWorker && process.env[WORKER_MARK_ENV] === '1';
// Read once; not handed on to what the worker starts (stdio upstreams).
delete process.env[WORKER_MARK_ENV];

/** How many gateway processes `serve` runs: 1 is a gateway on its own, as without the option. */
export type WorkerCount = { count: number } | { error: string };

/**
 * `--workers` (wins) or TASKGATE_WORKERS: a positive integer, or `auto` for one per core the process may use
 * (os.availableParallelism(): the CPUs it is allowed, not the machine's).
 */
export function workerCount(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): WorkerCount {
  const fromEnv = env[WORKERS_ENV];
  const [value, source] = flag !== undefined ? [flag, '--workers'] : fromEnv !== undefined && fromEnv !== '' ? [fromEnv, WORKERS_ENV] : ['1', ''];
  if (value.trim().toLowerCase() === 'auto') return { count: availableParallelism() };
  const count = /^\s*\d+\s*$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(count) || count < 1) return { error: `${source} must be a positive integer or 'auto' (got '${value}')` };
  return { count };
}

/**
 * Why `config` cannot run as several workers, or undefined. The memory store lives in one process: each worker
 * would have tasks and sessions of its own, and a client's next request lands on another worker. The check reads
 * the loaded config, where TASKGATE_REDIS_URL has already replaced the file's store.
 */
export function workersRefusal(config: GatewayConfig, count: number): string | undefined {
  if (count <= 1) return undefined;
  if (!cluster.isPrimary) return `--workers ${count}: this process is already a cluster worker (pm2's cluster mode?); let that manager run the processes`;
  if (config.store.type !== 'memory') return undefined;
  return (
    `--workers ${count} needs a store the workers share: the memory store lives in one process, and each worker ` +
    `would have tasks and sessions of its own. Set store.type: redis (or TASKGATE_REDIS_URL), or run one worker.`
  );
}

/** Which part this process plays in `serve`. */
export function workerRole(count: number): 'single' | 'primary' | 'worker' {
  if (ourWorker) return 'worker';
  return count > 1 ? 'primary' : 'single';
}

/** The worker's id in the group (1, 2, …; a replacement gets the next), for its log lines. */
export function workerId(): number | undefined {
  return cluster.worker?.id;
}

/**
 * In a worker, SIGINT is ignored. A terminal's Ctrl-C reaches the whole process group: the primary forwards it as
 * SIGTERM, and a worker that also obeyed the SIGINT would take the forwarded SIGTERM for a second signal and exit
 * at once instead of shutting down gracefully. Called at the worker's start and again once its shutdown handlers are
 * installed (they listen to SIGINT as a gateway on its own does).
 */
export function ignoreSigintInWorker(): void {
  if (!ourWorker) return;
  process.removeAllListeners('SIGINT');
  process.on('SIGINT', () => undefined);
}
