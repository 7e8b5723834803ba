// The jsonWindowMs deadlines of streamed answers share one timer: each window still ends at its own deadline,
// a closed one never fires, and closed windows do not pile up while calls keep coming.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { JsonWindows } from '../../src/protocol/rev2025-11-25/http/json-window.js';

describe('json windows', () => {
  it('expires each open window after its own window, in order, and never a closed one', async () => {
    const windows = new JsonWindows(40);
    const fired: { name: string; afterMs: number }[] = [];
    const started = performance.now();
    const open = (name: string) => windows.start(() => fired.push({ name, afterMs: performance.now() - started }));
    open('a');
    const b = open('b');
    await sleep(20);
    open('c');
    b.close();
    await sleep(80);
    assert.deepEqual(fired.map((f) => f.name), ['a', 'c']);
    assert.ok((fired[0]?.afterMs ?? 0) >= 39, `a fired after ${fired[0]?.afterMs} ms`);
    assert.ok((fired[1]?.afterMs ?? 0) >= 59, `c fired after ${fired[1]?.afterMs} ms (opened 20 ms later)`);
  });

  it('a window closed from another window’s expiry, or closed twice, does not fire', async () => {
    const windows = new JsonWindows(10);
    const fired: string[] = [];
    const later: ReturnType<JsonWindows['start']>[] = [];
    windows.start(() => {
      fired.push('first');
      for (const window of later) window.close();
    });
    later.push(windows.start(() => fired.push('second')));
    const third = windows.start(() => fired.push('third'));
    third.close();
    third.close();
    await sleep(40);
    assert.deepEqual(fired, ['first']);
    // The shared timer is re-armed for windows opened after the queue emptied.
    windows.start(() => fired.push('fourth'));
    await sleep(40);
    assert.deepEqual(fired, ['first', 'fourth']);
  });

  it('keeps the queue within a few times the windows still open while calls are answered in time', async () => {
    const windows = new JsonWindows(50);
    const fired: string[] = [];
    windows.start(() => fired.push('open'));
    for (let i = 0; i < 100_000; i++) windows.start(() => fired.push('closed')).close();
    assert.ok(windows.queued <= 1_000, `${windows.queued} windows queued for 1 open`);
    await sleep(80);
    assert.deepEqual(fired, ['open']);
    assert.equal(windows.queued, 0);
  });
});
