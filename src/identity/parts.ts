// The identity parts one gateway process shares across upstreams, built once from `identity` (issue 33): the token
// caches, the discovery cache, the signer (when keys are configured) and the sealer (when sealing keys are).
import type { IdentityConfig } from '../config/identity.js';
import { sealingKeyBytes } from '../config/schema/identity.js';
import type { IdentityParts } from './credential-sources.js';
import { DiscoveryCache } from './oauth-client.js';
import { Sealer } from './sealing.js';
import { IdentitySigner } from './signer.js';
import { TokenCache, type TokenCacheOptions } from './token-cache.js';

export interface GatewayIdentity extends IdentityParts {
  sealer: Sealer | undefined;
}

export function createGatewayIdentity(identity: IdentityConfig | undefined, options: TokenCacheOptions = {}): GatewayIdentity {
  const sealingKeys = (identity?.sealingKeys ?? []).map(({ kid, key }) => {
    const bytes = sealingKeyBytes(key);
    if (bytes === undefined) throw new Error(`unreachable: sealing key ${kid} passed validation`);
    return { kid, key: bytes };
  });
  return {
    tokens: new TokenCache(options),
    signed: new TokenCache({ ...options, maxConcurrentRequests: Number.MAX_SAFE_INTEGER }),
    discovery: new DiscoveryCache(options.now),
    signer: identity !== undefined && identity.keys.length > 0 ? new IdentitySigner(identity, options.now) : undefined,
    sealer: sealingKeys.length > 0 ? new Sealer(sealingKeys) : undefined,
  };
}
