// A shared stdio connection must never hand one client's data to another; per-session isolation gives each
// client its own child process.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { connectClient, fixtureUpstream, startTestGateway, textOf } from './harness.js';

describe('stdio isolation', () => {
  test('shared: an upstream request that cannot be attributed is refused, not sent to the wrong client', async () => {
    const upstream = await fixtureUpstream('stdio');
    const gateway = await startTestGateway({ upstreams: { fx: upstream.config } });
    try {
      const busy = await connectClient(gateway.url);
      const asker = await connectClient(gateway.url);
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
      await busy.client.close();
      await asker.client.close();
    } finally {
      await gateway.close();
    }
  });

  test('per-session: each client gets its own child process, and input requests always reach the right client', async () => {
    const upstream = await fixtureUpstream('stdio', { isolation: 'per-session' });
    const gateway = await startTestGateway({ upstreams: { fx: upstream.config } });
    try {
      const one = await connectClient(gateway.url);
      const two = await connectClient(gateway.url);
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
      await two.client.close();
    } finally {
      await gateway.close();
    }
  });
});
