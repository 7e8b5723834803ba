// What a revision's front knows of one POST that the calls it carries need, read once there and handed down as one
// object: who asks, the bytes the body holds, and its Idempotency-Key header.
import type { Caller } from '../principals.js';
import type { InflightCharge } from '../tasks/inflight-bytes.js';

export interface PostContext {
  /** The caller credentials.ts resolved (none without authentication). */
  caller?: Caller | undefined;
  /**
   * The bytes of the request body: held until the answer, and longer by a task that takes the call's arguments
   * with it.
   */
  charge?: InflightCharge | undefined;
  /** The POST's Idempotency-Key header as sent (idempotency-key.ts reads the key from it, with the call's `_meta`). */
  idempotencyHeader?: string | undefined;
}
