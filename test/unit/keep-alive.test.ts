import assert from 'node:assert/strict';
import { afterEach, describe, it, mock } from 'node:test';
import type { JsonRpcNotification } from '../../src/jsonrpc.js';
import { keepAliveFor } from '../../src/streams/keep-alive.js';

function progressOf(sent: JsonRpcNotification[]): { progress: unknown; total?: unknown }[] {
  return sent.map((n) => {
    const { progress, total } = n.params ?? {};
    return total === undefined ? { progress } : { progress, total };
  });
}

describe('keep-alive progress', () => {
  // The keep-alive's timer runs on a clock the test moves: exact counts, no waiting.
  afterEach(() => mock.timers.reset());

  it('is off without a progressToken or with interval 0', () => {
    assert.equal(keepAliveFor({}, 1_000, () => undefined), undefined);
    assert.equal(keepAliveFor({ progressToken: 't' }, 0, () => undefined), undefined);
  });

  it('counts up while the upstream is silent, then keeps the upstream\'s values increasing; a raised value loses its total', () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    const sent: JsonRpcNotification[] = [];
    const keepAlive = keepAliveFor({ progressToken: 'p' }, 30, (n) => sent.push(n));
    assert.ok(keepAlive !== undefined);
    mock.timers.tick(29);
    assert.equal(sent.length, 0, 'nothing before the upstream was silent for the interval');
    // One interval per tick: each keep-alive arms the next one from its own callback.
    for (const ms of [1, 30, 30]) mock.timers.tick(ms);
    const silent = sent.length;
    assert.equal(silent, 3, `keep-alives: ${silent}`);
    assert.deepEqual(progressOf(sent), Array.from({ length: silent }, (_, i) => ({ progress: i + 1 })));
    assert.ok(sent.every((n) => n.params?.progressToken === 'p'));

    // The upstream's "1 of 1" comes after the keep-alives went past it: raised, and its total dropped.
    keepAlive.forward({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'p', progress: 1, total: 1, message: 'done' } });
    // A value above everything sent goes as the upstream gave it, total and all.
    keepAlive.forward({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'p', progress: silent + 5, total: silent + 10 } });
    keepAlive.stop();
    const [raised, kept] = sent.slice(silent);
    assert.deepEqual({ ...raised?.params }, { progressToken: 'p', progress: silent + 0.001, message: 'done' });
    assert.deepEqual({ ...kept?.params }, { progressToken: 'p', progress: silent + 5, total: silent + 10 });
    for (const ms of [30, 30, 30]) mock.timers.tick(ms);
    assert.equal(sent.length, silent + 2, 'nothing after stop');
  });
});
