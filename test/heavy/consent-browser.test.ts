// Per-user consent in a real headless Chromium (issue 41), with JavaScript off as a user's browser may have it: an SDK
// client is refused -32042 with a link; the link opened in Chromium signs the browser in at the front door's issuer
// (its login form filled in the page), shows the gateway's consent page, whose link leads to the third-party
// authorization server's consent page, where Approve is clicked; the browser lands on the gateway's "connected" page,
// the client is told the elicitation completed, and its next call runs as the user. And the consent page cannot be
// framed: an iframe of it on a page from another origin is refused by the browser itself. Every wait is for the page
// or the client to show something, bounded by a timeout that only guards against hangs.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UrlElicitationRequiredError } from '@modelcontextprotocol/sdk/types.js';
import type { Browser, HTTPResponse, Page } from 'puppeteer-core';
import { USER_COOKIE } from '../fixtures/third-party-as.js';
import { consentSetup, type ConsentSetup } from '../helpers/consent-gateway.js';
import { launchChromium } from '../helpers/dashboard-browser.js';
import { eventually, testScope, textOf, type TestScope } from '../helpers/harness.js';

const WAIT = { timeout: 30_000 };

interface UserClient {
  client: Client;
  /** elicitationIds of notifications/elicitation/complete received. */
  completed: string[];
}

/** A 2025-11-25 SDK client as `user`, declaring URL elicitation, recording the completions it is told of. */
async function clientAs(scope: TestScope, setup: ConsentSetup, user: string): Promise<UserClient> {
  const token = await setup.tokenFor(user);
  const client = new Client({ name: `browser-${user}`, version: '1.0.0' }, { capabilities: { elicitation: { url: {} } } });
  const completed: string[] = [];
  client.fallbackNotificationHandler = async (notification) => {
    if (notification.method === 'notifications/elicitation/complete') completed.push(String((notification.params as { elicitationId?: unknown }).elicitationId));
  };
  await client.connect(new StreamableHTTPClientTransport(new URL(setup.resource), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  scope.defer(() => client.close());
  return { client, completed };
}

/** The link and elicitation id a plain call was refused with (-32042). */
async function refusal(client: Client): Promise<{ url: string; elicitationId: string }> {
  const error = await client.callTool({ name: 'tp_whoami', arguments: {} }).then(
    () => assert.fail('the call ran without a connection'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof UrlElicitationRequiredError, `expected -32042, got ${String(error)}`);
  const [elicitation] = error.elicitations;
  assert.ok(elicitation !== undefined && elicitation.mode === 'url');
  return { url: elicitation.url, elicitationId: elicitation.elicitationId };
}

/** On the issuer's login form: types `user` and submits, waiting for where the browser is sent. */
async function signInOnForm(page: Page, user: string): Promise<void> {
  await page.waitForSelector('form input[name="username"]', WAIT);
  await page.type('input[name="username"]', user);
  await Promise.all([page.waitForNavigation(WAIT), page.click('form button[type="submit"]')]);
}

describe('per-user consent in Chromium', () => {
  let browser: Browser;
  before(async () => {
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
  });

  it('a -32042 link: the issuer login form, the consent page, Approve at the third party, connected; the next call runs as the user', async (t) => {
    const scope = testScope(t);
    const setup = await consentSetup(scope, { thirdParty: { consent: 'page' } });
    const alice = await clientAs(scope, setup, 'alice');
    const asked = await refusal(alice.client);
    assert.match(asked.url, new RegExp(`^${setup.origin}/connect/`));

    const context = await browser.createBrowserContext();
    scope.defer(() => context.close());
    const page = await context.newPage();
    await page.setJavaScriptEnabled(false);
    await context.setCookie({ name: USER_COOKIE, value: 'alice-gh', domain: '127.0.0.1', path: '/' });
    await page.goto(asked.url, WAIT);
    // Not signed in at the gateway: sent to the front door's issuer, whose form signs alice in.
    assert.equal(new URL(page.url()).origin, setup.issuer.issuer);
    await signInOnForm(page, 'alice');

    // Back on the gateway's consent page: what is asked and where the browser goes next.
    assert.equal(new URL(page.url()).href, asked.url);
    assert.equal(await page.$eval('#upstream', (e) => e.textContent), 'tp');
    assert.equal(await page.$eval('#server-host', (e) => e.textContent), new URL(setup.thirdParty.issuer).host);
    await Promise.all([page.waitForNavigation(WAIT), page.click('#continue')]);

    // The third party's own consent page.
    assert.equal(new URL(page.url()).origin, setup.thirdParty.issuer);
    await page.waitForSelector('button[name="decision"][value="approve"]', WAIT);
    assert.equal(setup.upstream.counts().toolCallsByUser['alice-gh'] ?? 0, 0, 'nothing ran yet');
    await Promise.all([page.waitForNavigation(WAIT), page.click('button[name="decision"][value="approve"]')]);

    assert.equal(`${new URL(page.url()).origin}${new URL(page.url()).pathname}`, `${setup.origin}/oauth/callback`);
    assert.match(String(await page.$eval('h1', (e) => e.textContent)), /Connected tp/);
    await eventually(() => alice.completed.includes(asked.elicitationId));
    const result = await alice.client.callTool({ name: 'tp_whoami', arguments: {} });
    assert.equal((JSON.parse(textOf(result)) as { user: string }).user, 'alice-gh');
    assert.equal(setup.thirdParty.counts().codeExchanges, 1);
  });

  it('the consent page refuses to be framed by a page from another origin', async (t) => {
    const scope = testScope(t);
    const setup = await consentSetup(scope);
    const bob = await clientAs(scope, setup, 'bob');
    const asked = await refusal(bob.client);

    // A page of another origin (same host, another port) that frames the link.
    const framer = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end(`<!doctype html><title>framer</title><iframe id="victim" src="${asked.url}"></iframe>`);
    });
    await new Promise<void>((resolve) => framer.listen(0, '127.0.0.1', resolve));
    scope.defer(() => new Promise<void>((resolve) => framer.close(() => resolve())));
    const framerUrl = `http://127.0.0.1:${(framer.address() as AddressInfo).port}/`;

    const context = await browser.createBrowserContext();
    scope.defer(() => context.close());
    const page = await context.newPage();
    // Signed in at the gateway first (its session cookie is sent with the frame's request: same site).
    await page.goto(`${setup.origin}/oauth/login`, WAIT);
    await signInOnForm(page, 'bob');
    assert.match(String(await page.$eval('h1', (e) => e.textContent)), /Signed in/);

    const served: HTTPResponse[] = [];
    page.on('response', (response) => {
      if (response.url() === asked.url) served.push(response);
    });
    await page.goto(framerUrl, { ...WAIT, waitUntil: 'load' });
    // The gateway did serve its consent page to the frame, with headers that forbid framing it...
    const [consent] = served;
    assert.ok(consent !== undefined, 'the frame asked for the link');
    assert.equal(consent.status(), 200);
    assert.match(consent.headers()['content-security-policy'] ?? '', /frame-ancestors 'none'/);
    assert.equal(consent.headers()['x-frame-options'], 'DENY');
    // ...and the browser did not render it in the frame.
    const frame = page.frames().find((f) => f !== page.mainFrame());
    assert.ok(frame !== undefined);
    assert.match(frame.url(), /^chrome-error:/, 'the frame shows the browser\'s error page, not the link');
    assert.equal((await frame.$$('#continue')).length, 0, 'no consent page in the frame');
    assert.equal(setup.thirdParty.counts().authorizeRequests, 0);
  });
});
