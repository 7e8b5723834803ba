// A shared stdio connection must never hand one client's data to another; per-session isolation gives each
// client its own child process.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { eventually, suiteScope, testScope, textOf, type TestGateway } from '../helpers/harness.js';

describe('stdio isolation', () => {
  // The two tests of a shared child share one gateway and child: each opens clients of its own, closed when it ends.
  const shared = suiteScope();
  let gateway: TestGateway;
  before(async () => {
    const upstream = await shared.upstream('stdio');
    gateway = await shared.gateway({ upstreams: { fx: upstream.config } });
  });

  test('shared: an upstream request that cannot be attributed is refused, not sent to the wrong client', async (t) => {
    const scope = testScope(t);
    const busy = await scope.client(gateway.url);
    const asker = await scope.client(gateway.url);
    const slow = busy.client.callTool({ name: 'slow', arguments: { ms: 1500 } });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const asked = await asker.client.callTool({ name: 'ask_twice', arguments: {} }).then(
      (result) => textOf(result),
      (error: Error) => error.message,
    );
    assert.match(asked, /isolation: per-session/);
    assert.equal(busy.log.elicitations.length, 0, 'the other client was not asked');
    assert.equal(asker.log.elicitations.length, 0);
    await slow;
    // With only one client's calls running, the same request is relayed to that client.
    const alone = await asker.client.callTool({ name: 'ask_twice', arguments: {} });
    assert.match(textOf(alone), /answer to First question\?/);
  });

  test('shared: subscriptions are shared upstream, fanned out per session, and dropped with the last subscriber', async (t) => {
    const scope = testScope(t);
    const uri = 'test://watched-resource';
    const a = await scope.client(gateway.url);
    const b = await scope.client(gateway.url);
    const observer = await scope.client(gateway.url);
    const updates = (log: typeof a.log): number => log.notifications.filter((n) => n.method === 'notifications/resources/updated').length;
    await a.client.subscribeResource({ uri });
    await b.client.subscribeResource({ uri });
    await new Promise((resolve) => setTimeout(resolve, 200)); // GET streams open
    const touched = JSON.parse(textOf(await observer.client.callTool({ name: 'touch_resource', arguments: { uri } }))) as { notified: number };
    assert.equal(touched.notified, 1, 'one upstream subscription serves both sessions');
    await eventually(() => updates(a.log) === 1 && updates(b.log) === 1);
    assert.equal(updates(observer.log), 0, 'a session that did not subscribe gets no updates');

    await a.transport.terminateSession();
    await observer.client.callTool({ name: 'touch_resource', arguments: { uri } });
    await eventually(() => updates(b.log) === 2);
    await b.transport.terminateSession();
    await eventually(async () => {
      const again = JSON.parse(textOf(await observer.client.callTool({ name: 'touch_resource', arguments: { uri } }))) as { notified: number };
      return again.notified === 0;
    });
  });

  test('per-session: each client gets its own child process, and input requests always reach the right client', async (t) => {
    const scope = testScope(t);
    const upstream = await scope.upstream('stdio', { isolation: 'per-session' });
    const gateway = await scope.gateway({ upstreams: { fx: upstream.config } });
    const one = await scope.client(gateway.url);
    const two = await scope.client(gateway.url);
    const pidOne = (JSON.parse(textOf(await one.client.callTool({ name: 'whoami', arguments: {} }))) as { pid: number }).pid;
    const pidTwo = (JSON.parse(textOf(await two.client.callTool({ name: 'whoami', arguments: {} }))) as { pid: number }).pid;
    assert.notEqual(pidOne, pidTwo);
    const slow = one.client.callTool({ name: 'slow', arguments: { ms: 800 } });
    const asked = await two.client.callTool({ name: 'ask_twice', arguments: {} });
    assert.match(textOf(asked), /answer to Second question\?/);
    assert.equal(one.log.elicitations.length, 0);
    assert.equal(two.log.elicitations.length, 2);
    await slow;
    await one.client.close();
    // Ending the session ends its child.
    await one.transport.terminateSession().catch(() => undefined);
  });
});
