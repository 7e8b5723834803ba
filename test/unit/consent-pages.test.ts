// The browser side of per-user consent in pieces (src/http/consent/): pages escape every value and carry headers
// that keep them unframed, uncached and without a referrer; the consent page names the server's host with its port;
// returnTo accepts only paths of the gateway; session cookies are signed so any replica with the store's secret
// knows them and nothing else passes; cookies carry the attributes each needs; access rules decide which upstreams
// a caller is shown.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import type { ConsentPage, ConsentRefusal } from '../../src/consent/ports.js';
import { BrowserSessions, SESSION_TTL_MS } from '../../src/http/consent/browser-session.js';
import { browserBinding, clearCookie, cookieNames, matchesBinding, setCookie } from '../../src/http/consent/cookies.js';
import { escapeHtml, pageHeaders, sendPage } from '../../src/http/consent/html.js';
import { consentPage, consentRefusalPage, connectedPage } from '../../src/http/consent/pages.js';
import { publicOrigin } from '../../src/consent/settings.js';
import { safeReturnTo } from '../../src/http/consent/return-to.js';
import { couldMatchUnder, usableUpstreams } from '../../src/http/consent/usable-upstreams.js';
import { clientMetadataDocument } from '../../src/consent/clients.js';

const HOSTILE = `<script>alert("x")</script>&'\``;

function page(overrides: Partial<ConsentPage> = {}): ConsentPage {
  return {
    upstream: 'github',
    issuer: 'https://auth.example:8443/tenant',
    serverHost: 'auth.example:8443',
    scopes: ['repo', 'read:user'],
    authorizeUrl: 'https://auth.example:8443/authorize?client_id=c&state=s&code_challenge=x',
    browserCookie: 'cookie-value',
    ...overrides,
  };
}

describe('consent pages', () => {
  it('escapes every character that could open markup or leave an attribute', () => {
    assert.equal(escapeHtml(HOSTILE), '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;&#96;');
  });

  it('the consent page names the upstream, the server host with its port and the scopes, and links on without script', () => {
    const shown = consentPage(page(), 'oauth:https://issuer.example#alice');
    assert.equal(shown.status, 200);
    assert.match(shown.body, /<strong id="server-host">auth\.example:8443<\/strong>/);
    assert.match(shown.body, /<span id="upstream">github<\/span>/);
    assert.match(shown.body, /<li>repo<\/li><li>read:user<\/li>/);
    assert.match(shown.body, /<a class="button" id="continue" href="https:\/\/auth\.example:8443\/authorize\?client_id=c&amp;state=s&amp;code_challenge=x">/);
    assert.match(shown.body, /Signed in as <strong>alice<\/strong>/);
    assert.doesNotMatch(shown.body, /<script|<meta http-equiv/i, 'no script and no automatic redirect: the user sees what is asked');
    assert.deepEqual(shown.formActions, ['https://auth.example:8443']);
    assert.doesNotMatch(shown.body, /cookie-value/, 'the cookie value never appears in the page');
  });

  it('escapes hostile upstream names, scopes, issuers and URLs', () => {
    const shown = consentPage(page({ upstream: HOSTILE, scopes: [HOSTILE], issuer: `https://a.example/${HOSTILE}`, serverHost: HOSTILE, authorizeUrl: `https://a.example/authorize?x="><script>` }), `key:${HOSTILE}`);
    assert.doesNotMatch(shown.body, /<script/);
    assert.doesNotMatch(connectedPage(HOSTILE).body, /<script/);
  });

  it('every refusal is a 4xx page', () => {
    const reasons: ConsentRefusal[] = ['link_unknown', 'wrong_user', 'state_unknown', 'state_mismatch', 'issuer_mismatch', 'denied', 'untrusted_server', 'exchange_failed'];
    for (const reason of reasons) {
      const refused = consentRefusalPage(reason);
      assert.ok(refused.status >= 400 && refused.status < 500, `${reason}: ${refused.status}`);
    }
    assert.equal(consentRefusalPage('wrong_user').status, 403);
    assert.equal(consentRefusalPage('link_unknown').status, 404);
  });

  it('pages are sent unframed, uncached, without a referrer, forms only to the gateway and the named server', async () => {
    const app = Fastify();
    app.get('/p', async (_request, reply) => sendPage(reply, consentPage(page(), 'key:alice'), [setCookie('c', 'v', { path: '/oauth/callback', maxAgeS: 600, secure: true })]));
    const answer = await app.inject({ url: '/p' });
    assert.equal(answer.statusCode, 200);
    assert.equal(answer.headers['content-security-policy'], "default-src 'none'; style-src 'self' 'unsafe-inline'; base-uri 'none'; frame-ancestors 'none'; form-action https://auth.example:8443 'self'");
    assert.equal(answer.headers['x-frame-options'], 'DENY');
    assert.equal(answer.headers['referrer-policy'], 'no-referrer');
    assert.equal(answer.headers['cache-control'], 'no-store');
    assert.match(String(answer.headers['content-type']), /^text\/html/);
    assert.deepEqual(answer.headers['set-cookie'], ['c=v; Path=/oauth/callback; Max-Age=600; HttpOnly; SameSite=Lax; Secure']);
    assert.match(pageHeaders()['content-security-policy']!, /form-action 'self'$/);
    await app.close();
  });
});

describe('returnTo', () => {
  it('accepts paths of the gateway only', () => {
    for (const ok of ['/', '/connect/abc_DEF-123', '/dashboard/?status=working', '/a/b#c']) assert.equal(safeReturnTo(ok), ok);
    for (const bad of ['//evil.example', '/\\evil.example', 'https://evil.example/', 'javascript:alert(1)', 'connect/x', '', '/\t/evil.example', '/\n/evil', '/x\\y', 42, undefined, `/${'a'.repeat(3000)}`]) {
      assert.equal(safeReturnTo(bad), undefined, JSON.stringify(bad));
    }
  });
});

describe('cookies', () => {
  it('carry HttpOnly and SameSite=Lax always, Secure on https, and prefixed names there', () => {
    assert.equal(setCookie('n', 'abc.DEF_-1', { path: '/', maxAgeS: 60, secure: false }), 'n=abc.DEF_-1; Path=/; Max-Age=60; HttpOnly; SameSite=Lax');
    assert.equal(clearCookie('n', '/x', true), 'n=; Path=/x; Max-Age=0; HttpOnly; SameSite=Lax; Secure');
    assert.throws(() => setCookie('n', 'a;b', { path: '/', maxAgeS: 1, secure: false }));
    assert.equal(cookieNames(true).session, '__Host-taskgate-session');
    assert.equal(cookieNames(false).session, 'taskgate-session');
  });

  it('a flow stores only the SHA-256 of its browser cookie, and only that cookie matches it', () => {
    const binding = browserBinding('value-1');
    assert.notEqual(binding, 'value-1');
    assert.ok(matchesBinding('value-1', binding));
    assert.ok(!matchesBinding('value-2', binding));
    assert.ok(!matchesBinding(undefined, binding));
  });
});

describe('browser sessions', () => {
  const secret = randomBytes(32);
  const sessions = (now: () => number = Date.now, key: Buffer = secret, secure = false) => new BrowserSessions({ secret: async () => key, secure: () => secure, now });

  it('a session signed by one replica is recognised by another with the same store secret', async () => {
    const principal = 'oauth:https://issuer.example/a.b#alice.smith';
    const value = await sessions().sign(principal, Date.now() + 60_000);
    assert.equal(await sessions().verify(value), principal);
    assert.ok(!value.includes('alice'), 'the principal is encoded, not written out');
  });

  it('refuses a changed principal, expiry or signature, another secret, and an expired session', async () => {
    let now = 1_000_000;
    const own = sessions(() => now);
    const value = await own.sign('key:alice', now + SESSION_TTL_MS);
    const [version, principal, expiry, signature] = value.split('.') as [string, string, string, string];
    const forged = Buffer.from('key:mallory').toString('base64url');
    assert.equal(await own.verify([version, forged, expiry, signature].join('.')), undefined);
    assert.equal(await own.verify([version, principal, String(Number(expiry) + 1), signature].join('.')), undefined);
    assert.equal(await own.verify([version, principal, expiry, `${signature.slice(0, -2)}AA`].join('.')), undefined);
    assert.equal(await own.verify(`${value}.x`), undefined);
    assert.equal(await own.verify('garbage'), undefined);
    assert.equal(await sessions(() => now, randomBytes(32)).verify(value), undefined);
    now += SESSION_TTL_MS - 1;
    assert.equal(await own.verify(value), 'key:alice');
    now += 1;
    assert.equal(await own.verify(value), undefined, 'expired');
  });

  it('issues an HttpOnly SameSite=Lax cookie for the whole origin, Secure and __Host- on https, read back from a request', async () => {
    const secure = sessions(Date.now, secret, true);
    const header = await secure.issue('key:alice');
    assert.match(header, /^__Host-taskgate-session=v1\.[^;]+; Path=\/; Max-Age=28800; HttpOnly; SameSite=Lax; Secure$/);
    const app = Fastify();
    app.get('/who', async (request) => ({ who: (await secure.browserPrincipal(request)) ?? null }));
    const cookie = header.split(';')[0]!;
    assert.deepEqual((await app.inject({ url: '/who', headers: { cookie: `other=1; ${cookie}` } })).json(), { who: 'key:alice' });
    assert.deepEqual((await app.inject({ url: '/who', headers: { cookie: cookie.replace('__Host-', '') } })).json(), { who: null });
    assert.deepEqual((await app.inject({ url: '/who' })).json(), { who: null });
    assert.match(secure.clear(), /^__Host-taskgate-session=; Path=\/; Max-Age=0;/);
    await app.close();
  });
});

describe('which upstreams a caller is shown', () => {
  const config = (access?: unknown) =>
    parseConfig(
      stringify({
        upstreams: {
          gh: { transport: 'streamable-http', url: 'http://127.0.0.1:1/mcp', prefix: 'gh_', tools: { overrides: { search: { name: 'find' } } } },
          lin: { transport: 'streamable-http', url: 'http://127.0.0.1:2/mcp', prefix: 'lin_' },
        },
        auth: { resource: 'https://gw.example/mcp', apiKeys: [{ principal: 'alice', key: 'alice-key-0123456789' }], ...(access === undefined ? {} : { access }) },
      }),
      'usable.yaml',
      {},
    );
  const alice = { credential: 'key' as const, name: 'alice', scopes: [] as string[] };

  it('a glob can match a name under a prefix when its literal head agrees with it', () => {
    assert.ok(couldMatchUnder('gh_*', 'gh_'));
    assert.ok(couldMatchUnder('g*', 'gh_'));
    assert.ok(couldMatchUnder('*', 'gh_'));
    assert.ok(couldMatchUnder('gh_search', 'gh_'));
    assert.ok(!couldMatchUnder('lin_*', 'gh_'));
    assert.ok(!couldMatchUnder('gh', 'gh_'));
    assert.ok(!couldMatchUnder('gh_', 'gh_'));
  });

  it('every such upstream without rules; with rules, those where a rule that applies grants a tool', () => {
    assert.deepEqual(usableUpstreams({ config: config(), subject: alice, upstreams: ['gh', 'lin'] }), ['gh', 'lin']);
    const rules = [{ principals: ['alice'], tools: ['lin_*'] }, { principals: ['bob'], tools: ['*'] }];
    assert.deepEqual(usableUpstreams({ config: config(rules), subject: alice, upstreams: ['gh', 'lin'] }), ['lin']);
    assert.deepEqual(usableUpstreams({ config: config([{ principals: ['alice'], tools: ['gh_find'] }]), subject: alice, upstreams: ['gh', 'lin'] }), ['gh'], 'a renamed tool counts');
    assert.deepEqual(usableUpstreams({ config: config([{ scopes: ['s'], tools: ['*'] }]), subject: alice, upstreams: ['gh', 'lin'] }), [], 'a scope rule does not apply without the scope');
    const known = (upstream: string) => (upstream === 'gh' ? ['gh_issues'] : undefined);
    assert.deepEqual(usableUpstreams({ config: config([{ principals: ['alice'], tools: ['gh_search*', 'lin_*'] }]), subject: alice, upstreams: ['gh', 'lin'], toolsOf: known }), ['lin'], 'a known catalog decides by its tools');
  });

  it('links are built on listen.publicUrl, else the origin of auth.resource', () => {
    assert.equal(publicOrigin(config()), 'https://gw.example');
    assert.equal(publicOrigin({ ...config(), listen: { ...config().listen, publicUrl: 'https://public.example/' } }), 'https://public.example');
    const document = clientMetadataDocument('https://public.example');
    assert.equal(document.client_id, 'https://public.example/oauth/client-metadata.json');
    assert.deepEqual(document.redirect_uris, ['https://public.example/oauth/callback']);
    assert.equal(document.token_endpoint_auth_method, 'none');
  });
});
