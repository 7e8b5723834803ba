// The keyed pool every connection of a session's or a principal's own lives in (src/upstream/life/connection-pool.ts):
// one per key however many ask at once, the least recently used idle one closed at the bound and a clear refusal
// when every one is busy, and the idle sweep, which closes a swept connection once it has had no call for a while
// and never one with a call running. The pool's connections here are plain objects whose calls the test starts and
// ends; the sweep runs on real timers and the tests wait for a close, never for a clock.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConnectionPool, type PoolCloseReason, type PooledConnection } from '../../src/upstream/life/connection-pool.js';
import { bounded } from '../helpers/waits.js';

/** A connection whose calls the test runs: busy while one is running; `ended` settles when the pool closes it. */
class Line implements PooledConnection {
  private running = 0;
  closed = false;
  readonly ended: Promise<void>;
  private end!: () => void;

  constructor(readonly name: string) {
    this.ended = new Promise((resolve) => (this.end = resolve));
  }

  get isIdle(): boolean {
    return this.running === 0;
  }

  /** Starts a call; the returned function ends it. */
  call(): () => void {
    this.running++;
    return () => void this.running--;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.end();
  }
}

class FullError extends Error {}

function poolOf(options: { max?: number; idleTimeoutMs?: number } = {}) {
  const closedBy: Array<[string, PoolCloseReason]> = [];
  const closing = new Set<Promise<void>>();
  const pool = new ConnectionPool<Line>({
    max: options.max ?? 0,
    idleTimeoutMs: options.idleTimeoutMs ?? 0,
    closing,
    full: () => new FullError('every connection is busy'),
    closingBy: (key, reason) => closedBy.push([key, reason]),
  });
  let opened = 0;
  const open = (name: string) => async () => {
    opened++;
    return new Line(name);
  };
  return { pool, closedBy, closing, open, opened: () => opened };
}

describe('connection pool', () => {
  it('opens one connection per key, however many ask for it at once', async () => {
    const { pool, open, opened } = poolOf();
    const [a1, a2, b] = await Promise.all([pool.get('a', open('a')), pool.get('a', open('a again')), pool.get('b', open('b'))]);
    assert.equal(a1, a2);
    assert.equal(a1.name, 'a');
    assert.notEqual(a1, b);
    assert.equal(opened(), 2);
    assert.deepEqual(pool.keys(), ['a', 'b']);
  });

  it('forgets a key whose connection failed to open: the next use opens again', async () => {
    const { pool, open } = poolOf();
    await assert.rejects(pool.get('a', async () => Promise.reject(new Error('refused'))), /refused/);
    assert.equal(pool.size, 0);
    assert.equal((await pool.get('a', open('a'))).name, 'a');
  });

  it('at the bound closes the least recently used idle connection for a new key', async () => {
    const { pool, open, closedBy } = poolOf({ max: 2 });
    const a = await pool.get('a', open('a'));
    const b = await pool.get('b', open('b'));
    await pool.get('a', open('a')); // a used last: b is now the least recently used
    const c = await pool.get('c', open('c'));
    await b.ended;
    assert.deepEqual(closedBy, [['b', 'bound']]);
    assert.equal(a.closed, false);
    assert.equal(c.closed, false);
    assert.deepEqual(pool.keys(), ['a', 'c']);
  });

  it('at the bound never closes a busy connection: skips it, and refuses a new key when every one is busy', async () => {
    const { pool, open, closedBy } = poolOf({ max: 2 });
    const a = await pool.get('a', open('a'));
    const b = await pool.get('b', open('b'));
    const endA = a.call();
    await pool.get('c', open('c')); // a is the least recently used but busy: b goes
    await b.ended;
    assert.deepEqual(closedBy, [['b', 'bound']]);
    const endC = (await pool.get('c', open('c'))).call();
    assert.throws(() => pool.get('d', open('d')), FullError);
    assert.equal(a.closed, false);
    assert.deepEqual(pool.keys(), ['a', 'c']);
    endA();
    endC();
    assert.equal((await pool.get('d', open('d'))).name, 'd');
  });

  it('counts a connection still opening as busy at the bound', async () => {
    const { pool, open } = poolOf({ max: 1 });
    let opened!: (line: Line) => void;
    const opening = pool.get('a', () => new Promise<Line>((resolve) => (opened = resolve)));
    assert.throws(() => pool.get('b', open('b')), FullError);
    opened(new Line('a'));
    assert.equal((await opening).name, 'a');
  });

  it('a connection that closed by itself is replaced on its next use; a late notice of an older one changes nothing', async () => {
    const { pool, open, opened } = poolOf();
    const first = await pool.get('a', open('a'));
    pool.closed('a', first);
    await new Promise(setImmediate); // the notice is taken once the connection's promise has settled
    assert.equal(pool.size, 0);
    const second = await pool.get('a', open('a'));
    assert.notEqual(second, first);
    pool.closed('a', first); // the old connection's notice again, after the new one opened
    assert.equal(await pool.get('a', open('a')), second);
    assert.equal(opened(), 2);
  });

  it('sweeps a connection idle for idleTimeoutMs, and its next use opens a new one; keys not swept stay', async () => {
    const { pool, open, closedBy, closing } = poolOf({ idleTimeoutMs: 40 });
    const kept = await pool.get('client-session', open('client-session'));
    const swept = await pool.get('principal', open('principal'), { sweep: true });
    // The sweep's timer keeps no process up: the bound against a hang does meanwhile.
    await bounded(swept.ended, 'the idle sweep');
    assert.deepEqual(closedBy, [['principal', 'idle']]);
    assert.equal(kept.closed, false);
    assert.deepEqual(pool.keys(), ['client-session']);
    await Promise.all([...closing]);
    const again = await pool.get('principal', open('principal'), { sweep: true });
    assert.notEqual(again, swept);
    assert.equal(again.closed, false);
    await pool.close();
    assert.ok(kept.closed && again.closed);
    assert.equal(pool.size, 0);
  });

  it('never sweeps a connection while a call runs on it, however long; sweeps it once the call is over', async () => {
    const { pool, open, closedBy } = poolOf({ idleTimeoutMs: 40 });
    const busy = await pool.get('busy', open('busy'), { sweep: true });
    const endCall = busy.call();
    // Made idle after the busy one's call started: once the sweep closes it, the busy one has run longer than
    // idleTimeoutMs with its call, and it must still be open.
    const idle = await pool.get('idle', open('idle'), { sweep: true });
    await bounded(idle.ended, 'the idle sweep');
    assert.equal(busy.closed, false);
    assert.deepEqual(pool.keys(), ['busy']);
    endCall();
    await bounded(busy.ended, 'the idle sweep after the call');
    assert.deepEqual(closedBy, [['idle', 'idle'], ['busy', 'idle']]);
    assert.equal(pool.size, 0);
  });
});
