// List cursors: opaque to clients, signed with the store's secret (TaskStore.signingSecret) so that any replica
// recognises the ones it or another replica issued, and none other.
import { createHmac, timingSafeEqual } from 'node:crypto';

export class InvalidCursorError extends Error {
  constructor() {
    super('Invalid cursor');
    this.name = 'InvalidCursorError';
  }
}

/**
 * Opaque, tamper-proof list cursors: the listing key of the last task on a page, bound to the principal and
 * signed, so a cursor can be neither forged nor replayed by another principal.
 */
export class CursorCodec {
  constructor(private readonly secret: Buffer) {}

  encode(principal: string, key: string): string {
    const payload = Buffer.from(key).toString('base64url');
    return `${payload}.${this.sign(principal, payload)}`;
  }

  decode(principal: string, cursor: string): string {
    const [payload, signature, extra] = cursor.split('.');
    if (payload === undefined || signature === undefined || extra !== undefined) throw new InvalidCursorError();
    const expected = Buffer.from(this.sign(principal, payload));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw new InvalidCursorError();
    return Buffer.from(payload, 'base64url').toString('utf8');
  }

  private sign(principal: string, payload: string): string {
    return createHmac('sha256', this.secret).update(principal).update('\0').update(payload).digest('base64url').slice(0, 22);
  }
}
