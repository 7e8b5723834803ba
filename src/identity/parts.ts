// The identity parts one gateway process shares across upstreams, built once from `identity` (issue 33): the token
// caches, the discovery cache, the signer (when keys are configured) and the sealer (when sealing keys are). With
// `events`, every credential asked for and every cache lookup is announced there (token-events.ts).
import type { GatewayEvents } from '../events.js';
import type { IdentityConfig } from '../config/identity.js';
import { sealingKeyBytes } from '../config/schema/identity.js';
import type { IdentityParts } from './credential-sources.js';
import { DiscoveryCache } from './oauth-discovery.js';
import { Sealer } from './sealing.js';
import { IdentitySigner } from './signer.js';
import { TokenCache, type TokenCacheEvent, type TokenCacheOptions } from './token-cache.js';
import { cacheEventsTo } from './token-events.js';

export interface GatewayIdentity extends IdentityParts {
  sealer: Sealer | undefined;
}

export function createGatewayIdentity(identity: IdentityConfig | undefined, options: TokenCacheOptions = {}, events?: GatewayEvents): GatewayIdentity {
  const sealingKeys = (identity?.sealingKeys ?? []).map(({ kid, key }) => {
    const bytes = sealingKeyBytes(key);
    if (bytes === undefined) throw new Error(`unreachable: sealing key ${kid} passed validation`);
    return { kid, key: bytes };
  });
  const announced = (kind: 'tokens' | 'signed'): TokenCacheOptions['onEvent'] => {
    const own = options.onEvent;
    if (events === undefined) return own;
    const announce = cacheEventsTo(events, kind);
    return own === undefined ? announce : (event: TokenCacheEvent) => (own(event), announce(event));
  };
  return {
    tokens: new TokenCache({ ...options, onEvent: announced('tokens') }),
    signed: new TokenCache({ ...options, maxConcurrentRequests: Number.MAX_SAFE_INTEGER, onEvent: announced('signed') }),
    discovery: new DiscoveryCache(options.now),
    signer: identity !== undefined && identity.keys.length > 0 ? new IdentitySigner(identity, options.now) : undefined,
    sealer: sealingKeys.length > 0 ? new Sealer(sealingKeys) : undefined,
    ...(events !== undefined && { events }),
  };
}
