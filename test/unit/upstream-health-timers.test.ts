// When a down upstream is tried again (src/upstream/life/upstream-health.ts over restart-backoff.ts), on node:test's
// mock clock (setTimeout and Date): the reconnect comes exactly the backoff after each failure (1, 2, 4 … s for an
// HTTP upstream, capped at 30 s; a stdio child's restart settings), a connection that stayed up past the stable time
// earns the initial delay again, `upstream.down` is said once per outage, and a closed upstream is never tried again.
// restart-backoff.test.ts checks the delays alone; this checks they are what the reconnect timer waits.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import type { UpstreamConfig } from '../../src/config/types.js';
import { GatewayEvents } from '../../src/events.js';
import { UpstreamHealth } from '../../src/upstream/life/upstream-health.js';

const T0 = 1_000_000;

function upstreamConfig(upstream: Record<string, unknown>): UpstreamConfig {
  const config = parseConfig(stringify({ upstreams: { fx: upstream } }), 'upstream-health.yaml', {});
  return config.upstreams[0] as UpstreamConfig;
}

describe('upstream reconnect timer on the mock clock', () => {
  let events: GatewayEvents;
  let downs: string[];
  let reconnects: number[];
  let health: UpstreamHealth | undefined;

  beforeEach(() => {
    mock.timers.enable({ apis: ['Date', 'setTimeout'], now: T0 });
    events = new GatewayEvents();
    downs = [];
    reconnects = [];
    events.on('upstream.down', ({ reason }) => downs.push(reason));
  });
  afterEach(() => {
    health?.close();
    mock.timers.reset();
  });

  /** An upstream whose every reconnect fails at once, recording when it was tried. */
  function failing(config: UpstreamConfig): UpstreamHealth {
    const made: UpstreamHealth = new UpstreamHealth(config, events, async () => {
      reconnects.push(Date.now() - T0);
      made.down('still refused');
    });
    return made;
  }

  /** Advances to T0 + `at`, checking no reconnect came in the millisecond before it and one came at it. */
  function expectReconnectAt(at: number): void {
    const before = reconnects.length;
    mock.timers.tick(at - 1 - (Date.now() - T0));
    assert.equal(reconnects.length, before, `no reconnect before ${at} ms`);
    mock.timers.tick(1);
    assert.deepEqual(reconnects.slice(before), [at], `reconnected at ${at} ms`);
  }

  it('an HTTP upstream is tried again 1, 2, 4 … s after each failure, then every 30 s', () => {
    health = failing(upstreamConfig({ transport: 'streamable-http', url: 'http://127.0.0.1:9/mcp' }));
    health.down('connection refused');
    let at = 0;
    for (const delay of [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]) expectReconnectAt((at += delay));
    assert.deepEqual(downs, ['connection refused'], 'down is said once per outage, not at every failed retry');
  });

  it('a stdio child is restarted on its own restart settings', () => {
    health = failing(upstreamConfig({ transport: 'stdio', command: 'node', restart: { initialDelayMs: 250, maxDelayMs: 600 } }));
    health.down('exited');
    let at = 0;
    for (const delay of [250, 500, 600, 600]) expectReconnectAt((at += delay));
  });

  it('a connection that stayed up past the stable time (10 s) earns the initial delay; one that died sooner backs off on', () => {
    let fail = true;
    const made: UpstreamHealth = new UpstreamHealth(upstreamConfig({ transport: 'streamable-http', url: 'http://127.0.0.1:9/mcp' }), events, async () => {
      reconnects.push(Date.now() - T0);
      if (fail) made.down('refused');
      else made.up();
    });
    health = made;
    made.down('refused');
    expectReconnectAt(1_000);
    fail = false;
    expectReconnectAt(3_000); // up at 3 s
    mock.timers.tick(10_000); // up exactly 10 s: not yet "stable" (it must stay up longer)
    made.down('dropped');
    expectReconnectAt(13_000 + 4_000);
    mock.timers.tick(10_001); // up 10.001 s
    made.down('dropped');
    expectReconnectAt(27_001 + 1_000);
  });

  it('a closed upstream is never tried again', () => {
    health = failing(upstreamConfig({ transport: 'streamable-http', url: 'http://127.0.0.1:9/mcp' }));
    health.down('refused');
    mock.timers.tick(999);
    health.close();
    mock.timers.tick(60_000);
    assert.deepEqual(reconnects, []);
    health.down('late failure');
    mock.timers.tick(60_000);
    assert.deepEqual(reconnects, []);
  });
});
