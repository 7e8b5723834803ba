// The children of a stdio upstream with `isolation: per-principal` (issue 33): one per principal, started on the
// principal's first call with its caller in its env (child-env.ts), shared by every session and client of that
// principal, stopped once it has had no call for idleTimeoutMs. At most maxSessions of them: at the cap, the least
// recently used idle one is stopped for a new principal; when every one has a call running, the new principal's
// call is refused with an error naming the upstream and the cap (a busy child is never stopped for another).
import type { UpstreamConfig } from '../config/types.js';
import { upstreamChildrenFull, upstreamUnavailable } from '../errors.js';
import type { Logger } from '../log.js';
import type { SessionIdentity, UpstreamCaller } from './adapter.js';
import { renderChildEnv, type ChildCaller } from './child-env.js';
import { bearerOf } from '../identity/credential-sources.js';
import type { UpstreamConnection } from './connection.js';

/** What a child's env reads of a caller: its principal and claims, and the token its `auth` credentials carry. */
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

/** Starts a child: its handshake as `identity`, its env from `env` (called at spawn). */
export type StartChild = (identity: SessionIdentity, env: () => Promise<Record<string, string>>) => Promise<UpstreamConnection>;

/** The children of `config`'s upstream when it is per-principal stdio; undefined for every other upstream. */
export function principalChildrenOf(config: UpstreamConfig, parts: Pick<PrincipalChildrenOptions, 'maxChildren' | 'logger' | 'closing' | 'gatewayVersion'>): PrincipalChildren | undefined {
  if (config.transport !== 'stdio' || config.isolation !== 'per-principal') return undefined;
  return new PrincipalChildren({ ...parts, upstreamName: config.name, env: config.env, idleTimeoutMs: config.idleTimeoutMs });
}

interface Child {
  connection: Promise<UpstreamConnection>;
  open?: UpstreamConnection;
  /** When the sweep first saw it with no call (undefined: in use since). */
  idleSince: number | undefined;
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

/** How often idle children are looked for: a child stops between idleTimeoutMs and 1.5 × that after its last call. */
function sweepEveryMs(idleTimeoutMs: number): number {
  return Math.min(Math.max(Math.floor(idleTimeoutMs / 4), 10), 15_000);
}

export class PrincipalChildren {
  /** Least recently used first (each use moves one to the end). */
  private readonly children = new Map<string, Child>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly options: PrincipalChildrenOptions) {}

  get size(): number {
    return this.children.size;
  }

  /** The child of the caller's principal (`key`: sessionKeyOf), started now with `start` if it has none. */
  async get(key: string, caller: UpstreamCaller, start: StartChild): Promise<UpstreamConnection> {
    let child = this.children.get(key);
    if (child === undefined) {
      this.makeRoom();
      const env = () => renderChildEnv(this.options.env, childCallerOf(caller));
      const starting: Child = { connection: start(childIdentity(key, caller.identity, this.options.gatewayVersion), env), idleSince: undefined };
      child = starting;
      starting.connection.then(
        (connection) => (starting.open = connection),
        () => {
          if (this.children.get(key) === starting) this.children.delete(key);
        },
      );
      this.sweep();
    } else this.children.delete(key);
    child.idleSince = undefined;
    this.children.set(key, child);
    try {
      return await child.connection;
    } catch (error) {
      throw upstreamUnavailable(this.options.upstreamName, (error as Error).message);
    }
  }

  /** The child exited by itself: the principal gets a new one on its next call. */
  closed(key: string, connection: UpstreamConnection): void {
    const child = this.children.get(key);
    if (child?.open === connection) this.children.delete(key);
  }

  /** Stops every child (the upstream is closing). */
  async close(): Promise<void> {
    clearTimeout(this.sweeper);
    this.sweeper = undefined;
    await Promise.all([...this.children.keys()].map((key) => this.stop(key)));
  }

  private async stop(key: string): Promise<void> {
    const child = this.children.get(key);
    if (child === undefined) return;
    this.children.delete(key);
    const stopping = child.connection.then((c) => c.close()).catch(() => undefined);
    this.options.closing.add(stopping);
    await stopping.finally(() => this.options.closing.delete(stopping));
  }

  private makeRoom(): void {
    const max = this.options.maxChildren;
    if (max <= 0 || this.children.size < max) return;
    for (const [key, child] of this.children) {
      if (child.open === undefined || !child.open.isIdle) continue;
      this.options.logger.info({ maxSessions: max }, 'stopping the least recently used idle per-principal child: maxSessions reached');
      void this.stop(key);
      return;
    }
    throw upstreamChildrenFull(this.options.upstreamName, max);
  }

  /** Stops the children idle for idleTimeoutMs; runs while there are children, on a timer that keeps no process up. */
  private sweep(): void {
    const timeoutMs = this.options.idleTimeoutMs;
    if (timeoutMs <= 0 || this.sweeper !== undefined) return;
    this.sweeper = setTimeout(() => {
      this.sweeper = undefined;
      const now = Date.now();
      for (const [key, child] of this.children) {
        if (child.open === undefined) continue;
        if (!child.open.isIdle) child.idleSince = undefined;
        else if (child.idleSince === undefined) child.idleSince = now;
        else if (now - child.idleSince >= timeoutMs) {
          this.options.logger.info({ idleTimeoutMs: timeoutMs }, 'stopping an idle per-principal child');
          void this.stop(key);
        }
      }
      if (this.children.size > 0) this.sweep();
    }, sweepEveryMs(timeoutMs));
    this.sweeper.unref();
  }
}
