// Issue 40's shape of the code: at most two functions of src/ over 80 lines. eslint.config.js holds the limits one
// file or function at a time (450 lines a file, 120 a function, 6 parameters); how many functions pass a lower bound
// is beyond a lint rule, so this counts them. ESLint runs with that one rule and the TypeScript parser alone, not the
// project's config (which loads the codecs and every rule), so that it takes seconds; no comment in src/ can turn
// the rule off.
import assert from 'node:assert/strict';
import { relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** A function longer than this is long: a few may be (a table, a state machine that reads best whole), not many. */
const LONG_FUNCTION_LINES = 80;
const MOST_LONG_FUNCTIONS = 2;

test(`at most ${MOST_LONG_FUNCTIONS} functions of src/ have more than ${LONG_FUNCTION_LINES} lines`, async () => {
  const eslint = new ESLint({
    cwd: ROOT,
    overrideConfigFile: true,
    overrideConfig: [
      {
        files: ['**/*.ts'],
        languageOptions: { parser: tseslint.parser },
        linterOptions: { noInlineConfig: true, reportUnusedDisableDirectives: 'off' },
        // Counted as eslint.config.js counts: every line, blank or comment.
        rules: { 'max-lines-per-function': ['error', { max: LONG_FUNCTION_LINES, skipBlankLines: false, skipComments: false }] },
      },
    ],
  });
  const results = await eslint.lintFiles(['src/**/*.ts']);
  assert.ok(results.length > 100, `src/ was linted (${results.length} files)`);
  const where = (result: ESLint.LintResult, line: number): string => `${relative(ROOT, result.filePath)}:${line}`;
  const unparsed = results.flatMap((result) => result.messages.filter((m) => m.fatal === true).map((m) => `${where(result, m.line)} ${m.message}`));
  assert.deepEqual(unparsed, [], 'every file of src/ parses');
  const long = results.flatMap((result) => result.messages.filter((m) => m.ruleId === 'max-lines-per-function').map((m) => `${where(result, m.line)} ${m.message}`));
  assert.ok(long.length <= MOST_LONG_FUNCTIONS, `${long.length} functions have more than ${LONG_FUNCTION_LINES} lines:\n  ${long.join('\n  ')}`);
});
