// What a run's call sends towards its client (run-relay.ts), over the in-memory store: a question becomes one of
// the task's input requests until its answer comes (the store shows what is left before the answer is taken),
// one the client could not be reached for is put again once it can, one it cannot take at all never becomes an
// input request, and progress and the upstream task's status become the task's status message.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { RequestCancelled } from '../../src/errors.js';
import { GatewayEvents } from '../../src/events.js';
import type { Outcome } from '../../src/jsonrpc.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { abortRun, newLocalRun, NOTHING_TO_DO, RunChannel, type LocalRun, type TaskCaller } from '../../src/tasks/local-run.js';
import type { InputRequest } from '../../src/tasks/pending-inputs.js';
import { RunRelay } from '../../src/tasks/run-relay.js';
import { recordingCaller, silentLogger, storedWhen } from '../helpers/task-core.js';
import { nextEvent } from '../helpers/waits.js';

const QUESTION: InputRequest = { method: 'elicitation/create', params: { message: 'Your name?', requestedSchema: { type: 'object', properties: {} } } };
const ANSWER = { action: 'accept', content: { name: 'Ada' } };

let store: MemoryTaskStore;
let events: GatewayEvents;
let relay: RunRelay;

beforeEach(() => {
  store = new MemoryTaskStore();
  events = new GatewayEvents();
  relay = new RunRelay({ store, logger: silentLogger, events });
});
afterEach(() => store.close());

let serial = 0;
async function runFor(caller: TaskCaller): Promise<{ run: LocalRun; channel: RunChannel }> {
  const task = await store.tasks.create({ taskId: `relay-${++serial}`, principal: 'key:alice', era: '2026-07-28', tool: 'ask', upstream: 'fixture', retentionMs: 60_000, pollMs: 1000 });
  const run = newLocalRun(task, caller, NOTHING_TO_DO);
  return { run, channel: new RunChannel(relay, run, task.taskId) };
}

async function openKeys(taskId: string): Promise<string[]> {
  return Object.keys((await store.tasks.get(taskId))?.openRequests ?? {});
}

describe('run relay: input requests', () => {
  it('a question waits in the task until answered; the store shows what is left before the answer is taken', async () => {
    const caller = recordingCaller();
    const { run, channel } = await runFor(caller);
    const asked = nextEvent(events, 'task.input.asked');
    const answered = nextEvent(events, 'task.input.answered');
    const answer = channel.ask(QUESTION, new AbortController().signal);
    assert.equal((await asked).method, 'elicitation/create');
    assert.deepEqual(caller.asked, [QUESTION], 'put to the caller first');
    await storedWhen(store, run.task.taskId, (status, open) => status === 'input_required' && open === 1);
    const [key] = await openKeys(run.task.taskId);
    await relay.answer(run, { [key!]: ANSWER, 'elicitation-99': ANSWER });
    assert.equal((await store.tasks.get(run.task.taskId))?.status, 'working', 'read right after the answer: nothing is left');
    assert.deepEqual(await answer, { result: ANSWER });
    assert.equal((await answered).method, 'elicitation/create');
  });

  it('a question the caller could not put to the client now is put again once the client is reachable', async () => {
    const tries: InputRequest[] = [];
    const reachable = { now: false };
    const caller: TaskCaller = {
      deliver: (request) => {
        tries.push(request);
        return Promise.resolve(reachable.now ? ({ result: ANSWER } as Outcome) : undefined);
      },
      notify: NOTHING_TO_DO,
      ended: NOTHING_TO_DO,
    };
    const { run, channel } = await runFor(caller);
    const answer = channel.ask(QUESTION, new AbortController().signal);
    await storedWhen(store, run.task.taskId, (status) => status === 'input_required');
    await new Promise((resolve) => setImmediate(resolve)); // the caller's "not now" has been heard
    assert.equal(run.undelivered?.size, 1);
    reachable.now = true;
    relay.redeliver(run);
    assert.deepEqual(await answer, { result: ANSWER });
    assert.equal(tries.length, 2);
  });

  it('a question the client cannot take at all is answered at once and never shows in the task', async () => {
    const refusal: Outcome = { error: { code: -32601, message: 'the client has no elicitation capability' } };
    const { run, channel } = await runFor({ ...recordingCaller(), refuse: () => refusal });
    assert.deepEqual(await channel.ask(QUESTION, new AbortController().signal), refusal);
    assert.equal(run.inputs, undefined);
    assert.equal((await store.tasks.get(run.task.taskId))?.status, 'working');
  });

  it('a run that ended takes no more questions, and its waiting ones end cancelled', async () => {
    const { run, channel } = await runFor(recordingCaller());
    run.ended = true;
    abortRun(run, new Error('the task ended'));
    const outcome = await channel.ask(QUESTION, new AbortController().signal);
    assert.ok('error' in outcome);
    assert.equal(outcome.error.code, RequestCancelled);
  });
});

describe('run relay: notifications and status', () => {
  it('progress reaches the caller and becomes the task\'s status message; so does the upstream task\'s status', async () => {
    const caller = recordingCaller();
    const { run, channel } = await runFor(caller);
    const progressed = nextEvent(events, 'task.status');
    channel.notify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1, total: 4, message: 'step 1/4' } });
    channel.notify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'hello' } });
    assert.deepEqual(caller.notified, ['notifications/progress', 'notifications/message']);
    assert.equal((await progressed).message, 'step 1/4');
    assert.equal((await store.tasks.get(run.task.taskId))?.message, 'step 1/4');
    const upstreamStatus = nextEvent(events, 'task.status', (e) => e.message === 'indexing');
    channel.status('indexing');
    await upstreamStatus;
    assert.equal((await store.tasks.get(run.task.taskId))?.message, 'indexing');
  });
});
