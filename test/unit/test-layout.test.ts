// The test tree stays easy to walk: test/unit/, test/integration/ and test/heavy/ (the integration tests that start
// Redis servers, replicas or a browser of their own, or drive load: a lane of their own) hold test files only (shared
// set-ups live in test/helpers/, upstream servers and data in test/fixtures/), and no file name is in two of them,
// so a name says what is tested and the folder at which level.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const TEST_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const LEVELS = ['unit', 'integration', 'heavy'] as const;
/** Folders of data a level's tests read (not set-ups): the config files of the config tests. */
const DATA_FOLDERS: Record<(typeof LEVELS)[number], readonly string[]> = { unit: ['configs'], integration: [], heavy: [] };

function entries(level: (typeof LEVELS)[number]): { files: string[]; folders: string[] } {
  const found = readdirSync(join(TEST_ROOT, level), { withFileTypes: true });
  return { files: found.filter((e) => e.isFile()).map((e) => e.name), folders: found.filter((e) => e.isDirectory()).map((e) => e.name) };
}

describe('test layout', () => {
  for (const level of LEVELS) {
    it(`test/${level}/ holds only *.test.ts files (set-ups go to test/helpers/)`, () => {
      const { files, folders } = entries(level);
      assert.deepEqual(files.filter((name) => !name.endsWith('.test.ts')), [], `not a test file in test/${level}/`);
      assert.deepEqual(folders.filter((name) => !DATA_FOLDERS[level].includes(name)), [], `a folder in test/${level}/ that is not known test data`);
    });
  }

  it('no test file name is in two of test/unit/, test/integration/ and test/heavy/', () => {
    const seen = new Map<string, string>();
    const twice: string[] = [];
    for (const level of LEVELS) {
      for (const name of entries(level).files) {
        const first = seen.get(name);
        if (first !== undefined) twice.push(`${name} (test/${first}/ and test/${level}/)`);
        seen.set(name, level);
      }
    }
    assert.deepEqual(twice, [], 'rename one so the name says what it tests at its level');
  });
});
