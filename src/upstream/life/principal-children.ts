// The children of a stdio upstream with `isolation: per-principal` (issue 33): one per principal, started on the
// principal's first call with its caller in its env (child-env.ts), shared by every session and client of that
// principal, stopped once it has had no call for idleTimeoutMs. At most maxSessions of them: at the cap, the least
// recently used idle one is stopped for a new principal; when every one has a call running, the new principal's
// call is refused with an error naming the upstream and the cap (a busy child is never stopped for another). Their
// life is connection-pool.ts's; what is theirs alone is the child's env and the identity its handshake gives.
import type { UpstreamConfig } from '../../config/types.js';
import type { JsonObject } from '../../jsonrpc.js';
import { upstreamChildrenFull, upstreamUnavailable } from '../../errors.js';
import type { Logger } from '../../log.js';
import { RELAY_CAPABILITIES, type ActingFor, type SessionIdentity, type UpstreamCaller } from '../peer/adapter.js';
import { renderChildEnv, type ChildCaller } from './child-env.js';
import { bearerOf } from '../../identity/credential-sources.js';
import type { UpstreamConnection } from '../peer/connection.js';
import { ConnectionPool } from './connection-pool.js';

/**
 * What a child's env reads of a caller: its principal and claims, and the token its `auth` credentials carry. The
 * caller is the call that starts the child: an environment is fixed at spawn, so its `{{upstreamToken}}` serves all
 * of the principal's later calls too (docs/upstreams.md says so; HTTP upstreams carry each request's own).
 */
export function childCallerOf(caller: UpstreamCaller): ChildCaller {
  return {
    principal: caller.actingFor?.principal ?? caller.principal ?? '',
    claims: caller.actingFor?.claims ?? {},
    upstreamToken: async () => bearerOf(await caller.credentials.headers()),
  };
}

/** Who the child is told it serves in its handshake: the principal's clients, many of them, in the first one's revision. */
function childIdentity(key: string, first: SessionIdentity, gatewayVersion: string): SessionIdentity {
  return { sessionId: key, protocolVersion: first.protocolVersion, capabilities: first.capabilities, clientInfo: { name: 'taskgate (for one principal\'s clients)', version: gatewayVersion }, manyClients: true };
}

/** What a per-principal upstream offers as far as the gateway knows before any of its children has said. */
export const CHILDREN_NOT_HEARD: JsonObject = Object.freeze({ tools: {} });

/**
 * The identity a principal's child is started with for a caller outside any session (a call that names a tool before
 * the child listed it): no client's version, so the handshake offers the latest the gateway speaks.
 */
export function childStarter(actingFor: ActingFor | undefined): SessionIdentity {
  return { sessionId: `principal:${actingFor?.principal ?? ''}`, protocolVersion: '', capabilities: RELAY_CAPABILITIES, clientInfo: undefined, manyClients: true };
}

/** What /readyz says of a per-principal upstream's server: from its children's handshake. */
export function childStatus(said: JsonObject | undefined): { serverInfo: unknown; protocols: string[] } {
  return { serverInfo: said?.serverInfo, protocols: typeof said?.protocolVersion === 'string' ? [said.protocolVersion] : [] };
}

/** Starts a child: its handshake as `identity`, its env from `env` (called at spawn). */
export type StartChild = (identity: SessionIdentity, env: () => Promise<Record<string, string>>) => Promise<UpstreamConnection>;

/** The children of `config`'s upstream when it is per-principal stdio; undefined for every other upstream. */
export function principalChildrenOf(config: UpstreamConfig, parts: Pick<PrincipalChildrenOptions, 'maxChildren' | 'logger' | 'closing' | 'gatewayVersion'>): PrincipalChildren | undefined {
  if (config.transport !== 'stdio' || config.isolation !== 'per-principal') return undefined;
  return new PrincipalChildren({ ...parts, upstreamName: config.name, env: config.env, idleTimeoutMs: config.idleTimeoutMs });
}

export interface PrincipalChildrenOptions {
  upstreamName: string;
  /** The configured env, placeholders and all. */
  env: Readonly<Record<string, string>>;
  /** 0: no cap. */
  maxChildren: number;
  /** 0: never stopped for being idle. */
  idleTimeoutMs: number;
  logger: Logger;
  /** Children being stopped: the upstream's close() waits for them. */
  closing: Set<Promise<void>>;
  /** The gateway's version, as a child's handshake says. */
  gatewayVersion: string;
}

export class PrincipalChildren {
  /** One child per principal, least recently used first. */
  private readonly pool: ConnectionPool<UpstreamConnection>;

  constructor(private readonly options: PrincipalChildrenOptions) {
    const { upstreamName, maxChildren, idleTimeoutMs, logger, closing } = options;
    this.pool = new ConnectionPool({
      max: maxChildren,
      idleTimeoutMs,
      closing,
      full: () => upstreamChildrenFull(upstreamName, maxChildren),
      closingBy: (_key, reason) => {
        if (reason === 'bound') logger.info({ maxSessions: maxChildren }, 'stopping the least recently used idle per-principal child: maxSessions reached');
        else logger.info({ idleTimeoutMs }, 'stopping an idle per-principal child');
      },
    });
  }

  get size(): number {
    return this.pool.size;
  }

  /** The child of the caller's principal (`key`: upstreamSessionOf), started now with `start` if it has none. */
  async get(key: string, caller: UpstreamCaller, start: StartChild): Promise<UpstreamConnection> {
    const starting = () => start(childIdentity(key, caller.identity, this.options.gatewayVersion), () => renderChildEnv(this.options.env, childCallerOf(caller)));
    // The cap's refusal is thrown as it is; a child that fails to start makes the upstream unavailable to the call.
    const child = this.pool.get(key, starting, { sweep: true });
    try {
      return await child;
    } catch (error) {
      throw upstreamUnavailable(this.options.upstreamName, (error as Error).message);
    }
  }

  /** The child exited by itself: the principal gets a new one on its next call. */
  closed(key: string, connection: UpstreamConnection): void {
    this.pool.closed(key, connection);
  }

  /** Stops every child (the upstream is closing). */
  close(): Promise<void> {
    return this.pool.close();
  }
}
