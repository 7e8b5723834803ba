// What operators see of upstream identity (issue 33 item 5): real credential sources against the real
// authorization-server fixture, announcing on a real event seam, heard by the real subscribers: Prometheus metrics
// (a real prom-client registry, scraped and parsed back), the audit log (a real pino logger) and the credential status
// /readyz shows. The audit output is scanned for every token and secret the test saw: none may appear.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { IdentityConfig, UpstreamAuthConfig } from '../../src/config/identity.js';
import { GatewayEvents } from '../../src/events.js';
import { UpstreamCredentialError } from '../../src/identity/credential-error.js';
import { UpstreamCredentials, type CredentialCaller } from '../../src/identity/credential-sources.js';
import { createGatewayIdentity } from '../../src/identity/parts.js';
import { failureOf } from '../../src/identity/token-events.js';
import { subscribeAuditLog } from '../../src/observability/audit.js';
import { subscribeCredentialStatus } from '../../src/observability/credential-health.js';
import { GatewayMetrics } from '../../src/observability/metrics.js';
import { MCP_METHODS } from '../../src/protocol/revisions.js';
import { startAuthServer, type AuthServer } from '../fixtures/auth-server.js';
import { parsePrometheus, sampleValue, type Sample } from '../helpers/prometheus-text.js';

const UPSTREAM_URL = 'http://127.0.0.1:1/mcp';
const SECRET = 'gw-secret-do-not-log';
const IDENTITY: IdentityConfig = {
  issuer: 'https://gw.example',
  keys: [{ kid: 'k1', alg: 'ES256', privateKey: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() }],
  sealingKeys: [],
};
const CI: CredentialCaller = { principal: 'key:ci', claims: {} };

type Line = Record<string, unknown>;

/** One gateway's seam with every subscriber of this concern listening, and identity parts announcing on it. */
function observed(): {
  events: GatewayEvents;
  parts: ReturnType<typeof createGatewayIdentity>;
  scrape: () => Promise<Sample[]>;
  audit: { lines: Line[]; text: string[] };
  status: ReturnType<typeof subscribeCredentialStatus>;
} {
  const events = new GatewayEvents();
  const metrics = new GatewayMetrics({ events, methods: MCP_METHODS, principalLabels: true, knownTool: () => true });
  const audit = { lines: [] as Line[], text: [] as string[] };
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const text of chunk.toString('utf8').split('\n')) {
        if (text === '') continue;
        audit.text.push(text);
        audit.lines.push(JSON.parse(text) as Line);
      }
      done();
    },
  });
  subscribeAuditLog(events, pino({ level: 'info', base: undefined, timestamp: false }, sink));
  const status = subscribeCredentialStatus(events, () => Date.UTC(2026, 0, 1));
  const parts = createGatewayIdentity(IDENTITY, {}, events);
  return { events, parts, scrape: async () => parsePrometheus(await metrics.render()), audit, status };
}

/** Waits until pino's stream has written `count` lines (it writes asynchronously). */
async function auditLines(audit: { lines: Line[] }, count: number): Promise<Line[]> {
  const deadline = Date.now() + 10_000; // a hang guard only
  while (audit.lines.length < count) {
    if (Date.now() > deadline) assert.fail(`expected ${count} audit lines, got ${JSON.stringify(audit.lines)}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
  return audit.lines;
}

const auth = (over: Partial<UpstreamAuthConfig>): UpstreamAuthConfig => ({
  clientCredentials: undefined, tokenExchange: undefined, signedIdentity: undefined, authorizationCode: undefined, claimHeaders: {}, timeoutMs: 5_000, ...over,
});

describe('identity: what operators see', () => {
  let as: AuthServer;
  before(async () => {
    as = await startAuthServer({ clients: { gw: { secret: SECRET } } });
  });
  after(() => as.close());

  const client = (over: { timeoutMs?: number } = {}) => ({
    clientId: 'gw', clientSecret: SECRET, tokenUrl: `${as.issuer}/token`, resource: UPSTREAM_URL, scope: undefined, tokenEndpointAuthMethod: 'client_secret_basic' as const, ...over,
  });
  const credentials = (name: string, a: UpstreamAuthConfig, parts: ReturnType<typeof createGatewayIdentity>) =>
    new UpstreamCredentials({ name, url: UPSTREAM_URL, headers: {}, auth: a }, parts);
  const bearer = (headers: Readonly<Record<string, string>>): string => (headers.Authorization ?? '').replace(/^Bearer /, '');

  it('counts requests by grant and outcome, times them, counts cache results, and audits whom each credential is for: never a token', async () => {
    const { parts, scrape, audit } = observed();
    await as.setMode('up');
    const seen: string[] = [SECRET];
    // The gateway's own token (client credentials), then from the cache.
    const own = credentials('docs', auth({ clientCredentials: client() }), parts);
    seen.push(bearer(await own.forGateway().headers()), bearer(await own.forGateway().headers()));
    // Alice's token exchanged, then from the cache.
    const aliceToken = await as.mint({ sub: 'alice', aud: 'https://gw.example/mcp' });
    const alice: CredentialCaller = { principal: `oauth:${as.issuer}#alice`, claims: { email: 'alice@example.com' }, subjectToken: () => aliceToken };
    seen.push(aliceToken);
    const exchanged = credentials('wiki', auth({ tokenExchange: { ...client(), audience: undefined } }), parts);
    seen.push(bearer(await exchanged.forCaller(alice).headers()), bearer(await exchanged.forCaller(alice).headers()));
    // An API-key caller has nothing to exchange: refused by the gateway itself.
    await assert.rejects(exchanged.forCaller(CI).headers(), UpstreamCredentialError);
    // An identity the gateway signs for alice.
    const signed = credentials('crm', auth({ signedIdentity: { ttlSeconds: 60, claims: ['email'], audience: UPSTREAM_URL } }), parts);
    seen.push(bearer(await signed.forCaller(alice).headers()));

    const samples = await scrape();
    const requests = (labels: Record<string, string>): number => sampleValue(samples, 'taskgate_upstream_token_requests_total', labels);
    const cache = (labels: Record<string, string>): number => sampleValue(samples, 'taskgate_upstream_token_cache_total', labels);
    assert.equal(requests({ upstream: 'docs', grant: 'client_credentials', outcome: 'ok' }), 1);
    assert.equal(requests({ upstream: 'wiki', grant: 'token_exchange', outcome: 'ok' }), 1);
    assert.equal(requests({ upstream: 'wiki', grant: 'token_exchange', outcome: 'refused' }), 1);
    assert.equal(requests({ upstream: 'crm', grant: 'signed', outcome: 'ok' }), 1);
    assert.equal(sampleValue(samples, 'taskgate_upstream_token_request_seconds_count', { upstream: 'wiki', grant: 'token_exchange', outcome: 'ok' }), 1);
    assert.equal(cache({ upstream: 'docs', grant: 'client_credentials', result: 'miss' }), 1);
    assert.equal(cache({ upstream: 'docs', grant: 'client_credentials', result: 'hit' }), 1);
    assert.equal(cache({ upstream: 'wiki', grant: 'token_exchange', result: 'hit' }), 1);
    assert.equal(cache({ upstream: 'crm', grant: 'signed', result: 'miss' }), 1);
    const credentialSeries = samples.filter((s) => s.name.startsWith('taskgate_upstream_token_'));
    assert.ok(credentialSeries.length > 0);
    for (const s of credentialSeries) assert.equal(s.labels.principal, undefined, `${s.name}: no principal label, even with metrics.principalLabels`);

    const lines = await auditLines(audit, 4);
    assert.deepEqual(lines, [
      { level: 30, audit: 'credential.obtained', upstream: 'docs', grant: 'client_credentials', msg: 'upstream credential obtained for the gateway' },
      { level: 30, audit: 'credential.obtained', upstream: 'wiki', grant: 'token_exchange', principal: alice.principal, msg: 'upstream credential obtained for a caller' },
      { level: 40, audit: 'credential.failed', upstream: 'wiki', grant: 'token_exchange', principal: 'key:ci', outcome: 'refused', cause: 'no_subject_token', msg: 'no upstream credential for a caller' },
      { level: 30, audit: 'credential.obtained', upstream: 'crm', grant: 'signed', principal: alice.principal, msg: 'upstream credential obtained for a caller' },
    ]);
    assert.ok(seen.every((secret) => secret.length > 10));
    for (const text of audit.text) for (const secret of seen) assert.ok(!text.includes(secret), `an audit line holds a token or secret: ${text}`);
  });

  it('tells refused, unavailable, down and slow authorization servers apart; /readyz lists the upstream until its own credential comes back', async () => {
    const { parts, scrape, audit, status, events } = observed();
    const attempt = async (name: string, over: { timeoutMs?: number } = {}) => {
      const creds = credentials(name, auth({ clientCredentials: client(), ...over }), parts);
      return creds.forGateway().headers().then(() => 'ok', (e: unknown) => e);
    };
    try {
      await as.setMode('refuse');
      assert.ok((await attempt('refusing')) instanceof UpstreamCredentialError);
      await as.setMode('unavailable');
      assert.ok((await attempt('unavailable')) instanceof UpstreamCredentialError);
      await as.setMode('slow');
      assert.ok((await attempt('slow', { timeoutMs: 50 })) instanceof UpstreamCredentialError);
      await as.setMode('down');
      assert.ok((await attempt('down')) instanceof UpstreamCredentialError);
    } finally {
      await as.setMode('up');
    }
    const samples = await scrape();
    const requests = (upstream: string, outcome: string): number => sampleValue(samples, 'taskgate_upstream_token_requests_total', { upstream, grant: 'client_credentials', outcome });
    assert.equal(requests('refusing', 'refused'), 1);
    assert.equal(requests('unavailable', 'error'), 1, 'a 503 is the server failing, not refusing');
    assert.equal(requests('slow', 'timeout'), 1);
    assert.equal(requests('down', 'error'), 1);

    const failed = (await auditLines(audit, 4)).map(({ upstream, outcome, cause, oauthError, status: code }) => ({ upstream, outcome, cause, oauthError, status: code }));
    assert.deepEqual(failed, [
      { upstream: 'refusing', outcome: 'refused', cause: 'oauth_error', oauthError: 'invalid_client', status: 400 },
      { upstream: 'unavailable', outcome: 'error', cause: 'http_status', oauthError: undefined, status: 503 },
      { upstream: 'slow', outcome: 'timeout', cause: 'timeout', oauthError: undefined, status: undefined },
      { upstream: 'down', outcome: 'error', cause: 'unreachable', oauthError: undefined, status: undefined },
    ]);
    for (const text of audit.text) assert.ok(!text.includes(SECRET) && !text.includes('the fixture is in mode'), `no secret, no server-written text: ${text}`);

    const since = new Date(Date.UTC(2026, 0, 1)).toISOString();
    assert.deepEqual(status.credentialStatus().find((s) => s.upstream === 'refusing'), { upstream: 'refusing', grant: 'client_credentials', outcome: 'refused', cause: 'oauth_error', oauthError: 'invalid_client', status: 400, since });
    assert.deepEqual(status.credentialStatus().map((s) => s.upstream).sort(), ['down', 'refusing', 'slow', 'unavailable']);
    // Back up: the next request for 'down' succeeds (a new cache, past the remembered failure) and clears it.
    assert.equal(await credentials('down', auth({ clientCredentials: client() }), createGatewayIdentity(IDENTITY, {}, events)).forGateway().headers().then(() => 'ok'), 'ok');
    // An upstream that stopped (removed on reload) is forgotten.
    events.emit('upstream.stopped', { upstream: 'slow' });
    assert.deepEqual(status.credentialStatus().map((s) => s.upstream).sort(), ['refusing', 'unavailable']);
    // A caller's failure is the caller's: the gateway's own credential is what /readyz is about.
    events.emit('upstream.token', { upstream: 'wiki', grant: 'token_exchange', outcome: 'refused', durationMs: 1, principal: 'key:ci', cause: 'no_subject_token' });
    assert.equal(status.credentialStatus().some((s) => s.upstream === 'wiki'), false);
    status.close();
  });

  it('repeats only RFC 6749 error codes from a server, never its text', () => {
    const refused = (oauthError: string) => failureOf(new UpstreamCredentialError({ upstream: 'u', step: 'token', reason: 'oauth_error', status: 400, oauthError, detail: 'x' }));
    assert.deepEqual(refused('invalid_grant'), { outcome: 'refused', cause: 'oauth_error', oauthError: 'invalid_grant', status: 400 });
    assert.deepEqual(refused('eyJhbGciOiJFUzI1NiJ9.e30.sig'), { outcome: 'refused', cause: 'oauth_error', status: 400 }, 'a token-shaped "code" is dropped');
    assert.deepEqual(failureOf(new Error('boom')), { outcome: 'error' });
  });
});
