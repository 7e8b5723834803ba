// Gateways as child processes: several replicas on one Redis (a prefix of their own), and what happens to
// tasks when a replica or an upstream dies. Loopback only, bounded.
// One file because its cases share the replica helpers (gateways spawned on one Redis prefix, a task settled through
// any replica) and the one prefix this file deletes once they have all run.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fixtureCommand, spawnFixture, spawnGateway, type GatewayChild } from '../fixtures/spawn.js';
import { eventually, fixtureExecutions, testScope, type Json } from '../helpers/harness.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';
import { redisTestPrefix, TEST_REDIS_URL } from '../helpers/shared-redis.js';
import { createdTaskId, SessionWire } from '../helpers/session-wire.js';

const PREFIX = redisTestPrefix('replicas');
const LEASE_MS = 1000;

function replica(extra: Json = {}): Promise<GatewayChild> {
  const { command, args, cwd } = fixtureCommand('stdio');
  return spawnGateway({
    config: {
      store: { type: 'redis', url: TEST_REDIS_URL, prefix: PREFIX },
      upstreams: { fx: { command, args, cwd } },
      tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 } },
      replicas: { leaseMs: LEASE_MS, drainTimeoutMs: 0 },
      ...extra,
    },
  });
}

/** Runs `body` with two replicas of the same config, stopped afterwards whatever happens. */
async function withTwoReplicas(extra: Json, body: (a: GatewayChild, b: GatewayChild) => Promise<void>): Promise<void> {
  const a = await replica(extra);
  const b = await replica(extra);
  try {
    await body(a, b);
  } finally {
    await a.kill();
    await b.kill();
  }
}

async function taskOn(url: string, taskId: string): Promise<Json> {
  const r = await sendRev2026(url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES });
  assert.ok(r.result !== undefined, JSON.stringify(r.messages));
  return r.result;
}

/** Starts a slow_compute task (the gateways make every task-capable call a task at once) and returns its id. */
async function slowTask(url: string, name: string, seconds: number, label: string): Promise<string> {
  const created = await sendRev2026(url, 'tools/call', { name, arguments: { seconds, label } }, { capabilities: TASKS_CAPABILITIES });
  assert.equal(created.result?.resultType, 'task', JSON.stringify(created.messages));
  return created.result?.taskId as string;
}

/** The task once it is no longer `working`, read through `url`. */
async function settled(url: string, taskId: string, timeoutMs?: number): Promise<Json> {
  let task: Json = {};
  await eventually(async () => {
    task = await taskOn(url, taskId);
    return task.status !== 'working';
  }, timeoutMs);
  return task;
}

describe('replicas sharing one Redis', () => {
  test('kill -9 of the replica running a task: another replica fails it within the lease bound, saying the call was lost', async () => {
    const a = await replica();
    const b = await replica();
    try {
      const taskId = await slowTask(a.url, 'slow_compute', 60, 'orphan');
      assert.equal((await taskOn(b.url, taskId)).status, 'working');

      process.kill(-a.pid, 'SIGKILL');
      const killedAt = Date.now();
      await a.exited;
      const failed = await settled(b.url, taskId, 10 * LEASE_MS);
      const recoveredMs = Date.now() - killedAt;
      assert.equal(failed.status, 'failed');
      assert.match(String(failed.statusMessage), /The gateway lost the call: replica \S+ stopped while running it/);
      assert.match(String((failed.error as Json | undefined)?.message), /lost the call/);
      // Reported, not asserted: the bound is leaseMs plus one sweep (docs/limits.md).
      console.log(`# recovery after kill -9: ${recoveredMs} ms (leaseMs ${LEASE_MS})`);
    } finally {
      await a.kill(0).catch(() => undefined);
      await b.kill();
    }
  });

  test('a replica that is alive keeps its long task: leases are renewed past several lease periods', async () => {
    await withTwoReplicas({}, async (a, b) => {
      const taskId = await slowTask(a.url, 'slow_compute', 3.5, 'renewed');
      const done = await settled(b.url, taskId);
      assert.equal(done.status, 'completed', JSON.stringify(done));
    });
  });

  test('SIGTERM drains: a task that finishes within drainTimeoutMs completes, one that does not is failed saying so', async () => {
    const a = await replica({ replicas: { leaseMs: LEASE_MS, drainTimeoutMs: 3000 } });
    const b = await replica();
    try {
      const short = await slowTask(a.url, 'slow_compute', 1, 'drained');
      const long = await slowTask(a.url, 'slow_compute', 60, 'cut');
      process.kill(a.pid, 'SIGTERM'); // the gateway only, as a container runtime does (not its stdio children)
      assert.equal(await a.exited, 0, 'the replica exits cleanly after draining');
      assert.equal((await taskOn(b.url, short)).status, 'completed');
      const cut = await taskOn(b.url, long);
      assert.equal(cut.status, 'failed');
      assert.equal(cut.statusMessage, 'The gateway shut down while the task was running');
    } finally {
      await a.kill(0).catch(() => undefined);
      await b.kill();
    }
  });
});

describe('limits across replicas', () => {
  test('concurrency holds across replicas, and queued tasks start in order on whichever replica holds them', async () => {
    const limited = { tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 }, rules: [{ match: 'slow_compute', concurrency: 1 }] } };
    await withTwoReplicas(limited, async (a, b) => {
      const first = await slowTask(a.url, 'slow_compute', 1, 'limit-1');
      const queued: string[] = [];
      for (const [i, url] of [b.url, a.url, b.url].entries()) queued.push(await slowTask(url, 'slow_compute', 0.2, `limit-${i + 2}`));
      const waiting = await taskOn(a.url, queued[0] as string);
      assert.equal(waiting.status, 'working');
      assert.match(String(waiting.statusMessage), /Queued behind \d+ running or waiting task\(s\): tool 'slow_compute' runs at most 1 at once/);
      const done: Json[] = [];
      for (const taskId of [first, ...queued]) done.push(await settled(b.url, taskId, 15_000));
      assert.deepEqual(done.map((t) => t.status), ['completed', 'completed', 'completed', 'completed']);
      // One at a time, in the order they were created: each ended after the one before it.
      const ended = done.map((t) => Date.parse(String(t.lastUpdatedAt)));
      for (let i = 1; i < ended.length; i++) assert.ok((ended[i] as number) > (ended[i - 1] as number), JSON.stringify(done));
      assert.ok((ended[1] as number) - (ended[0] as number) >= 150, 'the second started only when the first ended');
    });
  });

  test('maxTasksPerPrincipal counts the tasks a principal holds on every replica', async () => {
    const limited = { tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100, maxTasksPerPrincipal: 1 } } };
    await withTwoReplicas(limited, async (a, b) => {
      const wire = new SessionWire();
      await wire.initialize(a.url);
      const call = (url: string): Promise<Json> => wire.request(url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 1, label: 'principal' }, task: {} });
      const first = await call(a.url);
      assert.ok(first.result !== undefined, JSON.stringify(first));
      const refused = await call(b.url);
      assert.match(String((refused.error as Json | undefined)?.message), /Too many unfinished tasks: clients without authentication \(counted together\) already have 1 \(maxTasksPerPrincipal: 1\)/);
      const taskId = createdTaskId(first);
      await wire.request(b.url, 'tasks/result', { taskId });
      const again = await call(b.url);
      assert.ok(again.result !== undefined, `a slot is free once the first task ended: ${JSON.stringify(again)}`);
    });
  });
});

describe('lost replicas: tasks taken over (retry: { onLoss: true }, or still waiting in line)', () => {
  test('a task still waiting in line when its replica dies is started by another replica, once; the running one is lost', async () => {
    const fixture = await spawnFixture({ transport: 'streamable-http' });
    const upstreamUrl = fixture.url as string;
    const config = {
      upstreams: { fx: { url: upstreamUrl } },
      tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 }, rules: [{ match: 'slow_compute', concurrency: 1 }] },
    };
    const a = await replica(config);
    const b = await replica(config);
    try {
      const running = await slowTask(a.url, 'slow_compute', 60, 'in-line-running');
      const waiting = await slowTask(a.url, 'slow_compute', 0.2, 'in-line-waiting');
      await eventually(async () => /Queued/.test(String((await taskOn(b.url, waiting)).statusMessage)));
      // The running task's CreateTaskResult comes before its upstream call goes out; kill A only once the
      // upstream has it, so the "ran once" count below is about takeover, not about a race with the kill.
      await eventually(async () => (await fixtureExecutions(upstreamUrl))['in-line-running'] === 1);
      process.kill(-a.pid, 'SIGKILL');
      await a.exited;
      const lost = await settled(b.url, running, 20 * LEASE_MS);
      assert.equal(lost.status, 'failed');
      const done = await settled(b.url, waiting, 20 * LEASE_MS);
      assert.equal(done.status, 'completed', JSON.stringify(done));
      const counts = await fixtureExecutions(upstreamUrl);
      assert.equal(counts['in-line-running'], 1);
      assert.equal(counts['in-line-waiting'], 1, 'the upstream never saw it on A; B ran it once');
    } finally {
      await a.kill(0).catch(() => undefined);
      await b.kill();
      await fixture.kill();
    }
  });

  test('a task of a killed replica runs again exactly once on another, in both eras; without attempts left it fails', async () => {
    const fixture = await spawnFixture({ transport: 'streamable-http' });
    const upstreamUrl = fixture.url as string;
    const config = {
      upstreams: { fx: { url: upstreamUrl } },
      tasks: {
        defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 },
        rules: [{ match: 'slow_compute', retry: { onLoss: true, maxAttempts: 2 } }],
      },
    };
    const a = await replica(config);
    const b = await replica(config);
    let c: GatewayChild | undefined;
    try {
      const rev2026Task = await slowTask(a.url, 'slow_compute', 2, 'retry-rev2026');
      const wire = new SessionWire();
      await wire.initialize(b.url);
      const created = await wire.request(a.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 2, label: 'retry-rev2025' }, task: {} });
      const sessionTask = createdTaskId(created);
      await eventually(async () => {
        const counts = await fixtureExecutions(upstreamUrl);
        return counts['retry-rev2026'] === 1 && counts['retry-rev2025'] === 1;
      });

      process.kill(-a.pid, 'SIGKILL');
      await a.exited;
      const rev2026Done = await settled(b.url, rev2026Task, 20 * LEASE_MS);
      assert.equal(rev2026Done.status, 'completed', JSON.stringify(rev2026Done));
      const rev2025Done = await wire.request(b.url, 'tasks/result', { taskId: sessionTask });
      assert.match(JSON.stringify(rev2025Done.result), /slow_compute \(retry-rev2025\) finished/);
      const counts = await fixtureExecutions(upstreamUrl);
      assert.equal(counts['retry-rev2026'], 2, 'ran once on A, once more on B');
      assert.equal(counts['retry-rev2025'], 2);

      // A task whose second replica is lost too has no attempts left: it fails, saying the call was lost.
      c = await replica(config);
      const last = await slowTask(c.url, 'slow_compute', 30, 'retry-twice');
      await eventually(async () => (await fixtureExecutions(upstreamUrl))['retry-twice'] === 1);
      process.kill(-c.pid, 'SIGKILL');
      await c.exited;
      await eventually(async () => (await fixtureExecutions(upstreamUrl))['retry-twice'] === 2, 20 * LEASE_MS);
      const d = await replica(config);
      try {
        process.kill(-b.pid, 'SIGKILL'); // B, the only replica left when C died, runs the second attempt
        await b.exited;
        const failed = await settled(d.url, last, 20 * LEASE_MS);
        assert.equal(failed.status, 'failed', JSON.stringify(failed));
        assert.match(String(failed.statusMessage), /lost the call/);
        assert.equal((await fixtureExecutions(upstreamUrl))['retry-twice'], 2, 'no third execution');
      } finally {
        await d.kill();
      }
    } finally {
      await a.kill(0).catch(() => undefined);
      await b.kill(0).catch(() => undefined);
      await c?.kill(0).catch(() => undefined);
      await fixture.kill();
    }
  });
});

describe('2025-11-25 sessions across replicas (no sticky routing)', () => {
  const text = (response: Json): string => JSON.stringify((response.result as Json | undefined)?.content ?? response.error);

  test('a session alternates replicas: created on A, listed, tasked, polled, read and ended through either', async () => {
    await withTwoReplicas({}, async (a, b) => {
      const wire = new SessionWire();
      await wire.initialize(a.url);
      const tools = (await wire.request(b.url, 'tools/list')).result as Json;
      assert.ok((tools.tools as Json[]).some((t) => t.name === 'slow_compute'));
      const created = await wire.request(b.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0.3, label: 'alternating' }, task: {} });
      const taskId = createdTaskId(created);
      assert.match(String(((await wire.request(a.url, 'tasks/get', { taskId })).result as Json).status), /working|completed/);
      const result = await wire.request(a.url, 'tasks/result', { taskId });
      assert.match(text(result), /slow_compute \(alternating\) finished/);
      const listed = (await wire.request(b.url, 'tasks/list')).result as Json;
      assert.ok((listed.tasks as Json[]).some((t) => t.taskId === taskId));

      assert.equal(await wire.end(a.url), 200);
      // B had a view of the session: the end reached it too.
      const after = await fetch(b.url, { method: 'POST', headers: wire.headers(), body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }) });
      assert.equal(after.status, 404);
      await after.arrayBuffer();
    });
  });

  test('a task running on A asks the client through the tasks/result stream open on B; the answer POSTed to B reaches A', async () => {
    await withTwoReplicas({}, async (a, b) => {
      const wire = new SessionWire({ elicitation: {} });
      await wire.initialize(a.url);
      const created = await wire.request(a.url, 'tools/call', { name: 'confirm_delete', arguments: { filename: 'notes.txt', delayMs: 1000 }, task: {} });
      const taskId = createdTaskId(created);
      // No GET stream yet: whether the question comes before or after this tasks/result stream is in place on B, it
      // can only arrive on it (a task whose client listens nowhere keeps it for its next tasks/result).
      const result = await wire.start(b.url, 'tasks/result', { taskId });
      const ask = await result.next((m) => m.method === 'elicitation/create');
      assert.match(String(ask.id), /@/, 'the request id names the replica that asked');
      const meta = ((ask.params as Json)._meta ?? {}) as Json;
      assert.deepEqual(meta['io.modelcontextprotocol/related-task'], { taskId });
      const listening = await wire.listen(b.url);
      assert.equal(listening.status, 200);
      assert.equal(await wire.respond(b.url, ask.id, { action: 'accept', content: { confirm: true } }), 202);
      const answer = await result.next((m) => 'result' in m || 'error' in m);
      assert.match(text(answer), /Deleted notes\.txt/);
      // Status notifications from A reach the GET stream held by B.
      const done = await listening.next((m) => m.method === 'notifications/tasks/status' && (m.params as Json).status === 'completed');
      assert.equal((done.params as Json).taskId, taskId);
      listening.close();
    });
  });

  test('a task running on A asks while its client listens nowhere: input_required, and tasks/result on B gets the question', async () => {
    await withTwoReplicas({}, async (a, b) => {
      const wire = new SessionWire({ elicitation: {} });
      await wire.initialize(a.url);
      const created = await wire.request(a.url, 'tools/call', { name: 'confirm_delete', arguments: { filename: 'nowhere.txt', delayMs: 200 }, task: {} });
      const taskId = createdTaskId(created);
      await eventually(async () => ((await wire.request(b.url, 'tasks/get', { taskId })).result as Json).status === 'input_required');
      const result = await wire.start(b.url, 'tasks/result', { taskId });
      const ask = await result.next((m) => m.method === 'elicitation/create');
      assert.deepEqual((((ask.params as Json)._meta ?? {}) as Json)['io.modelcontextprotocol/related-task'], { taskId });
      assert.equal(await wire.respond(b.url, ask.id, { action: 'accept', content: { confirm: true } }), 202);
      const answer = await result.next((m) => 'result' in m || 'error' in m);
      assert.match(text(answer), /Deleted nowhere\.txt/);
      await wire.end(a.url);
    });
  });

  test('a task lost with its replica: the session hears that it failed on the GET stream another replica holds', async () => {
    const a = await replica();
    const b = await replica();
    try {
      const wire = new SessionWire();
      await wire.initialize(b.url);
      const listening = await wire.listen(b.url);
      const created = await wire.request(a.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 60, label: 'told' }, task: {} });
      const taskId = createdTaskId(created);
      process.kill(-a.pid, 'SIGKILL');
      await a.exited;
      const failed = await listening.next((m) => m.method === 'notifications/tasks/status' && (m.params as Json).status === 'failed', 10 * LEASE_MS);
      assert.equal((failed.params as Json).taskId, taskId);
      assert.match(String((failed.params as Json).statusMessage), /lost the call/);
      listening.close();
    } finally {
      await a.kill(0).catch(() => undefined);
      await b.kill();
    }
  });

  test('Last-Event-ID on B resumes a POST stream held by A: the missed events and the result arrive through B', async () => {
    await withTwoReplicas({}, async (a, b) => {
      const wire = new SessionWire();
      await wire.initialize(a.url);
      const call = await wire.start(a.url, 'tools/call', { name: 'slow', arguments: { ms: 900, steps: 3 }, _meta: { progressToken: 'p1' } });
      await eventually(() => call.eventIds.length > 0);
      call.close(); // the connection drops after the priming event
      const resumed = await wire.listen(b.url, call.eventIds[0]);
      assert.equal(resumed.status, 200);
      const response = await resumed.next((m) => 'result' in m || 'error' in m);
      assert.ok('result' in response, JSON.stringify(response));
      const progress = resumed.messages.filter((m) => m.method === 'notifications/progress');
      assert.equal(progress.length, 3, JSON.stringify(resumed.messages));
      await resumed.done;
    });
  });

  test('notifications/cancelled sent to B stops the call running on A', async () => {
    await withTwoReplicas({}, async (a, b) => {
      const wire = new SessionWire();
      await wire.initialize(b.url);
      const call = await wire.start(a.url, 'tools/call', { name: 'slow', arguments: { ms: 30_000 } });
      await eventually(() => call.eventIds.length > 0); // the call runs (its stream is open)
      const started = Date.now();
      assert.equal(await wire.notify(b.url, 'notifications/cancelled', { requestId: 1, reason: 'changed my mind' }), 202);
      await call.done;
      assert.ok(Date.now() - started < 10_000, 'the stream ended long before the call would have');
      assert.equal(call.messages.some((m) => 'result' in m || 'error' in m), false, 'no response to a cancelled request');
    });
  });
});

describe('background tasks (plainCalls: background) across replicas', () => {
  const BACKGROUND = { tasks: { defaults: { plainCalls: 'background', taskAfterMs: 300, pollIntervalMs: 100 } } };
  const RELATED_TASK = 'io.modelcontextprotocol/related-task';
  const handleOf = (result: unknown): string => String((((result as Json)._meta as Json)[RELATED_TASK] as Json).taskId);

  test('2026-07-28 without the extension: the handle from A, the result from B', async () => {
    await withTwoReplicas(BACKGROUND, async (a, b) => {
      const answer = await sendRev2026(a.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 1.5, label: 'plain-ab' } });
      const taskId = handleOf(answer.result);
      const final = await sendRev2026(b.url, 'tools/call', { name: 'taskgate_task_result', arguments: { taskId, waitSeconds: 10 } });
      assert.deepEqual(final.result?.structuredContent, { seconds: 1.5, label: 'plain-ab' }, JSON.stringify(final.messages));
    });
  });

  test('2025: the call runs on A while its client listens nowhere; task_result on B gets the question, and the answer reaches A', async () => {
    await withTwoReplicas(BACKGROUND, async (a, b) => {
      const wire = new SessionWire({ elicitation: {} });
      await wire.initialize(a.url);
      const answer = await wire.request(a.url, 'tools/call', { name: 'confirm_delete', arguments: { filename: 'r.txt', delayMs: 600 } });
      const taskId = handleOf(answer.result);
      await eventually(async () => {
        const status = await wire.request(b.url, 'tools/call', { name: 'taskgate_task_status', arguments: { taskId } });
        return ((status.result as Json).structuredContent as Json).status === 'input_required';
      });
      const waiting = await wire.start(b.url, 'tools/call', { name: 'taskgate_task_result', arguments: { taskId } });
      const question = await waiting.next((m) => m.method === 'elicitation/create');
      await wire.respond(b.url, question.id, { action: 'accept', content: { confirm: true } });
      const response = await waiting.next((m) => 'result' in m);
      assert.match(JSON.stringify(response.result), /Deleted r\.txt/);
      await wire.end(a.url);
    });
  });
});

describe('upstream faults', () => {
  test('a stdio upstream that crashes fails its running tasks naming it, is restarted, and other upstreams are unaffected', async (t) => {
    const { command, args, cwd } = fixtureCommand('stdio');
    const gateway = await testScope(t).spawnGateway({
      config: {
        upstreams: {
          fx: { command, args, cwd, prefix: 'fx__', restart: { initialDelayMs: 100, maxDelayMs: 1000 } },
          other: { command, args, cwd, prefix: 'other__' },
        },
        tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 } },
      },
    });
    const taskId = await slowTask(gateway.url, 'fx__slow_compute', 60, 'crashed');
    // Called without the tasks extension, so synchronously: the call dies with the process.
    await sendRev2026(gateway.url, 'tools/call', { name: 'fx__crash', arguments: {} });
    const failed = await settled(gateway.url, taskId);
    assert.equal(failed.status, 'failed');
    assert.match(String(failed.statusMessage), /Upstream 'fx'/);
    const echo = await sendRev2026(gateway.url, 'tools/call', { name: 'other__echo', arguments: { still: 'here' } });
    assert.deepEqual(echo.result?.structuredContent, { still: 'here' }, JSON.stringify(echo.messages));
    await eventually(async () => {
      const again = await sendRev2026(gateway.url, 'tools/call', { name: 'fx__echo', arguments: { back: true } });
      return (again.result?.structuredContent as Json | undefined)?.back === true;
    });
  });

  test('an HTTP upstream that drops the connection mid-call fails that task naming it; other upstreams keep serving', async (t) => {
    const scope = testScope(t);
    const http = await spawnFixture({ transport: 'streamable-http' });
    scope.defer(() => http.kill(0).catch(() => undefined));
    const { command, args, cwd } = fixtureCommand('stdio');
    const gateway = await scope.spawnGateway({
      config: {
        upstreams: { fx: { transport: 'streamable-http', url: http.url, prefix: 'fx__' }, other: { command, args, cwd, prefix: 'other__' } },
        tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 } },
      },
    });
    const taskId = await slowTask(gateway.url, 'fx__slow_compute', 60, 'dropped');
    process.kill(-http.pid, 'SIGKILL'); // the upstream process vanishes with the call's stream open
    const failed = await settled(gateway.url, taskId);
    assert.equal(failed.status, 'failed');
    assert.match(String(failed.statusMessage), /Upstream 'fx'/);
    const echo = await sendRev2026(gateway.url, 'tools/call', { name: 'other__echo', arguments: { still: 'here' } });
    assert.deepEqual(echo.result?.structuredContent, { still: 'here' }, JSON.stringify(echo.messages));
  });
});
