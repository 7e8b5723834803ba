// The registry entry of 2025-11-25 and the session revisions before it (2025-06-18, 2025-03-26): sessions made by
// initialize, and everything no stateless revision claims. It builds this revision's task methods, router and
// HTTP front from the gateway's shared parts.
import { SESSION_VERSIONS } from '../../mcp.js';
import type { ProtocolRevision } from '../revision.js';
import { codec } from './codec.js';
import { sessionRefusal } from './errors.js';
import { sessionFront } from './http/front.js';
import { SessionRouter } from './router.js';
import { sessionUpstreamAdapter } from './upstream/side.js';
import { SessionTasks } from './tasks.js';
import { ElicitationCompletions } from './elicitation-completions.js';

export const rev2025_11_25: ProtocolRevision = {
  id: codec.revision,
  versions: SESSION_VERSIONS,
  sessions: true,
  codec,
  upstream: sessionUpstreamAdapter,
  // Last in the registry: initialize and session traffic, whatever the revisions before it declined.
  claims: () => true,
  // No header names these revisions apart from the rest: they answer what nothing else is named for (the last entry).
  namedBy: () => false,
  refusal: sessionRefusal,

  serve({ config, logger, events, store, engine, catalog, lists, taskTools, sessions, relay, rateLimiter, version }) {
    const tasks = new SessionTasks({ engine, store, logger, immediateResponse: config.tasks.immediateResponse, events });
    // A session told to open a link hears when the user connected (issue 41).
    const completions = new ElicitationCompletions(engine.consent, (sessionId) => sessions.get(sessionId), logger);
    const elicited = (elicitationId: string, sessionId: string): void => completions.note(elicitationId, sessionId);
    const router = new SessionRouter({ catalog, tasks, logger, lists, sessions, version, access: config.auth?.access, taskTools, events, elicited });
    return {
      front: ({ admission }) =>
        sessionFront({ router, sessions, relay, rateLimiter, admission, events, logger, maxBatchSize: config.listen.maxBatchSize, jsonWindowMs: config.sse.jsonWindowMs }),
      // The task runs for its session again, if it still exists (on any replica), under the session's identity.
      async resume(task, stored) {
        const session = await sessions.get(stored.sessionId).catch(() => undefined);
        return { caller: tasks.callerFor(task.taskId, session), identity: session ?? stored };
      },
      lost: (task) => void tasks.tellSession(task, (sessionId) => sessions.get(sessionId)),
      // Sessions hear list changes and resource updates on their own streams (gateway/upstream-messages.ts).
      broadcast: () => undefined,
      cancelInflight: (session, params) => router.cancelInflight(session, params),
      reconfigure(next, live) {
        if (live.tasks) tasks.reconfigure(next.tasks.immediateResponse);
        if (live.access) router.reconfigure(next.auth?.access);
      },
      close: () => completions.close(),
    };
  },
};
