#!/usr/bin/env node
// The `taskgate` command. Exit codes: 0 ok, 1 runtime failure, 2 bad usage or bad config.
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from './config/load.js';
import { renderEffectiveConfig, toYaml } from './config/render.js';
import { didYouMean } from './config/suggest.js';
import type { GatewayConfig } from './config/types.js';
import { watchConfigFile } from './config/watch.js';
import type { RunningGateway } from './taskgate.js';
import type { Logger } from './log.js';
import { VERSION } from './version.js';
import { ignoreSigintInWorker, workerCount, workerId, workerRole, workersRefusal } from './workers.js';

const DEFAULT_CONFIG = 'config/taskgate.yaml';
const COMMANDS = ['serve', 'check-config', 'help'] as const;

const USAGE = `Usage: taskgate <command> [options]

Commands:
  serve            start the gateway
  check-config     validate the config and print the effective configuration as YAML;
                   with --tools, also connect to the upstreams and print each exposed tool's effective
                   task policy, its upstream name where renamed, and the tools left out (and why)

Options:
  -c, --config <file>  config file (default: $TASKGATE_CONFIG, else ${DEFAULT_CONFIG})
      --tools          check-config: list the exposed tools with their task policy, and the excluded ones
      --workers <n>    serve: run n gateway processes sharing the port, one per core with 'auto'
                       (default: $TASKGATE_WORKERS, else 1); needs the Redis store
  -h, --help           show this help
  -v, --version        print the version

Environment:
  TASKGATE_CONFIG      config file when --config is not given
  TASKGATE_PORT        overrides listen.port
  TASKGATE_REDIS_URL   use the Redis store at this URL (overrides store)
  TASKGATE_LOG_LEVEL   overrides log.level
  TASKGATE_WORKERS     serve's --workers when the option is not given

serve reloads its config on SIGHUP and when the file changes; an invalid file is logged and the
running config stays (docs/operations.md: Config reload). With --workers, the first process forwards
SIGTERM, SIGINT and SIGHUP to the workers and exits with the worst of their exit codes
(docs/operations.md: One process per core).

Exit codes: 0 ok, 1 runtime failure, 2 bad usage or invalid config.
`;

const EXIT_OK = 0;
const EXIT_FAILURE = 1;
const EXIT_USAGE = 2;

function usageError(message: string): number {
  process.stderr.write(`taskgate: ${message}\nRun 'taskgate --help' for usage.\n`);
  return EXIT_USAGE;
}

/** Startup errors the operator fixes in the config (ConfigError, tool-name collisions) carry code 'CONFIG'. */
function isConfigError(err: unknown): boolean {
  return err instanceof ConfigError || (err !== null && typeof err === 'object' && (err as { code?: unknown }).code === 'CONFIG');
}

function load(path: string, explicit: boolean): GatewayConfig | undefined {
  try {
    return loadConfig(path);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    const n = err.errors.length;
    const header = n === 1 ? `taskgate: invalid config ${path}:` : `taskgate: invalid config ${path} (${n} problems):`;
    let text = `${header}\n${err.message}\n`;
    if (!explicit && err.errors.some((e) => e.line === 0 && e.file === path)) {
      text += `Pass --config <file> or set TASKGATE_CONFIG; config/taskgate.example.yaml is a starting point.\n`;
    }
    process.stderr.write(text);
    return undefined;
  }
}

async function checkConfig(path: string, explicit: boolean, withTools: boolean): Promise<number> {
  const config = load(path, explicit);
  if (config === undefined) return EXIT_USAGE;
  process.stdout.write(renderEffectiveConfig(config));
  if (withTools) {
    const [{ reportToolPolicies }, { createLogger }, { UPSTREAM_ADAPTERS }] = await Promise.all([
      import('./gateway/policy-report.js'),
      import('./log.js'),
      import('./protocol/revisions.js'),
    ]);
    const report = await reportToolPolicies(config, createLogger({ level: 'silent' }, { pretty: false }), UPSTREAM_ADAPTERS);
    const tools = Object.fromEntries(report.tools.map((t) => [t.name, {
      upstream: t.upstream,
      ...(t.upstreamName === undefined ? {} : { upstreamName: t.upstreamName }),
      ...(t.upstreamTaskSupport === undefined ? {} : { upstreamTaskSupport: t.upstreamTaskSupport }),
      ...t.policy,
    }]));
    const excluded: Record<string, Record<string, string>> = {};
    for (const e of report.excluded) (excluded[e.upstream] ??= {})[e.tool] = e.reason;
    process.stdout.write(`---\n# Effective task policy per exposed tool (upstreamName: renamed from), and the tools each upstream leaves out\n${toYaml({ tools, excluded })}`);
    for (const o of report.unmatchedOverrides) process.stderr.write(`taskgate: upstream '${o.upstream}' lists no tool '${o.tool}' (upstreams.${o.upstream}.tools.overrides)\n`);
    for (const u of report.unreachable) process.stderr.write(`taskgate: upstream '${u.upstream}' could not be reached: ${u.error}\n`);
    if (report.collisions.length > 0) {
      process.stderr.write(`taskgate: ${path}: upstream names collide:\n  ${report.collisions.join('\n  ')}\n`);
      return EXIT_USAGE;
    }
  }
  const n = config.upstreams.length;
  process.stderr.write(`taskgate: ${path} is valid (${n} upstream${n === 1 ? '' : 's'})\n`);
  return EXIT_OK;
}

/**
 * Resolves to an exit code only when startup fails; a running gateway exits from its signal handlers. With several
 * workers, this process is their primary and resolves once they have all exited; each worker runs this too.
 */
async function serve(path: string, explicit: boolean, workers: number): Promise<number | undefined> {
  const config = load(path, explicit);
  if (config === undefined) return EXIT_USAGE;
  const role = workerRole(workers);
  const refusal = role === 'primary' ? workersRefusal(config, workers) : undefined;
  if (refusal !== undefined) return usageError(refusal);
  const { createLogger } = await import('./log.js');
  const base = createLogger(config.log);
  if (role === 'primary') {
    const { runPrimary } = await import('./workers-primary.js');
    const logger = base.child({ role: 'primary' });
    return runPrimary({ count: workers, shutdownTimeoutMs: config.shutdownTimeoutMs, logger, metrics: config.metrics.enabled });
  }
  // Which worker said it: every line of a worker carries its id and pid.
  const logger = role === 'worker' ? base.child({ worker: workerId(), pid: process.pid }) : base;
  if (role === 'worker') {
    ignoreSigintInWorker();
    (await import('./observability/cluster-metrics.js')).joinClusterMetrics();
  }

  // Fail loudly on a programming error rather than keep serving in an unknown state; a stray rejected promise
  // is logged but must not take down every other client's calls.
  process.on('uncaughtException', (err) => {
    logger.fatal({ err }, 'uncaught exception; exiting');
    process.exit(EXIT_FAILURE);
  });
  process.on('unhandledRejection', (reason) => {
    logger.error({ err: reason }, 'unhandled promise rejection');
  });

  let running = config;
  try {
    // Loaded here, not at the top: --help, --version and check-config must not pay for (or depend on) the server.
    const { startGateway } = await import('./taskgate.js');
    // Signals and reloads are taken from the moment it listens: its upstreams may take a while to initialize, and
    // a SIGTERM meanwhile must stop their children too.
    await startGateway(config, logger, {
      onListening: (gateway) => {
        installReload(gateway, path, logger, (applied) => (running = applied));
        installShutdown(gateway, () => running.shutdownTimeoutMs, logger);
        ignoreSigintInWorker();
      },
    });
  } catch (err) {
    const configProblem = isConfigError(err);
    const message = err instanceof Error ? err.message : String(err);
    logger.error({ err }, configProblem ? 'invalid configuration' : 'failed to start');
    process.stderr.write(`taskgate: ${configProblem ? 'invalid config' : 'failed to start'}: ${message}\n`);
    return configProblem ? EXIT_USAGE : EXIT_FAILURE;
  }

  // startGateway logs the listening URL itself.
  return undefined;
}

/**
 * Reloads the config on SIGHUP and when the file changes. A file the loader refuses is logged with its located
 * problems and changes nothing. A reload applies without waiting for upstreams (they join in the background), so
 * one asked for while another is being read becomes one more right after it (the file's latest).
 */
function installReload(gateway: RunningGateway, path: string, logger: Logger, applied: (config: GatewayConfig) => void): void {
  let busy = false;
  let again: string | undefined;
  const reloadOnce = async (trigger: string): Promise<void> => {
    let next: GatewayConfig;
    try {
      next = loadConfig(path);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      logger.error({ trigger, source: path, problems: err.errors.length }, `config rejected, the running config stays:\n${err.message}`);
      gateway.events.emit('config.rejected', { source: path, error: err.message });
      return;
    }
    logger.info({ trigger, source: path }, 'config reload');
    // A refusal by the gateway itself (upstream names collide) is logged and announced there.
    await gateway.reload(next).then(() => applied(next), () => undefined);
  };
  const reload = (trigger: string): void => {
    if (busy) {
      again = trigger;
      return;
    }
    busy = true;
    void (async () => {
      for (let current: string | undefined = trigger; current !== undefined; current = again, again = undefined) {
        await reloadOnce(current).catch((err: unknown) => logger.error({ err, trigger: current }, 'config reload failed'));
      }
      busy = false;
    })();
  };
  process.on('SIGHUP', () => reload('SIGHUP'));
  watchConfigFile(path, () => reload('file changed'), { onError: (err) => logger.warn({ err, source: path }, 'cannot watch the config file; reload with SIGHUP') });
}

function installShutdown(gateway: { close(): Promise<void> }, shutdownTimeoutMs: () => number, logger: Logger): void {
  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    const timeoutMs = shutdownTimeoutMs();
    if (stopping) {
      logger.warn({ signal }, 'second signal during shutdown; exiting now');
      process.exit(EXIT_FAILURE);
    }
    stopping = true;
    logger.info({ signal, timeoutMs }, 'shutting down');
    // 0 means no deadline, like the other *Ms settings.
    if (timeoutMs > 0) {
      setTimeout(() => {
        logger.error({ timeoutMs }, 'graceful shutdown did not finish in time; exiting');
        process.exit(EXIT_FAILURE);
      }, timeoutMs);
    }
    gateway.close().then(
      () => {
        logger.info('stopped');
        process.exit(EXIT_OK);
      },
      (err: unknown) => {
        logger.error({ err }, 'error during shutdown');
        process.exit(EXIT_FAILURE);
      },
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

async function main(argv: string[]): Promise<number | undefined> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        config: { type: 'string', short: 'c' },
        tools: { type: 'boolean' },
        workers: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
    });
  } catch (err) {
    return usageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help === true) {
    process.stdout.write(USAGE);
    return EXIT_OK;
  }
  if (values.version === true) {
    process.stdout.write(`${VERSION}\n`);
    return EXIT_OK;
  }

  const [command, ...extra] = positionals;
  if (command === undefined) {
    process.stderr.write(USAGE);
    return EXIT_USAGE;
  }
  if (extra.length > 0) return usageError(`unexpected argument: ${extra.join(' ')}`);
  if (command === 'help') {
    process.stdout.write(USAGE);
    return EXIT_OK;
  }

  const fromEnv = process.env.TASKGATE_CONFIG;
  const explicit = values.config !== undefined || (fromEnv !== undefined && fromEnv !== '');
  const path = values.config ?? (fromEnv !== undefined && fromEnv !== '' ? fromEnv : DEFAULT_CONFIG);
  if (path === '') return usageError('--config needs a file path');

  if (values.workers !== undefined && command !== 'serve') return usageError('--workers applies to serve only');
  switch (command) {
    case 'serve': {
      const workers = workerCount(values.workers);
      if ('error' in workers) return usageError(workers.error);
      return serve(path, explicit, workers.count);
    }
    case 'check-config':
      return checkConfig(path, explicit, values.tools === true);
    default: {
      const hint = didYouMean(command, COMMANDS);
      return usageError(`unknown command '${command}'${hint !== undefined ? ` (did you mean '${hint}'?)` : ''}`);
    }
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    // serve keeps running (code undefined). Otherwise let stdout drain (pipes are asynchronous on some systems) and
    // exit; the unref'd timer only fires if a failed startup left children or sockets keeping the process alive.
    if (code === undefined) return;
    process.exitCode = code;
    setTimeout(() => process.exit(code), 1000).unref();
  },
  (err: unknown) => {
    process.stderr.write(`taskgate: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(EXIT_FAILURE);
  },
);
