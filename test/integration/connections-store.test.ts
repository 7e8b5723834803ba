// store.connections (per-user connections, issue 41) on every store: the in-memory one and Redis as one server (the
// shared one on 127.0.0.1:6379, a key prefix of this run's own), a 3-master Cluster (a script whose keys cross
// slots fails there with CROSSSLOT, as in production) and a Sentinel-managed primary, the last two started by this
// file on first use. Each case gets two replicas of one store (two Redis clients on one prefix; the memory store
// twice), and races are spread over both. The memory store's expiries are unit-tested on the mock clock
// (test/unit/memory-connections.test.ts); here Redis expires what it was given a short life, waited for.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import type { ClientRegistration, ConsentFlow, ConsentLink, StoredConnection } from '../../src/store/connections.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { connectRedis } from '../../src/store/redis-connection.js';
import { redisKeys } from '../../src/store/redis-keys.js';
import { RedisTaskStore } from '../../src/store/redis-task-store.js';
import type { TaskStore } from '../../src/store/task-store.js';
import { eventually } from '../helpers/harness.js';
import { startCluster, startSentinelSet, type RedisCluster, type SentinelSet } from '../helpers/redis-topologies.js';
import { deleteRedisPrefixes, TEST_REDIS_URL, uniqueRedisPrefix } from '../helpers/shared-redis.js';

type RedisTopology = 'single' | 'cluster' | 'sentinel';

let cluster: Promise<RedisCluster> | undefined;
let sentinelSet: Promise<SentinelSet> | undefined;
const prefixes: string[] = [];
const opened = new Set<TaskStore>();

async function redisStore(topology: RedisTopology, prefix: string): Promise<RedisTaskStore> {
  const base = { type: 'redis' as const, url: TEST_REDIS_URL, prefix };
  let config: Parameters<typeof connectRedis>[0] = base;
  if (topology === 'cluster') config = { ...base, cluster: { nodes: (await (cluster ??= startCluster())).nodes } };
  if (topology === 'sentinel') {
    const set = await (sentinelSet ??= startSentinelSet());
    config = { ...base, sentinel: { name: set.name, nodes: set.sentinels } };
  }
  const store = new RedisTaskStore(connectRedis(config), prefix, { waitForReplica: topology === 'sentinel' });
  opened.add(store);
  return store;
}

/** Two replicas of one new store. */
type Replicas = () => Promise<[TaskStore, TaskStore]>;

const redisReplicas = (topology: RedisTopology): Replicas => async () => {
  const prefix = uniqueRedisPrefix('connections');
  prefixes.push(prefix);
  return [await redisStore(topology, prefix), await redisStore(topology, prefix)];
};

const stores: Record<string, Replicas> = {
  memory: async () => {
    const store = new MemoryTaskStore();
    opened.add(store);
    return [store, store];
  },
  redis: redisReplicas('single'),
  'redis cluster': redisReplicas('cluster'),
  'redis sentinel': redisReplicas('sentinel'),
};

after(async () => {
  await Promise.all([...opened].map((store) => store.close().catch(() => undefined)));
  await Promise.all([cluster?.then((c) => c.stop()), sentinelSet?.then((s) => s.stop())]);
  await deleteRedisPrefixes(prefixes);
});

const ISSUER = 'https://as.example.com';
const PRINCIPAL = 'oauth:https://idp.example.com#alice';
const id = (): string => randomBytes(16).toString('base64url');

function connection(overrides: Partial<StoredConnection> = {}): StoredConnection {
  const now = Date.now();
  return { principal: PRINCIPAL, upstream: 'github', issuer: ISSUER, sealed: 'sealed-tokens', scopes: ['repo'], expiresAtMs: now + 3_600_000, issuedAtMs: now, connectedAtMs: now, version: 0, ...overrides };
}

function link(lifeMs = 600_000): ConsentLink {
  const now = Date.now();
  return { id: id(), principal: PRINCIPAL, upstream: 'github', elicitationId: id(), createdAtMs: now, expiresAtMs: now + lifeMs };
}

function flow(lifeMs = 600_000): ConsentFlow {
  return { state: id(), kind: 'consent', browserBinding: id(), sealedVerifier: 'sealed-verifier', redirectUri: 'https://gw.example.com/callback', issuer: ISSUER, principal: PRINCIPAL, upstream: 'github', elicitationId: id(), linkId: id(), expiresAtMs: Date.now() + lifeMs };
}

function registration(clientId: string): ClientRegistration {
  return { issuer: ISSUER, redirectUri: 'https://gw.example.com/callback', clientId, tokenEndpointAuthMethod: 'none', registeredAtMs: Date.now() };
}

/** Runs `count` calls of `call` at once, alternating between the two replicas. */
function race<T>(replicas: [TaskStore, TaskStore], count: number, call: (store: TaskStore, i: number) => Promise<T>): Promise<T[]> {
  return Promise.all(Array.from({ length: count }, (_, i) => call(replicas[i % 2] as TaskStore, i)));
}

for (const [kind, replicasOf] of Object.entries(stores)) {
  describe(`${kind} store: connections`, () => {
    test('put, get, list and delete a connection; the store counts versions whatever the record says', async () => {
      const [a, b] = await replicasOf();
      const github = connection({ version: 7 });
      assert.equal(await a.connections.put(github, 0), true);
      assert.deepEqual(await b.connections.get(PRINCIPAL, 'github'), { ...github, version: 1 });
      assert.equal(await a.connections.put(connection({ upstream: 'drive', scopes: [] }), 0), true);
      assert.equal(await a.connections.put(connection({ principal: 'oauth:https://idp.example.com#bob' }), 0), true);
      assert.deepEqual((await b.connections.list(PRINCIPAL)).map((c) => [c.upstream, c.version]), [['drive', 1], ['github', 1]]);
      assert.deepEqual(await b.connections.list('oauth:https://idp.example.com#nobody'), []);

      assert.deepEqual(await b.connections.delete(PRINCIPAL, 'github'), { ...github, version: 1 });
      assert.equal(await a.connections.get(PRINCIPAL, 'github'), undefined);
      assert.equal(await a.connections.delete(PRINCIPAL, 'github'), undefined);
      assert.deepEqual((await a.connections.list(PRINCIPAL)).map((c) => c.upstream), ['drive']);
      assert.equal((await a.connections.get('oauth:https://idp.example.com#bob', 'github'))?.version, 1, "another principal's connection stays");
      // Connected again after a delete: the versions start over.
      const again = connection({ sealed: 'again' });
      assert.equal(await a.connections.put(again, 0), true);
      assert.deepEqual(await b.connections.get(PRINCIPAL, 'github'), { ...again, version: 1 });
      await assert.rejects(a.connections.put(connection(), -1), RangeError);
    });

    test('compare and set: of writers from one version exactly one wins, and a stale version never writes', async () => {
      const [a, b] = await replicasOf();
      assert.equal(await a.connections.put(connection({ sealed: 'first' }), 0), true);
      assert.equal(await b.connections.put(connection({ sealed: 'second' }), 0), false, 'one is stored already');
      const written = await race([a, b], 10, (store, i) => store.connections.put(connection({ sealed: `refresh ${i}` }), 1));
      assert.equal(written.filter(Boolean).length, 1, String(written));
      const stored = await a.connections.get(PRINCIPAL, 'github');
      assert.equal(stored?.version, 2);
      assert.equal(stored?.sealed, `refresh ${written.indexOf(true)}`, "the winner's record is the one stored");
      assert.equal(await b.connections.put(connection({ sealed: 'stale' }), 1), false);
      assert.equal(await b.connections.put(connection({ sealed: 'ahead' }), 5), false);
      assert.equal(await b.connections.put(connection({ sealed: 'next' }), 2), true);
      assert.equal((await a.connections.get(PRINCIPAL, 'github'))?.sealed, 'next');
    });

    test('anyConnected follows puts and deletes, and a write that lost changes nothing', async () => {
      const [a, b] = await replicasOf();
      const [alice, bob] = [PRINCIPAL, 'oauth:https://idp.example.com#bob'];
      assert.equal(await a.connections.anyConnected('github'), undefined);
      assert.equal(await a.connections.put(connection({ principal: alice }), 0), true);
      assert.equal(await b.connections.anyConnected('github'), alice);
      assert.equal(await b.connections.anyConnected('drive'), undefined, 'per upstream');
      assert.equal(await a.connections.put(connection({ principal: bob }), 3), false);
      assert.equal(await a.connections.delete(alice, 'github') !== undefined, true);
      assert.equal(await b.connections.anyConnected('github'), undefined, 'the write that lost marked nobody');
      assert.equal(await a.connections.put(connection({ principal: alice }), 0), true);
      assert.equal(await a.connections.put(connection({ principal: bob }), 0), true);
      assert.ok([alice, bob].includes((await b.connections.anyConnected('github')) as string));
      await a.connections.delete(alice, 'github');
      assert.equal(await b.connections.anyConnected('github'), bob);
      await b.connections.delete(bob, 'github');
      assert.equal(await a.connections.anyConnected('github'), undefined);
    });

    test('a link is read any number of times, and taken once however many take it at once', async () => {
      const [a, b] = await replicasOf();
      const mine = link();
      await a.connections.putLink(mine);
      assert.deepEqual(await b.connections.getLink(mine.id), mine);
      assert.deepEqual(await a.connections.getLink(mine.id), mine, 'reading does not use it up');
      const taken = await race([a, b], 10, (store) => store.connections.takeLink(mine.id));
      assert.deepEqual(taken.filter((t) => t !== undefined), [mine]);
      assert.equal(await a.connections.getLink(mine.id), undefined);
      assert.equal(await b.connections.takeLink(mine.id), undefined);
      assert.equal(await b.connections.takeLink(id()), undefined, 'an unknown link');
    });

    test('a flow is taken once however many take it at once', async () => {
      const [a, b] = await replicasOf();
      const mine = flow();
      const login: ConsentFlow = { state: id(), kind: 'login', browserBinding: id(), sealedVerifier: 'v', redirectUri: 'https://gw.example.com/login/callback', issuer: ISSUER, nonce: id(), returnTo: '/connect/x', expiresAtMs: Date.now() + 60_000 };
      await a.connections.putFlow(mine);
      await a.connections.putFlow(login);
      const taken = await race([a, b], 10, (store) => store.connections.takeFlow(mine.state));
      assert.deepEqual(taken.filter((t) => t !== undefined), [mine]);
      assert.equal(await a.connections.takeFlow(mine.state), undefined);
      assert.deepEqual(await b.connections.takeFlow(login.state), login);
    });

    test('links and flows already past their time are never found', async () => {
      const [a, b] = await replicasOf();
      const [oldLink, oldFlow] = [link(-1), flow(-1)];
      await a.connections.putLink(oldLink);
      await a.connections.putFlow(oldFlow);
      assert.equal(await b.connections.getLink(oldLink.id), undefined);
      assert.equal(await b.connections.takeLink(oldLink.id), undefined);
      assert.equal(await b.connections.takeFlow(oldFlow.state), undefined);
    });

    test('registration: the first of racing registrations is the one every racer gets, and stays', async () => {
      const [a, b] = await replicasOf();
      assert.equal(await a.connections.registration(ISSUER, 'https://gw.example.com/callback'), undefined);
      const answers = await race([a, b], 10, (store, i) => store.connections.register(registration(`client-${i}`)));
      const stored = await b.connections.registration(ISSUER, 'https://gw.example.com/callback');
      assert.ok(stored !== undefined && /^client-\d$/.test(stored.clientId));
      for (const answer of answers) assert.deepEqual(answer, stored);
      assert.deepEqual(await a.connections.register(registration('late')), stored);
      assert.equal(await a.connections.registration(ISSUER, 'https://gw.example.com/other'), undefined, 'per redirect URI');
      assert.equal(await a.connections.registration('https://other.example.com', 'https://gw.example.com/callback'), undefined, 'per issuer');
    });

    test('lock: one owner at a time, even among racers; only its owner releases it', async () => {
      const [a, b] = await replicasOf();
      const name = `refresh:${PRINCIPAL}:github`;
      const taken = await race([a, b], 10, (store, i) => store.connections.lock(name, `owner-${i}`, 60_000));
      assert.equal(taken.filter(Boolean).length, 1, String(taken));
      const owner = `owner-${taken.indexOf(true)}`;
      const other = owner === 'owner-0' ? 'owner-1' : 'owner-0';
      assert.equal(await a.connections.lock(name, owner, 60_000), false, 'not re-entrant');
      await b.connections.unlock(name, other);
      assert.equal(await b.connections.lock(name, other, 60_000), false, 'another owner released nothing');
      assert.equal(await a.connections.lock('refresh:other', other, 60_000), true, 'locks are per name');
      await b.connections.unlock(name, owner);
      assert.equal(await a.connections.lock(name, other, 60_000), true);
    });
  });
}

for (const topology of ['single', 'cluster', 'sentinel'] as const) {
  describe(`redis store (${topology}): connections expire`, () => {
    test('links, flows and locks given a short life are gone by themselves; the rest stays', async () => {
      const prefix = uniqueRedisPrefix('connections');
      prefixes.push(prefix);
      const [a, b] = [await redisStore(topology, prefix), await redisStore(topology, prefix)];
      const keys = redisKeys(prefix);
      const [shortLink, shortFlow, longLink, longFlow] = [link(300), flow(300), link(), flow()];
      await a.connections.putLink(shortLink);
      await a.connections.putLink(longLink);
      await a.connections.putFlow(shortFlow);
      await a.connections.putFlow(longFlow);
      assert.equal(await a.connections.lock('short', 'first', 300), true);
      await eventually(async () => (await b.connections.getLink(shortLink.id)) === undefined);
      // Taking a flow uses it up: wait for its key to go, then see that taking finds nothing.
      await eventually(async () => (await b.redis.exists(keys.consentFlow(shortFlow.state))) === 0);
      assert.equal(await b.connections.takeFlow(shortFlow.state), undefined);
      await eventually(async () => b.connections.lock('short', 'second', 60_000));
      await a.connections.unlock('short', 'first');
      assert.equal(await a.connections.lock('short', 'first', 60_000), false, "the owner whose lock expired released nobody else's");
      assert.deepEqual(await b.connections.getLink(longLink.id), longLink);
      assert.deepEqual(await b.connections.takeFlow(longFlow.state), longFlow);
    });
  });
}
