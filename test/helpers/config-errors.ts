// What a config refused says: the located issues of the ConfigError that loading or parsing it threw. One reader for
// the config unit tests, which each kept a copy.
import assert from 'node:assert/strict';
import { ConfigError, type ConfigIssue } from '../../src/config/config-error.js';

/** The issues of the ConfigError `load` throws; fails the test when it throws anything else, or nothing. */
export function configErrorsOf(load: () => unknown): readonly ConfigIssue[] {
  try {
    load();
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    assert.equal(err.code, 'CONFIG');
    return err.errors;
  }
  assert.fail('expected a ConfigError');
}
