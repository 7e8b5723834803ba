// Approval listings read what they return (issue 39, findings 4 and 7), tried from outside against gateway
// processes. What a listing reads is measured on a Redis of the test's own: its `total_net_output_bytes` counts
// every byte the server sent to any client, and nothing but the gateway (and this test's few small reads) talks to
// it, so "a non-approver's listing fetched no held call" is read off the store, not off the gateway's own word.
// Concurrent listings are held in the gateway by stopping that Redis (SIGSTOP) while they arrive, so "this many
// were in flight at once" is a fact, not a timing. The per-principal cap is tried in both revisions, on the memory
// store.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { spawnFixture, spawnGateway, type FixtureChild, type GatewayChild } from '../fixtures/spawn.js';
import { eventually, type Json } from '../helpers/harness.js';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server.js';
import { SessionWire } from '../helpers/session-wire.js';
import { sendRev2026, TASKS_CAPABILITIES } from '../helpers/stateless-wire.js';

const PRINCIPALS = ['alice', 'bob', 'carol', 'dave', 'erin', 'mallory', 'l1', 'l2', 'l3', 'l4', 'l5'];
const KEYS: Record<string, string> = Object.fromEntries(PRINCIPALS.map((name) => [name, `${name}-key-0123456789abcdef`] as const));
const RESOURCE = 'http://127.0.0.1/mcp';
/** Arguments of each large held call: what a listing must not read for a caller who may not decide it. */
const BIG_LABEL_BYTES = 512 * 1024;
const BIG_HOLDS = 8;
/** More holds by one principal than the 500 a listing used to read before filtering. */
const FLOOD_HOLDS = 520;

function bearer(who: string): Record<string, string> {
  return { authorization: `Bearer ${KEYS[who] ?? ''}` };
}

/** slow_compute waits for bob, echo for dave, greet for bob but only briefly; each principal may hold `cap`. */
function config(fixtureUrl: string, store: Json, cap: number): Json {
  return {
    store,
    upstreams: { fx: { url: fixtureUrl } },
    auth: { resource: RESOURCE, apiKeys: PRINCIPALS.map((principal) => ({ principal, key: KEYS[principal] })) },
    tasks: {
      defaults: { mode: 'optional', taskAfterMs: 0, pollIntervalMs: 100 },
      rules: [
        { match: 'slow_compute', approval: { approvers: ['bob'], timeoutMs: 600_000 } },
        { match: 'echo', approval: { approvers: ['dave'], timeoutMs: 600_000 } },
        { match: 'greet', approval: { approvers: ['bob'], timeoutMs: 1_500 } },
        { match: 'report', approval: { approvers: ['erin'], timeoutMs: 600_000 } },
      ],
      maxPendingApprovalsPerPrincipal: cap,
    },
    replicas: { leaseMs: 60_000, drainTimeoutMs: 0 },
  };
}

async function held(url: string, who: string, name: string, args: Json): Promise<string> {
  const created = await sendRev2026(url, 'tools/call', { name, arguments: args }, { capabilities: TASKS_CAPABILITIES, headers: bearer(who) });
  assert.equal(created.result?.resultType, 'task', JSON.stringify(created.messages).slice(0, 500));
  return String(created.result?.taskId);
}

async function listing(baseUrl: string, who: string, query = ''): Promise<{ status: number; headers: Headers; body: Json }> {
  const response = await fetch(`${baseUrl}/approvals${query}`, { headers: bearer(who) });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Json };
}

/** Every hold `who` may decide, following nextCursor; how many pages it took. */
async function everyHold(baseUrl: string, who: string, limit: number): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await listing(baseUrl, who, `?limit=${limit}${cursor === undefined ? '' : `&cursor=${encodeURIComponent(cursor)}`}`);
    assert.equal(page.status, 200, JSON.stringify(page.body));
    ids.push(...(page.body.approvals as Json[]).map((item) => String(item.taskId)));
    cursor = page.body.nextCursor as string | undefined;
    pages++;
    assert.ok(pages < 1_000, 'the cursor ends');
  } while (cursor !== undefined);
  return { ids, pages };
}

/** Bytes the Redis server has sent to all its clients so far. */
async function bytesSent(redis: Redis): Promise<number> {
  const info = await redis.info('stats');
  return Number(/total_net_output_bytes:(\d+)/.exec(info)?.[1]);
}

/** Runs `tasks` at most `width` at a time. */
async function inBatches<T>(count: number, width: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  for (let start = 0; start < count; start += width) results.push(...(await Promise.all(Array.from({ length: Math.min(width, count - start) }, (_, j) => task(start + j)))));
  return results;
}

describe('approval listings on Redis: filtered before any call is read, paged per caller, bounded at once', () => {
  let fixture: FixtureChild;
  let redis: OwnRedis;
  let probe: Redis;
  let gateway: GatewayChild;
  const big: string[] = [];

  before(async () => {
    fixture = await spawnFixture({ transport: 'streamable-http' });
    redis = await startOwnRedis({ volatile: true });
    probe = new Redis(redis.url);
    // Commands wait for a stopped store rather than fail: the bound test holds listings in flight that way.
    gateway = await spawnGateway({ config: config(String(fixture.url), { type: 'redis', url: redis.url, prefix: 'listing', commandTimeoutMs: 120_000 }, 1_000) });
    for (let i = 0; i < BIG_HOLDS; i++) big.push(await held(gateway.url, 'alice', 'slow_compute', { seconds: 0, label: `${i}:${'x'.repeat(BIG_LABEL_BYTES)}` }));
  });

  after(async () => {
    await gateway?.kill();
    probe?.disconnect();
    await redis?.close();
    await fixture?.kill();
  });

  test('a caller who may decide nothing reads no held call; an approver reads only the calls of the page it gets', async () => {
    const heldBytes = BIG_HOLDS * BIG_LABEL_BYTES;
    const before = await bytesSent(probe);
    const nothing = await listing(gateway.baseUrl, 'mallory');
    const afterNothing = await bytesSent(probe);
    assert.equal(nothing.status, 200);
    assert.deepEqual(nothing.body.approvals, []);
    assert.equal(nothing.body.nextCursor, undefined);
    // The held calls are 4 MiB: a listing that fetched even one would send 512 KiB.
    assert.ok(afterNothing - before < BIG_LABEL_BYTES / 4, `a non-approver's listing made Redis send ${afterNothing - before} bytes`);

    // The same measure sees an approver's page: two calls read, not eight.
    const two = await listing(gateway.baseUrl, 'bob', '?limit=2');
    const afterTwo = await bytesSent(probe);
    assert.equal(two.status, 200);
    assert.equal((two.body.approvals as Json[]).length, 2);
    assert.equal(typeof two.body.nextCursor, 'string');
    assert.equal(String((two.body.approvals as Json[])[0]?.arguments && ((two.body.approvals as Json[])[0]?.arguments as Json).label).length, BIG_LABEL_BYTES + 2);
    const sent = afterTwo - afterNothing;
    assert.ok(sent >= 2 * BIG_LABEL_BYTES && sent < 3 * BIG_LABEL_BYTES, `a page of two made Redis send ${sent} bytes (of ${heldBytes} held)`);
    const all = await everyHold(gateway.baseUrl, 'bob', 3);
    assert.deepEqual(all.ids, big, 'every hold, soonest deadline first, once, across pages');
  });

  test(`${FLOOD_HOLDS} holds by one principal hide no one else's: the other approver's first page has it, and the flood's approver reaches every hold by cursor`, async () => {
    const flood = await inBatches(FLOOD_HOLDS, 20, (i) => held(gateway.url, 'alice', 'echo', { n: i }));
    const carols = await held(gateway.url, 'carol', 'slow_compute', { seconds: 0, label: 'behind-the-flood' });

    const first = await listing(gateway.baseUrl, 'bob');
    assert.equal(first.status, 200);
    const ids = (first.body.approvals as Json[]).map((item) => String(item.taskId));
    assert.ok(ids.includes(carols), `carol's hold is on bob's first page (${ids.length} items)`);
    assert.ok(!ids.some((id) => flood.includes(id)), 'nothing bob may not decide');
    const item = (first.body.approvals as Json[]).find((x) => x.taskId === carols) as Json;
    for (const field of ['taskId', 'tool', 'upstream', 'principal', 'createdMs', 'ageMs', 'taskStatus', 'upstreamTool', 'arguments', 'status', 'deadlineMs', 'deadline', 'approvers', 'scopes', 'digest']) {
      assert.ok(field in item, `the item keeps ${field}`);
    }

    // approval_list (bob's own host) sees it too.
    const tool = await sendRev2026(gateway.url, 'tools/call', { name: 'approval_list', arguments: {} }, { headers: bearer('bob') });
    const listed = ((tool.result?.structuredContent as Json | undefined)?.approvals ?? []) as Json[];
    assert.ok(listed.some((x) => x.taskId === carols), JSON.stringify(tool.messages).slice(0, 500));

    // dave decides the flood: every one of its holds, once, in pages of at most 100, following the cursor.
    const dave = await everyHold(gateway.baseUrl, 'dave', 100);
    assert.deepEqual([...dave.ids].sort(), [...flood].sort());
    assert.equal(new Set(dave.ids).size, dave.ids.length);
    assert.ok(dave.pages >= Math.ceil(FLOOD_HOLDS / 100), `${dave.pages} pages`);
    // approval_list pages the same way.
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await sendRev2026(gateway.url, 'tools/call', { name: 'approval_list', arguments: cursor === undefined ? {} : { cursor } }, { headers: bearer('dave') });
      const content = page.result?.structuredContent as Json | undefined;
      assert.ok(content !== undefined, JSON.stringify(page.messages).slice(0, 500));
      seen.push(...((content.approvals ?? []) as Json[]).map((x) => String(x.taskId)));
      cursor = content.nextCursor as string | undefined;
    } while (cursor !== undefined);
    assert.deepEqual([...seen].sort(), [...flood].sort());

    // A cursor is the caller's own: another principal's, or a forged one, is refused.
    const daves = (await listing(gateway.baseUrl, 'dave', '?limit=1')).body.nextCursor as string;
    assert.equal((await listing(gateway.baseUrl, 'bob', `?cursor=${encodeURIComponent(daves)}`)).status, 400);
    assert.equal((await listing(gateway.baseUrl, 'dave', '?cursor=forged.cursor')).status, 400);
    assert.equal((await listing(gateway.baseUrl, 'dave', '?limit=0')).status, 400);
    const foreign = await sendRev2026(gateway.url, 'tools/call', { name: 'approval_list', arguments: { cursor: daves } }, { headers: bearer('bob') });
    assert.equal(foreign.result?.isError, true, JSON.stringify(foreign.messages));
  });

  test('a page ends once its calls reach 16 MiB: six holds of 3.9 MB come as five, then one', async () => {
    const huge = 'y'.repeat(3_900_000);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await held(gateway.url, 'alice', 'report', { huge, i }));
    const first = await listing(gateway.baseUrl, 'erin');
    assert.equal(first.status, 200);
    assert.deepEqual((first.body.approvals as Json[]).map((x) => x.taskId), ids.slice(0, 5));
    assert.equal(typeof first.body.nextCursor, 'string');
    const second = await listing(gateway.baseUrl, 'erin', `?cursor=${encodeURIComponent(String(first.body.nextCursor))}`);
    assert.deepEqual((second.body.approvals as Json[]).map((x) => x.taskId), ids.slice(5));
    assert.equal(second.body.nextCursor, undefined);
  });

  test('listings at once are bounded per principal and per replica: the excess gets 429 with Retry-After, and a listing after is served', async () => {
    type Answer = { who: string; status: number; retryAfter: string | null; error: string };
    const ask = (who: string): Promise<Answer> =>
      fetch(`${gateway.baseUrl}/approvals`, { headers: bearer(who) }).then(async (r) => ({ who, status: r.status, retryAfter: r.headers.get('retry-after'), error: String(((await r.json()) as Json).error ?? '') }));
    const pid = Number(/process_id:(\d+)/.exec(await probe.info('server'))?.[1]);
    assert.ok(pid > 0);
    const asked: Promise<Answer>[] = [];
    const answered: Answer[] = [];
    const send = (who: string): void => {
      const answer = ask(who);
      asked.push(answer);
      void answer.then((a) => answered.push(a));
    };
    // With the store stopped, every admitted listing stays in flight; refusals need no store, and come at once.
    process.kill(pid, 'SIGSTOP');
    try {
      // One non-approver floods: two of its listings are in flight, the other 18 refused as its own excess.
      for (let i = 0; i < 20; i++) send('mallory');
      await eventually(() => answered.length === 18, 20_000);
      // Others fill the replica's eight; the ninth and tenth are one too many for the replica.
      for (const who of ['l1', 'l1', 'l2', 'l2', 'l3', 'l3']) send(who);
      for (const who of ['l4', 'l5']) send(who);
      await eventually(() => answered.length === 20, 20_000);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const refusals = answered.slice(0, 20);
    assert.ok(refusals.every((a) => a.status === 429 && a.retryAfter === '1' && /Too many approval listings at once/.test(a.error)), JSON.stringify(refusals));
    assert.ok(refusals.slice(0, 18).every((a) => a.who === 'mallory' && /per principal/.test(a.error)), JSON.stringify(refusals));
    assert.deepEqual(refusals.slice(18).map((a) => a.who).sort(), ['l4', 'l5']);
    assert.ok(refusals.slice(18).every((a) => /per replica/.test(a.error)), JSON.stringify(refusals));
    // Once the store answers, the eight in flight are served, and so is a new listing.
    const all = await Promise.all(asked);
    assert.equal(all.filter((a) => a.status === 200).length, 8, JSON.stringify(all));
    assert.equal((await listing(gateway.baseUrl, 'mallory')).status, 200);
    assert.equal((await listing(gateway.baseUrl, 'l5')).status, 200);
  });

  test('the sweep still expires a hold among many pending ones, without reading their calls', async () => {
    const taskId = await held(gateway.url, 'carol', 'greet', { name: 'expiring' });
    await eventually(async () => {
      const r = await sendRev2026(gateway.url, 'tasks/get', { taskId }, { capabilities: TASKS_CAPABILITIES, headers: bearer('carol') });
      return r.result?.status === 'failed' && /approval expired/.test(String(r.result?.statusMessage));
    }, 20_000);
    assert.ok(!((await listing(gateway.baseUrl, 'bob')).body.approvals as Json[]).some((x) => x.taskId === taskId));
  });
});

describe('a principal\'s pending holds are capped (tasks.maxPendingApprovalsPerPrincipal), in both revisions', () => {
  let fixture: FixtureChild;
  let gateway: GatewayChild;

  before(async () => {
    fixture = await spawnFixture({ transport: 'streamable-http' });
    gateway = await spawnGateway({ config: config(String(fixture.url), { type: 'memory' }, 2) });
  });

  after(async () => {
    await gateway?.kill();
    await fixture?.kill();
  });

  test('past the cap a new held call is refused with an error naming the key; a cancel or a decision frees a place', async () => {
    const first = await held(gateway.url, 'erin', 'slow_compute', { seconds: 0, label: 'cap-1' });
    await held(gateway.url, 'erin', 'slow_compute', { seconds: 0, label: 'cap-2' });
    const refused = await sendRev2026(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label: 'cap-3' } }, { capabilities: TASKS_CAPABILITIES, headers: bearer('erin') });
    assert.ok(refused.error !== undefined, JSON.stringify(refused.messages));
    assert.match(String(refused.error.message), /Too many calls waiting for approval: you have 2 \(tasks\.maxPendingApprovalsPerPrincipal: 2\)/);

    const wire = new (class extends SessionWire {
      override headers(extra: Record<string, string> = {}): Record<string, string> {
        return super.headers({ ...bearer('erin'), ...extra });
      }
    })({ tasks: {} });
    await wire.initialize(gateway.url);
    const rev2025Side = await wire.request(gateway.url, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label: 'cap-rev2025' }, task: { ttl: 60_000 } });
    assert.match(String((rev2025Side.error as Json | undefined)?.message), /maxPendingApprovalsPerPrincipal/, JSON.stringify(rev2025Side));
    // Another principal is not held back by erin's.
    await held(gateway.url, 'alice', 'slow_compute', { seconds: 0, label: 'cap-other' });

    // Cancelling a held call frees its place at once.
    const cancelled = await sendRev2026(gateway.url, 'tasks/cancel', { taskId: first }, { capabilities: TASKS_CAPABILITIES, headers: bearer('erin') });
    assert.equal(cancelled.error, undefined, JSON.stringify(cancelled.messages));
    const third = await held(gateway.url, 'erin', 'slow_compute', { seconds: 0, label: 'cap-3' });
    // So does a decision.
    const denied = await fetch(`${gateway.baseUrl}/approvals/${third}`, { method: 'POST', headers: { 'content-type': 'application/json', ...bearer('bob') }, body: JSON.stringify({ decision: 'deny' }) });
    assert.equal(denied.status, 200);
    await held(gateway.url, 'erin', 'slow_compute', { seconds: 0, label: 'cap-4' });
  });
});
