// The `listen` section of the config schema: where the gateway listens and what it admits (body size, batch size,
// JSON depth, timeouts, connections, inflight bytes), with the Origin and Host checks and CORS for browsers.
import { z } from 'zod';
import { isOriginPattern, ORIGIN_PATTERN_HINT } from '../origins.js';
import { DEFAULTS } from './defaults.js';
import { int } from './fields.js';

const ORIGIN_HINT = 'expected "*" or an origin: scheme://host[:port] with no path, e.g. "https://app.example.com"';
function isOrigin(value: string): boolean {
  if (value === '*') return true;
  try {
    const url = new URL(value);
    return url.origin !== 'null' && url.origin === value;
  } catch {
    return false;
  }
}

export const CorsSchema = z
  .strictObject({
    origins: z.array(z.string().refine(isOriginPattern, { error: ORIGIN_PATTERN_HINT })).min(1, { error: 'list at least one origin (or leave cors out)' }),
    credentials: z.boolean().default(false),
    // Browsers cap it themselves (Chromium at 7200 s); a day is Firefox's cap and the most any browser keeps.
    maxAgeSeconds: int(0, 86_400).default(DEFAULTS.corsMaxAgeSeconds),
  })
  .superRefine((cors, ctx) => {
    // Credentialed CORS for any origin would let every page on the web act with the user's cookies.
    const any = cors.origins.indexOf('*');
    if (cors.credentials && any >= 0) {
      ctx.addIssue({ code: 'custom', path: ['origins', any], input: '*', message: 'must name origins when credentials is true: "*" with credentials would let any page act as the user' });
    }
  });

export const ListenSchema = z.strictObject({
  host: z.string().min(1).default(DEFAULTS.host),
  port: int(0, 65535).default(DEFAULTS.port),
  path: z
    .string()
    .regex(/^\/[^\s?#]*$/, { error: 'expected a path starting with "/" (no spaces, query or fragment)' })
    .default(DEFAULTS.path),
  maxBodyBytes: int(1).default(DEFAULTS.maxBodyBytes),
  maxBatchSize: int(1).default(DEFAULTS.maxBatchSize),
  maxJsonDepth: int(2, 1_000).default(DEFAULTS.maxJsonDepth),
  requestTimeoutMs: int(1).default(DEFAULTS.clientRequestTimeoutMs),
  headersTimeoutMs: int(1).default(DEFAULTS.clientHeadersTimeoutMs),
  maxConnections: int(0).default(DEFAULTS.maxConnections),
  maxConnectionsPerAddress: int(0).default(DEFAULTS.maxConnectionsPerAddress),
  keepAliveTimeoutMs: int(1).default(DEFAULTS.clientKeepAliveTimeoutMs),
  maxInflightBytes: int(0).default(DEFAULTS.maxInflightBytes),
  maxInflightBytesPerPrincipal: int(0).default(DEFAULTS.maxInflightBytesPerPrincipal),
  // Compared exactly with the Origin header, which never has a path or trailing slash: catch those here.
  allowedOrigins: z.array(z.string().refine(isOrigin, { error: ORIGIN_HINT })).default(() => []),
  allowedHosts: z
    .array(
      z
        .string()
        .regex(/^[^\s/@]+$/, { error: 'expected a host or host:port as sent in the Host header, not a URL' })
        .transform((h) => h.toLowerCase()), // Host is case-insensitive; the front end compares lowercase
    )
    .default(() => []),
  // Absent: no CORS at all (browsers on other origins cannot read any answer).
  cors: CorsSchema.optional(),
});
