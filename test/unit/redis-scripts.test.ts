// The Redis store's Lua files: each opens with its contract, and snippets resolve once. What they do against a
// real Redis is the store suite's business (test/integration/task-store.test.ts).
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { scriptSource } from '../../src/store/redis/scripts.js';

const DIR = fileURLToPath(new URL('../../src/store/redis/scripts/', import.meta.url));
const files = readdirSync(DIR).filter((f) => f.endsWith('.lua'));
const transitions = files.filter((f) => !f.startsWith('_')).map((f) => f.slice(0, -'.lua'.length));

describe('Redis scripts', () => {
  it('every transition opens with its name and its KEYS/ARGV contract, and says what it returns', () => {
    assert.ok(transitions.length >= 9, transitions.join());
    for (const name of transitions) {
      const header = scriptSource(name).split('\n').filter((line) => line.startsWith('--'));
      assert.match(header[0] ?? '', new RegExp(`^-- ${name}: `), name);
      assert.ok(header.some((line) => /^-- KEYS/.test(line)), `${name}: KEYS contract`);
      assert.ok(header.some((line) => /^-- Returns /.test(line)), `${name}: return contract`);
    }
  });

  it('includes resolve to their snippet once, and nothing else can be included', () => {
    const acquire = scriptSource('acquire-slot');
    assert.doesNotMatch(acquire, /^--! include/m);
    assert.equal(acquire.match(/redis\.call\('TIME'\)/g)?.length, 1);
    assert.equal(acquire.match(/local function keep/g)?.length, 1);
    // The clock is read in one place for every script that needs it.
    for (const name of transitions) {
      const own = scriptSource(name).replace(scriptSource('_now'), '');
      assert.doesNotMatch(own, /redis\.call\('TIME'\)/, `${name} reads the clock itself`);
    }
  });
});
