// Scale-out, part 2: tasks/list as a principal's tasks grow (issue 23: a page with 100,000 stored tasks within
// 1.2× of a page with 1,000). Two 2025-11-25 sessions on one gateway, each a principal of its own (without auth a
// 2025-11-25 task belongs to the session that created it: src/principals.ts), get SMALL and LARGE tasks
// written straight through the store API (100k tools/call would measure creation, not listing). Then, one
// request at a time and the two sessions interleaved so that a slow spell hits both:
//
//   first page   tasks/list without a cursor
//   deep page    tasks/list with the cursor of the principal's last page (reached by walking every page, which
//                also proves the listing returns every stored task exactly once)
import { Redis } from 'ioredis';
import { RedisTaskStore } from '../src/store/redis-task-store.js';
import { newTaskId, type NewTask } from '../src/store/task-store.js';
import { sessionPrincipal } from '../src/principals.js';
import { McpHttp, type McpSession } from './load.js';
import { bounded, spread, startGateway, TASK_TTL_MS, type ScaleoutContext, type ScaleoutPart } from './scaleout-common.js';

/** Target from the issue; reported, never asserted. */
export const MAX_LIST_PAGE_RATIO = 1.2;
/** Store writes in flight while populating. */
const WRITES_IN_FLIGHT = 500;

export interface ListingSettings {
  /** the reference principal's stored tasks */
  small: number;
  /** the measured principal's stored tasks */
  large: number;
  /** timed requests per page kind and principal */
  repeats: number;
}

interface Listed {
  tasks?: { taskId?: unknown }[];
  nextCursor?: unknown;
}

async function writeTasks(store: RedisTaskStore, principal: string, count: number): Promise<void> {
  await bounded(count, WRITES_IN_FLIGHT, async () => {
    const task: NewTask = { taskId: newTaskId(), principal, era: 'legacy', tool: 'echo', upstream: 'fixture', retentionMs: TASK_TTL_MS, pollMs: 1000 };
    await store.tasks.create(task);
  });
}

export async function listingPart(ctx: ScaleoutContext, s: ListingSettings): Promise<ScaleoutPart> {
  const part: ScaleoutPart = { name: 'listing', ok: false, lines: [], checks: [], notes: [], data: {} };
  const store = new RedisTaskStore(new Redis(ctx.redis.url, { maxRetriesPerRequest: 1, commandTimeout: 60_000 }), ctx.redis.prefix);
  const gateway = await startGateway(ctx, 'listing');
  const http = new McpHttp(gateway.url, 2, 60_000);
  try {
    await store.ready();
    const [smallSession, largeSession] = (await http.openSessions(2)) as [McpSession, McpSession];
    const who = [
      { label: `${s.small.toLocaleString('en')} tasks`, session: smallSession, count: s.small },
      { label: `${s.large.toLocaleString('en')} tasks`, session: largeSession, count: s.large },
    ];
    const started = performance.now();
    for (const w of who) await writeTasks(store, sessionPrincipal(w.session.sessionId as string), w.count);
    const writeSec = (performance.now() - started) / 1000;

    const list = async (session: McpSession, cursor?: string): Promise<Listed> =>
      (await http.rpc(session, 'tasks/list', cursor === undefined ? {} : { cursor })) as Listed;
    // Walk every page: the count must come out exact, and the last page's cursor is the deep one.
    const walks: { pages: number; pageSize: number; ms: number; deepCursor: string }[] = [];
    for (const w of who) {
      const t0 = performance.now();
      const seen = new Set<string>();
      let cursor: string | undefined;
      let deepCursor: string | undefined;
      let pages = 0;
      let pageSize = 0;
      do {
        deepCursor = cursor;
        const page = await list(w.session, cursor);
        pages++;
        pageSize = Math.max(pageSize, page.tasks?.length ?? 0);
        for (const t of page.tasks ?? []) seen.add(String(t.taskId));
        cursor = typeof page.nextCursor === 'string' ? page.nextCursor : undefined;
      } while (cursor !== undefined);
      if (seen.size !== w.count) throw new Error(`tasks/list of the principal with ${w.count} tasks returned ${seen.size} distinct tasks over ${pages} pages`);
      if (deepCursor === undefined) throw new Error(`${w.count} tasks fit on one page of ${pageSize}: no deep page to time (use more tasks)`);
      walks.push({ pages, pageSize, ms: performance.now() - t0, deepCursor });
    }

    const times = who.map(() => ({ first: [] as number[], deep: [] as number[] }));
    const timed = async (session: McpSession, into: number[], cursor?: string): Promise<void> => {
      const t0 = performance.now();
      const page = await list(session, cursor);
      into.push(performance.now() - t0);
      if ((page.tasks?.length ?? 0) === 0) throw new Error('tasks/list answered an empty page');
    };
    for (let i = 0; i < s.repeats; i++) {
      // Alternate which principal goes first, so neither is always the one after the other's request.
      const order = i % 2 === 0 ? [0, 1] : [1, 0];
      for (const k of order) await timed(who[k]!.session, times[k]!.first);
      for (const k of order) await timed(who[k]!.session, times[k]!.deep, walks[k]!.deepCursor);
    }
    const stats = times.map((t) => ({ first: spread(t.first), deep: spread(t.deep) }));
    const [small, large] = stats as [(typeof stats)[0], (typeof stats)[0]];
    const firstRatio = large.first.p50Ms / small.first.p50Ms;
    const deepRatio = large.deep.p50Ms / small.deep.p50Ms;
    part.data = { settings: s, writeSec, walks: walks.map(({ deepCursor: _, ...w }) => w), small, large, firstRatio, deepRatio };
    const row = (k: number): string => {
      const x = stats[k]!;
      const w = walks[k]!;
      return (
        `${who[k]!.label}: first page p50/p99 ${x.first.p50Ms.toFixed(2)}/${x.first.p99Ms.toFixed(2)} ms, deep page (page ${w.pages}) ` +
        `${x.deep.p50Ms.toFixed(2)}/${x.deep.p99Ms.toFixed(2)} ms; every page walked in ${(w.ms / 1000).toFixed(1)} s`
      );
    };
    part.lines.push(
      `first page ${firstRatio.toFixed(2)}×, deep page ${deepRatio.toFixed(2)}× (p50, ${s.large.toLocaleString('en')} vs ${s.small.toLocaleString('en')} stored tasks, pages of ${walks[0]!.pageSize})`,
      row(0),
      row(1),
    );
    part.notes.push(`${(s.small + s.large).toLocaleString('en')} tasks written through the store API in ${writeSec.toFixed(1)} s; ${s.repeats} timed requests per page kind and principal`);
    part.checks.push({
      what: `tasks/list page with ${s.large.toLocaleString('en')} stored tasks within ${MAX_LIST_PAGE_RATIO}× of ${s.small.toLocaleString('en')}`,
      pass: firstRatio <= MAX_LIST_PAGE_RATIO && deepRatio <= MAX_LIST_PAGE_RATIO,
      detail: `p50 first page ${firstRatio.toFixed(2)}× (${large.first.p50Ms.toFixed(2)} vs ${small.first.p50Ms.toFixed(2)} ms), deep page ${deepRatio.toFixed(2)}× (${large.deep.p50Ms.toFixed(2)} vs ${small.deep.p50Ms.toFixed(2)} ms)`,
    });
    part.ok = true;
  } finally {
    await http.close();
    await gateway.proc.stop();
    await store.close();
  }
  return part;
}
