// Header values from verified claims (src/identity/claim-headers.ts): every claim type, control characters gone,
// non-ASCII percent-encoded (UTF-8), capped, absent claims sending nothing; every value passes Node's own check.
import assert from 'node:assert/strict';
import { validateHeaderValue } from 'node:http';
import { describe, it } from 'node:test';
import { claimHeaders, headerSafe, MAX_CLAIM_HEADER_BYTES } from '../../src/identity/claim-headers.js';

describe('identity: claim headers', () => {
  const caller = {
    principal: 'oauth:https://idp.example#alice',
    claims: { email: 'alice@example.com', groups: ['dev', 'ops'], admin: true, level: 3, name: 'Zoë\r\nX-Injected: 1', empty: [], obj: { a: 1 } },
  };

  it('maps principal and claims; arrays joined by ","; absent or unsendable claims send no header', () => {
    const headers = claimHeaders(
      { 'X-User': 'principal', 'X-Email': 'email', 'X-Groups': 'groups', 'X-Admin': 'admin', 'X-Level': 'level', 'X-Missing': 'nope', 'X-Empty': 'empty', 'X-Obj': 'obj' },
      caller,
    );
    assert.deepEqual(headers, {
      'X-User': 'oauth:https://idp.example#alice',
      'X-Email': 'alice@example.com',
      'X-Groups': 'dev,ops',
      'X-Admin': 'true',
      'X-Level': '3',
    });
  });

  it('removes CR/LF and control characters and percent-encodes non-ASCII and "%"', () => {
    assert.equal(claimHeaders({ 'X-Name': 'name' }, caller)['X-Name'], 'Zo%C3%ABX-Injected: 1');
    assert.equal(headerSafe('100% \u0000ok\u007f 日本'), '100%25 ok %E6%97%A5%E6%9C%AC');
    assert.equal(headerSafe('a\uD800b'), 'ab', 'a lone surrogate is dropped');
    for (const value of ['Zoë\r\n', '\u0001\u001b[31m', '日本語'.repeat(300)]) validateHeaderValue('x-test', headerSafe(value));
  });

  it('caps the value at 1024 bytes without cutting an escape in half', () => {
    assert.equal(headerSafe('a'.repeat(5000)).length, MAX_CLAIM_HEADER_BYTES);
    const cut = headerSafe(`a${'é'.repeat(600)}`);
    assert.ok(cut.length <= MAX_CLAIM_HEADER_BYTES);
    assert.match(cut, /(%[0-9A-F]{2})$/);
  });
});
