// Sealing what a task keeps (src/identity/sealing.ts): AES-256-GCM bound to its additional data, the key id
// recorded so keys rotate, and every way a sealed value can fail to open named.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { Sealer, UnsealError, type UnsealFault } from '../../src/identity/sealing.js';

const key = (kid: string) => ({ kid, key: randomBytes(32) });
const faultOf = (fn: () => unknown): UnsealFault => {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof UnsealError, String(err));
    return err.fault;
  }
  assert.fail('expected an UnsealError');
};

describe('identity: sealing', () => {
  const s1 = key('s1');
  const sealer = new Sealer([s1]);

  it('seals to v1.<kid>.<iv>.<ciphertext>.<tag> and opens with the same aad; the plaintext is not in it', () => {
    const sealed = sealer.seal('subject-token-of-alice', 'task-123');
    const parts = sealed.split('.');
    assert.equal(parts.length, 5);
    assert.equal(parts[0], 'v1');
    assert.equal(parts[1], 's1');
    assert.equal(Buffer.from(parts[2] ?? '', 'base64url').length, 12);
    assert.equal(Buffer.from(parts[4] ?? '', 'base64url').length, 16);
    assert.ok(!sealed.includes('alice'));
    assert.equal(sealer.open(sealed, 'task-123'), 'subject-token-of-alice');
    assert.notEqual(sealer.seal('x', 'a'), sealer.seal('x', 'a'), 'a fresh IV each time');
  });

  it('refuses another aad, an altered byte, a malformed value and an unknown key, saying which', () => {
    const sealed = sealer.seal('secret', 'task-1');
    assert.equal(faultOf(() => sealer.open(sealed, 'task-2')), 'tampered');
    const parts = sealed.split('.');
    const ct = Buffer.from(parts[3] ?? '', 'base64url');
    ct[0] = (ct[0] ?? 0) ^ 1;
    assert.equal(faultOf(() => sealer.open([parts[0], parts[1], parts[2], ct.toString('base64url'), parts[4]].join('.'), 'task-1')), 'tampered');
    assert.equal(faultOf(() => sealer.open('v2.s1.a.b.c', 'task-1')), 'malformed');
    assert.equal(faultOf(() => sealer.open('nonsense', 'task-1')), 'malformed');
    assert.equal(faultOf(() => new Sealer([key('s9')]).open(sealed, 'task-1')), 'unknown_kid');
  });

  it('rotates: the first key seals, every configured key opens', () => {
    const old = sealer.seal('kept across rotation', 'task-9');
    const rotated = new Sealer([key('s2'), s1]);
    assert.equal(rotated.open(old, 'task-9'), 'kept across rotation');
    assert.equal(rotated.seal('new', 'task-9').split('.')[1], 's2');
  });

  it('refuses keys that are not 32 bytes', () => {
    assert.throws(() => new Sealer([{ kid: 'short', key: randomBytes(16) }]), /32/);
    assert.throws(() => new Sealer([]), /at least one key/);
  });
});
