// The primary of `taskgate serve --workers N` (src/workers.ts says what the workers are). It serves nothing itself:
// it forks the workers, which share the listening port; forwards SIGTERM, SIGINT (as SIGTERM) and SIGHUP to them,
// each worker shutting down or reloading as a gateway on its own does; replaces a worker that dies unexpectedly;
// and exits, once every worker has, with the worst of their exit codes. It also answers the workers' requests for
// the group's /metrics (observability/cluster-metrics.ts).
import cluster, { type Worker } from 'node:cluster';
import { Counter, Gauge, Registry } from 'prom-client';
import type { Logger } from './log.js';
import { serveClusterMetrics } from './observability/cluster-metrics.js';
import { WORKER_MARK_ENV } from './workers.js';

const EXIT_OK = 0;
const EXIT_FAILURE = 1;
/** A worker exits with 2 when it refuses its config (the cli's exit code for an invalid config). */
const EXIT_CONFIG = 2;

/** Past shutdownTimeoutMs, the workers' own deadline, before the primary kills what is left. */
const SHUTDOWN_MARGIN_MS = 5_000;
/** More unexpected exits than this within a minute: something is wrong that restarting does not fix. */
const RESTARTS_PER_MINUTE = 10;
const FIRST_RESTART_DELAY_MS = 250;
const MAX_RESTART_DELAY_MS = 10_000;

export interface PrimaryOptions {
  count: number;
  /** The config's shutdownTimeoutMs (0: no deadline). */
  shutdownTimeoutMs: number;
  logger: Logger;
  /** Whether the workers serve /metrics (then the primary aggregates them). */
  metrics: boolean;
}

/** Runs the workers until they have all exited; resolves with the exit code of the group. */
export function runPrimary(options: PrimaryOptions): Promise<number> {
  return new Promise((resolve) => new Primary(options, resolve).start());
}

class Primary {
  private readonly live = new Set<Worker>();
  /** Workers that listen (serve requests): a fork starts its gateway before it does. */
  private readonly listening = new Set<Worker>();
  private readonly restartTimers = new Set<NodeJS.Timeout>();
  /** When each unexpected exit was replaced, for the bound per minute. */
  private restarts: number[] = [];
  private stopping = false;
  private worst = EXIT_OK;
  /** Whether any worker has listened yet: before that, a worker failing is the group failing to start. */
  private started = false;
  private readonly logger: Logger;
  private readonly registry = new Registry();
  private readonly restartCounter: Counter;

  constructor(
    private readonly options: PrimaryOptions,
    private readonly done: (code: number) => void,
  ) {
    this.logger = options.logger;
    const listening = this.listening;
    new Gauge({
      name: 'taskgate_workers',
      help: 'Worker processes of this gateway process group (serve --workers) listening for requests.',
      registers: [this.registry],
      collect() {
        this.set(listening.size);
      },
    });
    this.restartCounter = new Counter({
      name: 'taskgate_worker_restarts_total',
      help: 'Workers replaced after they exited unexpectedly.',
      registers: [this.registry],
    });
  }

  start(): void {
    // Round-robin in the primary on every platform (the default everywhere but Windows): the OS would hand most
    // connections to whichever worker happens to be waiting in accept().
    cluster.schedulingPolicy = cluster.SCHED_RR;
    if (this.options.metrics) serveClusterMetrics(this.registry);
    cluster.on('listening', (worker, address) => {
      this.started = true;
      this.listening.add(worker);
      this.logger.info({ worker: worker.id, pid: worker.process.pid, port: address.port }, 'worker listening');
    });
    cluster.on('exit', (worker, code, signal) => this.exited(worker, code, signal));
    process.on('SIGTERM', () => this.stop('SIGTERM'));
    process.on('SIGINT', () => this.stop('SIGINT'));
    process.on('SIGHUP', () => {
      this.logger.info({ workers: this.live.size }, 'SIGHUP: each worker reloads its config');
      this.signalAll('SIGHUP');
    });
    process.on('uncaughtException', (err) => {
      this.logger.fatal({ err }, 'uncaught exception in the primary; stopping the workers and exiting');
      this.signalAll('SIGTERM');
      process.exit(EXIT_FAILURE);
    });
    this.logger.info({ workers: this.options.count, pid: process.pid }, 'starting workers');
    for (let i = 0; i < this.options.count; i++) this.fork();
  }

  private fork(): void {
    const worker = cluster.fork({ [WORKER_MARK_ENV]: '1' });
    this.live.add(worker);
    this.logger.info({ worker: worker.id, pid: worker.process.pid }, 'worker started');
  }

  private exited(worker: Worker, code: number | null, signal: string | null): void {
    this.live.delete(worker);
    this.listening.delete(worker);
    const exitCode = signal !== null ? EXIT_FAILURE : (code ?? EXIT_FAILURE);
    const fields = { worker: worker.id, pid: worker.process.pid, code, signal };
    if (this.stopping) {
      this.logger.info(fields, 'worker stopped');
      this.worst = Math.max(this.worst, exitCode);
      if (this.live.size === 0) this.finish();
      return;
    }
    this.logger.error(fields, 'worker exited unexpectedly');
    if (exitCode === EXIT_CONFIG) return this.stopAll(EXIT_CONFIG, 'a worker refused the config; stopping every worker');
    if (!this.started) return this.stopAll(exitCode === EXIT_OK ? EXIT_FAILURE : exitCode, 'a worker failed to start; stopping every worker');
    const now = Date.now();
    this.restarts = this.restarts.filter((at) => now - at < 60_000);
    if (this.restarts.length >= RESTARTS_PER_MINUTE) {
      return this.stopAll(EXIT_FAILURE, `more than ${RESTARTS_PER_MINUTE} workers exited within a minute; stopping every worker`);
    }
    const delayMs = Math.min(MAX_RESTART_DELAY_MS, FIRST_RESTART_DELAY_MS * 2 ** this.restarts.length);
    this.restarts.push(now);
    this.logger.warn({ worker: worker.id, delayMs }, 'replacing the worker');
    const timer = setTimeout(() => {
      this.restartTimers.delete(timer);
      this.restartCounter.inc();
      this.fork();
    }, delayMs);
    this.restartTimers.add(timer);
  }

  /** The group cannot go on: every worker shuts down as on SIGTERM, and the group exits with at least `code`. */
  private stopAll(code: number, why: string): void {
    this.logger.error({ code }, why);
    this.worst = Math.max(this.worst, code);
    this.stop(undefined);
  }

  /**
   * SIGTERM to every worker; a second signal forwards another, which a worker takes as "exit now" like a gateway on
   * its own. The workers ignore SIGINT (workers.ts): a terminal's Ctrl-C reaches them only through here.
   */
  private stop(signal: NodeJS.Signals | undefined): void {
    if (this.stopping) {
      if (signal === undefined) return;
      this.logger.warn({ signal, workers: this.live.size }, 'second signal during shutdown; the workers exit now');
      this.signalAll('SIGTERM');
      return;
    }
    this.stopping = true;
    for (const timer of this.restartTimers) clearTimeout(timer);
    this.restartTimers.clear();
    const timeoutMs = this.options.shutdownTimeoutMs;
    if (signal !== undefined) this.logger.info({ signal, workers: this.live.size, timeoutMs }, 'shutting down');
    if (this.live.size === 0) return this.finish();
    this.signalAll('SIGTERM');
    if (timeoutMs > 0) {
      setTimeout(() => {
        this.logger.error({ workers: [...this.live].map((w) => w.process.pid) }, 'workers did not stop in time; killing them');
        this.worst = Math.max(this.worst, EXIT_FAILURE);
        this.signalAll('SIGKILL');
      }, timeoutMs + SHUTDOWN_MARGIN_MS).unref();
    }
  }

  private signalAll(signal: NodeJS.Signals): void {
    for (const worker of this.live) {
      try {
        worker.process.kill(signal);
      } catch {
        // already gone: its exit event follows
      }
    }
  }

  private finish(): void {
    this.logger.info({ code: this.worst }, 'every worker has exited');
    this.done(this.worst);
  }
}
