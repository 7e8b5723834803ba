// Load across replicas with faults: 1,000 tasks over 3 gateway replicas sharing a Redis of the test's own, every
// request to a random replica, one replica killed (kill -9) halfway through, and Redis restarted during the run.
// Every acknowledged task must end terminal and readable, none run twice upstream, none lost. Half the clients
// speak 2026-07-28 (sessionless), half 2025-11-25 (sessions, whose requests also go to any replica); half of
// those block on tasks/result at once (woken by the task's events), the others poll tasks/get first.
// Loopback only; the request rate, the requests in flight and every wait are bounded. Figures are logged, not
// asserted.
// One file because it is one test: its clients, the kill and the Redis restart are closures over one run's state (the
// tracked tasks, the failures, when each fault happened), which its final checks read.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { Agent, request as httpRequest } from 'undici';
import { spawnFixture, spawnGateway, type FixtureChild, type GatewayChild } from '../fixtures/spawn.js';
import { fixtureExecutions, type Json } from '../helpers/harness.js';
import { rev2026Request, sseMessages, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';
import { REV2025_PROTOCOL, rev2025Headers } from '../helpers/session-wire.js';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server.js';

const TASKS = 1000;
const REPLICAS = 3;
/** Creations are spread evenly over this window (100 per second). */
const CREATE_WINDOW_MS = 10_000;
/** The victim replica is killed once this many creations have been started. */
const KILL_AFTER = TASKS / 2;
/** Redis goes down this long after the kill (while the victim's leases run out), and stays down this long (plus its restart). */
const REDIS_STOP_AFTER_KILL_MS = 500;
const REDIS_DOWN_MS = 1000;
/** Errors of requests overlapping the outage until this long after Redis is back are the outage's. */
const REDIS_RECONNECT_GRACE_MS = 3000;
const LEASE_MS = 1000;
const POLL_INTERVAL_MS = 500;
const RETRY_PAUSE_MS = 200;
/** Requests in flight at once, over every client of the test; blocking tasks/result waits have their own bound. */
const MAX_IN_FLIGHT = 32;
const MAX_WAITING = 64;
const REQUEST_TIMEOUT_MS = 10_000;
/** How long after the last creation every acknowledged task has to become terminal and be read. */
const SETTLE_MS = 30_000;
const CREATE_ATTEMPTS = 5;
const REV2025_SESSIONS = 6;
const LOST = /The gateway lost the call: replica \S+ stopped while running it/;

type Era = 'modern' | 'legacy';

interface Replica {
  index: number;
  child: GatewayChild;
  url: string;
  alive: boolean;
}

/** One task as its client sees it. */
interface Tracked {
  era: Era;
  label: string;
  seconds: number;
  taskId: string;
  /** The replica that acknowledged the creation (and runs the upstream call). */
  createdOn: number;
  session: string | undefined;
  /** 2025-11-25 clients of every other task block on tasks/result at once instead of polling tasks/get first. */
  waits: boolean;
  /** The last tasks/get answer; terminal once settled. */
  task: Json | undefined;
  /** What the task's result says, once read (completed tasks). */
  result: Json | undefined;
  /** The JSON-RPC error tasks/result answered (failed 2025-11-25 tasks). */
  resultError: string | undefined;
}

/** A request that did not get a usable answer. */
interface Failure {
  era: Era;
  method: string;
  replica: number;
  sentAt: number;
  endedAt: number;
  /** `network: …`, `http 404: …`, `rpc -32603: …` */
  what: string;
  label: string;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  result: Json | undefined;
  error: { code: number; message: string } | undefined;
}

/** At most `limit` callers at once, the others wait in order. */
class Gate {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly limit: number) {}
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.active++;
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}

test('1,000 tasks over 3 replicas, random replica per request, kill -9 of one and a Redis restart: every acknowledged task terminal and readable, none run twice, none lost', { timeout: 120_000 }, async () => {
  const started = Date.now();
  const prefix = `taskgate-load-${process.pid}-${randomBytes(4).toString('hex')}`;
  const agent = new Agent({ connections: MAX_IN_FLIGHT + MAX_WAITING, keepAliveTimeout: 10_000 });
  const gate = new Gate(MAX_IN_FLIGHT);
  const waitGate = new Gate(MAX_WAITING);
  let redis: OwnRedis | undefined;
  let fixture: FixtureChild | undefined;
  const replicas: Replica[] = [];

  const tracked: Tracked[] = [];
  const refused: { era: Era; label: string; why: string }[] = [];
  const failures: Failure[] = [];
  /** Errors thrown by the clients themselves (a malformed answer): reported after the run, not left unhandled. */
  const problems: string[] = [];
  /** Every label a creation was sent for, acknowledged or not. */
  const labelsSent = new Set<string>();
  let victim: Replica | undefined;
  let killedAt = Number.POSITIVE_INFINITY;
  let redisStoppedAt = Number.POSITIVE_INFINITY;
  let redisBackAt = Number.POSITIVE_INFINITY;
  let creating = true;
  let settleDeadline = Number.POSITIVE_INFINITY;

  try {
    redis = await startOwnRedis();
    const redisUrl = redis.url;
    fixture = await spawnFixture({ transport: 'streamable-http' });
    const upstreamUrl = fixture.url as string;
    const children = await Promise.all(
      Array.from({ length: REPLICAS }, () =>
        spawnGateway({
          config: {
            store: { type: 'redis', url: redisUrl, prefix },
            upstreams: { fx: { transport: 'streamable-http', url: upstreamUrl } },
            tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: POLL_INTERVAL_MS, concurrency: 0, maxTasksPerPrincipal: 0 } },
            replicas: { leaseMs: LEASE_MS, drainTimeoutMs: 0 },
          },
        }),
      ),
    );
    children.forEach((child, index) => replicas.push({ index, child, url: child.url, alive: true }));

    /** A random replica: any of them while the load runs (clients do not know which one died), live ones after. */
    const pick = (not?: number): Replica => {
      const pool = replicas.filter((r) => r.index !== not && (creating || r.alive));
      return pool[Math.floor(Math.random() * pool.length)] as Replica;
    };

    /** One POST, JSON or SSE answer; throws on network errors and timeouts. */
    const post = (url: string, body: Json, headers: Record<string, string>, through = gate): Promise<Answer> =>
      through.run(async () => {
        const answer = await httpRequest(url, {
          method: 'POST',
          headers,
          body: JSON.stringify(body),
          dispatcher: agent,
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        const text = await answer.body.text();
        const sse = String(answer.headers['content-type'] ?? '').includes('text/event-stream');
        let messages: Json[];
        try {
          messages = sse ? sseMessages(text) : text.trim() === '' ? [] : [JSON.parse(text) as Json];
        } catch {
          messages = [{ error: { code: 0, message: `unparsable answer: ${text.slice(0, 200)}` } }];
        }
        const response = messages.find((m) => m.id === body.id && ('result' in m || 'error' in m)) ?? messages.find((m) => 'error' in m) ?? {};
        return { status: answer.statusCode, headers: answer.headers, result: response.result as Json | undefined, error: response.error as Answer['error'] };
      });

    let ids = 0;
    /**
     * A request of either era to `replica`: its result, the JSON-RPC error `answers` accepts as the answer, or why
     * there is neither (also recorded in `failures`).
     */
    const send = async (
      era: Era,
      replica: Replica,
      method: string,
      params: Json,
      label: string,
      options: { session?: string | undefined; answers?: RegExp; through?: Gate } = {},
    ): Promise<{ result: Json } | { error: string } | { failure: string }> => {
      const sentAt = Date.now();
      let what: string;
      try {
        let answer: Answer;
        if (era === 'modern') {
          const { body, headers } = rev2026Request(method, params, { capabilities: TASKS_CAPABILITIES });
          answer = await post(replica.url, body, headers, options.through);
        } else {
          answer = await post(replica.url, { jsonrpc: '2.0', id: `l${++ids}`, method, params }, rev2025Headers(options.session as string), options.through);
        }
        if (answer.status === 200 && answer.result !== undefined) return { result: answer.result };
        if (answer.status === 200 && answer.error !== undefined && options.answers?.test(answer.error.message)) return { error: answer.error.message };
        what = answer.error !== undefined
          ? `${answer.status === 200 ? 'rpc' : `http ${answer.status} rpc`} ${answer.error.code}: ${answer.error.message}`
          : `http ${answer.status}: no result`;
      } catch (error) {
        const cause = (error as { cause?: { code?: string } }).cause?.code;
        what = `network: ${(error as Error).name} ${(error as { code?: string }).code ?? cause ?? ''} ${(error as Error).message}`.trim();
      }
      failures.push({ era, method, replica: replica.index, sentAt, endedAt: Date.now(), what, label });
      return { failure: what };
    };

    // ---- 2025-11-25 sessions, each initialized on a random replica ----
    const sessions: string[] = [];
    for (let i = 0; i < REV2025_SESSIONS; i++) {
      const replica = pick();
      const init = await post(
        replica.url,
        { jsonrpc: '2.0', id: `init-${i}`, method: 'initialize', params: { protocolVersion: REV2025_PROTOCOL, capabilities: {}, clientInfo: { name: `load-${i}`, version: '1.0.0' } } },
        { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      );
      const session = init.headers['mcp-session-id'];
      assert.equal(typeof session, 'string', `initialize on replica ${replica.index}: ${JSON.stringify(init)}`);
      assert.equal(init.result?.protocolVersion, REV2025_PROTOCOL);
      const initialized = await gate.run(() =>
        httpRequest(replica.url, {
          method: 'POST',
          headers: rev2025Headers(session as string),
          body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
          dispatcher: agent,
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        }),
      );
      await initialized.body.dump();
      assert.equal(initialized.statusCode, 202);
      sessions.push(session as string);
    }

    /** Creates the task (a fresh label per attempt: a refused creation was never acknowledged). */
    const create = async (i: number): Promise<Tracked | undefined> => {
      const era: Era = i % 2 === 0 ? 'modern' : 'legacy';
      const session = era === 'legacy' ? sessions[Math.floor(i / 2) % REV2025_SESSIONS] : undefined;
      const seconds = Math.round((0.2 + Math.random() * 1.3) * 100) / 100;
      let not: number | undefined;
      for (let attempt = 0; attempt < CREATE_ATTEMPTS; attempt++) {
        const label = attempt === 0 ? `load-${i}` : `load-${i}-again-${attempt}`;
        const replica = pick(not);
        labelsSent.add(label);
        const args = { seconds, label };
        const answer = era === 'modern'
          ? await send(era, replica, 'tools/call', { name: 'slow_compute', arguments: args }, label)
          : await send(era, replica, 'tools/call', { name: 'slow_compute', arguments: args, task: { ttl: 600_000 } }, label, { session });
        if (!('result' in answer)) {
          refused.push({ era, label, why: 'failure' in answer ? answer.failure : answer.error });
          not = replica.index;
          await sleep(RETRY_PAUSE_MS);
          continue;
        }
        const taskId = era === 'modern' ? (answer.result.resultType === 'task' ? answer.result.taskId : undefined) : (answer.result.task as Json | undefined)?.taskId;
        assert.equal(typeof taskId, 'string', `${era} ${label}: not a CreateTaskResult: ${JSON.stringify(answer.result)}`);
        const waits = era === 'legacy' && Math.floor(i / 2) % 2 === 1;
        return { era, label, seconds, taskId: taskId as string, createdOn: replica.index, session, waits, task: undefined, result: undefined, resultError: undefined };
      }
      return undefined;
    };

    /** tasks/result of a 2025-11-25 task: its result, or the error it failed with. False if the request failed. */
    const readResult = async (t: Tracked, replica: Replica, through: Gate): Promise<boolean> => {
      const answer = await send(t.era, replica, 'tasks/result', { taskId: t.taskId }, t.label, { session: t.session, answers: LOST, through });
      if ('result' in answer) t.result = answer.result;
      else if ('error' in answer) t.resultError = answer.error;
      return !('failure' in answer);
    };

    /**
     * Polls tasks/get (a random replica each time, the task's poll interval apart) until terminal, then reads the
     * result of a 2025-11-25 task; a 2026-07-28 task's result comes with tasks/get. A client that waits blocks on
     * tasks/result first, and polls only if that is cut short (its replica died, Redis was away).
     */
    const settle = async (t: Tracked): Promise<void> => {
      if (t.waits) await readResult(t, pick(), waitGate);
      else await sleep(t.seconds * 1000);
      let not: number | undefined;
      while (Date.now() < settleDeadline) {
        const replica = pick(not);
        const answer = await send(t.era, replica, 'tasks/get', { taskId: t.taskId }, t.label, { session: t.session });
        if (!('result' in answer)) {
          not = replica.index;
          await sleep(RETRY_PAUSE_MS);
          continue;
        }
        not = undefined;
        t.task = answer.result;
        if (['completed', 'failed', 'cancelled'].includes(String(t.task.status))) break;
        await sleep(POLL_INTERVAL_MS);
      }
      if (t.era === 'modern' || !['completed', 'failed'].includes(String(t.task?.status))) return;
      while (t.result === undefined && t.resultError === undefined && Date.now() < settleDeadline) {
        const replica = pick(not);
        if (await readResult(t, replica, gate)) return;
        not = replica.index;
        await sleep(RETRY_PAUSE_MS);
      }
    };

    const lifecycle = async (i: number): Promise<void> => {
      const t = await create(i);
      if (t === undefined) return;
      tracked.push(t);
      await settle(t);
    };

    // ---- the load, with the faults on the way ----
    const loadStart = Date.now();
    const clients: Promise<void>[] = [];
    let redisCycle: Promise<void> = Promise.resolve();
    for (let i = 0; i < TASKS; i++) {
      const due = loadStart + (i * CREATE_WINDOW_MS) / TASKS;
      if (due > Date.now()) await sleep(due - Date.now());
      if (i === KILL_AFTER) {
        victim = replicas[Math.floor(Math.random() * REPLICAS)] as Replica;
        process.kill(-victim.child.pid, 'SIGKILL'); // the replica and everything it started
        killedAt = Date.now();
        victim.alive = false;
        redisCycle = (async () => {
          await sleep(REDIS_STOP_AFTER_KILL_MS);
          redisStoppedAt = Date.now();
          await redis?.stop();
          await sleep(REDIS_DOWN_MS);
          await redis?.restart();
          redisBackAt = Date.now();
        })();
        redisCycle.catch(() => undefined); // awaited (and thrown) after the creations
      }
      clients.push(lifecycle(i).catch((error: unknown) => void problems.push(`load-${i}: ${(error as Error).message}`)));
    }
    const createdBy = Date.now();
    await redisCycle;
    creating = false;
    settleDeadline = Date.now() + SETTLE_MS;
    await Promise.all(clients);
    const settledBy = Date.now();

    // ---- what the upstream ran ----
    const counts = await fixtureExecutions(upstreamUrl);

    // ---- verdict ----
    const outage = (f: Failure): boolean => f.endedAt >= redisStoppedAt && f.sentAt <= redisBackAt + REDIS_RECONNECT_GRACE_MS;
    const expected = (f: Failure): boolean =>
      (f.replica === victim?.index && f.endedAt >= killedAt) || (outage(f) && /task store is (unavailable|slow)/i.test(f.what));
    const unexpected = failures.filter((f) => !expected(f));

    const completed = tracked.filter((t) => t.task?.status === 'completed');
    const failed = tracked.filter((t) => t.task?.status === 'failed');
    const lostTimes = failed.map((t) => Date.parse(String(t.task?.lastUpdatedAt)));
    const lastLostMs = lostTimes.length > 0 ? Math.max(...lostTimes) - killedAt : undefined;
    const byKind = (list: { what?: string; why?: string }[]): string =>
      JSON.stringify(Object.entries(list.reduce<Record<string, number>>((acc, f) => {
        const key = (f.what ?? f.why ?? '').replace(/[0-9a-f-]{36}|\d+/g, 'N').slice(0, 120);
        acc[key] = (acc[key] ?? 0) + 1;
        return acc;
      }, {})));
    const eraCount = (era: Era): number => tracked.filter((t) => t.era === era).length;
    const waiters = tracked.filter((t) => t.waits);
    const lostRan = failed.filter((t) => counts[t.label] === 1).length;
    const lostOn = replicas.map((r) => failed.filter((t) => t.createdOn === r.index).length).join('/');
    console.log(
      `# replicas load: ${tracked.length} acknowledged (2026-07-28 ${eraCount('modern')}, 2025-11-25 ${eraCount('legacy')}), ` +
        `${completed.length} completed, ${failed.length} failed (${lostOn} per replica; ${lostRan} had started upstream), ` +
        `${refused.length} refused creations, ${failures.length} failed requests (${unexpected.length} unexpected); ` +
        `${waiters.length} tasks/result waits, ${waiters.filter((t) => !failures.some((f) => f.label === t.label && f.method === 'tasks/result')).length} answered on the first request; ` +
        `victim replica ${victim?.index} killed at +${killedAt - loadStart} ms; Redis down +${redisStoppedAt - loadStart}–${redisBackAt - loadStart} ms; ` +
        `kill → last lost task failed: ${lastLostMs ?? 'none lost'} ms; creations done at +${createdBy - loadStart} ms, all settled at +${settledBy - loadStart} ms; ` +
        `whole test ${Date.now() - started} ms`,
    );
    if (refused.length > 0) console.log(`# refused creations by reason: ${byKind(refused)}`);
    if (failures.length > 0) console.log(`# failed requests by reason: ${byKind(failures)}`);

    // Every check runs, and every violation is reported at once: a run that breaks several invariants says so.
    const violations: string[] = [];
    const check = (invariant: string, bad: string[]): void => {
      if (bad.length > 0) violations.push(`${invariant}: ${bad.length}, e.g. ${bad.slice(0, 5).join(' | ')}`);
    };
    const at = (iso: unknown): string => `+${Date.parse(String(iso)) - loadStart}ms`;
    check('clients that failed', problems);
    // No request failed for a reason other than the dead replica or the Redis outage.
    check(
      `requests that failed for another reason than the dead replica or the Redis outage ${byKind(unexpected)}`,
      unexpected.map((f) => {
        const t = tracked.find((x) => x.label === f.label);
        const task = t === undefined ? 'never acknowledged' : `created on replica ${t.createdOn}, ${String(t.task?.status)} at ${at(t.task?.lastUpdatedAt)}`;
        return `${f.era} ${f.method} ${f.label} on replica ${f.replica} +${f.sentAt - loadStart}–${f.endedAt - loadStart}ms: ${f.what} (task ${task})`;
      }),
    );
    // Every acknowledged task is terminal and was read, through the replicas still alive.
    check(
      'acknowledged tasks that never became terminal, or whose tasks/result was never read',
      tracked
        .filter((t) => !['completed', 'failed'].includes(String(t.task?.status)) || (t.era === 'legacy' && t.result === undefined && t.resultError === undefined))
        .map((t) => `${t.era} ${t.label} ${t.taskId}: ${JSON.stringify(t.task)}`),
    );
    // Completed tasks answer with their own call's result: 2026-07-28 ones in tasks/get, 2025-11-25 ones in tasks/result.
    check(
      'completed tasks without their own result',
      completed.flatMap((t) => {
        const result = t.era === 'modern' ? (t.task?.result as Json | undefined) : t.result;
        const text = ((result?.content ?? []) as Json[]).map((c) => c.text).join('');
        const right = text === `slow_compute (${t.label}) finished after ${t.seconds}s` && (result?.structuredContent as Json | undefined)?.label === t.label;
        return right && t.resultError === undefined ? [] : [`${t.era} ${t.label} ${t.taskId}: ${JSON.stringify(result) ?? t.resultError}`];
      }),
    );
    // Only the victim's tasks fail, and only because the victim died: status message, error and tasks/result say so.
    check(
      'failed tasks that are not the dead replica\'s, or do not say the call was lost',
      failed.flatMap((t) => {
        const error = t.era === 'modern' ? (t.task?.error as Json | undefined)?.message : t.resultError;
        const right = t.createdOn === victim?.index && LOST.test(String(t.task?.statusMessage)) && LOST.test(String(error));
        const said = error === t.task?.statusMessage ? String(error) : `${String(t.task?.statusMessage)} / error: ${String(error)}`;
        return right ? [] : [`${t.era} ${t.label} created on replica ${t.createdOn}, failed at ${at(t.task?.lastUpdatedAt)}: ${said}`];
      }),
    );
    // One upstream execution per task at most: per label, over every label sent (acknowledged or not).
    check('labels executed more than once upstream', Object.entries(counts).filter(([, n]) => n > 1).map(([label, n]) => `${label} ×${n}`));
    check('labels the upstream ran that nobody sent', Object.keys(counts).filter((label) => !labelsSent.has(label)));
    check('completed tasks that did not run exactly once upstream', completed.filter((t) => counts[t.label] !== 1).map((t) => `${t.label} ×${counts[t.label] ?? 0}`));
    // The replicas that were not killed are still serving.
    check('live replicas that exited', replicas.filter((r) => r !== victim && r.child.child.exitCode !== null).map((r) => `replica ${r.index}`));
    assert.deepEqual(violations, []);
    // Nothing lost: every acknowledged creation is one of the tasks accounted for above.
    assert.equal(completed.length + failed.length, tracked.length);
  } finally {
    creating = false;
    settleDeadline = 0;
    await Promise.all(replicas.map((r) => r.child.kill(1000).catch(() => undefined)));
    await fixture?.kill(1000).catch(() => undefined);
    // Its keys go with it: the server and its directory are the test's own.
    await redis?.close();
    await agent.close().catch(() => undefined);
  }
});
