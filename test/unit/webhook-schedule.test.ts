// When webhook deliveries are tried, on node:test's mock clock: the embedded store's queue (src/store/memory/
// deliveries.ts) makes a retried delivery due exactly its backoff later, a try whose lease ran out due again at the
// lease's end, and drops an endpoint's queue keepMs after it was last touched; the endpoint worker (src/webhooks/
// endpoint-worker.ts) sleeps until the next delivery is due, tries it then and not before, and dead-letters it once
// the next try would come after maxAgeMs. Each bound is checked one millisecond before and at it; Math.random is
// pinned so the jittered backoff is exact.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import type { WebhookConfig, WebhookDeliveryConfig } from '../../src/config/types.js';
import { GatewayEvents } from '../../src/events.js';
import { MemoryDeliveries } from '../../src/store/memory/deliveries.js';
import { EndpointWorker } from '../../src/webhooks/endpoint-worker.js';
import type { AttemptOutcome, WebhookSender } from '../../src/webhooks/sender.js';
import { silentLogger } from '../helpers/task-core.js';

const ENQUEUE = { maxQueued: 10, maxQueuedBytes: 1_000_000, keepMs: 3_600_000 };
const CLAIM = { concurrency: 1, leaseMs: 1_000, keepMs: 3_600_000 };
const body = JSON.stringify({ type: 'task.completed', timestamp: 0, data: {} });

/** Lets settled promises run their continuations, and fires timers due now (setImmediate is not mocked). */
async function settle(): Promise<void> {
  for (let round = 0; round < 5; round++) {
    await new Promise<void>((resolve) => setImmediate(resolve));
    mock.timers.tick(0);
  }
}

describe('webhook delivery queue (embedded store) on the mock clock', () => {
  beforeEach(() => mock.timers.enable({ apis: ['Date'], now: 0 }));
  afterEach(() => mock.timers.reset());

  it('a retried delivery is due exactly its delay after the retry, and claimed then as its next try', async () => {
    const queue = new MemoryDeliveries();
    await queue.enqueue('e', { id: 'd1', body }, ENQUEUE);
    const [first] = (await queue.claim('e', 'r1', CLAIM)).deliveries;
    assert.equal(first?.attempt, 1);
    mock.timers.setTime(100);
    assert.equal(await queue.retry('e', { id: 'd1', owner: 'r1', attempt: 1 }, 2_000, CLAIM.keepMs), true);
    mock.timers.setTime(2_099);
    const early = await queue.claim('e', 'r1', CLAIM);
    assert.deepEqual(early.deliveries, []);
    assert.equal(early.nextDueMs, 2_100, 'the worker is told when to come back');
    mock.timers.setTime(2_100);
    assert.deepEqual((await queue.claim('e', 'r1', CLAIM)).deliveries.map((d) => d.attempt), [2]);
  });

  it('a try whose lease ran out is due again at the lease\'s end; the late owner can no longer settle it', async () => {
    const queue = new MemoryDeliveries();
    await queue.enqueue('e', { id: 'd1', body }, ENQUEUE);
    await queue.claim('e', 'r1', CLAIM); // leased until 1 000
    mock.timers.setTime(999);
    const held = await queue.claim('e', 'r2', CLAIM);
    assert.deepEqual(held.deliveries, [], 'the lease still counts against the concurrency');
    mock.timers.setTime(1_000);
    assert.deepEqual((await queue.claim('e', 'r2', CLAIM)).deliveries.map((d) => d.attempt), [2]);
    assert.equal(await queue.retry('e', { id: 'd1', owner: 'r1', attempt: 1 }, 0, CLAIM.keepMs), false);
  });

  it('an endpoint\'s queue is dropped keepMs after it was last touched', async () => {
    const queue = new MemoryDeliveries();
    await queue.enqueue('e', { id: 'd1', body }, { ...ENQUEUE, keepMs: 5_000 });
    mock.timers.setTime(4_999);
    assert.equal(await queue.depth('e'), 1);
    mock.timers.setTime(5_000);
    assert.equal(await queue.depth('e'), 0);
  });
});

describe('webhook endpoint worker on the mock clock', () => {
  const settings: WebhookDeliveryConfig = {
    timeoutMs: 100,
    maxAgeMs: 10_000,
    initialBackoffMs: 1_000,
    maxBackoffMs: 600_000,
    maxQueuedPerEndpoint: 10,
    maxQueuedBytesPerEndpoint: 1_000_000,
    maxBodyBytes: 1_000,
    concurrency: 1,
  };
  const endpoint: WebhookConfig = { id: 'e', url: 'https://e.example', events: ['task.completed'], secret: 'whsec_x', includeResult: false };
  let worker: EndpointWorker | undefined;

  beforeEach(() => {
    mock.timers.enable({ apis: ['Date', 'setTimeout'], now: 0 });
    // The jitter at its top: each wait is the whole bound (1 s, 2 s, 4 s, 8 s …).
    mock.method(Math, 'random', () => 1);
  });
  afterEach(async () => {
    await worker?.close();
    mock.timers.reset();
    mock.restoreAll();
  });

  /** Runs one always-failing delivery to its dead letter, checking each try comes at its due time and not 1 ms before. */
  async function runToDeadLetter(maxAgeMs: number, dueTimes: number[]) {
    const queue = new MemoryDeliveries();
    const events = new GatewayEvents();
    const tries: number[] = [];
    const dead: { attempts: number; atMs: number }[] = [];
    events.on('webhook.dead_lettered', ({ attempts }) => dead.push({ attempts, atMs: Date.now() }));
    const sender = {
      send: async (): Promise<AttemptOutcome> => {
        tries.push(Date.now());
        return { outcome: 'failed', status: 503 };
      },
    } as unknown as WebhookSender;
    worker = new EndpointWorker(endpoint, { queue, sender, events, logger: silentLogger, owner: 'r1', settings: () => ({ ...settings, maxAgeMs }), leaseMarginMs: 1_000, pollMs: 3_600_000 });
    await queue.enqueue('e', { id: 'd1', body }, ENQUEUE);
    worker.wake();
    await settle();
    assert.deepEqual(tries, [0]);
    for (const due of dueTimes) {
      const before = tries.length;
      mock.timers.tick(due - 1 - Date.now());
      await settle();
      assert.equal(tries.length, before, `not tried before ${due} ms`);
      mock.timers.tick(1);
      await settle();
      assert.deepEqual(tries.slice(before), [due], `tried at ${due} ms`);
    }
    assert.equal(await queue.depth('e'), 0);
    assert.equal((await queue.deadLetters('e', 10)).length, 1);
    return { tries, dead };
  }

  it('tries at 0, 1 s, 3 s and 7 s, then dead-letters: the next try (15 s) would come after maxAgeMs (10 s)', async () => {
    const { tries, dead } = await runToDeadLetter(10_000, [1_000, 3_000, 7_000]);
    assert.deepEqual(tries, [0, 1_000, 3_000, 7_000]);
    assert.deepEqual(dead, [{ attempts: 4, atMs: 7_000 }], 'dead-lettered after its fourth try, at once');
  });

  it('a try due exactly at maxAgeMs is still made (the bound is inclusive)', async () => {
    const { tries, dead } = await runToDeadLetter(15_000, [1_000, 3_000, 7_000, 15_000]);
    assert.deepEqual(tries, [0, 1_000, 3_000, 7_000, 15_000]);
    assert.deepEqual(dead, [{ attempts: 5, atMs: 15_000 }]);
  });
});
