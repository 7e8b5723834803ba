// Long tool calls for clients that do not use tasks: while the upstream is silent, the gateway keeps a plain call
// alive with progress (when the client asked for progress), so a client that resets its timeout on progress waits
// for the result instead of giving up. Both revisions; the values the client sees always increase.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { suiteScope, testScope, textOf, type Json, type TestGateway } from '../helpers/harness.js';
import { sendRev2026 } from '../helpers/stateless-wire.js';

describe('keep-alive progress for plain tool calls', () => {
  const scope = suiteScope();
  let gateway: TestGateway;

  before(async () => {
    const upstream = await scope.upstream('stdio');
    gateway = await scope.gateway({
      upstreams: { fx: upstream.config },
      tasks: { defaults: { keepAliveProgressMs: 1_000 }, rules: [{ match: 'greet', keepAliveProgressMs: 0 }] },
    });
  });

  test('a client with a 3 s timeout that resets on progress gets the result of a silent 6 s call; progress only increases', async (t) => {
    const client = await testScope(t).plainClient(gateway.url);
    const progress: number[] = [];
    const result = await client.callTool({ name: 'slow', arguments: { ms: 6_000 } }, undefined, {
      timeout: 3_000,
      resetTimeoutOnProgress: true,
      onprogress: (p) => progress.push(p.progress),
    });
    assert.equal(result.isError, undefined, JSON.stringify(result));
    assert.ok(progress.length >= 4, `keep-alives while the upstream was silent: ${JSON.stringify(progress)}`);
    for (let i = 1; i < progress.length; i++) assert.ok((progress[i] as number) > (progress[i - 1] as number), JSON.stringify(progress));
  });

  test('without keep-alive (policy 0) the same client gives up after its timeout', async (t) => {
    const client = await testScope(t).plainClient(gateway.url);
    // greet answers at once, so the rule's 0 is checked on the wire instead: no progress arrives for it.
    const progress: number[] = [];
    const result = await client.callTool({ name: 'greet', arguments: { name: 'x' } }, undefined, { onprogress: (p) => progress.push(p.progress) });
    assert.match(textOf(result), /Hello, x!/);
    assert.deepEqual(progress, []);
    // And a silent call without a progressToken asked for gets none: a 2 s timeout without resets cuts it.
    await assert.rejects(client.callTool({ name: 'slow', arguments: { ms: 3_000 } }, undefined, { timeout: 2_000 }), /timed out|Request timed out/i);
  });

  test('2026-07-28 without the tasks extension: the same keep-alives on the request\'s stream, then the result', async () => {
    const answer = await sendRev2026(gateway.url, 'tools/call', { name: 'slow', arguments: { ms: 3_500 } }, { meta: { progressToken: 'p-1' }, accept: 'application/json, text/event-stream' });
    assert.equal(answer.sse, true);
    const values = answer.notifications
      .filter((n) => n.method === 'notifications/progress')
      .map((n) => ((n.params as Json).progress as number));
    assert.ok(values.length >= 3, JSON.stringify(answer.notifications));
    for (let i = 1; i < values.length; i++) assert.ok((values[i] as number) > (values[i - 1] as number), JSON.stringify(values));
    assert.ok(answer.notifications.every((n) => (n.params as Json).progressToken === 'p-1'));
    assert.equal(answer.result?.resultType, 'complete', JSON.stringify(answer.response));
  });
});
