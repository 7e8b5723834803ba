// Client sessions, as every replica shares them: the registry, the relay that reaches a session's streams and calls
// held on another replica, and the one budget of what every SSE stream may buffer.
import type { GatewayConfig } from '../config/types.js';
import type { GatewayEvents } from '../events.js';
import { SessionRelay, type SessionRelayDeps } from '../gateway/session-relay.js';
import { SessionRegistry, type SessionRegistryDeps } from '../gateway/sessions.js';
import type { ReplicaLink } from '../gateway/replicas.js';
import type { Logger } from '../log.js';
import { notifiedTaskId } from '../protocol/revisions.js';
import type { TaskStore } from '../store/task-store.js';
import { StreamBudget } from '../streams/stream-budget.js';

export interface GatewaySessionsDeps {
  config: GatewayConfig;
  logger: Logger;
  events: GatewayEvents;
  store: TaskStore;
  replicas: ReplicaLink;
  /** Cancels a session's call running on this replica, in whichever revision runs it (another replica asked). */
  cancelHere: SessionRelayDeps['cancelHere'];
  /** A session ended: its upstream connections go. */
  onEnd: SessionRegistryDeps['onEnd'];
}

export interface GatewaySessions {
  sessions: SessionRegistry;
  relay: SessionRelay;
  /** What SSE streams of every revision may hold, each and together, for clients that do not read. */
  streamBudget: StreamBudget;
}

/** The registry and the relay need each other: the relay reaches the registry through a closure, called once both exist. */
export function buildGatewaySessions(deps: GatewaySessionsDeps): GatewaySessions {
  const { config, logger, events, store } = deps;
  const relay = new SessionRelay({
    store,
    link: deps.replicas,
    sessions: { peek: (sessionId) => sessions.peek(sessionId), endHere: (sessionId, reason) => sessions.endHere(sessionId, reason) },
    sessionTtlMs: config.sessions.idleTimeoutMs,
    logger,
    cancelHere: deps.cancelHere,
  });
  const streamBudget = new StreamBudget(config.sse.maxBufferedBytesPerStream, config.sse.maxBufferedBytes, logger);
  const sessions: SessionRegistry = new SessionRegistry({ config: config.sessions, sse: config.sse, store, peers: relay, onEnd: deps.onEnd, budget: streamBudget, notifiedTaskId, events });
  return { sessions, relay, streamBudget };
}
