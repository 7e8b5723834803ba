// The budgets of request bytes in flight: what is admitted, the reserve for small requests, and holds that give
// the bytes back exactly once.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InflightBudgetFull, InflightBytes, SMALL_REQUEST_BYTES } from '../../src/tasks/inflight-bytes.js';

const KiB = 1024;
const MiB = 1024 * KiB;

function refusedBy(budget: string): (error: unknown) => boolean {
  return (error) => error instanceof InflightBudgetFull && (error.data as { budget: string }).budget === budget && error.httpStatus === 503;
}

describe('in-flight bytes: admission', () => {
  it('large requests fill a principal\'s budget up to its last eighth; small ones may use that reserve', () => {
    const budget = new InflightBytes({ total: 0, perPrincipal: 8 * MiB });
    for (let i = 0; i < 7; i++) budget.admit('alice', MiB);
    assert.throws(() => budget.admit('alice', MiB), refusedBy('listen.maxInflightBytesPerPrincipal'));
    assert.throws(() => budget.admit('alice', SMALL_REQUEST_BYTES + 1), refusedBy('listen.maxInflightBytesPerPrincipal'));
    for (let i = 0; i < 16; i++) budget.admit('alice', SMALL_REQUEST_BYTES);
    assert.equal(budget.inflight('alice'), 8 * MiB);
    assert.throws(() => budget.admit('alice', 1), refusedBy('listen.maxInflightBytesPerPrincipal'), 'the reserve is used up too');
    budget.admit('bob', MiB);
    assert.equal(budget.inflight(), 9 * MiB);
  });

  it('the total budget binds across principals, and its message names it', () => {
    const budget = new InflightBytes({ total: 4 * MiB, perPrincipal: 4 * MiB });
    budget.admit('alice', 2 * MiB);
    budget.admit('bob', MiB + 512 * KiB);
    let refusal: unknown;
    assert.throws(() => {
      try {
        budget.admit('carol', MiB);
      } catch (error) {
        refusal = error;
        throw error;
      }
    }, refusedBy('listen.maxInflightBytes'));
    assert.match((refusal as Error).message, /hold 3670016 of 4194304 \(listen\.maxInflightBytes\).*carries 1048576; retry in 5 s/);
    assert.equal((refusal as InflightBudgetFull).toJsonRpc().code, -32001);
    budget.admit('carol', 4 * KiB);
  });

  it('0 means unlimited', () => {
    const budget = new InflightBytes({ total: 0, perPrincipal: 0 });
    for (let i = 0; i < 100; i++) budget.admit('alice', 4 * MiB);
    assert.equal(budget.inflight('alice'), 400 * MiB);
  });
});

describe('in-flight bytes: holds', () => {
  it('the bytes go back with the last hold, once, however often each release is called', () => {
    const budget = new InflightBytes({ total: 0, perPrincipal: 0 });
    const { charge, release } = budget.admit('alice', 1000);
    const task = charge.hold();
    release();
    release();
    assert.equal(budget.inflight('alice'), 1000, 'the task still holds them');
    task();
    assert.equal(budget.inflight('alice'), 0);
    task();
    assert.equal(budget.inflight(), 0);
    const late = charge.hold();
    late();
    assert.equal(budget.inflight(), 0, 'a hold taken after the bytes went back keeps nothing');
  });

  it('a charge made before a body of unknown length was read comes down to its size', () => {
    const budget = new InflightBytes({ total: 0, perPrincipal: 0 });
    const { charge, release } = budget.admit('alice', 4 * MiB);
    charge.shrinkTo(300);
    assert.equal(budget.inflight('alice'), 300);
    charge.shrinkTo(5 * MiB);
    assert.equal(budget.inflight('alice'), 300, 'never raised');
    release();
    assert.equal(budget.inflight(), 0);
  });

  it('forced charges count without being refused', () => {
    const budget = new InflightBytes({ total: MiB, perPrincipal: MiB });
    const { release } = budget.force('alice', 2 * MiB);
    assert.throws(() => budget.admit('alice', 1), refusedBy('listen.maxInflightBytesPerPrincipal'));
    release();
    budget.admit('alice', 1);
  });
});
