import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import { tsImport } from 'tsx/esm/api';
import tseslint from 'typescript-eslint';

/**
 * The wire field names of every protocol revision, which only its codec may name: each codec declares its own
 * (`wireFields`, src/protocol/wire-codec.ts), read here from every revision folder's codec.ts (the codecs alone, not
 * the registry, which would load the whole gateway), so a new revision's join the rule with no edit here.
 */
const REVISION_FOLDERS = readdirSync(join(dirname(fileURLToPath(import.meta.url)), 'src', 'protocol'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && /^rev\d/.test(entry.name))
  .map((entry) => entry.name);
const CODECS = await Promise.all(REVISION_FOLDERS.map(async (folder) => (await tsImport(`./src/protocol/${folder}/codec.ts`, import.meta.url)).codec));
const WIRE_FIELDS = [...new Set(CODECS.flatMap((codec) => codec.wireFields))];

/**
 * no-restricted-syntax entries that find a revision's wire field names outside its codec. `nestedTask`: also the
 * `taskId` of a message's nested task (`result.task.taskId`); off in the task core, whose `run.task` is always a
 * stored record (TaskRecord), since it reads no message's task: the codecs do (`createdTask`).
 */
function wireFieldSelectors({ nestedTask = true } = {}) {
  const message = "wire field of a protocol revision: read/write it in that revision's codec (src/protocol/rev*/codec.ts)";
  const names = `/^(${WIRE_FIELDS.join('|')})$/`;
  const holders = nestedTask ? '/^(params|result|task)$/' : '/^(params|result)$/';
  return [
    `MemberExpression[computed=false] > Identifier.property[name=${names}]`,
    `Property > Identifier.key[name=${names}]`,
    `Literal[value=${names}]`,
    `TemplateLiteral[expressions.length=0] > TemplateElement[value.cooked=${names}]`,
    // `taskId` of a message: `params.taskId`, `result.taskId`, `x.params.taskId`, `x.result.task.taskId`.
    'MemberExpression[object.name=/^(params|result)$/] > Identifier.property[name="taskId"]',
    `MemberExpression[object.property.name=${holders}] > Identifier.property[name="taskId"]`,
    'MemberExpression[object.name=/^(params|result)$/] > Literal.property[value="taskId"]',
    `MemberExpression[object.property.name=${holders}] > Literal.property[value="taskId"]`,
  ].map((selector) => ({ selector, message }));
}

export default tseslint.config(
  { ignores: ['dist/', 'dist-test/', 'node_modules/', 'coverage/', 'bench/results/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  // The size of the code (issue 40): no file of src/ over 450 lines, no function over 120, none with more than 6
  // parameters (an options object counts as one), every line counted, blank or comment. And at most two functions
  // over 80 lines, which no rule can count: test/unit/code-shape.test.ts does.
  {
    files: ['src/**/*.ts'],
    rules: {
      'max-lines': ['error', { max: 450, skipBlankLines: false, skipComments: false }],
      'max-lines-per-function': ['error', { max: 120, skipBlankLines: false, skipComments: false }],
      'max-params': ['error', 6],
    },
  },
  // Every wire field name of a protocol revision is read and written only in that revision's codec
  // (src/protocol/wire-codec.ts says what the codecs share): names as members, object or destructuring keys and
  // string literals, and `taskId` where it is read off a message's params or result (a TaskRecord's is the store's).
  // Exempt: src/http/dashboard-api.ts, whose `inputRequests` is the dashboard's own documented JSON API.
  {
    files: ['src/protocol/**/*.ts', 'src/gateway/**/*.ts', 'src/http/**/*.ts', 'src/upstream/**/*.ts'],
    ignores: ['src/protocol/rev*/codec.ts', 'src/http/dashboard-api.ts'],
    rules: { 'no-restricted-syntax': ['error', ...wireFieldSelectors()] },
  },
  // The era-neutral task core too: it says nothing in a revision's words (each revision's task methods and codec do).
  {
    files: ['src/tasks/**/*.ts'],
    rules: { 'no-restricted-syntax': ['error', ...wireFieldSelectors({ nestedTask: false })] },
  },
  // CommonJS config files of tools (dependency-cruiser's).
  { files: ['**/*.cjs'], languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly' } } },
);
