// The read side of the task core (task-queries.ts) over the in-memory store: an id that names nothing the reader
// may see answers exactly like an unknown one, a principal's tasks come page by page behind cursors, and a wait
// wakes on the store's event (or on this replica's own end write, with the outcome in hand).
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { GatewayError } from '../../src/errors.js';
import { GatewayEvents } from '../../src/events.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import type { TaskRecord } from '../../src/store/task-store.js';
import { LocalEnds } from '../../src/tasks/local-ends.js';
import type { TaskReader } from '../../src/principals.js';
import { NOT_FOUND, TaskQueries } from '../../src/tasks/task-queries.js';

const RESULT = { result: { content: [{ type: 'text', text: 'done' }] } };

let store: MemoryTaskStore;
let events: GatewayEvents;
let localEnds: LocalEnds;
let queries: TaskQueries;

beforeEach(() => {
  store = new MemoryTaskStore();
  events = new GatewayEvents();
  localEnds = new LocalEnds();
  queries = new TaskQueries({ store, localEnds, events });
});

afterEach(() => store.close());

let serial = 0;
function create(principal: string, tool = 'slow', extra: { native?: boolean } = {}): Promise<TaskRecord> {
  return store.tasks.create({ taskId: `t${++serial}`, principal, era: '2025-11-25', tool, upstream: 'fixture', retentionMs: 60_000, pollMs: 1000, ...extra });
}

function reader(principal: string | undefined, denied: readonly string[] = []): TaskReader {
  return { principal, mayUse: (tool) => !denied.includes(tool) };
}

/** What a refused read says, for comparing refusals with each other. */
async function refusal(read: Promise<unknown>): Promise<{ code: string; message: string }> {
  const error = await read.then(() => assert.fail('the read was not refused'), (e: unknown) => e);
  assert.ok(error instanceof GatewayError, String(error));
  return { code: error.code, message: error.message };
}

describe('task queries: find', () => {
  it('another principal\'s task, and one of a tool the reader may no longer use, answer exactly like an unknown id', async () => {
    const bobs = await create('key:bob');
    const alices = await create('key:alice', 'revoked');
    const denied: unknown[] = [];
    events.on('access.denied', (payload) => denied.push(payload));
    const unknown = await refusal(queries.find('no-such-task', { reader: reader('key:alice') }));
    assert.deepEqual(unknown, { code: 'invalid_params', message: NOT_FOUND });
    assert.deepEqual(await refusal(queries.find(bobs.taskId, { reader: reader('key:alice') })), unknown);
    assert.deepEqual(await refusal(queries.find(alices.taskId, { reader: reader('key:alice', ['revoked']) })), unknown);
    assert.deepEqual(denied, [{ principal: 'key:alice', kind: 'tools', name: 'revoked', taskId: alices.taskId }], 'only the revoked tool is audited');
    assert.equal((await queries.find(bobs.taskId, { reader: reader('key:bob') })).taskId, bobs.taskId);
    // Without authentication the id is the bearer: any reader finds it.
    assert.equal((await queries.find(bobs.taskId, { reader: reader(undefined) })).principal, 'key:bob');
  });

  it('a missing id is invalid params; an upstream\'s own task is found only where that is asked for', async () => {
    assert.deepEqual(await refusal(queries.find('')), { code: 'invalid_params', message: 'params.taskId must be a non-empty string' });
    assert.deepEqual(await refusal(queries.find(42)), { code: 'invalid_params', message: 'params.taskId must be a non-empty string' });
    const native = await create('key:alice', 'remote', { native: true });
    const refused = await refusal(queries.find(native.taskId));
    assert.match(refused.message, /is run by upstream 'fixture' itself/);
    assert.equal((await queries.find(native.taskId, { allowNative: true })).native, true);
  });

  it('the outcome comes with the task only when asked for', async () => {
    const task = await create('key:alice');
    await store.tasks.transition(task.taskId, { to: 'completed', outcome: RESULT });
    assert.equal((await queries.find(task.taskId)).outcome, undefined);
    assert.deepEqual((await queries.find(task.taskId, { withOutcome: true })).outcome, RESULT);
  });
});

describe('task queries: list', () => {
  it('pages a principal\'s tasks newest first behind cursors, and only theirs', async () => {
    const created: string[] = [];
    for (let i = 0; i < 120; i++) {
      created.push((await create('key:alice')).taskId);
      if (i % 10 === 0) await create('key:bob');
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    const sizes: number[] = [];
    do {
      const page = await queries.list('key:alice', cursor);
      sizes.push(page.tasks.length);
      for (const task of page.tasks) {
        assert.equal(task.principal, 'key:alice');
        seen.push(task.taskId);
      }
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    assert.deepEqual(sizes, [50, 50, 20]);
    assert.deepEqual(seen, created.reverse(), 'every task once, newest first');
  });

  it('leaves out tasks of tools the caller may not use, and refuses a cursor it did not hand out', async () => {
    await create('key:alice', 'open');
    await create('key:alice', 'revoked');
    const page = await queries.list('key:alice', undefined, (tool) => tool !== 'revoked');
    assert.deepEqual(page.tasks.map((task) => task.tool), ['open']);
    assert.deepEqual(await refusal(queries.list('key:alice', 'not-a-cursor')), { code: 'invalid_params', message: 'Invalid cursor' });
    assert.deepEqual(await refusal(queries.list('key:alice', 7)), { code: 'invalid_params', message: 'Invalid cursor' });
  });
});

describe('task queries: waiting', () => {
  it('waitFor wakes on the store\'s event once the state holds, and an abort ends the wait empty', async () => {
    const task = await create('key:alice');
    const waiting = queries.waitFor(task.taskId, (t) => t.status === 'input_required', new AbortController().signal);
    await store.tasks.transition(task.taskId, { to: 'working', message: 'still going' });
    await store.tasks.transition(task.taskId, { to: 'input_required', openRequests: { q: { method: 'elicitation/create' } } });
    assert.equal((await waiting)?.status, 'input_required');

    const stop = new AbortController();
    const never = queries.waitFor(task.taskId, (t) => t.status === 'completed', stop.signal);
    stop.abort();
    assert.equal(await never, undefined);
    assert.deepEqual(await refusal(queries.waitFor('no-such-task', () => true, new AbortController().signal)), { code: 'invalid_params', message: NOT_FOUND });
  });

  it('untilResult reads the outcome from the store when the end was written elsewhere, refused as find refuses it', async () => {
    const task = await create('key:alice');
    const result = queries.untilResult(task.taskId, reader('key:alice'));
    const foreign = queries.untilResult(task.taskId, reader('key:bob'));
    await store.tasks.transition(task.taskId, { to: 'completed', outcome: RESULT });
    const ended = await result;
    assert.equal(ended.status, 'completed');
    assert.deepEqual(ended.outcome, RESULT);
    assert.deepEqual(await refusal(foreign), { code: 'invalid_params', message: NOT_FOUND });
  });

  it('an end this replica writes is told to its waiters with the outcome once the write is over, not before', async () => {
    const task = await create('key:alice');
    let woken = false;
    const result = queries.untilResult(task.taskId).then((ended) => {
      woken = true;
      return ended;
    });
    await new Promise((resolve) => setImmediate(resolve)); // the wait has read the task and subscribed
    localEnds.begin(task.taskId);
    const { task: written } = (await store.tasks.transition(task.taskId, { to: 'completed', outcome: RESULT })) as { ok: true; task: TaskRecord };
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(woken, false, 'the store\'s event alone does not wake a waiter while the write here is in flight');
    const outcome = structuredClone(RESULT);
    localEnds.settle(task.taskId, { ...written, outcome });
    const ended = await result;
    // The store hands out copies: the very object the write carried is proof that nothing was read back.
    assert.equal(ended.outcome, outcome, 'the outcome came from the write, not from a read');
  });
});
