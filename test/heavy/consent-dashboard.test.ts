// The dashboard's Connections view in a real headless Chromium (issue 41): a browser not signed in is offered the
// front door's sign-in, goes through the issuer fixture and comes back to the dashboard signed in; it lists the
// user's upstreams with a link to connect, the link's consent page is reached, its link goes through the third-party
// authorization server (the real consent core behind the routes) and back to the callback, which connects, and
// Disconnect (a same-origin DELETE with the session cookie) removes the connection. Every wait is for the page to
// show something, bounded by a timeout that only guards against hangs.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'puppeteer-core';
import { clickNow, launchChromium } from '../helpers/dashboard-browser.js';
import { DASHBOARD_PATH, startConsentApp, type ConsentApp } from '../helpers/consent-http-app.js';

const WAIT = { timeout: 30_000 };

describe('dashboard Connections view', () => {
  let setup: ConsentApp;
  let browser: Browser;
  before(async () => {
    setup = await startConsentApp({ dashboard: true });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await setup?.close();
  });

  it('signs in, connects through the link, and disconnects', async () => {
    setup.issuer.setAutoLogin('alice');
    const principal = `oauth:${setup.issuer.issuer}#alice`;
    const page = await browser.newPage();
    await page.goto(`${setup.origin}${DASHBOARD_PATH}/`);
    await page.waitForSelector('#connections-signin:not([hidden]) a#connections-signin-link', WAIT);
    await Promise.all([page.waitForNavigation(WAIT), page.click('#connections-signin-link')]);
    assert.equal(new URL(page.url()).pathname, `${DASHBOARD_PATH}/`, 'back on the dashboard after signing in');
    await page.waitForSelector('#connection-list li[data-upstream="gh"][data-connected="false"] a.connect', WAIT);

    const connectUrl = await page.$eval('#connection-list li[data-upstream="gh"] a.connect', (a) => a.getAttribute('href'));
    assert.match(String(connectUrl), new RegExp(`^${setup.origin}/connect/`));
    const consent = await browser.newPage();
    await consent.goto(String(connectUrl));
    await consent.waitForSelector('#server-host', WAIT);
    assert.equal(await consent.$eval('#server-host', (e) => e.textContent), new URL(setup.thirdParty.issuer).host);
    const authorize = await consent.$eval('#continue', (a) => a.getAttribute('href'));
    assert.ok(authorize?.startsWith(`${setup.thirdParty.authorizationEndpoint}?`));
    // The authorization server approves at once and sends the browser back to the callback.
    await Promise.all([consent.waitForNavigation(WAIT), consent.click('#continue')]);
    assert.equal(new URL(consent.url()).pathname, '/oauth/callback');
    await consent.waitForSelector('#upstream', WAIT);
    assert.match(String(await consent.$eval('h1', (e) => e.textContent)), /Connected gh/);
    assert.ok(await setup.connections.isConnected(principal, 'gh'));
    await consent.close();

    // Coming back to the tab asks again; a reload does the same here.
    await page.reload();
    await page.waitForSelector('#connection-list li[data-upstream="gh"][data-connected="true"] button.disconnect', WAIT);
    await clickNow(page, '#connection-list li[data-upstream="gh"] button.disconnect');
    await page.waitForSelector('#connection-list li[data-upstream="gh"][data-connected="false"]', WAIT);
    assert.equal(await setup.connections.isConnected(principal, 'gh'), false);
    await page.close();
  });
});
