// Every upstream body goes through one decoder, whatever revision the upstream speaks (issue 21). A 2026-07-28
// upstream that answers as the reference everything-server does (its notifications, then the answer, as several
// JSON values in one application/json body) has its progress and logs relayed and its answer delivered; a body
// that holds no JSON-RPC answer fails the call, on either upstream client, saying what came instead.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { startStatelessServer } from '../fixtures/stateless-server.js';
import { spawnAbusiveFixture, type GatewayChild } from '../fixtures/spawn.js';
import { eventually, logEntries, suiteScope, textOf, type Json } from '../helpers/harness.js';
import { sendRev2026 } from '../helpers/stateless-wire.js';

describe('a 2026-07-28 upstream answering with several JSON values in one body', () => {
  const scope = suiteScope();
  let gateway: GatewayChild;

  before(async () => {
    const fixture = await startStatelessServer({ rev2025Side: false, jsonBodies: true });
    scope.defer(() => fixture.close());
    gateway = await scope.spawnGateway({ config: { upstreams: { everything: { url: fixture.url, protocol: 'modern' } }, log: { level: 'info' } } });
  });

  test('a 2025-11-25 caller gets the progress that came before the result, then the result', async () => {
    const { client } = await scope.client(gateway.url);
    const progress: Json[] = [];
    const result = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, { onprogress: (p) => progress.push(p as Json) });
    assert.equal(textOf(result), 'Progress tool completed');
    assert.deepEqual(progress.map((p) => p.progress), [0, 50, 100]);
    assert.equal(progress[0]?.message, 'step 1 of 3');
  });

  test('a 2026-07-28 caller gets the progress under its own token, and logs only when it asked for a level', async () => {
    const withProgress = await sendRev2026(gateway.url, 'tools/call', { name: 'test_tool_with_progress', arguments: {} }, { meta: { progressToken: 'mine' } });
    assert.equal(withProgress.error, undefined, JSON.stringify(withProgress.messages));
    assert.equal(textOf(withProgress.result), 'Progress tool completed');
    const progress = withProgress.notifications.filter((n) => n.method === 'notifications/progress').map((n) => n.params as Json);
    assert.deepEqual(progress.map((p) => [p.progressToken, p.progress]), [['mine', 0], ['mine', 50], ['mine', 100]]);

    const logged = await sendRev2026(gateway.url, 'tools/call', { name: 'test_logging_tool', arguments: {} }, { logLevel: 'info' });
    assert.equal(logged.error, undefined, JSON.stringify(logged.messages));
    const logs = logged.notifications.filter((n) => n.method === 'notifications/message').map((n) => (n.params as Json).data);
    assert.deepEqual(logs, ['Tool execution started', 'Tool execution completed']);
    const quiet = await sendRev2026(gateway.url, 'tools/call', { name: 'test_logging_tool', arguments: {} });
    assert.equal(quiet.error, undefined, JSON.stringify(quiet.messages));
    assert.deepEqual(quiet.notifications.filter((n) => n.method === 'notifications/message'), []);
  });

  test("conformance server-stateless's streaming elicitation: progress, then an InputRequiredResult, never an error", async () => {
    const answer = await sendRev2026(gateway.url, 'tools/call', { name: 'test_streaming_elicitation', arguments: {} }, { capabilities: { elicitation: {} } });
    assert.equal(answer.error, undefined, JSON.stringify(answer.messages));
    assert.equal(answer.result?.resultType, 'input_required', JSON.stringify(answer.result));
    assert.ok(answer.messages.every((m) => typeof m.method !== 'string' || m.method.startsWith('notifications/')), 'no request on the stream');
  });

  test('the quirk is warned about, naming the upstream', async () => {
    const warnings = (): Json[] => logEntries(gateway).filter((e) => /JSON values in one body/.test(String(e.violation)));
    await eventually(() => warnings().length > 0);
    for (const warning of warnings()) assert.equal(warning.upstream, 'everything');
  });
});

describe('an upstream body that holds no JSON-RPC answer', () => {
  const scope = suiteScope();
  let gateway: GatewayChild;

  before(async () => {
    // One fixture that speaks both revisions, reached by both upstream clients.
    const fixture = await spawnAbusiveFixture({ transport: 'streamable-http', rev2026Side: true });
    scope.defer(() => fixture.kill());
    gateway = await scope.spawnGateway({
      config: {
        upstreams: {
          current: { url: fixture.url, protocol: 'modern', prefix: 'current_' },
          sessions: { url: fixture.url, protocol: 'legacy', prefix: 'sessions_' },
        },
      },
    });
  });

  test('fails the call with what came: status, content type and the first bytes, on either upstream client', async () => {
    const { client } = await scope.client(gateway.url);
    const what = /\(HTTP 200, Content-Type 'application\/json', body began "x{40}\\n"\)/;
    await assert.rejects(client.callTool({ name: 'current_huge_line', arguments: { bytes: 40 } }), (error: Error) => {
      assert.match(error.message, /Upstream 'current' answered tools\/call without a JSON-RPC response/);
      assert.match(error.message, what);
      return true;
    });
    const direct = await sendRev2026(gateway.url, 'tools/call', { name: 'current_huge_line', arguments: { bytes: 40 } });
    assert.equal(direct.error?.code, -32603, JSON.stringify(direct.messages));
    assert.match(String(direct.error?.message), what);
    await assert.rejects(client.callTool({ name: 'sessions_huge_line', arguments: { bytes: 40 } }), (error: Error) => {
      assert.match(error.message, /Upstream 'sessions' lost the call: the upstream answered without a response/);
      assert.match(error.message, what);
      return true;
    });
    // A long body is quoted only in part.
    await assert.rejects(client.callTool({ name: 'current_huge_line', arguments: { bytes: 5000 } }), /body began "x{120}"…\)/);
    // Both upstreams still serve.
    assert.equal(textOf(await client.callTool({ name: 'current_echo', arguments: { text: 'still here' } })), 'still here');
    assert.equal(textOf(await client.callTool({ name: 'sessions_echo', arguments: { text: 'still here' } })), 'still here');
  });
});
