// The registry entry of 2026-07-28 and its Tasks extension (SEP-2663): stateless requests, each carrying its
// envelope. It builds this revision's task methods, parked MRTR calls, listen streams, router and HTTP front from
// the gateway's shared parts.
import { MODERN_VERSIONS } from '../mcp.js';
import type { ProtocolRevision } from '../revision.js';
import { codec } from './codec.js';
import { headersNameModernRevision, isModernMessage } from './envelope.js';
import { modernRefusal } from './errors.js';
import { ParkedExchanges, RequestStateCodec } from './exchange.js';
import { modernFront } from './http/front.js';
import { ListenHub } from './listen.js';
import { ModernRouter } from './router.js';
import { MODERN_CALLER, ModernTasks } from './tasks.js';

export const rev2026_07_28: ProtocolRevision = {
  id: codec.revision,
  versions: MODERN_VERSIONS,
  sessions: false,
  codec,
  // A body with its `_meta` envelope, a version header or a method only it has; a message on a known session's id
  // is that session's, whatever else it looks like.
  claims: isModernMessage,
  namedBy: headersNameModernRevision,
  refusal: modernRefusal,

  serve({ config, logger, events, store, engine, catalog, lists, taskTools, replicas, streamBudget, signingSecret, version }) {
    const listeners = new ListenHub(store, logger);
    const parked = new ParkedExchanges(config.mrtr.parkTimeoutMs);
    const router = new ModernRouter({
      catalog,
      lists,
      tasks: new ModernTasks(engine),
      listeners,
      parked,
      requestStates: async () => new RequestStateCodec(await signingSecret()),
      logger,
      version,
      replicas,
      access: config.auth?.access,
      taskTools,
      events,
    });
    return {
      front: ({ admission }) => modernFront({ modern: router, logger, keepAliveMs: config.sse.keepAliveMs, admission, streamBudget, events }),
      // Its clients are not reachable between requests: the run goes on for whoever reads the task, under the
      // identity every 2026-07-28 client shares.
      resume: async (_task, stored) => ({ caller: MODERN_CALLER, identity: { ...stored, manyClients: true } }),
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
