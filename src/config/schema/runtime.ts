// The config schema's sections of one short map each: how the running gateway keeps sessions, SSE streams, calls
// parked across 2026-07-28 round trips (mrtr), list pages and replicas, and what it shows of itself (log, metrics,
// dashboard).
import { z } from 'zod';
import type { LogConfig } from '../types.js';
import { DEFAULTS } from './defaults.js';
import { int } from './fields.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const satisfies readonly LogConfig['level'][];

export const SessionsSchema = z.strictObject({
  idleTimeoutMs: int(1).default(DEFAULTS.idleTimeoutMs),
  maxPerPrincipal: int(0).default(DEFAULTS.maxSessionsPerPrincipal),
  maxStreamsPerPrincipal: int(0).default(DEFAULTS.maxStreamsPerPrincipal),
});
export const SseSchema = z.strictObject({
  keepAliveMs: int(1).default(DEFAULTS.keepAliveMs),
  replayBufferSize: int(0).default(DEFAULTS.replayBufferSize),
  jsonWindowMs: int(0).default(DEFAULTS.jsonWindowMs),
  maxBufferedBytesPerStream: int(1).default(DEFAULTS.maxBufferedBytesPerStream),
  maxBufferedBytes: int(0).default(DEFAULTS.maxBufferedBytes),
});
export const ReplicasSchema = z.strictObject({
  leaseMs: int(100).default(DEFAULTS.leaseMs),
  drainTimeoutMs: int(0).default(DEFAULTS.drainTimeoutMs),
  maxRunningTasks: int(0).default(DEFAULTS.maxRunningTasks),
});
export const MrtrSchema = z.strictObject({ parkTimeoutMs: int(1).default(DEFAULTS.parkTimeoutMs) });
export const ListsSchema = z.strictObject({ pageSize: int(1).default(DEFAULTS.listPageSize) });
export const LogSchema = z.strictObject({ level: z.enum(LOG_LEVELS).default(DEFAULTS.logLevel) });
const endpointPath = z.string().regex(/^\/[A-Za-z0-9._~/-]*$/, { error: 'expected an absolute URL path such as /metrics' });
export const MetricsSchema = z.strictObject({
  enabled: z.boolean().default(true),
  path: endpointPath.default(DEFAULTS.metricsPath),
  principalLabels: z.boolean().default(false),
});
export const DashboardSchema = z.strictObject({ enabled: z.boolean().default(true), path: endpointPath.default(DEFAULTS.dashboardPath) });
