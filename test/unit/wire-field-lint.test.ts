// The lint rule that keeps a protocol revision's wire field names in its codec (eslint.config.js): run through
// ESLint with the project's own config on small snippets, as if they were files of the protocol layer.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ESLint } from 'eslint';
import { WIRE_CODECS } from '../../src/protocol/revisions.js';

const MESSAGE = "wire field of a protocol revision: read/write it in that revision's codec (src/protocol/rev*/codec.ts)";
const ROUTER = 'src/protocol/rev2026-07-28/router.ts';
const CODEC = 'src/protocol/rev2026-07-28/codec.ts';

const eslint = new ESLint();

/** The lines of `code` the wire-field rule flags, were it the file at `filePath`. */
async function flagged(code: string, filePath: string): Promise<number[]> {
  const [result] = await eslint.lintText(code, { filePath });
  assert.ok(result !== undefined);
  return result.messages.filter((m) => m.ruleId === 'no-restricted-syntax' && m.message === MESSAGE).map((m) => m.line);
}

const SNIPPETS: Record<string, string> = {
  'a member access': 'export const f = (result: Record<string, unknown>): unknown => result.resultType;',
  'a computed member access': "export const f = (result: Record<string, unknown>): unknown => result['ttlMs'];",
  'an object literal key': "export const answer = { resultType: 'complete' };",
  'a shorthand key': 'export const f = (inputRequests: unknown): unknown => ({ inputRequests });',
  'a destructuring key': 'export const f = ({ requestState }: Record<string, unknown>): unknown => requestState;',
  'a rest destructuring that drops a field': 'export const f = (p: Record<string, unknown>): unknown => { const { inputResponses: _a, ...rest } = p; return rest; };',
  'a string literal': "export const key = 'cacheScope';",
  'a template literal': 'export const key = `pollIntervalMs`;',
  'a nested member': 'export const f = (tool: { execution: Record<string, unknown> }): unknown => tool.execution.taskSupport;',
  'params.taskId': 'export const f = (params: Record<string, unknown>): unknown => params.taskId;',
  "request.params['taskId']": "export const f = (request: { params: Record<string, unknown> }): unknown => request.params['taskId'];",
  'a result\'s taskId': 'export const f = (outcome: { result: Record<string, unknown> }): unknown => outcome.result.taskId;',
  'a nested task\'s taskId': 'export const f = (result: { task: Record<string, unknown> }): unknown => result.task.taskId;',
};

describe('wire field names outside a codec', () => {
  for (const [what, code] of Object.entries(SNIPPETS)) {
    it(`flags ${what} in a router`, async () => {
      assert.deepEqual(await flagged(code, ROUTER), [1]);
    });
    it(`allows ${what} in the revision's codec`, async () => {
      assert.deepEqual(await flagged(code, CODEC), []);
    });
  }

  it('flags them in the gateway, HTTP and upstream layers and in shared protocol files too', async () => {
    const code = SNIPPETS['an object literal key'] as string;
    for (const filePath of ['src/gateway/lists.ts', 'src/http/replies.ts', 'src/upstream/life/upstream.ts', 'src/protocol/task-tools.ts', 'src/protocol/rev2025-11-25/tasks.ts']) {
      assert.deepEqual(await flagged(code, filePath), [1], filePath);
    }
  });

  it("takes the names from the codecs: each revision's declared wire fields, and no other", async () => {
    for (const codec of WIRE_CODECS) {
      assert.ok(codec.wireFields.length > 0, codec.revision);
      for (const field of codec.wireFields) {
        const code = `export const f = (result: Record<string, unknown>): unknown => result.${field};`;
        assert.deepEqual(await flagged(code, ROUTER), [1], `${codec.revision}: ${field}`);
        assert.deepEqual(await flagged(code, CODEC), [], `${codec.revision}: ${field} in a codec`);
      }
    }
    const declared = WIRE_CODECS.flatMap((codec) => codec.wireFields);
    assert.ok(!declared.includes('ttlSeconds'));
    assert.deepEqual(await flagged('export const f = (result: Record<string, unknown>): unknown => result.ttlSeconds;', ROUTER), []);
  });

  it("flags them in the task core, where a run's task is always a stored record", async () => {
    const engine = 'src/tasks/engine.ts';
    for (const what of ['a member access', 'an object literal key', 'a string literal', 'params.taskId', "a result's taskId"]) {
      assert.deepEqual(await flagged(SNIPPETS[what] as string, engine), [1], what);
    }
    assert.deepEqual(await flagged('export const f = (run: { task: { taskId: string } }): string => run.task.taskId;', engine), []);
  });

  it("leaves a TaskRecord's taskId, other names, and files outside the rule alone", async () => {
    const code = [
      'export const f = (task: { taskId: string }): string => task.taskId;',
      'export const g = (input: Record<string, unknown>): unknown => input.taskId;',
      'export const h = (policy: { mode: string }): string => policy.mode;',
      "export const note = 'resultType is 2026-07-28s';",
    ].join('\n');
    assert.deepEqual(await flagged(code, ROUTER), []);
    assert.deepEqual(await flagged(SNIPPETS['a member access'] as string, 'src/store/memory-task-store.ts'), []);
  });
});
