// Retry-safe task creation: a task-creating call that carries an idempotency key makes its task once. The task's id
// is derived from the key (an HMAC under the store's shared secret of principal and key), so the key record IS the
// task record: one atomic store step (createOnce) either creates it or finds it, on any replica, in the task's own
// Redis Cluster slot. Once the task is deleted or expires the key is retired (a tombstone, or the expired-marker,
// in the same slot) for as long as an expired id is remembered: its id is never reused for another call. Ids stay
// the gateway's: 128 bits nobody can compute without the secret, never the client's key itself.
import { createHmac } from 'node:crypto';
import { GatewayError } from '../errors.js';
import type { KeyRetirement, TaskRecord } from '../store/task-store.js';
import { callDigest } from './call-digest.js';

/** A key a call carries, and the digest of the call it was first used for (tool name and arguments). */
export interface IdempotentCreation {
  key: string;
  digest: string;
}

/** The key's creation for a tools/call of `exposedName` with `args` (none when the call carries no key). */
export function idempotentCreation(key: string | undefined, exposedName: string, args: unknown): IdempotentCreation | undefined {
  return key === undefined ? undefined : { key, digest: callDigest(exposedName, args) };
}

/** The id of the task `key` makes for `principal`: the same on every replica sharing the store's secret. */
export function keyedTaskId(secret: Buffer, principal: string, key: string): string {
  return createHmac('sha256', secret).update('idempotency-key\0').update(principal).update('\0').update(key).digest().subarray(0, 16).toString('base64url');
}

/** The -32602 for a key already used for another call: never a second task, never the other call's task. */
export function keyReused(): GatewayError {
  return new GatewayError(
    'invalid_params',
    'Invalid params: this idempotency key was already used for a different call (another tool or other arguments) whose task still exists; use a new key for a new call',
  );
}

/**
 * The -32602 for a key whose task was deleted or expired: its id (the key gives it) never serves a new task, or an
 * approver's decision about that id could run a call they never saw (issue 39).
 */
export function keyRetired(reason: KeyRetirement): GatewayError {
  return new GatewayError(
    'invalid_params',
    `Invalid params: this idempotency key's task was ${reason === 'deleted' ? 'deleted' : 'expired'}, and its id is never used for another task; use a new key for a new call`,
  );
}

/** What opening a task under a key came to: a task made now, or the one the key made before (nothing new runs). */
export interface Opened {
  task: TaskRecord;
  existing: boolean;
}
