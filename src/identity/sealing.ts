// Sealing what a task keeps so it can act for its caller later (issue 33 item 2): AES-256-GCM with a key from the
// config, the key id written beside the ciphertext so keys can rotate (the first key seals, every configured key
// opens), and additional authenticated data binding a sealed value to what it belongs to (a task id): a value
// copied onto another task does not open.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export interface SealingKey {
  kid: string;
  /** Exactly 32 bytes. */
  key: Buffer;
}

export type UnsealFault = 'malformed' | 'unknown_kid' | 'tampered';

/** A sealed value that cannot be opened; `fault` says why (never anything of the plaintext). */
export class UnsealError extends Error {
  constructor(
    readonly fault: UnsealFault,
    message: string,
  ) {
    super(message);
    this.name = 'UnsealError';
  }
}

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const ALGORITHM = 'aes-256-gcm';

export class Sealer {
  private readonly keys: ReadonlyMap<string, Buffer>;
  private readonly sealingKey: SealingKey;

  constructor(keys: readonly SealingKey[]) {
    const first = keys[0];
    if (first === undefined) throw new Error('a Sealer needs at least one key');
    for (const k of keys) {
      if (k.key.length !== 32) throw new Error(`sealing key ${k.kid} has ${k.key.length} bytes; AES-256 needs 32`);
      if (k.kid.includes('.')) throw new Error(`sealing key id ${k.kid} may not contain "."`);
    }
    this.sealingKey = first;
    this.keys = new Map(keys.map((k) => [k.kid, k.key]));
  }

  /** `v1.<kid>.<iv>.<ciphertext>.<tag>`, each part base64url; `aad` must be given again to open it. */
  seal(plaintext: string, aad: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv(ALGORITHM, this.sealingKey.key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(aad, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [VERSION, this.sealingKey.kid, iv, ciphertext, cipher.getAuthTag()]
      .map((part) => (typeof part === 'string' ? part : part.toString('base64url')))
      .join('.');
  }

  /** The plaintext, or an UnsealError: malformed, sealed with a key no longer configured, or altered (or other aad). */
  open(sealed: string, aad: string): string {
    const parts = sealed.split('.');
    const [version, kid, iv, ciphertext, tag] = parts;
    if (parts.length !== 5 || version !== VERSION || kid === undefined || iv === undefined || ciphertext === undefined || tag === undefined) {
      throw new UnsealError('malformed', `not a sealed value of version ${VERSION}`);
    }
    const key = this.keys.get(kid);
    if (key === undefined) throw new UnsealError('unknown_kid', `sealed with key "${kid}", which is not among identity.sealingKeys`);
    const ivBytes = Buffer.from(iv, 'base64url');
    const tagBytes = Buffer.from(tag, 'base64url');
    if (ivBytes.length !== IV_BYTES || tagBytes.length !== TAG_BYTES) throw new UnsealError('malformed', 'sealed value has a wrong IV or tag length');
    try {
      const decipher = createDecipheriv(ALGORITHM, key, ivBytes, { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(aad, 'utf8'));
      decipher.setAuthTag(tagBytes);
      return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      throw new UnsealError('tampered', `sealed value does not authenticate with key "${kid}" (altered, or sealed for something else)`);
    }
  }
}
