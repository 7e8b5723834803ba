// `npm run stress`: every abuse issue 20 found, run against a real gateway process, each on a fresh gateway so
// that its peak RSS is its own. For each it prints the gateway's peak RSS next to the documented bound, whether
// the process is still alive and whether a new client is still served while (or right after) the abuse runs.
// A report with a verdict: exit 1 when the gateway died, stopped serving or went past a ceiling.
//
//   npm run stress                      full sizes (600 MB lines, 60 s slow readers, 1,024 idle sockets, ...)
//   npm run stress -- --smoke           the same abuses at small sizes, for CI (~1 min)
//   npm run stress -- --only a,b        some scenarios (names as printed)
//   npm run stress -- --tsx             run the gateway through tsx instead of building dist/
//   npm run stress -- --redis-url URL   the Redis the `-redis` scenarios use (default redis://127.0.0.1:6379)
//
// Everything targets loopback only and stops by itself (bounded counts and durations).
//
// One file because it is one command whose scenarios are entries of one table (`scenarios`), sharing its raw HTTP
// helpers and the runner that starts a fresh gateway and samples its peak RSS; the process helpers already live in
// procs.ts.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { stringify } from 'yaml';
import { builtCli } from './build.js';
import { freePort, rssBytes, startProc, waitHttp, waitListening, type Proc } from './procs.js';
import { startAuthServer, type AuthServer } from '../test/fixtures/auth-server.js';
import { nodeArgs } from '../test/fixtures/spawn.js';
import { startWebhookReceiver, type WebhookReceiver } from '../test/fixtures/webhook-receiver.js';
import { redisPrefixMemory } from '../test/helpers/redis-memory.js';
import { TASK_OVERHEAD_BYTES } from '../src/store/task-store.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const FIXTURE = join(ROOT, 'test/fixtures/abusive-server.ts');
const MiB = 1024 * 1024;

const { values: flags } = parseArgs({
  options: { smoke: { type: 'boolean', default: false }, only: { type: 'string' }, tsx: { type: 'boolean', default: false }, 'redis-url': { type: 'string', default: 'redis://127.0.0.1:6379' } },
});
const smoke = flags.smoke === true;
/** Full size, or the smoke's. */
const size = <T>(full: T, small: T): T => (smoke ? small : full);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
/** How long any one request may go unanswered before the scenario reports it (a report, not a timed test). */
const ANSWER_DEADLINE_MS = size(120_000, 30_000);

interface Gateway {
  url: string;
  base: string;
  proc: Proc;
}

/** What a scenario's abuse left behind, in words, for the report. */
type Detail = string;

interface Scenario {
  name: string;
  /** The abuse, as issue 20 describes it. */
  abuse: string;
  /** The bound that holds it, as docs/limits.md documents it. */
  bound: string;
  /** Peak RSS of the gateway past which the scenario fails (the documented bounds plus the process's own footprint). */
  ceilingBytes: number;
  /** Which upstream the abuse goes to (`abuse`), next to a healthy stdio one (`ok`). */
  upstream: 'stdio' | 'streamable-http' | 'sse';
  /** Config beyond the defaults; `abuse` gets merged into the abused upstream's entry. */
  config?: { abuse?: Record<string, unknown>; gateway?: Record<string, unknown> };
  /** What the abuse must have led to, matched against the detail `run` resolves with (beyond surviving it). */
  expect?: RegExp[];
  /** Runs the abuse; `served` probes a new client while it is still going on. Resolves with what happened. */
  run(gateway: Gateway, served: () => Promise<void>): Promise<Detail>;
}

const API_KEYS = { alice: `alice-${randomBytes(12).toString('hex')}`, bob: `bob-${randomBytes(12).toString('hex')}` };
const authConfig = {
  resource: 'http://127.0.0.1/mcp',
  apiKeys: [
    { principal: 'alice', key: API_KEYS.alice },
    { principal: 'bob', key: API_KEYS.bob },
  ],
};
const bearer = (who: keyof typeof API_KEYS): Record<string, string> => ({ authorization: `Bearer ${API_KEYS[who]}` });

// The authorization server of the auth-server-down scenario: real (the tests' fixture), tokens of 4 s.
const STRESS_CLIENT_SECRET = randomBytes(16).toString('hex');
let authServer: AuthServer | undefined;
const stressAuthServer = (): AuthServer => {
  if (authServer === undefined) throw new Error('the stress authorization server is not started');
  return authServer;
};

// The endpoints of the webhook-endpoint-down scenario: one never answers, one acknowledges at once.
let webhookReceivers: { stuck: WebhookReceiver; healthy: WebhookReceiver } | undefined;
const stressReceivers = (): { stuck: WebhookReceiver; healthy: WebhookReceiver } => {
  if (webhookReceivers === undefined) throw new Error('the stress webhook receivers are not started');
  return webhookReceivers;
};

// ---- raw MCP over HTTP, as careless clients send it -------------------------------------------------------------

interface Posted {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The whole body (only when read). */
  text?: string;
  /** The response, paused: the caller never reads it (a slow reader). */
  response?: http.IncomingMessage;
}

/** POSTs one JSON-RPC message; `read: false` leaves the response unread (paused) once its headers came. */
function post(url: string, body: unknown, headers: Record<string, string>, options: { read?: boolean; localAddress?: string } = {}): Promise<Posted> {
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolvePost, reject) => {
    // A call the gateway never answers is a finding, not a hang of the script.
    const deadline = setTimeout(() => {
      request.destroy();
      reject(new Error(`no answer within ${ANSWER_DEADLINE_MS / 1000} s`));
    }, ANSWER_DEADLINE_MS);
    deadline.unref();
    const request = http.request(
      url,
      {
        method: 'POST',
        localAddress: options.localAddress,
        agent: false,
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'content-length': Buffer.byteLength(payload), ...headers },
      },
      (response) => {
        if (options.read === false) {
          clearTimeout(deadline);
          response.pause();
          resolvePost({ status: response.statusCode ?? 0, headers: response.headers, response });
          return;
        }
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => {
          clearTimeout(deadline);
          resolvePost({ status: response.statusCode ?? 0, headers: response.headers, text });
        });
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

/** Opens a 2025-11-25 session; returns the headers its later requests carry. */
async function openSession(url: string, auth: Record<string, string> = {}): Promise<Record<string, string>> {
  const init = await post(url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'stress', version: '1' } } }, auth);
  const sessionId = init.headers['mcp-session-id'];
  if (typeof sessionId !== 'string') throw new Error(`initialize: HTTP ${init.status} without a session: ${init.text?.slice(0, 200)}`);
  const headers = { ...auth, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
  return headers;
}

function toolCall(id: number, name: string, args: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, ...extra } };
}

/** A stateless 2026-07-28 tools/call: the envelope in `_meta`, the headers that mirror the body. */
function rev2026Call(id: number, name: string, args: Record<string, unknown>, meta: Record<string, unknown> = {}): { body: unknown; headers: Record<string, string> } {
  return {
    body: toolCall(id, name, args, {
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': {},
        'io.modelcontextprotocol/clientInfo': { name: 'stress', version: '1' },
        ...meta,
      },
    }),
    headers: { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': name },
  };
}

/** The JSON-RPC answer in a JSON or SSE body. */
function answerOf(text: string | undefined): { result?: unknown; error?: { code: number; message: string } } | undefined {
  if (text === undefined) return undefined;
  const candidates = text.trimStart().startsWith('{') ? [text] : text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5));
  for (const candidate of candidates.reverse()) {
    try {
      const message = JSON.parse(candidate) as { id?: unknown; result?: unknown; error?: { code: number; message: string } };
      if ('result' in message || 'error' in message) return message;
    } catch {
      // a keep-alive or priming line
    }
  }
  return undefined;
}

function describe(posted: Posted): string {
  const answer = answerOf(posted.text);
  if (answer?.error !== undefined) return `HTTP ${posted.status}, error ${answer.error.code}: ${answer.error.message.slice(0, 140)}`;
  if (answer?.result !== undefined) return `HTTP ${posted.status}, result ${JSON.stringify(answer.result).slice(0, 100)}`;
  return `HTTP ${posted.status} ${String(posted.text ?? '').slice(0, 140)}`;
}

/** What one principal stores until its budget: results of RESULT_BYTES against a budget of STORED_BUDGET. */
const STORED_BUDGET = size(64, 8) * MiB;
const RESULT_BYTES = size(3, 1) * MiB;
const STORED_ATTEMPTS = size(300, 30);

/**
 * One principal (alice, a 2025 session) stores results of RESULT_BYTES with a 24 h TTL, reading each back, until
 * the gateway refuses a new task; then another principal's task is served. `redisPrefix`: the store is Redis, and
 * the bytes its keys hold are reported too (MEMORY USAGE of each key under the prefix, the shared server's other
 * keys left out).
 */
async function storeUntilBudget(gateway: Gateway, served: () => Promise<void>, redisPrefix?: string): Promise<Detail> {
  const alice = await openSession(gateway.url, bearer('alice'));
  let stored = 0;
  let refusal: string | undefined;
  for (let id = 1; id <= STORED_ATTEMPTS && refusal === undefined; id++) {
    const created = await post(gateway.url, toolCall(id, 'abuse__big_result', { bytes: RESULT_BYTES }, { task: { ttl: 86_400_000 } }), alice);
    const taskId = (answerOf(created.text)?.result as { task?: { taskId?: string } } | undefined)?.task?.taskId;
    if (taskId === undefined) {
      refusal = `${describe(created)}${created.headers['retry-after'] !== undefined ? ` (Retry-After ${created.headers['retry-after']})` : ''}`;
      break;
    }
    const read = await post(gateway.url, { jsonrpc: '2.0', id: `r${id}`, method: 'tasks/result', params: { taskId } }, alice);
    const text = (answerOf(read.text)?.result as { content?: { text?: string }[] } | undefined)?.content?.[0]?.text;
    if (text?.length !== RESULT_BYTES) return `result ${id} came back as ${describe(read)}`;
    stored++;
  }
  await served();
  const bob = await openSession(gateway.url, bearer('bob'));
  const bobs = await post(gateway.url, toolCall(1, 'abuse__big_result', { bytes: RESULT_BYTES }, { task: { ttl: 60_000 } }), bob);
  const bobsTask = (answerOf(bobs.text)?.result as { task?: { taskId?: string } } | undefined)?.task?.taskId;
  const bobsResult = bobsTask === undefined ? bobs : await post(gateway.url, { jsonrpc: '2.0', id: 2, method: 'tasks/result', params: { taskId: bobsTask } }, bob);
  const bobServed = (answerOf(bobsResult.text)?.result as { content?: { text?: string }[] } | undefined)?.content?.[0]?.text?.length === RESULT_BYTES;
  let redis = '';
  if (redisPrefix !== undefined) {
    const held = await redisBytesUnder(redisPrefix);
    // Each result is its JSON in a hash, plus Redis' own overhead: within a quarter over the budget and two results.
    const within = held <= STORED_BUDGET * 1.25 + 2 * RESULT_BYTES;
    redis = `; Redis keys under the prefix: ${(held / MiB).toFixed(1)} MB (${within ? 'within the budget' : `OVER the budget of ${STORED_BUDGET / MiB} MiB`})`;
  }
  return `alice stored ${stored} results of ${RESULT_BYTES / MiB} MiB, then: ${refusal ?? 'never refused'}; bob's task: ${bobServed ? 'served' : describe(bobsResult)}${redis}`;
}

/** Bytes Redis holds for the keys under `prefix` (MEMORY USAGE, key by key), then those keys go. */
async function redisBytesUnder(prefix: string): Promise<number> {
  const redis = new Redis(flags['redis-url'] as string);
  try {
    let bytes = 0;
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    for (const key of keys) bytes += Number((await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
    if (keys.length > 0) await redis.del(...keys);
    return bytes;
  } finally {
    redis.disconnect();
  }
}

const STORED_PREFIX = `taskgate-stress-${process.pid}-${randomBytes(4).toString('hex')}`;

/** Held calls of the approval-listing-flood scenario: their count and the bytes of each one's arguments. */
const HELD_CALLS = size(15, 6);
const HELD_ARGUMENT_BYTES = 3_900_000;
const LISTING_KEYS = { approver: `approver-${randomBytes(12).toString('hex')}`, mallory: `mallory-${randomBytes(12).toString('hex')}` };

/**
 * GET /approvals as `key`'s principal, page after page while the answer names a `nextCursor` (a page ends once its
 * calls reach 16 MiB): the last status, how many holds all pages had, and how many pages it took.
 */
async function approvalsListing(gateway: Gateway, key: string): Promise<{ status: number; holds: number; pages: number }> {
  let holds = 0;
  let cursor: string | undefined;
  for (let pages = 1; ; pages++) {
    const query = cursor === undefined ? '' : `?cursor=${encodeURIComponent(cursor)}`;
    const response = await fetch(`${gateway.base}/approvals${query}`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(ANSWER_DEADLINE_MS) });
    const body = (await response.json()) as { approvals?: unknown[]; nextCursor?: string };
    holds += body.approvals?.length ?? 0;
    cursor = body.nextCursor;
    if (response.status !== 200 || cursor === undefined) return { status: response.status, holds, pages };
  }
}

/**
 * alice holds HELD_CALLS calls with arguments of HELD_ARGUMENT_BYTES for an approver; mallory, who approves nothing,
 * lists GET /approvals 20 at a time over and over (each listing used to read every held call in full). Then the
 * approver lists: every hold, with its arguments.
 */
async function approvalListingFlood(gateway: Gateway, served: () => Promise<void>): Promise<Detail> {
  const alice = await openSession(gateway.url, bearer('alice'));
  const filler = 'h'.repeat(HELD_ARGUMENT_BYTES);
  let held = 0;
  for (let id = 1; id <= HELD_CALLS; id++) {
    const created = await post(gateway.url, toolCall(id, 'abuse__echo', { text: filler, n: id }, { task: { ttl: 600_000 } }), alice);
    if ((answerOf(created.text)?.result as { task?: { taskId?: string } } | undefined)?.task?.taskId === undefined) return `hold ${id} was not made: ${describe(created)}`;
    held++;
  }
  const statuses = new Map<string, number>();
  const rounds = size(25, 5);
  for (let round = 0; round < rounds; round++) {
    const answers = await Promise.all(Array.from({ length: 20 }, () => approvalsListing(gateway, LISTING_KEYS.mallory)));
    for (const answer of answers) {
      const key = answer.status === 200 ? `HTTP 200 with ${answer.holds === 0 ? 'no holds' : `${answer.holds} holds`}` : `HTTP ${answer.status}`;
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
    }
    if (round === Math.floor(rounds / 2)) await served();
  }
  const approver = await approvalsListing(gateway, LISTING_KEYS.approver);
  return `alice held ${held} calls of ${(HELD_ARGUMENT_BYTES / 1e6).toFixed(1)} MB; mallory's ${rounds * 20} listings, 20 at a time: ${[...statuses].map(([k, n]) => `${n}× ${k}`).join(', ')}; the approver's listing: HTTP ${approver.status} with ${approver.holds} holds in ${approver.pages} pages`;
}

// ---- tiny-keyed-task-flood (issue 39, finding 8) ---------------------------------------------------------------
// One principal floods tiny tasks under fresh idempotency keys, several at a time, on Redis. When the stored budget
// counted results only, each such task was free (≈2.6 KB of records, timeline, key and listings in Redis), and one
// principal filled Redis to 30× its budget. Now each task is charged TASK_OVERHEAD_BYTES: the flood is refused
// (503 + Retry-After) near its budget (memory store: at most budget / overhead tasks and those in flight), and what
// Redis holds for it stays within the budget plus the tasks in flight.

const FLOOD_BUDGET = size(4 * MiB, 256 * 1024);
const FLOOD_CONCURRENCY = 8;
const FLOOD_PREFIX = `taskgate-stress-flood-${process.pid}-${randomBytes(4).toString('hex')}`;
/** Past the budget: the tasks in flight when it filled (each charged after its check), each ending with its outcome. */
const FLOOD_SLACK = (FLOOD_CONCURRENCY + 2) * TASK_OVERHEAD_BYTES;

/** The most tasks the flood may get in: what the budget holds at TASK_OVERHEAD_BYTES each, and those in flight. */
const FLOOD_MOST_ACCEPTED = Math.ceil(FLOOD_BUDGET / TASK_OVERHEAD_BYTES) + FLOOD_CONCURRENCY;

function tinyKeyedTaskFlood(store: 'memory' | 'redis'): Scenario {
  return {
    name: `tiny-keyed-task-flood${store === 'redis' ? '-redis' : ''}`,
    expect: [/then: HTTP 503, error -32603: Your stored tasks and results fill tasks\.maxStoredBytesPerPrincipal.*\(Retry-After \d+\)/, /within the budget/],
    abuse: `one principal creates tiny tasks under fresh idempotency keys, ${FLOOD_CONCURRENCY} at a time, until refused (up to ${Math.ceil((20 * FLOOD_BUDGET) / TASK_OVERHEAD_BYTES)}), ${store} store`,
    bound:
      `tasks.maxStoredBytesPerPrincipal (${FLOOD_BUDGET / 1024} KiB) counts ${TASK_OVERHEAD_BYTES} bytes per task: the flood is refused within ${FLOOD_MOST_ACCEPTED} tasks` +
      (store === 'redis' ? `, Redis holds at most the budget + ${FLOOD_SLACK / 1024} KiB for it` : ''),
    ceilingBytes: size(400, 300) * MiB,
    upstream: 'stdio',
    config: {
      gateway: {
        auth: authConfig,
        tasks: { maxStoredBytesPerPrincipal: FLOOD_BUDGET },
        ...(store === 'redis' ? { store: { type: 'redis', url: flags['redis-url'], prefix: FLOOD_PREFIX } } : {}),
      },
    },
    run: async (gateway, served) => {
      const redis = store === 'redis' ? new Redis(flags['redis-url'] as string) : undefined;
      try {
        const before = redis === undefined ? undefined : await redisPrefixMemory(redis, FLOOD_PREFIX);
        const alice = await openSession(gateway.url, bearer('alice'));
        const most = Math.ceil((20 * FLOOD_BUDGET) / TASK_OVERHEAD_BYTES);
        const accepted: string[] = [];
        let refusal: string | undefined;
        for (let next = 0; next < most && refusal === undefined; next += FLOOD_CONCURRENCY) {
          const batch = Array.from({ length: FLOOD_CONCURRENCY }, (_, i) => next + i).map((n) =>
            post(gateway.url, toolCall(n + 1, 'abuse__echo', { text: `t${n}` }, { task: {} }), { ...alice, 'idempotency-key': `"flood-${n}"` }),
          );
          for (const created of await Promise.all(batch)) {
            const taskId = (answerOf(created.text)?.result as { task?: { taskId?: string } } | undefined)?.task?.taskId;
            if (taskId !== undefined) accepted.push(taskId);
            else refusal ??= `${describe(created)}${created.headers['retry-after'] !== undefined ? ` (Retry-After ${created.headers['retry-after']})` : ''}`;
          }
        }
        await served();
        // Every accepted task ends (an echo), so what Redis holds is what its TTL keeps.
        for (const taskId of accepted) await post(gateway.url, { jsonrpc: '2.0', id: `r-${taskId}`, method: 'tasks/result', params: { taskId } }, alice);
        const counted = accepted.length <= FLOOD_MOST_ACCEPTED;
        let held = '';
        if (redis !== undefined && before !== undefined) {
          const bytes = (await redisPrefixMemory(redis, FLOOD_PREFIX)).bytes - before.bytes;
          const within = bytes <= FLOOD_BUDGET + FLOOD_SLACK;
          await redisBytesUnder(FLOOD_PREFIX); // and the keys go
          held = `; Redis holds ${(bytes / 1024).toFixed(1)} KiB for them (${(bytes / Math.max(1, accepted.length)).toFixed(0)} bytes a task; ${within ? 'within the budget' : `OVER the budget of ${FLOOD_BUDGET / 1024} KiB`} + ${FLOOD_SLACK / 1024} KiB)`;
        }
        return `alice created ${accepted.length} tiny keyed tasks (${counted ? 'within the budget' : `OVER the ${FLOOD_MOST_ACCEPTED} the budget holds`}), then: ${refusal ?? 'never refused'}${held}`;
      } finally {
        redis?.disconnect();
      }
    },
  };
}

// ---- the scenarios --------------------------------------------------------------------------------------------

const scenarios: Scenario[] = [
  {
    name: 'stdio-huge-line',
    abuse: `a stdio upstream writes a ${size('600 MB', '40 MB')} result line (crashed readline at ~512 MB)`,
    bound: 'upstreams.*.maxMessageBytes (16 MiB): the call fails; a line past 16 × the bound restarts the child',
    ceilingBytes: 400 * MiB,
    upstream: 'stdio',
    expect: [/big_result: HTTP 200, error -?\d+: .*maxMessageBytes/, /afterwards: HTTP 200, result/],
    async run(gateway, served) {
      const session = await openSession(gateway.url);
      const answer = await post(gateway.url, toolCall(1, 'abuse__big_result', { bytes: size(600, 40) * 1_000_000 }), session);
      await served();
      // A line that long is taken for one that never ends: the child is restarted (with backoff) and serves again.
      let echo: Posted | undefined;
      for (let attempt = 0; attempt < 60; attempt++) {
        echo = await post(gateway.url, toolCall(2 + attempt, 'abuse__echo', { text: 'after' }), session);
        if (!/is unavailable/.test(echo.text ?? '')) break;
        await sleep(500);
      }
      return `big_result: ${describe(answer)}; echo on the same upstream afterwards: ${echo === undefined ? 'not sent' : describe(echo)}`;
    },
  },
  {
    name: 'stdio-huge-stderr',
    expect: [/stderr_flood: HTTP 200, result/],
    abuse: `a stdio upstream writes a ${size('600 MB', '40 MB')} stderr line`,
    bound: 'stderr lines are logged truncated, never buffered whole',
    ceilingBytes: 400 * MiB,
    upstream: 'stdio',
    async run(gateway, served) {
      const session = await openSession(gateway.url);
      const answer = await post(gateway.url, toolCall(1, 'abuse__stderr_flood', { bytes: size(600, 40) * 1_000_000 }), session);
      await served();
      return `stderr_flood: ${describe(answer)}`;
    },
  },
  {
    name: 'stdio-big-result',
    expect: [/all \d+ characters arrived/],
    abuse: `a legitimate ${size('200 MB', '20 MB')} result, with maxMessageBytes raised to allow it`,
    bound: 'maxMessageBytes 256 MiB (configured): the result passes; memory a small multiple of it',
    ceilingBytes: size(1_400, 400) * MiB,
    upstream: 'stdio',
    config: { abuse: { maxMessageBytes: 256 * MiB }, gateway: { listen: { maxBodyBytes: 4 * MiB } } },
    async run(gateway, served) {
      const session = await openSession(gateway.url);
      const bytes = size(200, 20) * 1_000_000;
      const answer = await post(gateway.url, toolCall(1, 'abuse__big_result', { bytes }), session);
      const text = (answerOf(answer.text)?.result as { content?: { text?: string }[] } | undefined)?.content?.[0]?.text;
      await served();
      return `big_result: HTTP ${answer.status}, ${text?.length === bytes ? `all ${bytes} characters arrived` : `text of ${text?.length} characters (expected ${bytes})`}`;
    },
  },
  ...(['streamable-http', 'sse'] as const).map(
    (upstream): Scenario => ({
      name: `${upstream === 'sse' ? 'sse' : 'http'}-endless-line`,
      expect: [/×2: HTTP 200, error .*maxMessageBytes.*; HTTP 200, error .*maxMessageBytes/],
      abuse: `a${upstream === 'sse' ? ' legacy SSE' : ' Streamable HTTP'} upstream's SSE data line never ends; two calls at once`,
      bound: 'upstreams.*.maxMessageBytes (16 MiB): the call fails, its stream is dropped',
      ceilingBytes: 400 * MiB,
      upstream,
      async run(gateway, served) {
        const session = await openSession(gateway.url);
        // Each call is awaited until it is answered (post's deadline catches one never answered), never raced against a
        // clock: on legacy SSE the second call's line waits behind the first on the one stream, and its answer comes
        // when the gateway closes that stream, after skipping RESYNC_FACTOR × the bound, however long a busy machine takes.
        const calls = [1, 2].map((id) =>
          post(gateway.url, toolCall(id, 'abuse__endless_line', {}), session).then(describe, (error: Error) => `no answer (${error.message})`),
        );
        const first = await calls[0];
        await served();
        const second = await calls[1];
        return `endless_line ×2: ${first}; ${second}`;
      },
    }),
  ),
  {
    name: 'big-arguments',
    expect: [/HTTP 503 \(Retry-After \d+\)/, /another principal's call: HTTP 200, result/],
    abuse: `one principal sends ${size(845, 40)} task calls with 4 MiB arguments to a tool that never answers`,
    bound: 'listen.maxInflightBytesPerPrincipal (64 MiB), listen.maxInflightBytes (256 MiB): past them 503 + Retry-After',
    ceilingBytes: 800 * MiB,
    upstream: 'stdio',
    config: { gateway: { auth: authConfig } },
    async run(gateway, served) {
      const session = await openSession(gateway.url, bearer('alice'));
      const filler = 'a'.repeat(4 * MiB - 4096);
      const statuses = new Map<string, number>();
      const open: http.IncomingMessage[] = [];
      const count = size(845, 40);
      for (let id = 1; id <= count; id += 20) {
        const batch = Array.from({ length: Math.min(20, count - id + 1) }, (_, k) =>
          post(gateway.url, toolCall(id + k, 'abuse__never_answers', { filler }, { task: { ttl: 60_000 } }), session, { read: false }),
        );
        for (const posted of await Promise.all(batch)) {
          const key = `HTTP ${posted.status}${posted.headers['retry-after'] !== undefined ? ` (Retry-After ${posted.headers['retry-after']})` : ''}`;
          statuses.set(key, (statuses.get(key) ?? 0) + 1);
          if (posted.response !== undefined) open.push(posted.response);
        }
      }
      await served();
      const other = await openSession(gateway.url, bearer('bob'));
      const bob = await post(gateway.url, toolCall(1, 'abuse__echo', { text: 'bob' }), other);
      for (const response of open) response.destroy();
      return `${[...statuses].map(([k, n]) => `${n}× ${k}`).join(', ')}; another principal's call: ${describe(bob)}`;
    },
  },
  {
    name: 'approval-listing-flood',
    expect: [/mallory's \d+ listings, 20 at a time: .*HTTP 200 with no holds/, new RegExp(`the approver's listing: HTTP 200 with ${HELD_CALLS} holds`)],
    abuse: `a principal who approves nothing lists GET /approvals 20 at a time, ${size(25, 5)} times, while ${size(15, 6)} held calls keep 3.9 MB arguments each (each listing read them all: 20 at once took 2.36 GB)`,
    bound: 'listings filter by caller before reading a call (none for a non-approver) and read their own page only; 2 at once per principal, 8 per replica, the rest 429 + Retry-After',
    ceilingBytes: size(600, 500) * MiB,
    upstream: 'stdio',
    config: {
      gateway: {
        auth: { ...authConfig, apiKeys: [...authConfig.apiKeys, { principal: 'approver', key: LISTING_KEYS.approver }, { principal: 'mallory', key: LISTING_KEYS.mallory }] },
        listen: { maxBodyBytes: 4 * MiB },
        tasks: { rules: [{ match: 'abuse__echo', mode: 'optional', approval: { approvers: ['approver'], timeoutMs: 600_000 } }] },
      },
    },
    run: approvalListingFlood,
  },
  ...(['streamable-http', 'stdio'] as const).map(
    (upstream): Scenario => ({
      name: `slow-reader-2025-${upstream === 'stdio' ? 'stdio' : 'http'}`,
      abuse: `a 2025 session never reads its POST stream while a ${upstream === 'stdio' ? 'shared stdio' : 'Streamable HTTP'} tool floods progress, ${size('60', '4')} s`,
      bound: `sse.maxBufferedBytesPerStream (8 MiB): progress coalesces; ${upstream === 'stdio' ? 'the call fails at the bound' : 'the upstream response is paused'}`,
      ceilingBytes: 400 * MiB,
      upstream,
      async run(gateway, served) {
        const session = await openSession(gateway.url);
        const posted = await post(gateway.url, toolCall(1, 'abuse__progress_flood', { count: 10_000_000, size: 2_000 }, { _meta: { progressToken: 'p1' } }), session, { read: false });
        await sleep(size(60_000, 4_000));
        await served();
        posted.response?.destroy();
        return `progress_flood unread: HTTP ${posted.status}`;
      },
    }),
  ),
  {
    name: 'slow-reader-2026-http',
    abuse: `a 2026-07-28 request never reads its response while the tool floods progress, ${size('30', '4')} s`,
    bound: 'sse.maxBufferedBytesPerStream (8 MiB): progress coalesces, the upstream response is paused',
    ceilingBytes: 400 * MiB,
    upstream: 'streamable-http',
    async run(gateway, served) {
      const call = rev2026Call(1, 'abuse__progress_flood', { count: 10_000_000, size: 2_000 }, { progressToken: 'p1' });
      const posted = await post(gateway.url, call.body, call.headers, { read: false });
      await sleep(size(30_000, 4_000));
      await served();
      posted.response?.destroy();
      return `progress_flood unread: HTTP ${posted.status}`;
    },
  },
  {
    name: 'stdio-unasked-answers',
    abuse: `a stdio upstream answers ${size('2,000', '200')} calls each with a wrong id, a task nobody asked for, a cancel of the gateway's own request, twice, and followed by an unsolicited response (issue 31)`,
    bound: 'every answer is matched to its call: those answers fail their call at once (-32603 naming the upstream), the others keep their first answer; nothing is left waiting; 1,024 ids remembered per connection',
    ceilingBytes: 400 * MiB,
    upstream: 'stdio',
    expect: ['wrong_id', 'task_result', 'cancel_own'].map((tool) => new RegExp(`${tool}: (\\d+) of \\1 failed with the violation`)).concat(
      ['answer_twice', 'unsolicited'].map((tool) => new RegExp(`${tool}: 0 of (\\d+) failed with the violation, \\1 answered`)),
    ),
    async run(gateway, served) {
      const session = await openSession(gateway.url);
      const count = size(2_000, 200);
      const lines: string[] = [];
      let id = 0;
      for (const tool of ['wrong_id', 'task_result', 'cancel_own', 'answer_twice', 'unsolicited']) {
        let failed = 0;
        let answered = 0;
        // One at a time: on a channel all calls share, a wrong-id answer is attributed only with one call waiting.
        for (let i = 0; i < count; i++) {
          const answer = answerOf((await post(gateway.url, toolCall(++id, `abuse__${tool}`, { text: 'x' }), session)).text);
          if (answer?.error?.code === -32603 && /Upstream 'abuse' broke the protocol/.test(answer.error.message)) failed++;
          else if (answer?.result !== undefined) answered++;
        }
        lines.push(`${tool}: ${failed} of ${count} failed with the violation, ${answered} answered`);
      }
      await served();
      return lines.join('; ');
    },
  },
  {
    name: 'unlisted-name-flood',
    abuse: `${size('20,000', '2,000')} calls, 50 at a time, of names the upstream never listed: spellings of its excluded tool (case, trailing space, full-width) and new names each time (issue 31)`,
    bound: 'only names the upstream listed are forwarded; a miss re-reads its lists at most once per 2 s (MISS_REFRESH_INTERVAL_MS)',
    ceilingBytes: 400 * MiB,
    upstream: 'stdio',
    // The abusive fixture answers any name it does not know with a tool result: a forwarded name would show as one.
    config: { abuse: { tools: { exclude: ['echo'] } } },
    expect: [/^\d+ of \d+ answered by the gateway as unknown tools, 0 reached the upstream/],
    async run(gateway, served) {
      const session = await openSession(gateway.url);
      const total = size(20_000, 2_000);
      const spellings = ['ECHO', 'echo ', ' echo', 'Echo', 'ｅｃｈｏ', 'echo'];
      let refused = 0;
      let forwarded = 0;
      for (let sent = 0; sent < total; sent += 50) {
        const answers = await Promise.all(
          Array.from({ length: 50 }, (_, k) => {
            const n = sent + k;
            const name = `abuse__${n % 2 === 0 ? spellings[n % spellings.length] : `unlisted_${n}`}`;
            return post(gateway.url, toolCall(n + 1, name, { text: 'x' }), session);
          }),
        );
        for (const answer of answers) {
          const parsed = answerOf(answer.text);
          if (parsed?.error?.code === -32602 && /^Unknown tool: abuse__/.test(parsed.error.message)) refused++;
          else if (parsed?.result !== undefined) forwarded++;
        }
        if (sent === 0) await served();
      }
      return `${refused} of ${total} answered by the gateway as unknown tools, ${forwarded} reached the upstream`;
    },
  },
  {
    name: 'auth-server-down',
    abuse: `the authorization server of an upstream with auth.clientCredentials stops answering once its token expired; ${size('5,000', '500')} calls to that upstream, 50 at a time`,
    bound: 'each token request bounded by auth.timeoutMs; one in flight per upstream (single flight), at most 8 per gateway, a failure remembered 5 s: calls fail with an error naming the upstream, other upstreams serve',
    ceilingBytes: 400 * MiB,
    upstream: 'streamable-http',
    config: {
      get abuse() {
        return { auth: { clientCredentials: { clientId: 'taskgate', clientSecret: STRESS_CLIENT_SECRET, tokenUrl: `${stressAuthServer().issuer}/token` }, timeoutMs: size(2_000, 500) } };
      },
    },
    expect: [/^\d+ of \d+ failed naming the upstream's credential, 0 answered, token requests: \d+$/],
    async run(gateway, served) {
      const authServer = stressAuthServer();
      const session = await openSession(gateway.url);
      // The gateway's token (4 s) is used until 1 s before it expires: wait it out, then the server hangs.
      await sleep(4_000);
      await authServer.setMode('slow');
      authServer.resetCounts();
      const total = size(5_000, 500);
      let failed = 0;
      let answered = 0;
      for (let sent = 0; sent < total; sent += 50) {
        const answers = await Promise.all(Array.from({ length: 50 }, (_, k) => post(gateway.url, toolCall(sent + k + 1, 'abuse__echo', { text: 'x' }), session)));
        for (const answer of answers) {
          const parsed = answerOf(answer.text);
          if (parsed?.error !== undefined && /abuse/.test(parsed.error.message) && /credential/.test(parsed.error.message)) failed++;
          else if (parsed?.result !== undefined) answered++;
        }
        if (sent === 0) await served();
      }
      const requests = authServer.tokenCounts().total;
      await authServer.setMode('up');
      return `${failed} of ${total} failed naming the upstream's credential, ${answered} answered, token requests: ${requests}`;
    },
  },
  {
    name: 'webhook-endpoint-down',
    abuse: `a webhook endpoint that never answers, beside a healthy one, both told of every task event; ${size('5,000', '300')} task calls, 50 at a time, the next 50 once the healthy endpoint has the last ones' events`,
    bound: `webhookDelivery.maxQueuedPerEndpoint (${size('10,000', '200')}): the stuck endpoint's queue, the newest dropped past it; its tries in flight bounded by webhookDelivery.concurrency and timeoutMs: the healthy endpoint and the calls go on`,
    ceilingBytes: 400 * MiB,
    upstream: 'stdio',
    config: {
      get gateway() {
        const { stuck, healthy } = stressReceivers();
        const events = ['task.created', 'task.completed', 'task.failed', 'task.cancelled'];
        return {
          webhooks: [
            { id: 'stuck', url: stuck.url, secret: stuck.secret, events },
            { id: 'healthy', url: healthy.url, secret: healthy.secret, events },
          ],
          webhookDelivery: { timeoutMs: size(10_000, 2_000), maxQueuedPerEndpoint: size(10_000, 200) },
        };
      },
    },
    expect: [/^all \d+ calls answered; the healthy endpoint acknowledged all \d+ events/],
    async run(gateway, served) {
      const { stuck, healthy } = stressReceivers();
      const session = await openSession(gateway.url);
      const total = size(5_000, 300);
      let answered = 0;
      for (let sent = 0; sent < total; sent += 50) {
        const answers = await Promise.all(Array.from({ length: 50 }, (_, k) => post(gateway.url, toolCall(sent + k + 1, 'ok__echo', { text: 'x' }, { task: { ttl: 60_000 } }), session)));
        answered += answers.filter((answer) => answerOf(answer.text)?.result !== undefined).length;
        if (sent === 0) await served();
        // Paced by the healthy endpoint: each batch's events (a created and an ended one per task) acknowledged there
        // before the next batch, so that its own queue bound is never what it meets (a burst faster than its
        // webhookDelivery.concurrency drains would fill it, stuck endpoint or not); the stuck one's queue fills.
        const deadline = Date.now() + ANSWER_DEADLINE_MS;
        while (healthy.acknowledged().size < 2 * (sent + 50) && Date.now() < deadline) await sleep(20);
      }
      const events = 2 * total;
      const metrics = await fetch(`${gateway.base}/metrics`).then((r) => r.text());
      const dropped = /taskgate_webhook_dropped_total\{endpoint="stuck",reason="queue_full"\} (\d+)/.exec(metrics)?.[1] ?? '0';
      const calls = answered === total ? `all ${total} calls answered` : `${answered} of ${total} calls answered`;
      const acked = healthy.acknowledged().size;
      const healthyWord = acked === events ? `acknowledged all ${events} events` : `acknowledged ${acked} of ${events} events`;
      return `${calls}; the healthy endpoint ${healthyWord}; the stuck one holds ${stuck.open()} tries open, ${dropped} of its deliveries dropped at its queue bound`;
    },
  },
  {
    name: 'anonymous-task-flood',
    abuse: `without auth, ${size(1_100, 150)} task calls from ${size(110, 15)} sessions to a tool that never answers (each session used to be its own principal)`,
    bound: `tasks.defaults.maxTasksPerPrincipal (${size('1,000', '100')}): all anonymous callers share it; past it the call is refused`,
    ceilingBytes: 400 * MiB,
    upstream: 'stdio',
    config: { gateway: { tasks: { defaults: { maxTasksPerPrincipal: size(1_000, 100) } } } },
    async run(gateway, served) {
      const outcomes = new Map<string, number>();
      const open: http.IncomingMessage[] = [];
      const sessions = size(110, 15);
      for (let s = 0; s < sessions; s++) {
        const session = await openSession(gateway.url);
        const answers = await Promise.all(
          Array.from({ length: 10 }, (_, k) => post(gateway.url, toolCall(k + 1, 'abuse__never_answers', {}, { task: { ttl: 60_000 } }), session)),
        );
        for (const answer of answers) {
          const parsed = answerOf(answer.text);
          const key = parsed?.error !== undefined ? `refused (${parsed.error.code}: ${parsed.error.message.slice(0, 60)}…)` : parsed?.result !== undefined ? 'task created' : `HTTP ${answer.status}`;
          outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
          if (answer.response !== undefined) open.push(answer.response);
        }
      }
      await served();
      return [...outcomes].map(([k, n]) => `${n}× ${k}`).join(', ');
    },
    expect: [new RegExp(`^${size(1_000, 100)}× task created, \\d+× refused`)],
  },
  {
    name: 'idle-sockets',
    abuse: `${size(1_024, 128)} idle keep-alive sockets from 4 loopback addresses (one GET /healthz each)`,
    bound: 'listen.maxConnections: idle keep-alive sockets are reclaimed near the cap; listen.maxConnectionsPerAddress',
    ceilingBytes: 400 * MiB,
    upstream: 'stdio',
    config: { gateway: { listen: { maxConnections: size(1_024, 128) } } },
    async run(gateway, served) {
      const port = Number(new URL(gateway.url).port);
      const sockets: net.Socket[] = [];
      let closedByGateway = 0;
      const count = size(1_024, 128);
      for (let i = 0; i < count; i++) {
        const socket = net.connect({ host: '127.0.0.1', port, localAddress: `127.0.0.${2 + (i % 4)}` });
        socket.on('error', () => undefined);
        socket.on('close', () => closedByGateway++);
        socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n');
        sockets.push(socket);
      }
      await Promise.all(sockets.map((socket) => new Promise((r) => (socket.once('data', r), socket.once('close', r)))));
      await served();
      const reclaimed = closedByGateway;
      for (const socket of sockets) socket.destroy();
      return `${count} idle sockets held; ${reclaimed} closed by the gateway by the time a new client was served`;
    },
  },
  {
    name: 'session-churn',
    abuse: `${size(2_000, 200)} 2025 sessions, each calling an HTTP upstream once and never ending (every session used to keep its own upstream connection, and upstream session, until it expired)`,
    bound: `upstreams.*.maxSessions (${size(64, 16)} here): at the bound the least recently used idle upstream session is closed`,
    ceilingBytes: 400 * MiB,
    upstream: 'streamable-http',
    // sessions.maxPerPrincipal off: all of them are one anonymous principal here, and it would stop them at 1,000.
    config: { abuse: { maxSessions: size(64, 16) }, gateway: { sessions: { maxPerPrincipal: 0 } } },
    async run(gateway, served) {
      const outcomes = new Map<string, number>();
      for (let s = 0; s < size(2_000, 200); s++) {
        const session = await openSession(gateway.url);
        const answer = answerOf((await post(gateway.url, toolCall(1, 'abuse__echo', { text: `session ${s}` }), session)).text);
        const key = answer?.result !== undefined ? 'answered' : `refused (${answer?.error?.message.slice(0, 60) ?? 'no answer'})`;
        outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
      }
      await served();
      const ready = (await (await fetch(`${gateway.base}/readyz`)).json()) as { upstreams?: { name: string; sessions?: number }[] };
      const held = ready.upstreams?.find((u) => u.name === 'abuse')?.sessions;
      return `${[...outcomes].map(([k, n]) => `${n}× ${k}`).join(', ')}; upstream sessions held at the end: ${held}`;
    },
    expect: [new RegExp(`^${size(2_000, 200)}× answered; upstream sessions held at the end: (\\d|[1-5]\\d|6[0-4])$`)],
  },
  {
    name: 'stream-flood',
    expect: [/HTTP 429/, /bob's: HTTP 200/],
    abuse: `one principal opens ${size(1_000, 150)} sessions with a GET stream each`,
    bound: 'sessions.maxStreamsPerPrincipal (100): more streams get 429; other principals unaffected',
    ceilingBytes: 400 * MiB,
    upstream: 'stdio',
    config: { gateway: { auth: authConfig } },
    async run(gateway, served) {
      const statuses = new Map<number, number>();
      const streams: http.IncomingMessage[] = [];
      const count = size(1_000, 150);
      for (let i = 0; i < count; i += 25) {
        const opened = await Promise.all(
          Array.from({ length: Math.min(25, count - i) }, async () => {
            try {
              const headers = await openSession(gateway.url, bearer('alice'));
              return await getStream(gateway.url, headers);
            } catch (error) {
              return { status: -1, error };
            }
          }),
        );
        for (const stream of opened) {
          statuses.set(stream.status, (statuses.get(stream.status) ?? 0) + 1);
          if ('response' in stream && stream.response !== undefined) streams.push(stream.response);
        }
      }
      await served();
      const bob = await getStream(gateway.url, await openSession(gateway.url, bearer('bob')));
      bob.response?.destroy();
      for (const stream of streams) stream.destroy();
      return `alice's GET streams: ${[...statuses].map(([status, n]) => `${n}× ${status === -1 ? 'refused before the stream' : `HTTP ${status}`}`).join(', ')}; bob's: HTTP ${bob.status}`;
    },
  },
  ...(['memory', 'redis'] as const).map(
    (store): Scenario => ({
      name: `stored-results${store === 'redis' ? '-redis' : ''}`,
      expect: [
        /then: HTTP 503, error -32603: Your stored tasks and results fill tasks\.maxStoredBytesPerPrincipal.*\(Retry-After \d+\)/,
        /bob's task: served/,
        ...(store === 'redis' ? [/within the budget/] : []),
      ],
      abuse: `one principal stores results of ${RESULT_BYTES / MiB} MiB with a 24 h TTL until the budget (up to ${STORED_ATTEMPTS}), ${store} store`,
      bound: `tasks.maxStoredBytesPerPrincipal (${STORED_BUDGET / MiB} MiB): past it new tasks get 503 + Retry-After; another principal is served`,
      ceilingBytes: size(500, 300) * MiB,
      upstream: 'stdio',
      config: {
        gateway: {
          auth: authConfig,
          tasks: { maxStoredBytesPerPrincipal: STORED_BUDGET },
          ...(store === 'redis' ? { store: { type: 'redis', url: flags['redis-url'], prefix: STORED_PREFIX } } : {}),
        },
      },
      run: (gateway, served) => storeUntilBudget(gateway, served, store === 'redis' ? STORED_PREFIX : undefined),
    }),
  ),
  ...(['memory', 'redis'] as const).map(tinyKeyedTaskFlood),
];

function getStream(url: string, headers: Record<string, string>): Promise<{ status: number; response?: http.IncomingMessage }> {
  return new Promise((resolveGet, reject) => {
    const request = http.request(url, { method: 'GET', agent: false, headers: { accept: 'text/event-stream', ...headers } }, (response) => {
      if (response.statusCode !== 200) response.resume();
      resolveGet({ status: response.statusCode ?? 0, response: response.statusCode === 200 ? response : undefined });
    });
    request.on('error', reject);
    request.end();
  });
}

// ---- running them ---------------------------------------------------------------------------------------------

/** The built gateway (build.ts), or tsx on the sources with --tsx or when the build failed. */
async function gatewayCommand(): Promise<{ command: string; args: string[]; how: string }> {
  if (!flags.tsx) {
    const built = await builtCli();
    if (built.cli !== undefined) return { command: process.execPath, args: [built.cli], how: built.how };
    if (process.env.TEST_SPAWN_BUILD === '1') throw new Error(built.failure ?? built.how);
    console.warn(`! ${built.how}; running the gateway through tsx:\n${built.failure ?? ''}`);
  }
  return { command: process.execPath, args: ['--import', 'tsx', join(ROOT, 'src/cli.ts')], how: 'node --import tsx src/cli.ts' };
}

function fixtureEntry(transport: Scenario['upstream'], url?: string): Record<string, unknown> {
  if (transport === 'stdio') return { transport, command: process.execPath, args: [...nodeArgs(FIXTURE), '--transport', 'stdio'], cwd: ROOT };
  return { transport, url };
}

/** Peak RSS of the gateway process (VmHWM: the kernel's own high-water mark), or undefined if it is gone. */
function peakRss(pid: number): number | undefined {
  try {
    const m = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m?.[1] !== undefined ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** A new client, as a host would connect: initialize, list tools, call the healthy upstream's echo. */
async function newClientServed(url: string, auth: Record<string, string>): Promise<void> {
  const client = new Client({ name: 'stress-probe', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth } });
  try {
    await client.connect(transport, { timeout: 20_000 });
    await client.listTools(undefined, { timeout: 20_000 });
    const result = await client.callTool({ name: 'ok__echo', arguments: { text: 'still here' } }, undefined, { timeout: 20_000 });
    const text = (result.content as { text?: string }[])[0]?.text;
    if (text !== 'still here') throw new Error(`echo answered ${JSON.stringify(result).slice(0, 200)}`);
  } finally {
    await client.close().catch(() => undefined);
  }
}

interface Row {
  name: string;
  abuse: string;
  bound: string;
  baseline?: number;
  peak?: number;
  ceiling: number;
  alive: boolean;
  served: string;
  detail: string;
  ok: boolean;
}

async function runScenario(scenario: Scenario, command: Awaited<ReturnType<typeof gatewayCommand>>): Promise<Row> {
  const row: Row = { name: scenario.name, abuse: scenario.abuse, bound: scenario.bound, ceiling: scenario.ceilingBytes, alive: false, served: 'not probed', detail: '', ok: false };
  const procs: Proc[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'taskgate-stress-'));
  try {
    let url: string | undefined;
    if (scenario.upstream !== 'stdio') {
      const fixture = startProc('abusive fixture', process.execPath, [...nodeArgs(FIXTURE), '--transport', scenario.upstream, '--port', '0'], { cwd: ROOT });
      procs.push(fixture);
      url = await waitListening(fixture, 20_000);
    }
    const port = await freePort();
    const extra = scenario.config?.gateway ?? {};
    const config = {
      ...extra,
      listen: { host: '127.0.0.1', port, path: '/mcp', ...((extra.listen as object | undefined) ?? {}) },
      store: extra.store ?? { type: 'memory' },
      log: { level: 'error' },
      upstreams: { abuse: { ...fixtureEntry(scenario.upstream, url), ...scenario.config?.abuse }, ok: fixtureEntry('stdio') },
    };
    const configPath = join(dir, 'taskgate.yaml');
    writeFileSync(configPath, stringify(config));
    const gatewayProc = startProc('taskgate', command.command, [...command.args, 'serve', '--config', configPath], { cwd: ROOT, dropEnvPrefix: 'TASKGATE_' });
    procs.push(gatewayProc);
    const base = `http://127.0.0.1:${port}`;
    await waitHttp(gatewayProc, `${base}/readyz`, 30_000, 200);
    const gateway: Gateway = { url: `${base}/mcp`, base, proc: gatewayProc };
    const auth = 'auth' in extra ? bearer('alice') : {};
    const probeAuth = 'auth' in extra ? bearer('bob') : {};
    await newClientServed(gateway.url, auth); // warm: both upstreams up, code paths loaded
    row.baseline = rssBytes(gatewayProc.pid);
    let served: string | undefined;
    const probe = async (): Promise<void> => {
      try {
        await newClientServed(gateway.url, probeAuth);
        served = 'yes';
      } catch (error) {
        served = `no: ${(error as Error).message.slice(0, 160)}`;
      }
    };
    try {
      row.detail = await scenario.run(gateway, probe);
    } catch (error) {
      row.detail = `abuse failed: ${(error as Error).message.slice(0, 300)}`;
    }
    if (served === undefined) await probe();
    row.served = served ?? 'no';
    row.peak = peakRss(gatewayProc.pid);
    row.alive = !gatewayProc.exited();
    if (!row.alive) row.detail += ` | gateway exited: ${gatewayProc.tail().slice(-600)}`;
    const unmet = (scenario.expect ?? []).filter((pattern) => !pattern.test(row.detail));
    if (unmet.length > 0) row.detail += ` | expected to see ${unmet.map(String).join(' and ')}`;
    row.ok = row.alive && row.served === 'yes' && row.peak !== undefined && row.peak <= row.ceiling && unmet.length === 0;
  } catch (error) {
    row.detail = `setup failed: ${(error as Error).message.slice(0, 500)}`;
  } finally {
    for (const proc of procs.reverse()) await proc.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return row;
}

const mb = (bytes: number | undefined): string => (bytes === undefined ? '?' : `${(bytes / MiB).toFixed(0)} MB`);

async function main(): Promise<void> {
  const only = flags.only?.split(',').map((s) => s.trim());
  const chosen = scenarios.filter((s) => only === undefined || only.includes(s.name));
  if (chosen.length === 0) throw new Error(`no scenario named ${flags.only}; there are: ${scenarios.map((s) => s.name).join(', ')}`);
  const command = await gatewayCommand();
  authServer = await startAuthServer({ clients: { taskgate: { secret: STRESS_CLIENT_SECRET } }, expiresInSeconds: 4 });
  webhookReceivers = { stuck: await startWebhookReceiver({ mode: 'never' }), healthy: await startWebhookReceiver({ mode: 'ok' }) };
  console.log(`stress${smoke ? ' (smoke sizes)' : ''}: ${chosen.length} scenarios, gateway run as ${command.how}, memory store (unless a name ends in -redis), loopback only\n`);
  const rows: Row[] = [];
  for (const scenario of chosen) {
    const started = Date.now();
    const row = await runScenario(scenario, command);
    rows.push(row);
    console.log(`${row.ok ? 'ok  ' : 'FAIL'} ${row.name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    console.log(`     abuse:  ${row.abuse}`);
    console.log(`     bound:  ${row.bound}`);
    console.log(`     RSS:    ${mb(row.baseline)} before, peak ${mb(row.peak)} (ceiling ${mb(row.ceiling)}); alive: ${row.alive ? 'yes' : 'NO'}; new client served: ${row.served}`);
    console.log(`     saw:    ${row.detail}\n`);
  }
  const failed = rows.filter((row) => !row.ok);
  console.log(`stress: ${rows.length - failed.length} of ${rows.length} scenarios held${failed.length > 0 ? `; failed: ${failed.map((row) => row.name).join(", ")}` : ""}`);
  process.exitCode = failed.length === 0 ? 0 : 1;
  await authServer.close();
  await Promise.all([webhookReceivers.stuck.close(), webhookReceivers.healthy.close()]);
}

await main();
