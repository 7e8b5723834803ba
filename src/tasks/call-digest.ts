// What identifies a call, as bytes: one canonical JSON (jsonrpc.ts, keys sorted) under one SHA-256, for every digest
// the gateway keeps or hands out. Each use hashes its own input, and each is persisted (an idempotency key's record,
// an approval hold, a requestState in a client's hands): its input and encoding are part of stored data, so they
// stay what they were when it was written, and only the function that hashes them is shared.
import { createHash } from 'node:crypto';
import { canonicalJson, type JsonObject } from '../jsonrpc.js';

/** SHA-256 of `value`'s canonical JSON (key order aside, `undefined` members left out). */
export function canonicalDigest(value: unknown, encoding: 'base64url' | 'hex' = 'base64url'): string {
  return createHash('sha256').update(canonicalJson(value)).digest(encoding);
}

/**
 * What an idempotency key is bound to: the tool's exposed name and its arguments. `_meta` is not part of it: a
 * retry may carry another progress token.
 */
export function callDigest(exposedName: string, args: unknown): string {
  return canonicalDigest({ name: exposedName, arguments: (args ?? {}) as JsonObject });
}

/**
 * What an approval hold is bound to: the tool and arguments as the upstream gets them (`tools/call` params: its own
 * tool name and `arguments`), hex, as approvers are shown it.
 */
export function approvalDigest(params: JsonObject): string {
  return canonicalDigest({ name: params.name ?? null, arguments: params.arguments ?? null }, 'hex');
}
