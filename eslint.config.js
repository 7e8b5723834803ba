import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', 'bench/results/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  // Which revision a message belongs to is the revision registry's to say (src/protocol/revisions.ts): nothing
  // else asks a revision's detection directly, so no front or router grows an "if modern … else legacy".
  {
    files: ['src/**/*.ts'],
    ignores: ['src/protocol/revisions.ts', 'src/protocol/rev2026-07-28/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/rev2026-07-28/envelope.js'], importNames: ['isModernMessage'], message: 'ask the revision registry (src/protocol/revisions.ts: revisionOf) instead' }] },
      ],
    },
  },
  // CommonJS config files of tools (dependency-cruiser's).
  { files: ['**/*.cjs'], languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly' } } },
);
