// A run's parts made on first use (local-run.ts): its abort signal is aborted with the run's reason whether it was
// made before the run ended or only after, and its handle reaches the run through the engine's one set of actions.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JsonRpcNotification, Outcome } from '../../src/jsonrpc.js';
import { abortRun, newLocalRun, NOTHING_TO_DO, RunChannel, runInputs, runSignal, type LocalRun, type RunActions } from '../../src/tasks/local-run.js';
import type { InputRequest } from '../../src/tasks/pending-inputs.js';

function newRun(taskId: string): LocalRun {
  const task = { taskId, principal: 'alice', tool: 'slow', upstream: 'fixture', era: '2025-11-25', status: 'working', createdMs: 0, createdUs: 0, updatedMs: 0, retentionMs: 60_000, pollMs: 1000 } as const;
  return newLocalRun(task, { deliver: () => undefined, notify: NOTHING_TO_DO, ended: NOTHING_TO_DO }, NOTHING_TO_DO);
}

describe('local runs: parts made on first use', () => {
  it('a signal made before the run ends is aborted with the reason it ended', () => {
    const run = newRun('t1');
    const signal = runSignal(run);
    assert.equal(signal.aborted, false);
    assert.equal(runSignal(run), signal, 'one signal per run');
    run.ended = true;
    abortRun(run, new Error('the task was cancelled'));
    assert.equal(signal.aborted, true);
    assert.equal((signal.reason as Error).message, 'the task was cancelled');
  });

  it('a signal first asked for after the run ended is already aborted, with the same reason', () => {
    const run = newRun('t2');
    run.ended = true;
    abortRun(run, new Error('maxRunMs exceeded'));
    assert.equal(run.abort, undefined, 'no controller was made for a run nobody listened to');
    const signal = runSignal(run);
    assert.equal(signal.aborted, true);
    assert.equal((signal.reason as Error).message, 'maxRunMs exceeded');
  });

  it('input requests are made by the first question, once', () => {
    const run = newRun('t3');
    assert.equal(run.inputs, undefined);
    let changes = 0;
    const inputs = runInputs(run, () => changes++);
    assert.equal(runInputs(run, () => assert.fail('a second set of input requests')), inputs);
    inputs.ask({ method: 'elicitation/create', params: { message: 'name?' } }, new AbortController().signal);
    assert.equal(inputs.size, 1);
    assert.equal(changes, 1);
  });

  it('a handle reaches its own run through the shared actions, and its signal is the run\'s', async () => {
    const heard: string[] = [];
    const actions: RunActions = {
      ask: (run: LocalRun, request: InputRequest): Promise<Outcome> => Promise.resolve({ result: { run: run.task.taskId, method: request.method } }),
      status: (run: LocalRun, message: string) => void heard.push(`${run.task.taskId} status ${message}`),
      notify: (run: LocalRun, message: JsonRpcNotification) => void heard.push(`${run.task.taskId} ${message.method}`),
    };
    const a = newRun('a');
    const b = newRun('b');
    const handleA = new RunChannel(actions, a, 'session-1');
    const handleB = new RunChannel(actions, b, 'b');
    handleA.notify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } });
    handleB.status('half way');
    assert.deepEqual(heard, ['a notifications/progress', 'b status half way']);
    assert.deepEqual(await handleB.ask({ method: 'roots/list' }, new AbortController().signal), { result: { run: 'b', method: 'roots/list' } });
    assert.equal(handleA.sessionId, 'session-1');
    assert.equal(handleA.signal, runSignal(a));
  });
});
