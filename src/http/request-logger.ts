// Each request's logger (fastify's `request.log`), made only when something logs through it at a level that is on.
// fastify's default makes a pino child per request: its bindings serialized and redaction applied, about 1 % of the
// gateway's CPU per proxied call under the bench's load (issue 43), for a logger almost no request writes to.
import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, LevelWithSilent } from 'pino';

type Level = Exclude<LevelWithSilent, 'silent'>;
type LogMethod = FastifyBaseLogger['info'];

/** fastify's `childLoggerFactory`: a stand-in that makes the request's pino child on its first enabled line. */
export function lazyRequestLogger(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  // A route with a level of its own gets its child at once (none of the gateway's routes sets one).
  if (options.level !== undefined) return logger.child(bindings, options);
  return new LazyChildLogger(logger, bindings, options);
}

class LazyChildLogger implements FastifyBaseLogger {
  private made: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  get level(): string {
    return this.made?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.child_().level = level;
  }

  // Methods on the prototype, not closures per instance: one stand-in is made per request.
  fatal(...args: Parameters<LogMethod>): void {
    this.log('fatal', args);
  }
  error(...args: Parameters<LogMethod>): void {
    this.log('error', args);
  }
  warn(...args: Parameters<LogMethod>): void {
    this.log('warn', args);
  }
  info(...args: Parameters<LogMethod>): void {
    this.log('info', args);
  }
  debug(...args: Parameters<LogMethod>): void {
    this.log('debug', args);
  }
  trace(...args: Parameters<LogMethod>): void {
    this.log('trace', args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.child_().child(bindings, options);
  }

  private child_(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings, this.options));
  }

  private log(level: Level, args: Parameters<LogMethod>): void {
    if (this.made === undefined && !isLevelEnabled(this.parent, level)) return;
    (this.child_()[level] as (...a: unknown[]) => void)(...args);
  }
}

/** pino's own check where the logger has it; a logger without it is asked to log and decides itself. */
function isLevelEnabled(logger: FastifyBaseLogger, level: Level): boolean {
  const check = (logger as { isLevelEnabled?: (level: string) => boolean }).isLevelEnabled;
  return check === undefined ? true : check.call(logger, level);
}
