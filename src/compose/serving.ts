// What the composition root does around its parts to serve: the replica link's start that a store outage must not
// hold up, the readiness answer, and the listen with what the log says about it.
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { GatewayConfig } from '../config/types.js';
import type { ReplicaLink } from '../gateway/replicas.js';
import type { SessionRegistry } from '../gateway/sessions.js';
import { isLoopbackHostname } from '../http/guards.js';
import type { JsonObject } from '../jsonrpc.js';
import type { Logger } from '../log.js';
import type { TaskStore } from '../store/task-store.js';
import type { TaskEngine } from '../tasks/engine.js';

/** How long the start waits for the replica link's subscriptions before it goes on without them. */
const REPLICA_LINK_WAIT_MS = 2000;

/** A store outage must not stop the start (readiness reports it): the subscriptions complete when it is back. */
export async function startReplicaLink(replicas: ReplicaLink, logger: Logger): Promise<void> {
  const subscribed = replicas.start().catch((error: Error) => logger.warn({ err: error }, 'replica messaging is not available'));
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([subscribed, new Promise((resolve) => (timer = setTimeout(resolve, REPLICA_LINK_WAIT_MS)).unref())]);
  clearTimeout(timer);
}

export interface ReadinessParts {
  store: TaskStore;
  tasks: Pick<TaskEngine, 'health'>;
  sessions: Pick<SessionRegistry, 'size'>;
  /** Every upstream's status, live or joining. */
  upstreams(): JsonObject[];
  /** Upstreams the replica waits for before it is ready (the start's; none once they all made their first attempt). */
  initializing(): string[];
  shuttingDown(): boolean;
  /** Upstreams whose gateway credential the last attempt could not obtain (observability/credential-health.ts). */
  credentials?(): JsonObject[];
}

/** GET /readyz: the store answers, leases renew, the start's upstreams made their first attempt, no shutdown. */
export function readinessOf(parts: ReadinessParts): () => Promise<{ ready: boolean; body: JsonObject }> {
  const { store, tasks, sessions } = parts;
  return async () => {
    const storeStatus: JsonObject = { type: store.kind, ok: true };
    try {
      await store.ping();
    } catch (error) {
      storeStatus.ok = false;
      storeStatus.error = (error as Error).message;
    }
    // A replica whose lease renewals fail is about to have its tasks declared lost by the others (even while
    // the store answers PING: a full Redis refuses the writes).
    const { leases, running, maxRunningTasks } = tasks.health();
    const initializing = parts.initializing();
    const ready = storeStatus.ok === true && leases.ok && !parts.shuttingDown() && initializing.length === 0;
    const body: JsonObject = { ready, store: storeStatus, leases, tasks: { running, maxRunningTasks }, upstreams: parts.upstreams(), sessions: sessions.size };
    // Upstreams whose gateway credential cannot be obtained now (their own status says down): not a reason to leave rotation.
    const credentials = parts.credentials?.() ?? [];
    if (credentials.length > 0) body.credentials = credentials;
    if (initializing.length > 0) body.initializing = initializing;
    if (initializing.length > 0) body.reason = `the gateway is starting: upstream${initializing.length === 1 ? '' : 's'} ${initializing.map((name) => `'${name}'`).join(', ')} still initializing`;
    return { ready, body };
  };
}

/** Listens where the config says and logs it; resolves with the MCP endpoint's URL, with the port actually bound. */
export async function listenAndAnnounce(app: FastifyInstance, config: GatewayConfig, logger: Logger): Promise<string> {
  await app.listen({ host: config.listen.host, port: config.listen.port });
  const address = app.server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}${config.listen.path}`;
  // Its upstreams connect next: 'upstreams started' says how each came up.
  logger.info({ url, upstreams: config.upstreams.map((u) => u.name), auth: config.auth !== undefined }, 'taskgate listening');
  if (config.auth === undefined && !isLoopbackHostname(config.listen.host)) {
    logger.warn(
      { host: config.listen.host },
      'listening beyond loopback without an auth section: anyone who reaches the port uses every upstream, and a task id is all it takes to read a task; configure auth (docs/security.md: Authentication)',
    );
  }
  return url;
}
