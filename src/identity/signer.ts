// The identities the gateway signs for upstreams (`auth.signedIdentity`, issue 33): short-lived JWTs with the
// gateway as issuer and the caller's qualified principal as subject, signed with the first configured key; every
// configured key's public half is published (GET /.well-known/jwks.json) so rotation never strands a token.
import { createPrivateKey, createPublicKey, randomUUID, type KeyObject } from 'node:crypto';
import { SignJWT, type JWK } from 'jose';
import type { IdentityConfig } from '../config/identity.js';

export interface MintRequest {
  /** `sub`: the qualified principal (`oauth:<issuer>#<sub>`, `key:<name>`), or the gateway's own. */
  subject: string;
  audience: string;
  /** Extra claims (copied from the caller's verified token); the registered ones below are the signer's alone. */
  claims?: Readonly<Record<string, unknown>>;
  ttlSeconds: number;
}

/** Claims a copied claim may never override: they say who signed, for whom, and for how long. */
const REGISTERED = new Set(['iss', 'sub', 'aud', 'iat', 'nbf', 'exp', 'jti']);

interface LoadedKey {
  kid: string;
  alg: 'ES256' | 'RS256';
  privateKey: KeyObject;
  publicKey: KeyObject;
}

export class IdentitySigner {
  readonly issuer: string;
  private readonly keys: readonly LoadedKey[];
  private readonly now: () => number;
  private readonly published: { keys: JWK[] };

  /** `now` in milliseconds (tests pass a clock). Throws when no key is configured. */
  constructor(config: IdentityConfig, now: () => number = Date.now) {
    if (config.keys.length === 0) throw new Error('identity.keys is empty: nothing to sign with');
    this.issuer = config.issuer;
    this.now = now;
    this.keys = config.keys.map(({ kid, alg, privateKey }) => {
      const key = createPrivateKey({ key: privateKey, format: 'pem' });
      return { kid, alg, privateKey: key, publicKey: createPublicKey(key) };
    });
    this.published = Object.freeze({
      keys: this.keys.map(({ kid, alg, publicKey }) => Object.freeze({ ...(publicKey.export({ format: 'jwk' }) as JWK), kid, alg, use: 'sig' })),
    });
  }

  /**
   * The `sub` for what the gateway asks on its own behalf: a kind of its own (`gateway:`), qualified by the issuer,
   * so it can never equal a caller's principal (`key:…`, `oauth:…`).
   */
  get gatewaySubject(): string {
    return `gateway:${this.issuer}`;
  }

  async mint(request: MintRequest): Promise<string> {
    const signing = this.keys[0];
    if (signing === undefined) throw new Error('unreachable: no signing key');
    const iat = Math.floor(this.now() / 1000);
    const extra = Object.fromEntries(Object.entries(request.claims ?? {}).filter(([name, value]) => !REGISTERED.has(name) && value !== undefined));
    return new SignJWT(extra)
      .setProtectedHeader({ alg: signing.alg, kid: signing.kid, typ: 'JWT' })
      .setIssuer(this.issuer)
      .setSubject(request.subject)
      .setAudience(request.audience)
      .setIssuedAt(iat)
      .setExpirationTime(iat + request.ttlSeconds)
      .setJti(randomUUID())
      .sign(signing.privateKey);
  }

  /** Public keys only (a public KeyObject's JWK has no private members), for /.well-known/jwks.json. */
  jwks(): { keys: JWK[] } {
    return this.published;
  }
}

// The config is frozen and replaced whole on reload: one signer per identity config, built the first time its keys
// are asked for, so serving the JWKS costs a lookup and a reload that changes keys publishes the new set at once.
const signers = new WeakMap<IdentityConfig, IdentitySigner>();

/** The JWKS of `identity` as configured now (for /.well-known/jwks.json); undefined when it has no signing keys. */
export function publishedJwks(identity: IdentityConfig | undefined): { keys: JWK[] } | undefined {
  if (identity === undefined || identity.keys.length === 0) return undefined;
  let signer = signers.get(identity);
  if (signer === undefined) signers.set(identity, (signer = new IdentitySigner(identity)));
  return signer.jwks();
}
