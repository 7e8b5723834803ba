// The registry entry of 2026-07-28 and its Tasks extension (SEP-2663): stateless requests, each carrying its
// envelope. It builds this revision's task methods, parked MRTR calls, listen streams, router and HTTP front from
// the gateway's shared parts.
import type { ProtocolRevision } from '../revision.js';
import { codec, STATELESS_VERSIONS } from './codec.js';
import { headersNameStatelessRevision, isStatelessMessage } from './envelope.js';
import { statelessRefusal } from './errors.js';
import { ParkedExchanges, RequestStateCodec } from './exchange.js';
import { statelessFront } from './http/front.js';
import { ListenHub } from './listen.js';
import { StatelessRouter } from './router.js';
import { statelessUpstreamAdapter } from './upstream/side.js';
import { STATELESS_CALLER, StatelessTasks } from './tasks.js';

export const rev2026_07_28: ProtocolRevision = {
  id: codec.revision,
  versions: STATELESS_VERSIONS,
  sessions: false,
  codec,
  upstream: statelessUpstreamAdapter,
  // A body with its `_meta` envelope, a version header or a method only it has; a message on a known session's id
  // is that session's, whatever else it looks like.
  claims: isStatelessMessage,
  namedBy: headersNameStatelessRevision,
  refusal: statelessRefusal,

  serve({ config, logger, events, store, engine, catalog, lists, taskTools, replicas, streamBudget, notifiedTaskId, supportedVersions, signingSecret, version }) {
    const listeners = new ListenHub(store, logger);
    const parked = new ParkedExchanges(config.mrtr.parkTimeoutMs);
    const router = new StatelessRouter({
      catalog,
      lists,
      tasks: new StatelessTasks(engine),
      listeners,
      parked,
      requestStates: async () => new RequestStateCodec(await signingSecret()),
      logger,
      version,
      replicas,
      access: config.auth?.access,
      taskTools,
      events,
      supportedVersions,
    });
    return {
      front: ({ admission }) => statelessFront({ router, logger, keepAliveMs: config.sse.keepAliveMs, admission, streamBudget, notifiedTaskId, supportedVersions, events }),
      // Its clients are not reachable between requests: the run goes on for whoever reads the task, under the
      // identity every 2026-07-28 client shares.
      resume: async (_task, stored) => ({ caller: STATELESS_CALLER, identity: { ...stored, manyClients: true } }),
      // Its clients read the task's failure when they next ask: nobody is waiting to be told.
      lost: () => undefined,
      broadcast: (notification) => listeners.broadcast(notification),
      cancelInflight: () => false,
      reconfigure(next, live) {
        if (live.access) router.reconfigure(next.auth?.access);
        if (live.mrtr) parked.reconfigure(next.mrtr.parkTimeoutMs);
      },
      close() {
        parked.close();
        listeners.close();
      },
    };
  },
};
