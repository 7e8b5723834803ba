// The one lifecycle of the process (src/lifecycle.ts): parts start in the order asked, one at a time, and stop in
// reverse, whatever failed in between; a stop that throws is logged and the rest still stop; only started parts
// stop; a second close waits for the first.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Lifecycle, LifecycleClosedError } from '../../src/lifecycle.js';

interface Logged {
  fields: Record<string, unknown>;
  message: string;
}

function recording(): { life: Lifecycle; logged: Logged[]; trail: string[]; part(name: string, start?: () => unknown): Promise<unknown> } {
  const logged: Logged[] = [];
  const trail: string[] = [];
  const life = new Lifecycle({ error: (fields, message) => logged.push({ fields: fields as Record<string, unknown>, message }) });
  const part = (name: string, start: () => unknown = () => name): Promise<unknown> =>
    life.start({
      name,
      start: () => {
        trail.push(`start ${name}`);
        return start();
      },
      stop: () => {
        trail.push(`stop ${name}`);
      },
    });
  return { life, logged, trail, part };
}

/** A promise and the function that settles it, for a start that waits on the test. */
function deferred<T = void>(): { promise: Promise<T>; resolve(value: T): void; reject(error: Error): void } {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

describe('lifecycle', () => {
  it('starts parts in order, hands each stop what its start returned, and stops them last-started first', async () => {
    const { life, trail, part } = recording();
    const handed: unknown[] = [];
    await part('store');
    const value = await life.start({ name: 'server', start: () => ({ port: 1 }), stop: (server) => void handed.push(server) });
    await part('listener');
    assert.deepEqual(value, { port: 1 });
    await life.close();
    assert.deepEqual(trail, ['start store', 'start listener', 'stop listener', 'stop store']);
    assert.deepEqual(handed, [{ port: 1 }]);
  });

  it('starts run one at a time in the order asked, also when nobody awaits the one before', async () => {
    const { life, trail, part } = recording();
    const slow = deferred<string>();
    const first = part('slow', () => slow.promise);
    const second = part('next');
    await Promise.resolve();
    assert.deepEqual(trail, ['start slow']);
    slow.resolve('done');
    assert.equal(await first, 'done');
    await second;
    await life.close();
    assert.deepEqual(trail, ['start slow', 'start next', 'stop next', 'stop slow']);
  });

  it('a start that fails: close stops only the parts whose start returned', async () => {
    const { life, trail, part } = recording();
    await part('tracing');
    await part('store');
    await assert.rejects(
      part('listener', () => {
        throw new Error('EADDRINUSE');
      }),
      /EADDRINUSE/,
    );
    await life.close();
    assert.deepEqual(trail, ['start tracing', 'start store', 'start listener', 'stop store', 'stop tracing']);
  });

  it('a stop that throws (or rejects) is logged with its part, and the others still stop', async () => {
    const { life, logged, trail, part } = recording();
    await part('first');
    await life.start({ name: 'throws', start: () => undefined, stop: () => { throw new Error('boom'); } });
    await life.start({ name: 'rejects', start: () => undefined, stop: () => Promise.reject(new Error('later boom')) });
    await part('last');
    await life.close();
    assert.deepEqual(trail, ['start first', 'start last', 'stop last', 'stop first']);
    assert.deepEqual(logged.map((entry) => [entry.fields.part, (entry.fields.err as Error).message]), [['rejects', 'later boom'], ['throws', 'boom']]);
  });

  it('each stop waits for the one before it to settle', async () => {
    const { life, trail, part } = recording();
    await part('store');
    const draining = deferred();
    await life.start({ name: 'drain', start: () => undefined, stop: () => draining.promise.then(() => void trail.push('drained')) });
    const closed = life.close();
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(trail, ['start store']);
    draining.resolve();
    await closed;
    assert.deepEqual(trail, ['start store', 'drained', 'stop store']);
  });

  it('a second close waits for the first and stops nothing twice; closing says so from the first call', async () => {
    const { life, trail, part } = recording();
    await part('store');
    const draining = deferred();
    await life.start({ name: 'drain', start: () => undefined, stop: () => draining.promise });
    assert.equal(life.closing, false);
    const first = life.close();
    assert.equal(life.closing, true);
    const second = life.close();
    assert.equal(second, first);
    let secondDone = false;
    void second.then(() => (secondDone = true));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(secondDone, false);
    draining.resolve();
    await second;
    await life.close();
    assert.deepEqual(trail, ['start store', 'stop store']);
  });

  it('close during a start lets it finish and stops it too; nothing starts once closing', async () => {
    const { life, trail, part } = recording();
    await part('store');
    const listening = deferred<string>();
    const listener = part('listener', () => listening.promise);
    await Promise.resolve();
    const closed = life.close();
    listening.resolve('http://127.0.0.1:1/mcp');
    await listener;
    await closed;
    assert.deepEqual(trail, ['start store', 'start listener', 'stop listener', 'stop store']);
    await assert.rejects(part('late'), LifecycleClosedError);
    assert.deepEqual(trail, ['start store', 'start listener', 'stop listener', 'stop store']);
  });

  it('a part with nothing to stop is started and skipped on the way down', async () => {
    const { life, trail, part } = recording();
    await part('store');
    assert.equal(await life.start({ name: 'built', start: () => 42 }), 42);
    await life.close();
    assert.deepEqual(trail, ['start store', 'stop store']);
  });
});
