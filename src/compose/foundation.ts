// What every later part is built on: the store (with the replica link and the signing secret it carries), who the
// callers are and what they may spend, and who the gateway is to its upstreams.
import type { GatewayConfig } from '../config/types.js';
import type { GatewayEvents } from '../events.js';
import { ReplicaLink } from '../gateway/replicas.js';
import { Authenticator } from '../http/credentials.js';
import { createGatewayIdentity, type GatewayIdentity } from '../identity/parts.js';
import type { Lifecycle } from '../lifecycle.js';
import type { Logger } from '../log.js';
import { subscribeCredentialStatus, type CredentialStatus } from '../observability/credential-health.js';
import { consentUpstreams } from '../consent/settings.js';
import { createUserConnections, type UserConnectionsService } from '../consent/user-connections.js';
import { createStore } from '../store/store.js';
import type { TaskStore } from '../store/task-store.js';
import { ActingCallers } from '../tasks/acting-callers.js';
import { InflightBytes } from '../tasks/inflight-bytes.js';
import { RateLimiter } from '../tasks/rate-limits.js';

export interface FoundationDeps {
  config: GatewayConfig;
  logger: Logger;
  events: GatewayEvents;
}

export interface Foundation {
  store: TaskStore;
  /** Messages between replicas, through the store (started later: 'replica link'). */
  replicas: ReplicaLink;
  /** The store's shared secret, which signs what one replica hands out and another must recognise. */
  signingSecret(): Promise<Buffer>;
  /** One authenticator for the MCP endpoint and the admin endpoints (one cache of verified tokens); none without `auth`. */
  authenticator: Authenticator | undefined;
  rateLimiter: RateLimiter | undefined;
  /** The budgets of request bytes in flight, shared by the front and the task core. */
  inflight: InflightBytes;
  /** Who the gateway is to upstreams (issue 33): token caches, signer and sealer, shared by every upstream and the tasks. */
  identity: GatewayIdentity;
  /** Upstreams whose gateway credential cannot be obtained now, for readiness. */
  credentialHealth: CredentialStatus;
  /** Keeps the callers of calls another replica may run, sealed with the identity's sealer. */
  acting: ActingCallers;
  /**
   * Users' own connections to upstreams that need them (`auth.authorizationCode`, issue 41): the upstreams' requests
   * ask it for a caller's token (through `identity.userTokens`), the task core and the browser routes for the rest.
   * None when no upstream needs one.
   */
  consent: UserConnectionsService | undefined;
}

/** Starts the store, then what hears the identity's token events; builds the rest around them. */
export async function startFoundation(life: Lifecycle, deps: FoundationDeps): Promise<Foundation> {
  const { config, logger, events } = deps;
  const store = await life.start({ name: 'store', start: () => createStore(config.store, events), stop: (started) => started.close() });
  const callers = callerParts(deps, store);
  const identity = createGatewayIdentity(config.identity, {}, events);
  const replicas = new ReplicaLink(store, logger);
  const consent = await startConsent(life, deps, store, identity, replicas.id);
  if (consent !== undefined) identity.userTokens = consent;
  const credentialHealth = await life.start({ name: 'credential status', start: () => subscribeCredentialStatus(events), stop: (status) => status.close() });
  return {
    store,
    replicas,
    signingSecret: sharedSecret(store),
    ...callers,
    identity,
    credentialHealth,
    acting: new ActingCallers(identity.sealer),
    consent,
  };
}

/** The users' connections, listening for connections made on other replicas before anything can wait for one. */
async function startConsent(life: Lifecycle, deps: FoundationDeps, store: TaskStore, identity: GatewayIdentity, replicaId: string): Promise<UserConnectionsService | undefined> {
  const { config, logger, events } = deps;
  if (consentUpstreams(config).size === 0) return undefined;
  const sealer = identity.sealer;
  // The config loader refuses authorizationCode without sealing keys.
  if (sealer === undefined) throw new Error('unreachable: auth.authorizationCode passed validation without identity.sealingKeys');
  const consent = createUserConnections({ config, store, sealer, events, logger, replicaId });
  return life.start({ name: 'user connections', start: async () => (await consent.start(), consent), stop: (started) => started.stop() });
}

function callerParts({ config, logger, events }: FoundationDeps, store: TaskStore): Pick<Foundation, 'authenticator' | 'rateLimiter' | 'inflight'> {
  const { auth, listen } = config;
  return {
    authenticator: auth === undefined ? undefined : new Authenticator(auth, logger),
    rateLimiter: auth === undefined ? undefined : new RateLimiter(auth.rateLimits, store, events),
    inflight: new InflightBytes({ total: listen.maxInflightBytes, perPrincipal: listen.maxInflightBytesPerPrincipal }),
  };
}

/** Read once from the store, so any replica recognises what another signed (and none can forge it); a failed read is retried. */
function sharedSecret(store: TaskStore): () => Promise<Buffer> {
  let secret: Promise<Buffer> | undefined;
  return () =>
    (secret ??= store.signingSecret().catch((error: unknown) => {
      secret = undefined;
      throw error;
    }));
}
