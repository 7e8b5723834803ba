import { pino, type Logger } from 'pino';
import type { LogConfig } from './config/types.js';

export type { Logger } from 'pino';

// Header and config values that must never reach a log line.
const REDACT_PATHS = [
  'headers.authorization',
  'headers.cookie',
  'req.headers.authorization',
  'req.headers.cookie',
  'upstream.headers',
  '*.headers.Authorization',
  '*.env',
];

/** JSON logs to stdout; pretty-printed when stdout is a terminal (a person is reading). */
export function createLogger(config: LogConfig, options: { pretty?: boolean } = {}): Logger {
  const pretty = options.pretty ?? process.stdout.isTTY === true;
  return pino({
    level: config.level,
    base: { service: 'taskgate' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    ...(pretty ? { transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l' } } } : {}),
  });
}
