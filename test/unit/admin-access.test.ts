// Admin access for operator endpoints, on a real fastify instance with the real Authenticator (API keys): who is
// let through, what is refused with which status, and the access.denied events the refusals announce.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import type { AdminAccess } from '../../src/config/types.js';
import { GatewayEvents, type GatewayEventMap } from '../../src/events.js';
import { adminAccess, adminOf, isAdmin } from '../../src/http/admin-access.js';
import { Authenticator } from '../../src/http/credentials.js';
import { createLogger } from '../../src/log.js';
import { apiKeyCaller, oauthCaller } from '../../src/principals.js';

const silent = createLogger({ level: 'silent' }, { pretty: false });
const KEYS = { ops: 'admin-access-ops-key-000', alice: 'admin-access-alice-key-0', robot: 'admin-access-robot-key-0' };

function gatewayConfig(admin: AdminAccess | undefined, listen: Record<string, unknown> = {}) {
  const config = parseConfig(
    stringify({
      upstreams: { fx: { transport: 'streamable-http', url: 'http://127.0.0.1:1/mcp' } },
      listen,
      auth: {
        resource: 'http://127.0.0.1/mcp',
        apiKeys: [
          { principal: 'ops', key: KEYS.ops },
          { principal: 'alice', key: KEYS.alice },
          { principal: 'robot', key: KEYS.robot, scopes: ['taskgate:admin'] },
        ],
        ...(admin === undefined ? {} : { admin }),
      },
    }),
    'admin-access.yaml',
    {},
  );
  return config;
}

async function guarded(admin: AdminAccess | undefined, withAuth = true, listen: Record<string, unknown> = {}): Promise<{ app: FastifyInstance; denied: GatewayEventMap['access.denied'][] }> {
  const events = new GatewayEvents();
  const denied: GatewayEventMap['access.denied'][] = [];
  events.on('access.denied', (event) => denied.push(event));
  const config = gatewayConfig(admin, listen);
  const auth = config.auth!;
  const app = Fastify();
  const onRequest = adminAccess({ authenticator: withAuth ? new Authenticator(auth, silent) : undefined, admin: auth.admin, events, logger: silent, endpoint: 'metrics', listen: config.listen });
  app.get('/metrics', { onRequest }, async (request) => ({ admin: adminOf(request)?.principal ?? null }));
  app.post('/cancel', { onRequest }, async (request) => ({ admin: adminOf(request)?.principal ?? null }));
  await app.ready();
  return { app, denied };
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

describe('admin access', () => {
  it('without auth every request is let through, as nobody in particular', async () => {
    const { app, denied } = await guarded({ principals: ['ops'], scopes: [] }, false);
    const answer = await app.inject({ url: '/metrics' });
    assert.equal(answer.statusCode, 200);
    assert.deepEqual(answer.json(), { admin: null });
    assert.deepEqual(denied, []);
  });

  it('401 with the challenge without a (known) credential; 403 for a principal that is not an admin; each announced', async () => {
    const { app, denied } = await guarded({ principals: ['key:ops'], scopes: ['taskgate:admin'] });
    const none = await app.inject({ url: '/metrics' });
    assert.equal(none.statusCode, 401);
    assert.match(String(none.headers['www-authenticate']), /^Bearer resource_metadata="http:\/\/127\.0\.0\.1\/\.well-known\/oauth-protected-resource\/mcp"/);
    assert.equal((await app.inject({ url: '/metrics', headers: bearer('unknown-key-0000000000') })).statusCode, 401);
    const alice = await app.inject({ url: '/metrics', headers: bearer(KEYS.alice) });
    assert.equal(alice.statusCode, 403);
    assert.match(alice.json<{ error: string }>().error, /not an admin/);
    assert.deepEqual(
      denied.map(({ principal, kind, name }) => ({ principal, kind, name })),
      [
        { principal: undefined, kind: 'credentials', name: 'metrics' },
        { principal: undefined, kind: 'credentials', name: 'metrics' },
        { principal: 'key:alice', kind: 'admin', name: 'metrics' },
      ],
    );
    assert.deepEqual((await app.inject({ url: '/metrics', headers: bearer(KEYS.ops) })).json(), { admin: 'key:ops' }, 'by principal');
    assert.deepEqual((await app.inject({ url: '/metrics', headers: bearer(KEYS.robot) })).json(), { admin: 'key:robot' }, 'by scope');
    assert.equal(denied.length, 3, 'admins are not announced');
  });

  it('without auth.admin nobody is an admin while auth is on', async () => {
    const { app, denied } = await guarded(undefined);
    const ops = await app.inject({ url: '/metrics', headers: bearer(KEYS.ops) });
    assert.equal(ops.statusCode, 403);
    assert.match(ops.json<{ error: string }>().error, /auth\.admin is not configured/);
    assert.equal(denied[0]?.principal, 'key:ops');
  });

  it('principal globs match as access rules do: bare names either credential, qualified ones only theirs', () => {
    const admin = (principals: string[], scopes: string[] = []): AdminAccess => ({ principals, scopes });
    const key = apiKeyCaller('ops-1', []);
    const token = oauthCaller('https://idp.example.com', 'ops-1', ['read', 'admin']);
    assert.equal(isAdmin(admin(['ops-*']), key), true);
    assert.equal(isAdmin(admin(['ops-*']), token), true);
    assert.equal(isAdmin(admin(['key:ops-*']), token), false);
    assert.equal(isAdmin(admin(['oauth:ops-1']), token), true);
    assert.equal(isAdmin(admin(['someone'], ['admin']), token), true, 'by scope');
    assert.equal(isAdmin(admin(['someone'], ['admin']), key), false);
    assert.equal(isAdmin(undefined, key), false);
  });

  it('a write must be JSON, and from the gateway\'s own origin or an allowedOrigins entry, with or without auth', async () => {
    for (const withAuth of [false, true]) {
      const { app, denied } = await guarded({ principals: ['ops'], scopes: [] }, withAuth, { allowedOrigins: ['http://ops.example:8443'] });
      const post = (headers: Record<string, string>) =>
        app.inject({ method: 'POST', url: '/cancel', headers: { host: '127.0.0.1:8080', ...(withAuth ? bearer(KEYS.ops) : {}), ...headers }, payload: headers['content-type']?.startsWith('application/json') === true ? '{}' : 'x' });
      // What a page on another origin can send without a preflight: refused, whatever its Origin.
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
        assert.equal((await post({ 'content-type': type })).statusCode, 415, type);
        assert.equal((await post({ 'content-type': type, origin: 'http://127.0.0.1:8080' })).statusCode, 415, `${type}, own origin`);
      }
      for (const origin of ['http://127.0.0.1:9999', 'http://localhost:8080', 'http://127.0.0.1:80', 'null', 'http://evil.example']) {
        const refused = await post({ 'content-type': 'application/json', origin });
        assert.equal(refused.statusCode, 403, origin);
        assert.match(refused.json<{ error: string }>().error, /may not change state/);
      }
      for (const origin of [undefined, 'http://127.0.0.1:8080', 'http://ops.example:8443']) {
        const admitted = await post({ 'content-type': 'application/json; charset=utf-8', ...(origin === undefined ? {} : { origin }) });
        assert.equal(admitted.statusCode, 200, String(origin));
      }
      assert.equal((await app.inject({ url: '/metrics', headers: { host: '127.0.0.1:8080', origin: 'http://127.0.0.1:9999', ...(withAuth ? bearer(KEYS.ops) : {}) } })).statusCode, 200, 'reads are not writes');
      assert.ok(denied.length >= 11 && denied.every((event) => event.kind === 'cross-site' && event.name === 'metrics'), JSON.stringify(denied));
    }
  });
});
