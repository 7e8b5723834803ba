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

/** An http(s) origin, optionally with a trailing "/": what public links are built on. */
function isPublicOrigin(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'https:' || url.protocol === 'http:') && url.origin === value.replace(/\/$/, '');
  } catch {
    return false;
  }
}

export const CorsSchema = z
  .strictObject({
    origins: z
      .array(z.string().refine(isOriginPattern, { error: ORIGIN_PATTERN_HINT }))
      .min(1, { error: 'list at least one origin (or leave cors out)' })
      .describe(`Pages allowed to call the MCP endpoint: exact origins, \`"*"\`, or globs (\`*.\` = one or
        more leftmost labels, \`:*\` = any port), e.g. \`["https://ide.example.com", "https://*.example.dev",
        "http://localhost:*"]\`. They pass the Origin guard too, whatever \`listen.allowedOrigins\` says; Host is still
        checked. Another origin gets no CORS headers, so its browser refuses the answer (fetch rejects).`),
    credentials: z.boolean().default(false).describe(`Send \`Access-Control-Allow-Credentials\`, for cookies or TLS
      client certificates in front of the gateway; an \`Authorization\` header needs none. \`true\` refuses \`"*"\` in
      \`origins\` at load.`),
    // Browsers cap it themselves (Chromium at 7200 s); a day is Firefox's cap and the most any browser keeps.
    maxAgeSeconds: int(0, 86_400)
      .default(DEFAULTS.corsMaxAgeSeconds)
      .describe("How long a browser keeps a preflight's answer (browsers cap it themselves: Chromium at 7200)."),
  })
  .superRefine((cors, ctx) => {
    // Credentialed CORS for any origin would let every page on the web act with the user's cookies.
    const any = cors.origins.indexOf('*');
    if (cors.credentials && any >= 0) {
      ctx.addIssue({ code: 'custom', path: ['origins', any], input: '*', message: 'must name origins when credentials is true: "*" with credentials would let any page act as the user' });
    }
  });

export const ListenSchema = z.strictObject({
  host: z.string().min(1).default(DEFAULTS.host).describe(`Bind address. On a loopback address only local clients reach
    the gateway, and Host and Origin are checked against DNS rebinding (see \`allowedHosts\`, \`allowedOrigins\`).
    Without \`auth\`, binding beyond loopback is warned about.`),
  port: int(0, 65535).default(DEFAULTS.port).describe('TCP port; 0 lets the system pick a free one. `TASKGATE_PORT` overrides it.'),
  path: z
    .string()
    .regex(/^\/[^\s?#]*$/, { error: 'expected a path starting with "/" (no spaces, query or fragment)' })
    .default(DEFAULTS.path)
    .describe(`The MCP endpoint (POST, GET, DELETE): starts with \`/\`, no spaces, query or fragment. Must differ
      from \`/healthz\`, \`/readyz\`, \`metrics.path\` and \`dashboard.path\`.`),
  publicUrl: z
    .string()
    .refine(isPublicOrigin, { error: 'expected an http(s) origin: scheme://host[:port] with no path, query or fragment' })
    .optional()
    .meta({
      description: `The origin browsers and clients reach the gateway at (behind a proxy, the public https one): the
        links it hands out (connect links, redirect URIs) are built from it, whichever replica makes them.`,
      derivedDefault: "the origin of `auth.resource`",
    }),
  maxBodyBytes: int(1).default(DEFAULTS.maxBodyBytes).describe('Largest request body; a larger one gets HTTP 413.'),
  maxBatchSize: int(1)
    .default(DEFAULTS.maxBatchSize)
    .describe('Most messages in one JSON-RPC batch (2025-03-26 sessions only); more: HTTP 400.'),
  maxJsonDepth: int(2, 1_000)
    .default(DEFAULTS.maxJsonDepth)
    .describe('Deepest nesting of arrays and objects in a request body; deeper: HTTP 400 (-32600).'),
  requestTimeoutMs: int(1).default(DEFAULTS.clientRequestTimeoutMs).describe(`A request's headers and body must have
    arrived within this, else HTTP 408 and the connection closes. Only the request's arrival is timed, never a long
    answer.`),
  headersTimeoutMs: int(1)
    .default(DEFAULTS.clientHeadersTimeoutMs)
    .describe('The headers alone must have arrived within this; at most `listen.requestTimeoutMs`.'),
  maxConnections: int(0).default(DEFAULTS.maxConnections).describe(`Client connections open at once. From 90% of it,
    idle keep-alive connections are closed to make room (with auth, those that never presented valid credentials
    first; then the longest idle); a newcomer is closed only when none can go. 0 = unlimited.`),
  maxConnectionsPerAddress: int(0).default(DEFAULTS.maxConnectionsPerAddress).describe(`Connections open at once from
    one remote address; more are closed as they arrive. 0 = unlimited.`),
  keepAliveTimeoutMs: int(1).default(DEFAULTS.clientKeepAliveTimeoutMs).describe(`A keep-alive connection without a
    request for this long is closed (Node's default; fastify alone would keep it 72 s).`),
  maxInflightBytes: int(0).default(DEFAULTS.maxInflightBytes).describe(`Bytes of request bodies held at once, from
    reading a body until the gateway lets go of what it carried (a forwarded call: its answer; a task: the end of its
    upstream call). Past it a new request gets HTTP 503, \`Retry-After: 5\` and a -32001 error naming the budget;
    running calls go on. 0 = unlimited; else at least 2 × \`listen.maxBodyBytes\`.`),
  maxInflightBytesPerPrincipal: int(0).default(DEFAULTS.maxInflightBytesPerPrincipal).describe(`The same as
    \`listen.maxInflightBytes\`, per principal (without auth: all clients together). In both budgets, requests over
    64 KiB may not use the last eighth, so polls, task reads and cancels still pass. 0 = unlimited; else at least 2 ×
    \`listen.maxBodyBytes\`.`),
  // Compared exactly with the Origin header, which never has a path or trailing slash: catch those here.
  allowedOrigins: z
    .array(z.string().refine(isOrigin, { error: ORIGIN_HINT }))
    .default(() => [])
    .describe(`More \`Origin\` values accepted, each exactly \`scheme://host[:port]\` (\`"*"\` = any). Empty: loopback
      origins when bound to loopback, else any. Origins in \`listen.cors.origins\` pass too.`),
  allowedHosts: z
    .array(
      z
        .string()
        .regex(/^[^\s/@]+$/, { error: 'expected a host or host:port as sent in the Host header, not a URL' })
        .transform((h) => h.toLowerCase()), // Host is case-insensitive; the front end compares lowercase
    )
    .default(() => [])
    .describe(`More \`Host\` values accepted (host or host:port, not a URL; compared case-insensitively); loopback
      names always are. Empty: loopback names only when bound to loopback, else any.`),
  cors: CorsSchema.optional().describe(`CORS for browser pages on other origins. Absent (the default): no CORS, so pages
    on other origins cannot read any answer.`),
});
