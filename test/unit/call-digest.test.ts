// The digests the gateway keeps are stored data: an idempotency key's record, an approval hold, a requestState a
// client holds. One function hashes them all; each keeps the bytes it had when the record was written (these values
// were computed with the code of each digest before they shared it), or stored keys and holds would stop matching.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { approvalDigest, callDigest } from '../../src/tasks/call-digest.js';
import { paramsDigest } from '../../src/protocol/rev2026-07-28/exchange.js';

const args = { b: [1, { y: 2, x: 1 }], a: 'z' };

describe('call digests', () => {
  it('an idempotency key binds the exposed name and arguments, as before (base64url)', () => {
    assert.equal(callDigest('files_delete', args), 'tkE6fmNV0IY99tOECYwHEvBwPPbffaxHCbu6eKurFwQ');
  });

  it('an approval hold binds the upstream name and arguments, as before (hex)', () => {
    assert.equal(approvalDigest({ name: 'delete', arguments: args, _meta: { progressToken: 1 } }), '97ee76b944646fcbbc33961faa09b96cfb5d99c071d6d0a971f0f763c77b0ee8');
  });

  it("a requestState binds the upstream params without _meta and the retry's fields, as before (base64url)", () => {
    assert.equal(paramsDigest({ name: 'delete', arguments: args, _meta: { progressToken: 1 }, requestState: 's' }), 'l-52uURkb8u8M5Yfqgm5bPtdmcBx1tCpcfD3Y8d7Dug');
  });
});
