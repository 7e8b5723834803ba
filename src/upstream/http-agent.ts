import { Agent } from 'undici';
import type { HttpUpstreamConfig } from '../config/types.js';

/**
 * One pooled undici dispatcher per HTTP upstream. Every timeout is explicit: undici's 300 s header/body defaults
 * would cut long tool calls and idle SSE streams, so those are off unless configured; deadlines are policy.
 */
export function createUpstreamAgent(config: HttpUpstreamConfig): Agent {
  return new Agent({
    connect: { timeout: config.connectTimeoutMs },
    headersTimeout: config.headersTimeoutMs,
    bodyTimeout: config.bodyTimeoutMs,
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 600_000,
    connections: 256,
    pipelining: 1,
  });
}
