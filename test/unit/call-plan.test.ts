// The call plan: what becomes of a tool call, decided once for both revisions from the policy and what the client
// can do with a task. Each case is what one revision decided before the plan existed (2025-11-25 sessions: the
// client asks with params.task; 2026-07-28: the gateway decides for a client that declared the Tasks extension).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { planCall, type TaskAsk } from '../../src/tasks/call-plan.js';
import { DEFAULT_POLICY } from '../../src/config/schema/defaults.js';
import type { TaskPolicy } from '../../src/config/types.js';

const policy = (over: Partial<TaskPolicy> = {}): TaskPolicy => ({ ...DEFAULT_POLICY, ...over });
const approval = { approvers: ['key:boss'], scopes: [], timeoutMs: 60_000, allowSelf: false, onCallerGone: 'keep' as const };

const session = (asked: boolean, upstreamSupport: TaskAsk['upstreamSupport'] = 'forbidden'): TaskAsk => ({ speaksTasks: true, task: asked ? 'asked' : 'none', upstreamSupport });
const oldSession = (asked: boolean): TaskAsk => ({ speaksTasks: false, task: asked ? 'asked' : 'none' });
const stateless = (declares: boolean): TaskAsk => ({ speaksTasks: true, task: declares ? 'accepted' : 'none' });

describe('call plan', () => {
  it('a session that asks gets a task at once, refused where policy forbids one', () => {
    assert.deepEqual(planCall(policy(), session(true)), { kind: 'task', afterMs: 0, held: false });
    assert.deepEqual(planCall(policy({ mode: 'forbidden' }), session(true)), { kind: 'refuse', why: 'task_forbidden' });
    assert.deepEqual(planCall(policy({ mode: 'forbidden' }), session(true, 'required')), { kind: 'task', afterMs: 0, held: false }, 'the upstream runs it only as a task');
  });

  it("a session that does not ask is refused a tool that must be a task, saying whose rule it is", () => {
    assert.deepEqual(planCall(policy({ mode: 'required' }), session(false)), { kind: 'refuse', why: 'task_required', byUpstream: false });
    assert.deepEqual(planCall(policy(), session(false, 'required')), { kind: 'refuse', why: 'task_required', byUpstream: true });
    assert.deepEqual(planCall(policy(), session(false)), { kind: 'plain' });
  });

  it('a session without tasks calls plainly, a required tool too, whatever it sent', () => {
    assert.deepEqual(planCall(policy({ mode: 'required' }), oldSession(false)), { kind: 'plain' });
    assert.deepEqual(planCall(policy(), oldSession(true)), { kind: 'plain' });
    assert.deepEqual(planCall(policy({ approval }), oldSession(false)), { kind: 'wait_held' });
    // A task hint its protocol does not have changes nothing: a held call is held, a background rule applies.
    assert.deepEqual(planCall(policy({ approval }), oldSession(true)), { kind: 'wait_held' });
    assert.deepEqual(planCall(policy({ plainCalls: 'background', taskAfterMs: 300 }), oldSession(true)), { kind: 'background', afterMs: 300, held: false });
  });

  it('a stateless client with the extension gets a task past taskAfterMs; where policy forbids one, a plain call', () => {
    assert.deepEqual(planCall(policy({ taskAfterMs: 500 }), stateless(true)), { kind: 'task', afterMs: 500, held: false });
    assert.deepEqual(planCall(policy({ mode: 'forbidden' }), stateless(true)), { kind: 'plain' });
    assert.deepEqual(planCall(policy({ mode: 'required' }), stateless(false)), { kind: 'refuse', why: 'task_required', byUpstream: false });
  });

  it('plainCalls: background gives a client that takes no task a background task, at once when held', () => {
    for (const ask of [session(false), stateless(false), oldSession(false)]) {
      assert.deepEqual(planCall(policy({ plainCalls: 'background', taskAfterMs: 300 }), ask), { kind: 'background', afterMs: 300, held: false });
      assert.deepEqual(planCall(policy({ plainCalls: 'background', approval }), ask), { kind: 'background', afterMs: 0, held: true });
      assert.deepEqual(planCall(policy({ plainCalls: 'background', mode: 'forbidden' }), ask), { kind: 'plain' });
    }
  });

  it('a held call is a task at once for a client that takes one, and the wait of a plain caller otherwise', () => {
    assert.deepEqual(planCall(policy({ approval }), session(true)), { kind: 'task', afterMs: 0, held: true });
    assert.deepEqual(planCall(policy({ approval }), stateless(true)), { kind: 'task', afterMs: 0, held: true });
    assert.deepEqual(planCall(policy({ approval }), session(false)), { kind: 'wait_held' });
    assert.deepEqual(planCall(policy({ approval }), stateless(false)), { kind: 'wait_held' });
    assert.deepEqual(planCall(policy({ approval, mode: 'forbidden' }), stateless(true)), { kind: 'wait_held' });
    // A tool that must be a task still says so to a plain caller that could have asked.
    assert.deepEqual(planCall(policy({ approval, mode: 'required' }), session(false)), { kind: 'refuse', why: 'task_required', byUpstream: false });
    assert.deepEqual(planCall(policy({ approval, mode: 'required' }), stateless(false)), { kind: 'refuse', why: 'task_required', byUpstream: false });
  });
});
