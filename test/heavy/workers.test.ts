// `taskgate serve --workers 2` as an operator runs it (issue 43): one process group sharing the port on the Redis
// store. Each client here holds one connection of its own (the primary hands connections to the workers in turn), and
// tells which worker serves it by the upstream it reaches: every worker runs its own stdio child of the session
// fixture, whose `whoami` names its instance. Then: a task created through one worker is read and its result taken
// through the other, /metrics describes the group whichever worker serves it, SIGTERM stops every worker and exits
// 0; the memory store is refused.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Client } from 'undici';
import { stringify } from 'yaml';
import { fixtureCommand, GATEWAY_CLI_PATH, nodeArgs, spawnGateway, startChild } from '../fixtures/spawn.js';
import { logEntries, whenLogged, type Json } from '../helpers/harness.js';
import { redisTestPrefix, TEST_REDIS_URL } from '../helpers/shared-redis.js';
import { createdTaskId, rev2025Headers } from '../helpers/session-wire.js';
import { sseMessages } from '../helpers/stateless-wire.js';

const PREFIX = redisTestPrefix('workers');

/** This process's environment without TASKGATE_* (they would override the config), plus `extra`. */
function gatewayEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('TASKGATE_')));
  return { ...env, ...extra };
}

/** A 2025-11-25 client on one connection of its own (an undici Client is one socket), so on one worker. */
class PinnedClient {
  readonly http: Client;
  sessionId = '';
  private nextId = 1;

  constructor(
    origin: string,
    private readonly path: string,
  ) {
    this.http = new Client(origin);
  }

  async initialize(): Promise<void> {
    const answer = await this.http.request({
      path: this.path,
      method: 'POST',
      headers: rev2025Headers(''),
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'workers-test', version: '1' } } }),
    });
    await answer.body.text();
    this.sessionId = String(answer.headers['mcp-session-id'] ?? '');
    assert.notEqual(this.sessionId, '', 'initialize gave no session');
    const initialized = await this.http.request({ path: this.path, method: 'POST', headers: rev2025Headers(this.sessionId), body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
    await initialized.body.text();
  }

  /** A request on this connection, in `sessionId`'s session (this client's own unless given). */
  async request(method: string, params: Json, sessionId = this.sessionId): Promise<Json> {
    const id = this.nextId++;
    const answer = await this.http.request({ path: this.path, method: 'POST', headers: rev2025Headers(sessionId), body: JSON.stringify({ jsonrpc: '2.0', id, method, params }) });
    const text = await answer.body.text();
    const sse = String(answer.headers['content-type'] ?? '').includes('text/event-stream');
    const messages = sse ? sseMessages(text) : [JSON.parse(text) as Json];
    const response = messages.find((m) => m.id === id);
    assert.ok(response !== undefined, `${method}: no response (HTTP ${answer.statusCode}): ${text}`);
    assert.equal(response.error, undefined, `${method}: ${JSON.stringify(response.error)}`);
    return response.result as Json;
  }

  /** The instance of the upstream child this connection's worker runs. */
  async upstreamInstance(): Promise<string> {
    const result = await this.request('tools/call', { name: 'whoami', arguments: {} });
    const content = result.content as { text: string }[];
    return (JSON.parse(content[0]?.text ?? '{}') as { instanceId: string }).instanceId;
  }

  /** The sum of `metric`'s series whose labels include `labels`, read from GET /metrics on this connection. */
  async metric(metric: string, labels = ''): Promise<number> {
    const answer = await this.http.request({ path: '/metrics', method: 'GET' });
    const text = await answer.body.text();
    assert.equal(answer.statusCode, 200, text);
    let sum = 0;
    for (const line of text.split('\n')) {
      const m = /^(\w+)(\{[^}]*\})? (\S+)$/.exec(line);
      if (m?.[1] === metric && (m[2] ?? '').includes(labels)) sum += Number(m[3]);
    }
    return sum;
  }
}

describe('serve --workers 2', () => {
  test('clients land on both workers; tasks, sessions and /metrics span them; SIGTERM stops them all with 0', async (t) => {
    const { command, args, cwd } = fixtureCommand('stdio');
    const gateway = await spawnGateway({
      config: {
        store: { type: 'redis', url: TEST_REDIS_URL, prefix: PREFIX },
        upstreams: { fx: { command, args, cwd } },
        tasks: { defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 } },
        log: { level: 'info' },
      },
      env: gatewayEnv({ TASKGATE_WORKERS: '2' }),
    });
    const clients: PinnedClient[] = [];
    t.after(async () => {
      await Promise.all(clients.map((c) => c.http.destroy()));
      await gateway.kill();
    });
    const logged = (msg: string): Json[] => logEntries(gateway).filter((e) => e.msg === msg);
    await whenLogged(gateway, () => logged('worker listening').length === 2, 'both workers listening');

    // Each new connection goes to the next worker: a few clients reach both.
    const byWorker = new Map<string, PinnedClient>();
    while (byWorker.size < 2 && clients.length < 10) {
      const client = new PinnedClient(gateway.baseUrl, '/mcp');
      clients.push(client);
      await client.initialize();
      const instance = await client.upstreamInstance();
      if (!byWorker.has(instance)) byWorker.set(instance, client);
    }
    assert.equal(byWorker.size, 2, `${clients.length} clients all reached the same worker`);
    const [onA, onB] = [...byWorker.values()] as [PinnedClient, PinnedClient];

    // A task created in A's session on worker A, read and its result taken in that session through worker B.
    const created = await onA.request('tools/call', { name: 'slow_compute', arguments: { seconds: 0.5, label: 'across-workers' }, task: {} });
    const taskId = createdTaskId({ result: created });
    const task = await onB.request('tasks/get', { taskId }, onA.sessionId);
    assert.equal(task.taskId, taskId);
    const result = await onB.request('tasks/result', { taskId }, onA.sessionId);
    assert.match(JSON.stringify(result.content), /across-workers/);
    assert.equal(await onB.upstreamInstance(), [...byWorker.keys()][1], 'the client on B is still on B');

    // Calls on both workers; /metrics counts them all, whichever worker serves it.
    for (let i = 0; i < 3; i++) await onA.request('tools/call', { name: 'echo', arguments: { i } });
    for (let i = 0; i < 4; i++) await onB.request('tools/call', { name: 'echo', arguments: { i } });
    for (const client of [onA, onB]) {
      assert.equal(await client.metric('taskgate_request_duration_seconds_count', 'tool="echo"'), 7);
      assert.equal(await client.metric('taskgate_workers'), 2);
      assert.equal(await client.metric('taskgate_store_up'), 1);
    }

    // SIGTERM to the primary alone, as a container runtime sends it.
    await Promise.all(clients.map((c) => c.http.close()));
    const workerPids = logged('worker started').map((e) => Number(e.pid));
    assert.equal(workerPids.length, 2);
    gateway.child.kill('SIGTERM');
    assert.equal(await gateway.exited, 0, gateway.stderr());
    assert.equal(logged('worker stopped').length, 2);
    for (const pid of workerPids) assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' }, `worker ${pid} still runs`);
  });

  test('the memory store, and an invalid config, are refused with exit 2 before any worker starts', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'taskgate-workers-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const { command, args, cwd } = fixtureCommand('stdio');
    const configs = {
      memory: { listen: { port: 0 }, store: { type: 'memory' }, upstreams: { fx: { command, args, cwd } } },
      invalid: { listen: { port: 0 }, store: { type: 'redis', url: TEST_REDIS_URL, prefix: PREFIX }, upstreams: {} },
    };
    for (const [name, config] of Object.entries(configs)) {
      const file = join(dir, `${name}.yaml`);
      writeFileSync(file, stringify(config));
      const child = startChild(process.execPath, [...nodeArgs(GATEWAY_CLI_PATH), 'serve', '--workers', '2', '--config', file], { env: gatewayEnv({}) });
      assert.equal(await child.exited, 2, `${name}: ${child.stderr()}`);
      assert.match(child.stderr(), name === 'memory' ? /needs a store the workers share/ : /invalid config/);
      assert.doesNotMatch(child.stdout(), /worker started/);
    }
  });
});
