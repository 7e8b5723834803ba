// Real things the task core's unit tests run against: the 2025-era fixture MCP server over Streamable HTTP in this
// process with an Upstream connected to it, a task core built from its parts over the in-memory store, a caller
// that records what reaches it, and a wait for one event of the gateway's seam.
import { pino } from 'pino';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import type { GatewayConfig } from '../../src/config/types.js';
import { MethodNotFound } from '../../src/errors.js';
import type { GatewayEvents } from '../../src/events.js';
import type { Outcome } from '../../src/jsonrpc.js';
import type { ReplicaLink } from '../../src/gateway/replicas.js';
import type { TaskStore } from '../../src/store/task-store.js';
import { TaskEngine } from '../../src/tasks/engine.js';
import { NOTHING_TO_DO } from '../../src/tasks/local-run.js';
import type { TaskCaller } from '../../src/tasks/local-run.js';
import type { InputRequest } from '../../src/tasks/pending-inputs.js';
import { UPSTREAM_ADAPTERS } from '../../src/protocol/revisions.js';
import { Upstream, type SessionIdentity, type UpstreamMessageSink } from '../../src/upstream/life/upstream.js';
import { startSessionServer, type SessionServerHandle } from '../fixtures/session-server.js';

export const silentLogger = pino({ level: 'silent' });

/** A gateway config whose one upstream is `url` (the fixture), with the `tasks` section given. */
export function configFor(url: string, tasks: Record<string, unknown> = {}): GatewayConfig {
  const upstreams = { fixture: { transport: 'streamable-http', url, protocol: 'legacy' } };
  return parseConfig(stringify({ listen: { port: 8080 }, upstreams, tasks }), 'test.yaml', {});
}

/**
 * No client sessions here: the upstream's requests go to the call they belong to (as gateway/upstream-messages.ts
 * sends those of calls without a session), and its own notifications nowhere.
 */
const NO_CLIENTS: UpstreamMessageSink = {
  notification: () => undefined,
  request: async (_upstream, message, origin, signal): Promise<Outcome> =>
    origin.call === undefined
      ? { error: { code: MethodNotFound, message: 'no client here' } }
      : origin.call.ask(message.params === undefined ? { method: message.method } : { method: message.method, params: message.params }, signal),
  catalogChanged: () => undefined,
};

export interface FixtureUpstream {
  upstream: Upstream;
  config: GatewayConfig;
  close(): Promise<void>;
}

/** The fixture server, and an Upstream connected to it (its catalog read). */
export async function fixtureUpstream(events: GatewayEvents, tasks: Record<string, unknown> = {}): Promise<FixtureUpstream> {
  const server: SessionServerHandle = await startSessionServer({ transport: 'streamable-http' });
  const config = configFor(server.url, tasks);
  const upstream = new Upstream(config.upstreams[0]!, silentLogger, NO_CLIENTS, { version: 'test', events, adapters: UPSTREAM_ADAPTERS });
  await upstream.start();
  return {
    upstream,
    config,
    close: async () => {
      await upstream.close();
      await server.close();
    },
  };
}

/** An upstream named `fixture` that is never connected: for what only needs to name it. */
export function unconnectedUpstream(events: GatewayEvents): Upstream {
  return new Upstream(configFor('http://127.0.0.1:1/mcp').upstreams[0]!, silentLogger, NO_CLIENTS, { version: 'test', events, adapters: UPSTREAM_ADAPTERS });
}

/** A client session's identity, able to answer elicitation. */
export function identity(sessionId: string): SessionIdentity {
  return { sessionId, protocolVersion: '2025-11-25', capabilities: { elicitation: {} }, clientInfo: undefined };
}

/** A caller that cannot reach its client (the client reads input requests from the task) and counts what it hears. */
export interface RecordingCaller extends TaskCaller {
  readonly asked: InputRequest[];
  readonly notified: string[];
  endedCount: number;
}

export function recordingCaller(): RecordingCaller {
  const caller: RecordingCaller = {
    asked: [],
    notified: [],
    endedCount: 0,
    deliver: (request) => {
      caller.asked.push(request);
      return undefined;
    },
    notify: (message) => void caller.notified.push(message.method),
    ended: () => {
      caller.endedCount++;
    },
  };
  return caller;
}

/** The task's record once `done` holds for it (a wait on the store's events, not a timer). */
export async function storedWhen(store: TaskStore, taskId: string, done: (status: string, openRequests: number) => boolean): Promise<void> {
  await new Promise<void>((resolve) => {
    const check = (status: string, open: Record<string, unknown> | undefined): void => {
      if (!done(status, Object.keys(open ?? {}).length)) return;
      stop();
      resolve();
    };
    const stop = store.tasks.watch(taskId, (task) => check(task.status, task.openRequests));
    void store.tasks.get(taskId).then((task) => task !== undefined && check(task.status, task.openRequests));
  });
}

/**
 * A task engine of the fixture's config over `store`, started with its replica link (started too): lost tasks are
 * resumed for a recording caller on the fixture's upstream.
 */
export async function startedEngine(parts: {
  store: TaskStore;
  fixture: FixtureUpstream;
  link: ReplicaLink;
  events: GatewayEvents;
  replica: { leaseMs: number; maxRunningTasks: number };
}): Promise<TaskEngine> {
  const { store, fixture, link, events, replica } = parts;
  const engine = new TaskEngine({
    store,
    config: fixture.config.tasks,
    logger: silentLogger,
    replica,
    peers: link,
    recovery: { upstream: () => fixture.upstream, lost: NOTHING_TO_DO, resume: async (task) => ({ caller: recordingCaller(), identity: identity(task.call.identity.sessionId) }) },
    callers: { authenticated: true },
    events,
  });
  await link.start();
  engine.start();
  return engine;
}
