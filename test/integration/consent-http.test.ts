// The browser side of per-user consent over real HTTP on loopback (issue 41): the front door's browser sign-in
// against the issuer fixture (code + PKCE S256 + nonce, state bound to the browser's cookie, the ID token checked),
// the session cookie it leaves, /connect/{id} (404 for an unknown link, sign-in first, 403 for another user's
// browser with nothing used or sent, the consent page and its state cookie), /oauth/callback, GET and DELETE
// /connections by bearer (as /mcp) and by session (own origin only), and the Client ID Metadata Document. The
// consent core is the real one (createUserConnections), connecting users at the third-party authorization server
// fixture (test/helpers/consent-http-app.ts).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LOGIN_CLIENT, startConsentApp, type ConsentApp } from '../helpers/consent-http-app.js';

/** A browser's cookies, as far as these tests need one: name → value, from Set-Cookie. */
class Browser {
  readonly jar = new Map<string, string>();
  readonly setCookies: string[] = [];

  async get(url: string, init: RequestInit = {}): Promise<Response> {
    const cookie = [...this.jar].map(([name, value]) => `${name}=${value}`).join('; ');
    const response = await fetch(url, { ...init, redirect: 'manual', headers: { ...(cookie === '' ? {} : { cookie }), ...(init.headers as Record<string, string> | undefined) } });
    for (const line of response.headers.getSetCookie()) {
      this.setCookies.push(line);
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      const value = pair.slice(eq + 1);
      if (/Max-Age=0/.test(line)) this.jar.delete(pair.slice(0, eq));
      else this.jar.set(pair.slice(0, eq), value);
    }
    return response;
  }

  /** Follows 302s from `url` (the issuer logs in as `user`), answering the last. */
  async follow(url: string, user: string, max = 6): Promise<Response> {
    let response = await this.get(url);
    for (let hop = 0; hop < max && response.status === 302; hop++) {
      await response.body?.cancel();
      const next = response.headers.get('location')!;
      const asIssuer = !next.startsWith('/') && !next.startsWith(new URL(url).origin);
      response = asIssuer ? await this.get(next, { headers: { cookie: `fixture_login=${user}` } }) : await this.get(new URL(next, url).href);
    }
    return response;
  }
}

/** Signs a new browser in as `user` through GET /oauth/login. */
async function signedIn(setup: ConsentApp, user: string): Promise<Browser> {
  const browser = new Browser();
  const answer = await browser.follow(`${setup.origin}/oauth/login`, user);
  assert.equal(answer.status, 200, await answer.text());
  assert.ok(browser.jar.has('taskgate-session'));
  return browser;
}

/** The consent page's link to the authorization server. */
function continueHref(html: string): string {
  const href = /<a class="button" id="continue" href="([^"]+)"/.exec(html)?.[1]?.replaceAll('&amp;', '&');
  assert.ok(href !== undefined, html);
  return href;
}

/** Opens `link` in `browser` (signing it in as `user` on the way), approves at the third party and lands connected. */
async function connectThrough(setup: ConsentApp, browser: Browser, link: string, user: string): Promise<void> {
  const page = await browser.follow(link, user);
  assert.equal(page.status, 200);
  // The authorization server approves at once and sends the browser back to the callback.
  const approved = await browser.get(continueHref(await page.text()));
  assert.equal(approved.status, 302);
  const done = await browser.get(approved.headers.get('location')!);
  assert.equal(done.status, 200, await done.text());
  assert.ok(await setup.connections.isConnected(`oauth:${setup.issuer.issuer}#${user}`, 'gh'));
}

function assertPageHeaders(response: Response): void {
  assert.match(response.headers.get('content-security-policy') ?? '', /^default-src 'none'; style-src 'self' 'unsafe-inline'; .*frame-ancestors 'none'; form-action .*'self'$/);
  assert.equal(response.headers.get('x-frame-options'), 'DENY');
  assert.equal(response.headers.get('referrer-policy'), 'no-referrer');
  assert.equal(response.headers.get('cache-control'), 'no-store');
}

describe('consent over HTTP', () => {
  let setup: ConsentApp;
  before(async () => {
    setup = await startConsentApp();
  });
  after(async () => {
    await setup.close();
  });

  it('signs a browser in at the front door by code + PKCE S256 with a nonce, and leaves a signed session cookie', async () => {
    const browser = new Browser();
    const first = await browser.get(`${setup.origin}/oauth/login?returnTo=${encodeURIComponent('/connections')}`);
    assert.equal(first.status, 302);
    const authorize = new URL(first.headers.get('location')!);
    assert.equal(`${authorize.origin}${authorize.pathname}`, `${setup.issuer.issuer}/authorize`);
    const asked = Object.fromEntries(authorize.searchParams);
    assert.equal(asked.client_id, LOGIN_CLIENT);
    assert.equal(asked.redirect_uri, `${setup.origin}/oauth/login/callback`);
    assert.equal(asked.code_challenge_method, 'S256');
    assert.equal(asked.response_type, 'code');
    assert.match(asked.scope ?? '', /\bopenid\b/);
    assert.ok((asked.state ?? '').length >= 32 && (asked.nonce ?? '').length >= 32);
    assert.match(browser.setCookies[0] ?? '', /^taskgate-login=[\w-]+; Path=\/oauth\/login\/callback; Max-Age=600; HttpOnly; SameSite=Lax$/);

    const back = await browser.get(authorize.href, { headers: { cookie: 'fixture_login=alice' } });
    assert.equal(back.status, 302);
    const done = await browser.get(back.headers.get('location')!);
    assert.equal(done.status, 302);
    assert.equal(done.headers.get('location'), '/connections', 'back where the sign-in was asked from');
    assert.ok(!browser.jar.has('taskgate-login'), 'the login cookie is cleared');
    const session = browser.setCookies.find((line) => line.startsWith('taskgate-session='));
    assert.match(session ?? '', /; Path=\/; Max-Age=28800; HttpOnly; SameSite=Lax$/);

    const listed = await browser.get(`${setup.origin}/connections`);
    assert.equal(listed.status, 200);
    const body = (await listed.json()) as { connections: { upstream: string; connected: boolean; connectUrl?: string }[] };
    assert.equal(body.connections.length, 1);
    assert.equal(body.connections[0]!.upstream, 'gh');
    assert.equal(body.connections[0]!.connected, false);
    assert.match(body.connections[0]!.connectUrl ?? '', new RegExp(`^${setup.origin}/connect/`));
    const last = setup.issuer.logins().at(-1);
    assert.equal(last?.outcome, 'code');
    assert.equal(last?.user, 'alice');
  });

  it('refuses a callback without its browser\'s cookie, and the state cannot be used again', async () => {
    const browser = new Browser();
    const first = await browser.get(`${setup.origin}/oauth/login`);
    const back = await browser.get(first.headers.get('location')!, { headers: { cookie: 'fixture_login=mallory' } });
    const callback = back.headers.get('location')!;
    const stranger = await fetch(callback, { redirect: 'manual' });
    assert.equal(stranger.status, 403);
    assertPageHeaders(stranger);
    assert.match(await stranger.text(), /another browser/i);
    const replay = await browser.get(callback);
    assert.equal(replay.status, 400, 'the state was used up by the refused attempt');
    assert.ok(!browser.jar.has('taskgate-session'));
  });

  it('sends a returnTo only to a path of the gateway', async () => {
    for (const returnTo of ['//evil.example/x', 'https://evil.example/', '/\\evil.example']) {
      const answer = await fetch(`${setup.origin}/oauth/login?returnTo=${encodeURIComponent(returnTo)}`, { redirect: 'manual' });
      assert.equal(answer.status, 400, returnTo);
      await answer.body?.cancel();
    }
  });

  it('/connect/{id}: unknown 404; sign-in first; the consent page and its state cookie; the callback connects once', async () => {
    const unknown = await fetch(`${setup.origin}/connect/unknown-link-id-0000`, { redirect: 'manual' });
    assert.equal(unknown.status, 404);
    assertPageHeaders(unknown);
    await unknown.body?.cancel();

    const { url } = await setup.connections.request('oauth:' + setup.issuer.issuer + '#carol', 'gh', 'connections');
    const browser = new Browser();
    const page = await browser.follow(url, 'carol');
    assert.equal(page.status, 200);
    assertPageHeaders(page);
    const asOrigin = setup.thirdParty.issuer;
    const asHost = new URL(asOrigin).host;
    assert.ok(page.headers.get('content-security-policy')!.endsWith(`form-action ${asOrigin} 'self'`), page.headers.get('content-security-policy')!);
    const html = await page.text();
    assert.match(html, /<span id="upstream">gh<\/span>/);
    assert.ok(html.includes(`<strong id="server-host">${asHost}</strong>`), 'the server host with its port');
    assert.match(html, /<li>repo<\/li>/);
    const href = continueHref(html);
    assert.ok(href.startsWith(`${setup.thirdParty.authorizationEndpoint}?`));
    const stateCookie = browser.setCookies.find((line) => line.startsWith('taskgate-consent='));
    assert.match(stateCookie ?? '', /; Path=\/oauth\/callback; Max-Age=600; HttpOnly; SameSite=Lax$/);

    // The authorization server approves at once and sends the browser back with a code, the state and its issuer.
    const approved = await browser.get(href);
    assert.equal(approved.status, 302);
    const callback = approved.headers.get('location')!;
    const back = new URL(callback);
    assert.equal(`${back.origin}${back.pathname}`, `${setup.origin}/oauth/callback`);
    assert.equal(back.searchParams.get('state'), new URL(href).searchParams.get('state'));
    assert.equal(back.searchParams.get('iss'), asOrigin);
    const connected = await browser.get(callback);
    assert.equal(connected.status, 200);
    assertPageHeaders(connected);
    assert.match(await connected.text(), /Connected <span id="upstream">gh<\/span>/);
    assert.ok(!browser.jar.has('taskgate-consent'), 'the state cookie is cleared');
    assert.ok(await setup.connections.isConnected(`oauth:${setup.issuer.issuer}#carol`, 'gh'));
    const replay = await fetch(callback, { redirect: 'manual' });
    assert.equal(replay.status, 400);
    await replay.body?.cancel();
    const again = await browser.get(url);
    assert.equal(again.status, 404, 'a link is single use');
    await again.body?.cancel();
  });

  it("a link opened in another user's browser is refused 403: the link stays unused, nothing is stored or sent", async () => {
    const alice = `oauth:${setup.issuer.issuer}#alice`;
    const { url } = await setup.connections.request(alice, 'gh', 'connections');
    const id = url.split('/').at(-1)!;
    const bob = await signedIn(setup, 'bob');
    const logins = setup.issuer.logins().length;
    const asRequests = setup.thirdParty.requests().length;
    const refused = await bob.get(url);
    assert.equal(refused.status, 403);
    assertPageHeaders(refused);
    assert.match(await refused.text(), /someone else/i);
    assert.ok(!bob.jar.has('taskgate-consent'), 'no state cookie');
    assert.deepEqual(setup.refusals.at(-1), { principal: alice, upstream: 'gh', reason: 'wrong_user' });
    assert.ok((await setup.store.connections.getLink(id)) !== undefined, 'the link stays unused');
    assert.equal(setup.issuer.logins().length, logins, 'nothing sent to any server');
    assert.equal(setup.thirdParty.requests().length, asRequests, 'nothing sent to the authorization server');
    assert.equal(await setup.connections.isConnected(alice, 'gh'), false);
  });

  it('GET and DELETE /connections by bearer as /mcp; 401 with the challenge without credentials', async () => {
    const none = await fetch(`${setup.origin}/connections`);
    assert.equal(none.status, 401);
    assert.match(none.headers.get('www-authenticate') ?? '', /^Bearer resource_metadata="/);
    await none.body?.cancel();
    const wrong = await fetch(`${setup.origin}/connections`, { headers: { authorization: 'Bearer nope' } });
    assert.equal(wrong.status, 401);
    await wrong.body?.cancel();

    const dave = `oauth:${setup.issuer.issuer}#dave`;
    const token = await setup.issuer.mint({ sub: 'dave', aud: `${setup.origin}/mcp` });
    const auth = { authorization: `Bearer ${token}` };
    const before = (await (await fetch(`${setup.origin}/connections`, { headers: auth })).json()) as { connections: { connected: boolean }[] };
    assert.deepEqual(before.connections.map((c) => c.connected), [false]);
    const gone = await fetch(`${setup.origin}/connections/gh`, { method: 'DELETE', headers: auth });
    assert.equal(gone.status, 404, 'no connection to remove');
    await gone.body?.cancel();

    const { url } = await setup.connections.request(dave, 'gh', 'connections');
    await connectThrough(setup, new Browser(), url, 'dave');
    const listed = (await (await fetch(`${setup.origin}/connections`, { headers: auth })).json()) as { connections: { upstream: string; connected: boolean; scopes: string[]; expiresAt?: string }[] };
    assert.equal(listed.connections[0]?.connected, true);
    assert.deepEqual(listed.connections[0]?.scopes, ['repo']);
    assert.ok(listed.connections[0]?.expiresAt !== undefined);
    const unknownUpstream = await fetch(`${setup.origin}/connections/nope`, { method: 'DELETE', headers: auth });
    assert.equal(unknownUpstream.status, 404);
    await unknownUpstream.body?.cancel();
    const revocations = setup.thirdParty.counts().revocations;
    const removed = await fetch(`${setup.origin}/connections/gh`, { method: 'DELETE', headers: auth });
    assert.equal(removed.status, 204);
    assert.equal(await setup.connections.isConnected(dave, 'gh'), false);
    assert.ok(setup.thirdParty.counts().revocations > revocations, 'the grant is revoked at the authorization server');
  });

  it("a signed-in browser disconnects only from the gateway's own origin", async () => {
    const erin = `oauth:${setup.issuer.issuer}#erin`;
    const browser = await signedIn(setup, 'erin');
    const { url } = await setup.connections.request(erin, 'gh', 'connections');
    await connectThrough(setup, browser, url, 'erin');

    const crossSite: Record<string, string>[] = [{}, { origin: 'http://127.0.0.1:9' }, { origin: setup.origin, 'sec-fetch-site': 'same-site' }];
    for (const headers of crossSite) {
      const refused = await browser.get(`${setup.origin}/connections/gh`, { method: 'DELETE', headers });
      assert.equal(refused.status, 403, JSON.stringify(headers));
      await refused.body?.cancel();
    }
    assert.ok(await setup.connections.isConnected(erin, 'gh'));
    const removed = await browser.get(`${setup.origin}/connections/gh`, { method: 'DELETE', headers: { origin: setup.origin, 'sec-fetch-site': 'same-origin' } });
    assert.equal(removed.status, 204);
    assert.equal(await setup.connections.isConnected(erin, 'gh'), false);
  });

  it('serves the Client ID Metadata Document at its own URL', async () => {
    const answer = await fetch(`${setup.origin}/oauth/client-metadata.json`);
    assert.equal(answer.status, 200);
    const document = (await answer.json()) as Record<string, unknown>;
    assert.equal(document.client_id, `${setup.origin}/oauth/client-metadata.json`);
    assert.deepEqual(document.redirect_uris, [`${setup.origin}/oauth/callback`]);
    assert.deepEqual(document.grant_types, ['authorization_code', 'refresh_token']);
  });

  it('no code, state, token or cookie value reaches the log', () => {
    const log = setup.logLines.join('\n');
    for (const secret of [...setup.issuer.logins().flatMap((l) => [l.state, l.nonce])].filter((v): v is string => v !== undefined)) {
      assert.ok(!log.includes(secret), 'a state or nonce was logged');
    }
    // What the authorization server was sent and gave: states, codes, verifiers, refresh tokens, client secrets.
    const sent = setup.thirdParty.requests().flatMap((r) => [r.query.state, r.form.code, r.form.code_verifier, r.form.refresh_token, r.form.token]);
    const secrets = [...sent, ...setup.thirdParty.clients().map((c) => c.secret)].filter((v): v is string => v !== undefined && v.length >= 8);
    assert.ok(secrets.length > 0, 'the authorization server was used');
    for (const secret of secrets) assert.ok(!log.includes(secret), 'a value sent to or by the authorization server was logged');
    assert.doesNotMatch(log, /code=|code_verifier|eyJ/);
  });
});
