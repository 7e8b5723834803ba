// A rolling upgrade that loses nothing (issue 42): two replica processes on one Redis, tasks, a synchronous call and
// open streams on replica A, then SIGTERM to A's process alone, as Kubernetes sends it. Every task reaches a
// terminal state or goes on running on B, no client sees a lost task, the synchronous call gets its answer, each
// open stream is told when to reconnect before it closes, B serves at once, and A exits cleanly. Nothing here
// asserts a duration: each step waits for what it needs to see.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fixtureCommand } from '../fixtures/spawn.js';
import { eventually, testScope, type Json } from '../helpers/harness.js';
import { twoReplicaProcesses } from '../helpers/replicas.js';
import { createdTaskId, SessionWire } from '../helpers/session-wire.js';
import { rev2026Request, sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';

/** Longer than the tasks that finish within the drain, shorter than the ones that do not. */
const DRAIN_MS = 2500;
const SHUTDOWN_MS = 8000;
const LOST = /lost the call/;

/** An SSE response read raw: its event blocks as they arrive, and when it ended. */
interface RawStream {
  status: number;
  blocks: string[];
  ended: Promise<void>;
  /** Resolves once a block matching `pattern` has arrived. */
  until(pattern: RegExp): Promise<void>;
}

async function openRaw(url: string, init: RequestInit): Promise<RawStream> {
  const response = await fetch(url, init);
  const blocks: string[] = [];
  const arrivals: (() => void)[] = [];
  const ended = (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of response.body ?? []) {
      buffer += decoder.decode(chunk as Uint8Array, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        blocks.push(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
      for (const wake of arrivals.splice(0)) wake();
    }
    for (const wake of arrivals.splice(0)) wake();
  })().catch(() => undefined);
  const stream: RawStream = {
    status: response.status,
    blocks,
    ended,
    until: async (pattern) => {
      for (;;) {
        if (blocks.some((block) => pattern.test(block))) return;
        const done = await Promise.race([new Promise<false>((resolve) => arrivals.push(() => resolve(false))), ended.then(() => true)]);
        if (done && !blocks.some((block) => pattern.test(block))) throw new Error(`the stream ended without ${pattern}: ${JSON.stringify(blocks)}`);
      }
    },
  };
  return stream;
}

/** A bare `retry:` field, as a replica that shuts down sends (a priming event carries an id and data too). */
const RETRY_HINT = /^retry: \d+$/;

function messagesOf(stream: RawStream): Json[] {
  return stream.blocks.flatMap((block) => block.split('\n').filter((line) => line.startsWith('data: ') && line.length > 6).map((line) => JSON.parse(line.slice(6)) as Json));
}

async function task2026(url: string, taskId: string): Promise<Json> {
  const r = await sendRev2026(url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES });
  assert.ok(r.result !== undefined, JSON.stringify(r.messages));
  return r.result;
}

async function call2026(url: string, name: string, args: Json): Promise<string> {
  const created = await sendRev2026(url, 'tools/call', { name, arguments: args }, { capabilities: TASKS_CAPABILITIES });
  assert.equal(created.result?.resultType, 'task', JSON.stringify(created.messages));
  return created.result?.taskId as string;
}

/** The 2026-07-28 task once `done` holds for it, read through `url`. */
async function task2026When(url: string, taskId: string, done: (task: Json) => boolean): Promise<Json> {
  let task: Json = {};
  await eventually(async () => done((task = await task2026(url, taskId))));
  return task;
}

test('SIGTERM to one of two replicas: every task ends or goes on on the other, calls get answers, streams are told to reconnect', async (t) => {
  const scope = testScope(t);
  const { command, args, cwd } = fixtureCommand('stdio');
  const [a, b] = await twoReplicaProcesses(scope, {
    upstreams: { fx: { command, args, cwd } },
    tasks: {
      defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 },
      rules: [
        { match: 'slow_compute', retry: { onLoss: true } },
        { match: 'report', concurrency: 1 },
      ],
    },
    // Long leases: B takes A's tasks over because A hands them over and asks it to sweep, not because A's lease ran out.
    replicas: { leaseMs: 30_000, drainTimeoutMs: DRAIN_MS },
    shutdownTimeoutMs: SHUTDOWN_MS,
    log: { level: 'info' },
  }, 'rolling-upgrade');

  // 2026-07-28 tasks on A: one that finishes within the drain, one that runs past it and may run again elsewhere.
  const quick = await call2026(a.url, 'finish_at', { ms: 300 });
  const retried = await call2026(a.url, 'slow_compute', { seconds: 8, label: 'rolling-retried' });
  // A 2025-11-25 session on A: a task that runs past the drain and may not run again, one waiting behind it for the
  // tool's one slot, and a synchronous call in flight.
  const session = new SessionWire({});
  await session.initialize(a.url);
  const cut = createdTaskId(await session.request(a.url, 'tools/call', { name: 'report', arguments: { ms: 60_000 }, task: { ttl: 600_000 } }));
  const queued = createdTaskId(await session.request(a.url, 'tools/call', { name: 'report', arguments: { ms: 100 }, task: { ttl: 600_000 } }));
  await eventually(async () => /Queued behind/.test(String(((await session.request(b.url, 'tasks/get', { taskId: queued })).result as Json).statusMessage)));

  // Open streams on A: the session's GET stream, a POST stream waiting for the queued task's result, a 2026 listen.
  const get = await openRaw(a.url, { method: 'GET', headers: session.headers({ accept: 'text/event-stream' }) });
  const waitingResult = await openRaw(a.url, { method: 'POST', headers: session.headers(), body: JSON.stringify({ jsonrpc: '2.0', id: 'result-1', method: 'tasks/result', params: { taskId: queued } }) });
  const listenRequest = rev2026Request('subscriptions/listen', { notifications: { taskIds: [retried], toolsListChanged: true } }, { capabilities: TASKS_CAPABILITIES, id: 'listen-1' });
  const listen = await openRaw(a.url, { method: 'POST', headers: listenRequest.headers, body: JSON.stringify(listenRequest.body) });
  assert.deepEqual([get.status, waitingResult.status, listen.status], [200, 200, 200]);
  const sync = await openRaw(a.url, {
    method: 'POST',
    headers: session.headers(),
    body: JSON.stringify({ jsonrpc: '2.0', id: 'sync-1', method: 'tools/call', params: { name: 'slow', arguments: { ms: 1200, steps: 4 }, _meta: { progressToken: 'sync' } } }),
  });
  await sync.until(/notifications\/progress/); // the call is at the upstream
  await task2026When(a.url, retried, (task) => task.status === 'working');

  process.kill(a.pid, 'SIGTERM'); // the gateway only, as a container runtime does (not its stdio children)

  // A refuses new requests at once, saying to retry (elsewhere); B serves them.
  await eventually(async () => (await fetch(`${a.baseUrl}/readyz`).catch(() => undefined))?.status !== 200);
  assert.equal((await fetch(`${b.baseUrl}/readyz`)).status, 200);
  const onB = await sendRev2026(b.url, 'tools/call', { name: 'echo', arguments: { said: 'still here' } });
  assert.equal(onB.status, 200, JSON.stringify(onB.messages));
  assert.ok(onB.result !== undefined && onB.result.isError !== true, JSON.stringify(onB.messages));

  // The synchronous call in flight got its answer.
  await sync.ended;
  const answer = messagesOf(sync).find((m) => m.id === 'sync-1');
  assert.ok(answer !== undefined && answer.result !== undefined, JSON.stringify(sync.blocks));
  assert.notEqual((answer.result as Json).isError, true, JSON.stringify(answer));

  assert.equal(await a.exited, 0, `A exits cleanly within shutdownTimeoutMs; stderr:\n${a.stderr()}`);
  // Each open stream was told when to reconnect before it closed.
  for (const [name, stream] of [['GET', get], ['tasks/result', waitingResult], ['listen', listen]] as const) {
    await stream.ended;
    assert.ok(stream.blocks.some((block) => RETRY_HINT.test(block.trim())), `${name} stream: ${JSON.stringify(stream.blocks)}`);
  }
  assert.match(a.stdout(), /tasks handed over/);

  // Every task ends, or goes on on B; none is lost.
  assert.equal((await task2026When(b.url, quick, (task) => task.status !== 'working')).status, 'completed');
  const cutTask = (await session.request(b.url, 'tasks/get', { taskId: cut })).result as Json;
  assert.deepEqual([cutTask.status, cutTask.statusMessage], ['failed', 'The gateway shut down while the task was running']);
  // The one that may run again runs again on B (A cancelled its call and is gone): its result comes from there.
  const rerun = await task2026When(b.url, retried, (task) => task.status !== 'working' || /attempt 2 of 2/.test(String(task.statusMessage)));
  assert.match(String(rerun.statusMessage ?? ''), /attempt 2 of 2/, JSON.stringify(rerun));
  const done = await task2026When(b.url, retried, (task) => task.status !== 'working');
  assert.equal(done.status, 'completed', JSON.stringify(done));
  let waited: Json = {};
  await eventually(async () => (waited = (await session.request(b.url, 'tasks/get', { taskId: queued })).result as Json).status !== 'working');
  assert.equal(waited.status, 'completed', JSON.stringify(waited));
  const result = (await session.request(b.url, 'tasks/result', { taskId: queued })).result as Json;
  assert.deepEqual(result.structuredContent, { summary: 'report ready after 100 ms', ms: 100 });
  for (const task of [cutTask, done, waited]) assert.doesNotMatch(JSON.stringify(task), LOST);
});
