// The consent core (src/consent/, issue 41) driven directly, as the HTTP routes and the call side will drive it,
// against the third-party fixtures (a GitHub-like authorization server with registration, PKCE, rotating refresh and
// revocation; the MCP upstream behind it, whose 401 and RFC 9728 metadata name it) on both stores: the memory store
// and the shared Redis. Every case runs two replicas (two services on one store): links made on one are completed on
// the other, refreshes are counted at the authorization server, and waits wake across them. Time for refreshes is
// the services' injected clock, moved forward; nothing here waits on a clock.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { pino } from 'pino';
import { ConsentRefused, type ConsentPage, type ConsentRefusal } from '../../src/consent/ports.js';
import type { ConsentConfig } from '../../src/consent/settings.js';
import { createUserConnections, type UserConnectionsService } from '../../src/consent/user-connections.js';
import { GatewayEvents, type GatewayEventMap, type GatewayEventName } from '../../src/events.js';
import { Sealer } from '../../src/identity/sealing.js';
import { ConsentRequiredError, type ConsentReason } from '../../src/identity/user-tokens.js';
import { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { connectRedis } from '../../src/store/redis-connection.js';
import { RedisTaskStore } from '../../src/store/redis-task-store.js';
import type { TaskStore } from '../../src/store/task-store.js';
import { startThirdPartyAs, USER_COOKIE, type ThirdPartyAs } from '../fixtures/third-party-as.js';
import { startThirdPartyUpstream, type ThirdPartyUpstream } from '../fixtures/third-party-upstream.js';
import { deleteRedisPrefixes, TEST_REDIS_URL, uniqueRedisPrefix } from '../helpers/shared-redis.js';
import { bounded } from '../helpers/waits.js';

const ALICE = 'oauth:https://idp.example#alice';
const BOB = 'oauth:https://idp.example#bob';
const PUBLIC = 'http://127.0.0.1:1';
const opened: TaskStore[] = [];
const prefixes: string[] = [];

after(async () => {
  await Promise.all(opened.map((store) => store.close().catch(() => undefined)));
  await deleteRedisPrefixes(prefixes);
});

const storeKinds: Record<string, () => [TaskStore, TaskStore]> = {
  memory: () => {
    const store = new MemoryTaskStore();
    opened.push(store);
    return [store, store];
  },
  redis: () => {
    const prefix = uniqueRedisPrefix('consent-core');
    prefixes.push(prefix);
    const replica = (): TaskStore => new RedisTaskStore(connectRedis({ type: 'redis', url: TEST_REDIS_URL, prefix }), prefix);
    const pair: [TaskStore, TaskStore] = [replica(), replica()];
    opened.push(...pair);
    return pair;
  },
};

interface Setup {
  as: ThirdPartyAs;
  upstream: ThirdPartyUpstream;
  /** Two replicas on one store. */
  a: UserConnectionsService;
  b: UserConnectionsService;
  store: TaskStore;
  events: Recorded;
  /** Moves both services' clock forward. */
  advance(ms: number): void;
  close(): Promise<void>;
}

type Recorded = { [K in GatewayEventName]?: GatewayEventMap[K][] } & { bus: GatewayEvents };

function recorded(): Recorded {
  const bus = new GatewayEvents();
  const record: Recorded = { bus };
  for (const name of ['consent.requested', 'consent.started', 'consent.refused', 'connection.created', 'connection.refreshed', 'connection.revoked', 'connection.failed'] as const) {
    bus.on(name, (payload) => ((record[name] as unknown[] | undefined) ??= []).push(payload));
  }
  return record;
}

async function setup(kind: string, options: { allowed?: string[]; expiresIn?: number; configured?: boolean } = {}): Promise<Setup> {
  const as = await startThirdPartyAs({
    consent: 'approve',
    expiresInSeconds: options.expiresIn ?? 3600,
    ...(options.configured && { clients: { 'gw-app': { secret: 'gw-secret', redirectUris: [`${PUBLIC}/oauth/callback`] } } }),
  });
  const upstream = await startThirdPartyUpstream({ authorizationServer: as, scopesSupported: ['repo'] });
  const config = {
    upstreams: [{
      name: 'github', prefix: 'github', transport: 'streamable-http', url: upstream.url,
      auth: {
        timeoutMs: 5_000, claimHeaders: {}, clientCredentials: undefined, tokenExchange: undefined, signedIdentity: undefined,
        authorizationCode: { scopes: [], resource: upstream.url, extraAuthorizeParams: { prompt: 'consent' }, ...(options.configured && { clientId: 'gw-app', clientSecret: 'gw-secret' }) },
      },
    }],
    listen: { host: '127.0.0.1', port: 1, path: '/mcp', publicUrl: PUBLIC },
    auth: { resource: `${PUBLIC}/mcp` },
    identity: { issuer: PUBLIC, keys: [], sealingKeys: [], ...(options.allowed && { allowedAuthorizationServers: options.allowed }) },
  } as unknown as ConsentConfig;
  const [storeA, storeB] = storeKinds[kind]!();
  const sealer = new Sealer([{ kid: 'k1', key: randomBytes(32) }]);
  const events = recorded();
  let offset = 0;
  const now = () => Date.now() + offset;
  const logger = pino({ level: 'silent' });
  const service = (store: TaskStore, replicaId: string) => createUserConnections({ config, store, sealer, events: events.bus, logger, replicaId, now, recheckMs: 200 });
  const a = service(storeA, 'replica-a');
  const b = service(storeB, 'replica-b');
  await a.start();
  await b.start();
  return {
    as, upstream, a, b, store: storeA, events,
    advance: (ms) => void (offset += ms),
    close: async () => {
      await a.stop();
      await b.stop();
      await upstream.close();
      await as.close();
    },
  };
}

const linkId = (url: string): string => new URL(url).pathname.split('/').pop()!;

async function refusal(promise: Promise<unknown>, reason: ConsentRefusal): Promise<ConsentRefused> {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof ConsentRefused, `expected ConsentRefused ${reason}, got ${String(err)}`);
  assert.equal(err.reason, reason);
  return err;
}

async function consentRequired(promise: Promise<unknown>, reason: ConsentReason): Promise<void> {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof ConsentRequiredError, `expected ConsentRequiredError ${reason}, got ${String(err)}`);
  assert.equal(err.reason, reason);
}

/** The browser at the authorization server: consent given at once, the redirect read (never followed). */
async function authorize(page: ConsentPage, thirdPartyUser: string): Promise<URLSearchParams> {
  const res = await fetch(page.authorizeUrl, { redirect: 'manual', headers: { cookie: `${USER_COOKIE}=${thirdPartyUser}` } });
  assert.equal(res.status, 302);
  const location = new URL(res.headers.get('location')!);
  assert.equal(`${location.origin}${location.pathname}`, `${PUBLIC}/oauth/callback`);
  return location.searchParams;
}

const callback = (params: URLSearchParams, cookie: string | undefined) => ({
  state: params.get('state') ?? undefined, code: params.get('code') ?? undefined, error: params.get('error') ?? undefined, iss: params.get('iss') ?? undefined, cookie,
});

/** Alice connects: the link made on `from`, opened and completed on `to`. */
async function connect(s: Setup, principal = ALICE, user = 'alice-gh', from = s.a, to = s.b): Promise<void> {
  const request = await from.request(principal, 'github', 'call');
  const page = await to.begin(linkId(request.url), principal);
  await to.complete(callback(await authorize(page, user), page.browserCookie));
}

for (const kind of Object.keys(storeKinds)) {
  describe(`consent core on the ${kind} store`, () => {
    test('a link connects only its own user: another browser is refused without using it or reaching the server', async () => {
      const s = await setup(kind);
      try {
        const connected = new Promise((resolve) => s.b.onConnected(resolve));
        const waiting = s.b.whenConnected(ALICE, 'github', AbortSignal.timeout(60_000));
        const request = await s.a.request(ALICE, 'github', 'call');
        assert.match(request.url, new RegExp(`^${PUBLIC}/connect/[A-Za-z0-9_-]{43}$`));
        assert.match(request.message, /'github'/);
        assert.deepEqual(s.events['consent.requested'], [{ principal: ALICE, upstream: 'github', via: 'call' }]);
        assert.deepEqual(await s.b.link(linkId(request.url)), { principal: ALICE, upstream: 'github' });

        const before = s.as.requests().length;
        await refusal(s.b.begin(linkId(request.url), BOB), 'wrong_user');
        assert.equal(s.as.requests().length, before, 'nothing was sent to the authorization server');
        assert.equal(s.events['consent.refused']?.[0]?.reason, 'wrong_user');

        const page = await s.b.begin(linkId(request.url), ALICE);
        assert.equal(page.serverHost, new URL(s.as.issuer).host);
        const asked = new URL(page.authorizeUrl).searchParams;
        assert.equal(asked.get('code_challenge_method'), 'S256');
        assert.equal(asked.get('redirect_uri'), `${PUBLIC}/oauth/callback`);
        assert.equal(asked.get('resource'), s.upstream.url);
        assert.equal(asked.get('scope'), 'repo', "the upstream's scopes_supported");
        assert.equal(asked.get('prompt'), 'consent');
        assert.equal(s.as.counts().registrations, 1, 'registered itself (RFC 7591)');
        await refusal(s.a.begin(linkId(request.url), ALICE), 'link_unknown');

        const params = await authorize(page, 'alice-gh');
        assert.deepEqual(await s.a.complete(callback(params, page.browserCookie)), { principal: ALICE, upstream: 'github' });
        assert.equal(await bounded(waiting, 'whenConnected on the other replica'), true);
        assert.deepEqual(await bounded(connected, 'onConnected'), { principal: ALICE, upstream: 'github', elicitationId: request.elicitationId });
        await refusal(s.b.complete(callback(params, page.browserCookie)), 'state_unknown');

        const token = await s.b.accessToken(ALICE, 'github');
        const seen = s.as.validate(token);
        assert.ok(seen.active && seen.user === 'alice-gh');
        const stored = await s.store.connections.get(ALICE, 'github');
        assert.ok(stored !== undefined && !stored.sealed.includes(token), 'sealed in the store');
        assert.deepEqual(stored.scopes, ['repo']);
        assert.equal(s.events['connection.created']?.length, 1);
        await consentRequired(s.a.accessToken(BOB, 'github'), 'not_connected');
        await consentRequired(s.a.accessToken('key:ci', 'github'), 'no_user');
        await assert.rejects(s.a.request('key:ci', 'github', 'call'), ConsentRequiredError);
      } finally {
        await s.close();
      }
    });

    test('the callback checks the browser cookie, the user\'s refusal and RFC 9207 iss; a state is tried once', async () => {
      const s = await setup(kind);
      try {
        const begin = async () => s.a.begin(linkId((await s.a.request(ALICE, 'github', 'call')).url), ALICE);
        let page = await begin();
        let params = await authorize(page, 'alice-gh');
        await refusal(s.b.complete(callback(params, 'another-browser')), 'state_mismatch');
        await refusal(s.b.complete(callback(params, page.browserCookie)), 'state_unknown');

        page = await begin();
        params = await authorize(page, 'alice-gh');
        params.set('iss', 'http://127.0.0.1:2');
        await refusal(s.b.complete(callback(params, page.browserCookie)), 'issuer_mismatch');

        s.as.setConsent('deny');
        page = await begin();
        await refusal(s.b.complete(callback(await authorize(page, 'alice-gh'), page.browserCookie)), 'denied');
        assert.deepEqual(s.events['consent.refused']?.map((e) => e.reason), ['state_mismatch', 'issuer_mismatch', 'denied']);
        assert.equal(await s.a.isConnected(ALICE, 'github'), false);
        assert.equal(s.as.counts().codeExchanges, 0, 'no code was exchanged');
      } finally {
        await s.close();
      }
    });

    test('one refresh per expiry for 20 calls on two replicas; the rotated refresh token is stored', async () => {
      const s = await setup(kind, { expiresIn: 4 });
      try {
        await connect(s);
        const first = await s.a.accessToken(ALICE, 'github');
        s.advance(1_000);
        assert.equal(await s.b.accessToken(ALICE, 'github'), first, 'a 4 s token is not refreshed in its first half');
        const before = await s.store.connections.get(ALICE, 'github');
        s.advance(1_500);
        const tokens = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? s.a : s.b).accessToken(ALICE, 'github')));
        assert.equal(s.as.counts().refreshes, 1);
        assert.equal(new Set(tokens).size, 1);
        assert.notEqual(tokens[0], first);
        const after = await s.store.connections.get(ALICE, 'github');
        assert.equal(after?.version, (before?.version ?? 0) + 1);
        assert.deepEqual(s.events['connection.refreshed']?.map((e) => e.rotated), [true]);
        assert.equal(s.as.counts().reuseDetected, 0);
        assert.equal(await s.a.accessToken(ALICE, 'github'), tokens[0], 'served again until half its new lifetime');

        assert.equal(s.a.refused(ALICE, 'github', tokens[0]!), true);
        const next = await s.a.accessToken(ALICE, 'github');
        assert.notEqual(next, tokens[0]);
        assert.equal(s.as.counts().refreshes, 2, 'a refused token is refreshed at once');
        assert.ok(s.as.validate(next).active);
      } finally {
        await s.close();
      }
    });

    test('invalid_grant deletes the connection and asks for consent again, on every replica', async () => {
      const s = await setup(kind, { expiresIn: 60 });
      try {
        await connect(s);
        s.as.failNextRefresh('invalid_grant');
        s.advance(31_000);
        await consentRequired(s.a.accessToken(ALICE, 'github'), 'grant_refused');
        assert.equal(await s.store.connections.get(ALICE, 'github'), undefined);
        await consentRequired(s.b.accessToken(ALICE, 'github'), 'not_connected');
        assert.deepEqual(s.events['connection.failed']?.map((e) => [e.reason, e.step]), [['invalid_grant', 'refresh']]);
        assert.deepEqual(s.events['connection.revoked']?.map((e) => e.by), ['server']);
      } finally {
        await s.close();
      }
    });

    test('a refresh ahead of expiry that fails for a while keeps serving the token while it lasts', async () => {
      const s = await setup(kind, { expiresIn: 60 });
      try {
        await connect(s);
        const first = await s.a.accessToken(ALICE, 'github');
        s.as.failNextRefresh('temporarily_unavailable');
        s.advance(31_000);
        assert.equal(await s.b.accessToken(ALICE, 'github'), first);
        assert.deepEqual(s.events['connection.failed']?.map((e) => [e.reason, e.step]), [['http_status', 'refresh']], 'oauth4webapi reads a 503 as a status, whatever its body');
        const next = await s.a.accessToken(ALICE, 'github');
        assert.notEqual(next, first, 'refreshed on the next call');
        assert.equal(s.as.counts().refreshes, 2);
      } finally {
        await s.close();
      }
    });

    test('disconnect revokes at the server (RFC 7009) and deletes; every replica asks again; list shows both states', async () => {
      const s = await setup(kind);
      try {
        const [empty] = await s.a.list(ALICE, ['github', 'not-consent']);
        assert.equal(empty?.connected, false);
        assert.match(empty?.connectUrl ?? '', new RegExp(`^${PUBLIC}/connect/`));
        await connect(s);
        const token = await s.b.accessToken(ALICE, 'github');
        const [listed] = await s.b.list(ALICE, ['github']);
        assert.equal(listed?.connected, true);
        assert.deepEqual(listed?.scopes, ['repo']);
        assert.ok(listed?.expiresAt !== undefined && listed.connectUrl === undefined);

        assert.equal(await s.a.disconnect(ALICE, 'github'), true);
        assert.equal(s.as.counts().revocations, 1);
        assert.equal(s.as.validate(token).active, false, 'the family is revoked at the server');
        await consentRequired(s.b.accessToken(ALICE, 'github'), 'not_connected');
        assert.equal(await s.b.disconnect(ALICE, 'github'), false);
        assert.deepEqual(s.events['connection.revoked']?.map((e) => [e.by, e.revokedAtServer]), [['user', true]]);
      } finally {
        await s.close();
      }
    });

    test('the gateway registers once per server across replicas; a configured client is used as it is', async () => {
      const s = await setup(kind);
      try {
        const links = await Promise.all([s.a.request(ALICE, 'github', 'call'), s.b.request(BOB, 'github', 'call')]);
        await Promise.all([s.a.begin(linkId(links[0].url), ALICE), s.b.begin(linkId(links[1].url), BOB)]);
        assert.equal(s.as.counts().registrations, 1);
      } finally {
        await s.close();
      }
      const configured = await setup(kind, { configured: true });
      try {
        await connect(configured);
        assert.equal(configured.as.counts().registrations, 0);
        const seen = configured.as.validate(await configured.a.accessToken(ALICE, 'github'));
        assert.ok(seen.active && seen.clientId === 'gw-app');
      } finally {
        await configured.close();
      }
    });

    test('a discovered server the allowlist does not name is sent nothing, and the refusal names it', async () => {
      const s = await setup(kind, { allowed: ['https://github.com/login/oauth'] });
      try {
        const request = await s.a.request(ALICE, 'github', 'call');
        const err = await refusal(s.a.begin(linkId(request.url), ALICE), 'untrusted_server');
        assert.ok(err.message.includes(s.as.issuer));
        assert.equal(s.as.requests().length, 0);
        assert.deepEqual(s.events['connection.failed']?.map((e) => [e.reason, e.step]), [['untrusted_server', 'discovery']]);
        assert.deepEqual(await s.a.link(linkId(request.url)), { principal: ALICE, upstream: 'github' }, 'the link stays for another try');
      } finally {
        await s.close();
      }
    });
  });
}
