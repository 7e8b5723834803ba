// `isolation: per-principal` stdio upstreams (issue 33, item 3) through a real gateway and a real stdio fixture:
// each principal gets a child of its own whose env names it, the principal's sessions share it, the cap refuses a
// principal past it while every child is busy, and an idle child is stopped. No child runs without a principal
// (issue 39, finding 10): a server that checks its environment lists and serves every principal.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { decodeJwt } from 'jose';
import { startAuthServer } from '../fixtures/auth-server.js';
import { bearer } from '../helpers/auth-requests.js';
import { eventually, testScope, textOf, type TestScope } from '../helpers/harness.js';
import { sendRev2026 } from '../helpers/stateless-wire.js';
import { fixtureCommand } from '../fixtures/spawn.js';

const KEYS = { alice: 'alice-key-0123456789abcdef', bob: 'bob-key-0123456789abcdef-bob', carol: 'carol-key-0123456789abcdef' } as const;
type Name = keyof typeof KEYS;

interface EnvAnswer {
  pid: number;
  env: Record<string, string | null>;
}

async function envOf(client: Client): Promise<EnvAnswer> {
  return JSON.parse(textOf(await client.callTool({ name: 'env', arguments: { names: ['CALLER', 'GREETING', 'EMPTY_CLAIM'] } }))) as EnvAnswer;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function perPrincipalGateway(scope: TestScope, upstream: Record<string, unknown>) {
  const fixture = await scope.upstream('stdio', {
    isolation: 'per-principal',
    env: { CALLER: '{{principal}}', GREETING: 'hello {{principal}}', EMPTY_CLAIM: '[{{claims.email}}]' },
    ...upstream,
  });
  const gateway = await scope.gateway({
    upstreams: { fx: fixture.config },
    auth: { resource: 'http://gateway.example/mcp', apiKeys: (Object.keys(KEYS) as Name[]).map((principal) => ({ principal, key: KEYS[principal] })) },
  });
  const as = (name: Name) => scope.plainClient(gateway.url, { headers: bearer(KEYS[name]) });
  return { gateway, as };
}

describe('stdio isolation: per-principal', () => {
  test('each principal gets a child of its own whose env names it; its sessions share that child', async (t) => {
    const scope = testScope(t);
    const { as } = await perPrincipalGateway(scope, { idleTimeoutMs: 0 });
    const alice = await as('alice');
    const aliceAgain = await as('alice');
    const bob = await as('bob');

    const a1 = await envOf(alice);
    const a2 = await envOf(aliceAgain);
    const b = await envOf(bob);
    assert.deepEqual(a1.env, { CALLER: 'key:alice', GREETING: 'hello key:alice', EMPTY_CLAIM: '[]' });
    assert.deepEqual(b.env, { CALLER: 'key:bob', GREETING: 'hello key:bob', EMPTY_CLAIM: '[]' });
    assert.notEqual(a1.pid, b.pid, 'two principals, two children');
    assert.equal(a2.pid, a1.pid, "alice's second session reaches her child");
    assert.notEqual(a1.pid, process.pid);
  });

  test('past maxSessions, a new principal is refused clearly while every child is busy; a busy child is never stopped for it', async (t) => {
    const scope = testScope(t);
    const { as } = await perPrincipalGateway(scope, { maxSessions: 2, idleTimeoutMs: 0 });
    const alice = await as('alice');
    const bob = await as('bob');
    const carol = await as('carol');
    const pids = { alice: (await envOf(alice)).pid, bob: (await envOf(bob)).pid };

    // Both children get a call that runs until it is cancelled; each has started once its first progress arrives.
    const stop = new AbortController();
    t.after(() => stop.abort());
    const busy = (client: Client) =>
      new Promise<void>((started) => {
        client
          .callTool({ name: 'slow', arguments: { ms: 600_000, steps: 6_000 } }, undefined, { signal: stop.signal, onprogress: () => started() })
          .catch(() => undefined);
      });
    await Promise.all([busy(alice), busy(bob)]);

    await assert.rejects(envOf(carol), (error: Error) => {
      assert.match(error.message, /Upstream 'fx' has no child process to spare for another principal: its cap of 2 children \(upstreams\.fx\.maxSessions, one child per principal\) is reached/);
      return true;
    });
    assert.ok(alive(pids.alice) && alive(pids.bob), 'the busy children were left running');

    // Once a child is idle again, the new principal gets a child in its place (the least recently used idle one).
    stop.abort();
    await eventually(async () => {
      try {
        return (await envOf(carol)).env.CALLER === 'key:carol';
      } catch {
        return false;
      }
    });
  });

  test('a child with no call for idleTimeoutMs is stopped; the principal\'s next call starts a new one', async (t) => {
    const scope = testScope(t);
    const { as } = await perPrincipalGateway(scope, { idleTimeoutMs: 200 });
    const alice = await as('alice');
    const first = await envOf(alice);
    assert.ok(alive(first.pid));
    await eventually(() => !alive(first.pid), 10_000);
    const second = await envOf(alice);
    assert.notEqual(second.pid, first.pid);
    assert.equal(second.env.CALLER, 'key:alice');
  });

  test('without auth on the gateway, every caller shares the anonymous principal\'s child', async (t) => {
    const scope = testScope(t);
    const fixture = await scope.upstream('stdio', { isolation: 'per-principal', idleTimeoutMs: 0, env: { CALLER: '[{{principal}}]' } });
    const gateway = await scope.gateway({ upstreams: { fx: fixture.config } });
    const one = await scope.plainClient(gateway.url);
    const two = await scope.plainClient(gateway.url);
    const a = JSON.parse(textOf(await one.callTool({ name: 'env', arguments: { names: ['CALLER'] } }))) as EnvAnswer;
    const b = JSON.parse(textOf(await two.callTool({ name: 'env', arguments: { names: ['CALLER'] } }))) as EnvAnswer;
    assert.equal(a.pid, b.pid);
    assert.deepEqual(a.env, { CALLER: '[]' });
  });

  test('a task a principal creates in its session runs in its own child', async (t) => {
    const scope = testScope(t);
    const { as } = await perPrincipalGateway(scope, { idleTimeoutMs: 0 });
    const alice = await as('alice');
    const direct = await envOf(alice);
    const created = await alice.request({ method: 'tools/call', params: { name: 'env', arguments: { names: ['CALLER'] }, task: {} } }, CreateTaskResultSchema);
    const result = await alice.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
    const answer = JSON.parse(textOf(result)) as EnvAnswer;
    assert.equal(answer.pid, direct.pid);
    assert.equal(answer.env.CALLER, 'key:alice');
  });

  test('a 2026-07-28 call runs in its principal\'s child, the one that principal\'s sessions use', async (t) => {
    const scope = testScope(t);
    const { gateway, as } = await perPrincipalGateway(scope, { idleTimeoutMs: 0 });
    const session = await envOf(await as('alice'));
    const answer = await sendRev2026(gateway.url, 'tools/call', { name: 'env', arguments: { names: ['CALLER'] } }, { headers: bearer(KEYS.alice) });
    const stateless = JSON.parse(textOf(answer.result as never)) as EnvAnswer;
    assert.equal(stateless.env.CALLER, 'key:alice');
    assert.equal(stateless.pid, session.pid, "alice's 2026-07-28 call and her session share her child");
    const bob = await sendRev2026(gateway.url, 'tools/call', { name: 'env', arguments: { names: ['CALLER'] } }, { headers: bearer(KEYS.bob) });
    assert.equal((JSON.parse(textOf(bob.result as never)) as EnvAnswer).env.CALLER, 'key:bob');
  });

  test('the gateway refuses at load a caller placeholder in a shared upstream and auth on a per-session one', async (t) => {
    const scope = testScope(t);
    const fixture = await scope.upstream('stdio');
    await assert.rejects(scope.gateway({ upstreams: { fx: { ...fixture.config, env: { CALLER: '{{principal}}' } } } }), /upstreams\.fx\.env\.CALLER: names the caller/);
    await assert.rejects(
      scope.gateway({ upstreams: { fx: { ...fixture.config, isolation: 'per-session', auth: { clientCredentials: { clientId: 'gw', clientSecret: 'x', resource: 'https://api.example' } } } } }),
      /upstreams\.fx\.auth: auth on a stdio upstream needs isolation: per-principal/,
    );
  });

  test('no child starts without a principal: a server that refuses unfilled placeholders lists and serves every principal, never down', async (t) => {
    const scope = testScope(t);
    const strict = fixtureCommand('stdio');
    // Exits at start when CALLER or MEMORY_FILE_PATH is unset or still holds "{{": the control child of old did.
    const { gateway, as } = await perPrincipalGateway(scope, {
      args: [...strict.args, '--require-env', 'CALLER,MEMORY_FILE_PATH'],
      idleTimeoutMs: 0,
      env: { CALLER: '{{principal}}', MEMORY_FILE_PATH: '/tmp/graph-{{principal}}.jsonl' },
    });
    const statusOf = async () => {
      const ready = await fetch(`${gateway.origin}/readyz`);
      const body = (await ready.json()) as { upstreams: { name: string; state: string; error?: string }[] };
      return { code: ready.status, fx: body.upstreams.find((u) => u.name === 'fx') };
    };
    const before = await statusOf();
    assert.equal(before.code, 200);
    assert.equal(before.fx?.state, 'ready', JSON.stringify(before.fx));

    // A principal's list starts its child, which lists its tools; calls of that principal and another work.
    const alice = await as('alice');
    const tools = (await alice.listTools()).tools.map((tool) => tool.name);
    assert.ok(tools.includes('env'), JSON.stringify(tools));
    const answer = JSON.parse(textOf(await alice.callTool({ name: 'env', arguments: { names: ['CALLER', 'MEMORY_FILE_PATH'] } }))) as EnvAnswer;
    assert.deepEqual(answer.env, { CALLER: 'key:alice', MEMORY_FILE_PATH: '/tmp/graph-key:alice.jsonl' });
    const bob = JSON.parse(textOf(await (await as('bob')).callTool({ name: 'env', arguments: { names: ['CALLER'] } }))) as EnvAnswer;
    assert.equal(bob.env.CALLER, 'key:bob');
    const listed = await sendRev2026(gateway.url, 'tools/list', {}, { headers: bearer(KEYS.carol) });
    assert.ok(((listed.result?.tools as { name: string }[] | undefined) ?? []).some((tool) => tool.name === 'env'), JSON.stringify(listed.response));

    const after = await statusOf();
    assert.equal(after.code, 200);
    assert.equal(after.fx?.state, 'ready', JSON.stringify(after.fx));
  });

  test('a principal\'s first call names a tool before anything was listed: its own child is started and listed for it', async (t) => {
    const scope = testScope(t);
    const strict = fixtureCommand('stdio');
    const { as } = await perPrincipalGateway(scope, { args: [...strict.args, '--require-env', 'CALLER'], idleTimeoutMs: 0, env: { CALLER: '{{principal}}' } });
    const first = JSON.parse(textOf(await (await as('bob')).callTool({ name: 'env', arguments: { names: ['CALLER'] } }))) as EnvAnswer;
    assert.equal(first.env.CALLER, 'key:bob');
  });

  test('the upstream token of the upstream\'s auth reaches the child as {{upstreamToken}}', async (t) => {
    const issuer = await startAuthServer({ clients: { gw: { secret: 'gw-secret-0123' } } });
    t.after(() => issuer.close());
    const scope = testScope(t);
    // The child refuses to start without its token: no child may ever run with "{{upstreamToken}}" unfilled.
    const { as } = await perPrincipalGateway(scope, {
      args: [...fixtureCommand('stdio').args, '--require-env', 'CALLER,API_TOKEN'],
      idleTimeoutMs: 0,
      env: { CALLER: '{{principal}}', API_TOKEN: '{{upstreamToken}}' },
      auth: { clientCredentials: { clientId: 'gw', clientSecret: 'gw-secret-0123', tokenUrl: `${issuer.issuer}/token`, resource: 'https://api.example/' } },
    });
    const answer = JSON.parse(textOf(await (await as('alice')).callTool({ name: 'env', arguments: { names: ['CALLER', 'API_TOKEN'] } }))) as EnvAnswer;
    assert.equal(answer.env.CALLER, 'key:alice');
    assert.equal(decodeJwt(String(answer.env.API_TOKEN)).aud, 'https://api.example/', 'a token of the authorization server, for the configured resource');
    assert.equal(issuer.tokenCounts().byGrant.client_credentials, 1);
  });
});

