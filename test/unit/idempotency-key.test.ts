// Reading an idempotency key: the Idempotency-Key header as the IETF httpapi draft defines it (an RFC 8941 Item
// whose value is a String), the gateway's `_meta` key and SEP-1686's client-chosen task id; and what a key binds.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../../src/errors.js';
import {
  IDEMPOTENCY_KEY_META,
  idempotencyHeaderOf,
  idempotencyKeyOf,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  parseIdempotencyKeyHeader,
  SEP1686_TASK_META,
  withoutIdempotencyMeta,
} from '../../src/protocol/idempotency-key.js';
import { callDigest } from '../../src/tasks/call-digest.js';
import { keyedTaskId } from '../../src/tasks/idempotency.js';

/** The -32602 message a read throws. */
function refusal(read: () => unknown): string {
  try {
    read();
  } catch (error) {
    assert.ok(error instanceof GatewayError && error.code === 'invalid_params', String(error));
    return error.message;
  }
  assert.fail('accepted');
}

describe('Idempotency-Key header', () => {
  it('is a quoted string: escapes undone, surrounding spaces and RFC 8941 parameters ignored', () => {
    assert.equal(parseIdempotencyKeyHeader('"8e03978e-40d5-43e8-bc93-6894a57f9324"'), '8e03978e-40d5-43e8-bc93-6894a57f9324');
    assert.equal(parseIdempotencyKeyHeader('  "a \\"quoted\\" \\\\ key"  '), 'a "quoted" \\ key');
    assert.equal(parseIdempotencyKeyHeader('"k";a=1;b="x;y";c;d=?0;e=tok/en:1;f=:aGk=:;g=-1.5'), 'k');
    assert.equal(parseIdempotencyKeyHeader('"k"; spaced=1'), 'k');
  });

  it('is a bare token too, as Stripe-style clients send it: the same key as its quoted form', () => {
    assert.equal(parseIdempotencyKeyHeader('abc'), 'abc');
    assert.equal(parseIdempotencyKeyHeader('abc'), parseIdempotencyKeyHeader('"abc"'));
    // A UUID starts with a digit: not an RFC 8941 token, still the key its client means.
    assert.equal(parseIdempotencyKeyHeader('8e03978e-40d5-43e8-bc93-6894a57f9324'), '8e03978e-40d5-43e8-bc93-6894a57f9324');
    assert.equal(parseIdempotencyKeyHeader('  k1/b64+x==:@?  '), 'k1/b64+x==:@?');
    assert.equal(parseIdempotencyKeyHeader('tok;a=1;b="x"'), 'tok');
    const longest = 'k'.repeat(MAX_IDEMPOTENCY_KEY_LENGTH);
    assert.equal(parseIdempotencyKeyHeader(longest), longest);
  });

  it('refuses what the draft does not allow, saying what a key looks like', () => {
    assert.match(refusal(() => parseIdempotencyKeyHeader('')), /it is empty.*Idempotency-Key: "8e03978e/);
    assert.match(refusal(() => parseIdempotencyKeyHeader('two words')), /unexpected " words" after the key/);
    assert.match(refusal(() => parseIdempotencyKeyHeader('a, b')), /unexpected ", b" after the key/);
    assert.match(refusal(() => parseIdempotencyKeyHeader('a"b"')), /unexpected "\\"b\\"" after the key/);
    assert.match(refusal(() => parseIdempotencyKeyHeader(';a=1')), /no key before the parameters/);
    assert.match(refusal(() => parseIdempotencyKeyHeader('caf\u00e9')), /printable ASCII/);
    assert.match(refusal(() => parseIdempotencyKeyHeader(`${'k'.repeat(MAX_IDEMPOTENCY_KEY_LENGTH)}k`)), /at most/);
    assert.match(refusal(() => parseIdempotencyKeyHeader('"open')), /closing double quote is missing/);
    assert.match(refusal(() => parseIdempotencyKeyHeader('"a\\b"')), /backslash may only escape/);
    assert.match(refusal(() => parseIdempotencyKeyHeader('"caf\u00e9"')), /printable ASCII/);
    assert.match(refusal(() => parseIdempotencyKeyHeader('"tab\there"')), /printable ASCII/);
    assert.match(refusal(() => parseIdempotencyKeyHeader('"a", "b"')), /unexpected ", \\"b\\""/);
    assert.match(refusal(() => parseIdempotencyKeyHeader('"k";Upper=1')), /parameter name/);
    assert.match(refusal(() => parseIdempotencyKeyHeader('"k";a=@')), /bare item/);
    assert.match(refusal(() => parseIdempotencyKeyHeader('""')), /must not be empty/);
  });

  it('is bounded: MAX_IDEMPOTENCY_KEY_LENGTH characters', () => {
    const longest = 'k'.repeat(MAX_IDEMPOTENCY_KEY_LENGTH);
    assert.equal(parseIdempotencyKeyHeader(`"${longest}"`), longest);
    assert.match(refusal(() => parseIdempotencyKeyHeader(`"${longest}k"`)), new RegExp(`${MAX_IDEMPOTENCY_KEY_LENGTH + 1} characters long; an idempotency key may have at most ${MAX_IDEMPOTENCY_KEY_LENGTH}`));
  });

  it('sent twice, it is one malformed list', () => {
    assert.equal(idempotencyHeaderOf({ 'idempotency-key': ['"a"', '"b"'] }), '"a", "b"');
    assert.equal(idempotencyHeaderOf({}), undefined);
  });
});

describe('a call\'s idempotency key, wherever it is', () => {
  it('header, the gateway\'s _meta key or SEP-1686\'s task id; one key however many name it', () => {
    assert.equal(idempotencyKeyOf(undefined, undefined), undefined);
    assert.equal(idempotencyKeyOf(undefined, { progressToken: 1 }), undefined);
    assert.equal(idempotencyKeyOf('"k1"', undefined), 'k1');
    assert.equal(idempotencyKeyOf(undefined, { [IDEMPOTENCY_KEY_META]: 'k2' }), 'k2');
    assert.equal(idempotencyKeyOf(undefined, { [SEP1686_TASK_META]: { taskId: 'k3', keepAlive: 60_000 } }), 'k3');
    assert.equal(idempotencyKeyOf('"k"', { [IDEMPOTENCY_KEY_META]: 'k', [SEP1686_TASK_META]: { taskId: 'k' } }), 'k');
  });

  it('refuses two different keys, and a key that is not a bounded string', () => {
    assert.match(refusal(() => idempotencyKeyOf('"a"', { [IDEMPOTENCY_KEY_META]: 'b' })), /the Idempotency-Key header and _meta\["taskgate\/idempotency-key"\] name different idempotency keys/);
    assert.match(refusal(() => idempotencyKeyOf(undefined, { [IDEMPOTENCY_KEY_META]: 7 })), /_meta\["taskgate\/idempotency-key"\] must be a string/);
    assert.match(refusal(() => idempotencyKeyOf(undefined, { [SEP1686_TASK_META]: { keepAlive: 1 } })), /_meta\["modelcontextprotocol.io\/task"\]\.taskId must be a string/);
    assert.match(refusal(() => idempotencyKeyOf(undefined, { [IDEMPOTENCY_KEY_META]: 'x'.repeat(MAX_IDEMPOTENCY_KEY_LENGTH + 1) })), /at most/);
    assert.match(refusal(() => idempotencyKeyOf(undefined, { [IDEMPOTENCY_KEY_META]: 'line\nbreak' })), /printable ASCII/);
  });

  it('never goes upstream: the keys are taken out of _meta, the rest stays', () => {
    const params = { name: 't', _meta: { progressToken: 'p', [IDEMPOTENCY_KEY_META]: 'k', [SEP1686_TASK_META]: { taskId: 'k' } } };
    assert.deepEqual(withoutIdempotencyMeta(params), { name: 't', _meta: { progressToken: 'p' } });
    const plain = { name: 't', _meta: { progressToken: 'p' } };
    assert.equal(withoutIdempotencyMeta(plain), plain);
  });
});

describe('what a key binds', () => {
  it('the digest is of the tool and its arguments, key order aside', () => {
    assert.equal(callDigest('t', { a: 1, b: { c: [1, 2] } }), callDigest('t', { b: { c: [1, 2] }, a: 1 }));
    assert.notEqual(callDigest('t', { a: 1 }), callDigest('t', { a: 2 }));
    assert.notEqual(callDigest('t', { a: 1 }), callDigest('u', { a: 1 }));
    assert.equal(callDigest('t', undefined), callDigest('t', {}));
  });

  it('the task id: 128 bits of the gateway\'s, one per principal and key, never the key itself', () => {
    const secret = Buffer.alloc(32, 1);
    const id = keyedTaskId(secret, 'key:alice', 'k');
    assert.match(id, /^[A-Za-z0-9_-]{22}$/);
    assert.equal(keyedTaskId(secret, 'key:alice', 'k'), id);
    assert.notEqual(keyedTaskId(secret, 'key:bob', 'k'), id);
    assert.notEqual(keyedTaskId(secret, 'key:alice', 'k2'), id);
    assert.notEqual(keyedTaskId(Buffer.alloc(32, 2), 'key:alice', 'k'), id);
    // The separator keeps (principal, key) pairs apart that would concatenate alike.
    assert.notEqual(keyedTaskId(secret, 'key:a', 'lice\0k'), keyedTaskId(secret, 'key:alice', 'k'));
  });
});
