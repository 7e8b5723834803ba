// Every tool's task policy as the running configuration says (task-policies.ts): rules over defaults, and a reload
// replaces them in the one place the task core and the routers read them from.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TaskPolicies } from '../../src/tasks/task-policies.js';
import { configFor } from '../helpers/task-core.js';

test('rules apply over the defaults by exposed name, and a reconfigure replaces them for what comes next', () => {
  const running = configFor('http://127.0.0.1:1/mcp', { defaults: { maxRunMs: 5000 }, rules: [{ match: 'report_*', maxRunMs: 100, concurrency: 2 }] }).tasks;
  const policies = new TaskPolicies(running);
  assert.equal(policies.config, running);
  assert.deepEqual([policies.policyFor('report_daily').maxRunMs, policies.policyFor('report_daily').concurrency], [100, 2]);
  assert.equal(policies.policyFor('other').maxRunMs, 5000);
  const reloaded = configFor('http://127.0.0.1:1/mcp', { rules: [{ match: 'other', maxRunMs: 7 }] }).tasks;
  policies.reconfigure(reloaded);
  assert.equal(policies.config, reloaded);
  assert.equal(policies.policyFor('other').maxRunMs, 7);
  assert.equal(policies.policyFor('report_daily').concurrency, 0, 'the old rule is gone');
});

test('a policy is shared frozen, and names past the bound of those kept resolved still get their own', () => {
  const policies = new TaskPolicies(configFor('http://127.0.0.1:1/mcp', { defaults: { maxRunMs: 5000 }, rules: [{ match: 'report_*', maxRunMs: 100 }] }).tasks);
  const first = policies.policyFor('report_0');
  assert.equal(policies.policyFor('report_0'), first, 'resolved once');
  assert.ok(Object.isFrozen(first), 'no call can change what the next one reads');
  // Names come from clients: more of them than are kept (1,024) start the map over, never grow it or answer wrong.
  for (let i = 0; i < 3000; i++) assert.equal(policies.policyFor(i % 2 === 0 ? `report_${i}` : `other_${i}`).maxRunMs, i % 2 === 0 ? 100 : 5000);
});
