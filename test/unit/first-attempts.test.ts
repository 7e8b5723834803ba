// What lists wait for while the gateway starts (src/gateway/first-attempts.ts): every upstream's first attempt,
// each no longer than its bound, and nothing once the start has named none (or ended). The behaviour through a
// gateway process: test/integration/startup-lists.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FirstAttempts } from '../../src/gateway/first-attempts.js';

describe('first attempts at start', () => {
  it('waits until the start names its upstreams, then until each attempt ends (a failed one too)', async () => {
    const attempts = new FirstAttempts();
    let waited = false;
    const waiting = attempts.wait().then(() => (waited = true));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(waited, false, 'nothing named yet: the listener opened before the upstreams started');
    let fail!: (error: Error) => void;
    let succeed!: () => void;
    attempts.begin([
      { attempt: new Promise<void>((resolve) => (succeed = resolve)), boundMs: 600_000 },
      { attempt: new Promise<void>((_, reject) => (fail = reject)), boundMs: 600_000 },
    ]);
    succeed();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(waited, false, 'one attempt still running');
    fail(new Error('not reachable'));
    await waiting;
    assert.equal(attempts.over, true);
  });

  it('waits for an attempt that never ends only until its bound', async () => {
    const attempts = new FirstAttempts();
    attempts.begin([{ attempt: new Promise(() => undefined), boundMs: 1 }]);
    await attempts.wait();
    assert.equal(attempts.over, true);
  });

  it('is begun once: a gateway stopped before its upstreams started releases whoever waits', async () => {
    const attempts = new FirstAttempts();
    const waiting = attempts.wait();
    attempts.begin([]);
    attempts.begin([{ attempt: new Promise(() => undefined), boundMs: 600_000 }]);
    await waiting;
    await attempts.wait();
  });
});
