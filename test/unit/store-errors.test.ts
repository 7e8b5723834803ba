// How a failed store operation reaches a client: slow (connected, no answer in time) or unavailable (no
// connection), in the gateway's words, as a temporary refusal (503 + retryAfterMs), never the Redis client's text.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayError, retryAfterHeaders, STORE_RETRY_AFTER_MS, storeFailureKind, storeUnavailable } from '../../src/errors.js';
import { NO_CONNECTION_TIMEOUT } from '../../src/store/redis-connection.js';

test('a command that timed out on a live connection is the store being slow', () => {
  const error = storeUnavailable(new Error('Command timed out'));
  assert.equal(error.code, 'store_slow');
  assert.equal(error.httpStatus, 503);
  assert.equal(error.message, 'The task store is slow: it did not answer within store.commandTimeoutMs; try again shortly');
  assert.deepEqual(error.data, { retryAfterMs: STORE_RETRY_AFTER_MS });
  assert.deepEqual(retryAfterHeaders(error.data), { 'retry-after': '1' });
  assert.equal(error.toJsonRpc().code, -32603);
});

test('no connection (refused, reset, past the retry limit, timed out while reconnecting) is the store being unavailable', () => {
  for (const message of [
    'connect ECONNREFUSED 127.0.0.1:6390',
    'read ECONNRESET',
    'Reached the max retries per request limit (which is 1). Refer to "maxRetriesPerRequest" option for details.',
    'Connection is closed.',
    `${NO_CONNECTION_TIMEOUT} (reconnecting)`,
  ]) {
    assert.equal(storeFailureKind(new Error(message)), 'unavailable', message);
    const error = storeUnavailable(new Error(message));
    assert.equal(error.code, 'store_unavailable');
    assert.equal(error.message, 'The task store is unavailable: no connection to Redis; try again shortly');
    assert.equal(error.httpStatus, 503);
    assert.deepEqual(error.data, { retryAfterMs: STORE_RETRY_AFTER_MS });
  }
});

test('an error Redis itself answered keeps its words; a store refusal passes through unchanged', () => {
  const oom = storeUnavailable(new Error("OOM command not allowed when used memory > 'maxmemory'."));
  assert.equal(oom.code, 'store_unavailable');
  assert.match(oom.message, /OOM command not allowed/);
  const slow = new GatewayError('store_slow', 'slow');
  assert.equal(storeUnavailable(slow), slow);
});
