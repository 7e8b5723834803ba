// When an upstream is tried again after it went down (src/upstream/life/restart-backoff.ts), on a clock the test
// moves (node:test's mock timers): a connection that keeps dying backs off up to the bound, one that stayed up
// longer than the stable time starts afresh. The integration suites restart real upstreams; this checks the
// sequence itself, including the 10 s rule no integration test waits out.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import { RestartBackoff } from '../../src/upstream/life/restart-backoff.js';

describe('restart backoff', () => {
  beforeEach(() => mock.timers.enable({ apis: ['Date'], now: 1_000_000 }));
  afterEach(() => mock.timers.reset());

  it('doubles from the initial delay up to the bound while the upstream keeps failing, counting the attempts', () => {
    const backoff = new RestartBackoff(100, 1_000);
    assert.deepEqual(Array.from({ length: 6 }, () => backoff.next()), [100, 200, 400, 800, 1_000, 1_000]);
    assert.equal(backoff.attempts, 6);
  });

  it('a connection that died within the stable time goes on backing off', () => {
    const backoff = new RestartBackoff(100, 10_000);
    backoff.next();
    backoff.next();
    backoff.up();
    mock.timers.tick(10_000); // not longer than the stable time
    assert.equal(backoff.next(), 400);
    assert.equal(backoff.attempts, 3);
  });

  it('a connection that stayed up longer than the stable time earns the initial delay again', () => {
    const backoff = new RestartBackoff(100, 10_000);
    for (let i = 0; i < 4; i++) backoff.next();
    backoff.up();
    mock.timers.tick(10_001);
    assert.equal(backoff.next(), 100);
    assert.equal(backoff.attempts, 1);
    assert.equal(backoff.next(), 200, 'and backs off from there');
  });

  it('a failure right after one that never came up counts on, however long ago the last connection was', () => {
    const backoff = new RestartBackoff(100, 10_000);
    backoff.up();
    mock.timers.tick(60_000);
    assert.equal(backoff.next(), 100); // it had been up a long time
    mock.timers.tick(60_000); // an attempt that did not come up (no up()) does not start afresh
    assert.equal(backoff.next(), 200);
  });
});
