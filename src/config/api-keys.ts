// API keys are kept and compared only as their SHA-256: the configuration may hold the hash instead of the key
// (`sha256:`), the loaded config never holds a key, and a presented token is hashed before it is looked up.
import { createHash } from 'node:crypto';

/** The SHA-256 of an API key, as lowercase hex (what `auth.apiKeys[].sha256` holds). */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}
