// The task dashboard in a real headless Chromium (test/helpers/dashboard-browser.ts): real gateway, real fixture upstream, tasks
// made by the SDK client. Every wait is for the page to show something (waitForSelector/waitForFunction), bounded
// by a generous timeout that only guards against hangs.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Browser, HTTPRequest, Page } from 'puppeteer-core';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { eventually, fixtureExecutions, suiteScope, testScope, type TestGateway } from '../helpers/harness.js';
import { deleteRedisPrefixes, TEST_REDIS_URL, uniqueRedisPrefix } from '../helpers/shared-redis.js';
import { redisKeys } from '../../src/store/redis-keys.js';
import { approvalDigest } from '../../src/tasks/call-digest.js';
import { clickNow, launchChromium, startTask } from '../helpers/dashboard-browser.js';
import { bearer } from '../helpers/auth-requests.js';
import { GATEWAY_CLIENT, whoamiOf } from '../helpers/identity-gateway.js';
import { HANG_MS } from '../helpers/waits.js';
import { startAuthServer, type AuthServer } from '../fixtures/auth-server.js';
import { startProtectedServer, type ProtectedServer } from '../fixtures/protected-server.js';
import { freePort } from '../fixtures/spawn.js';

const WAIT = { timeout: 30_000 };
const TASKS = { defaults: { mode: 'optional', pollIntervalMs: 100 } };
const OPS_KEY = 'dashboard-ops-key-0123456789';
const ALICE_KEY = 'dashboard-alice-key-0123456789';
const ROBOT_KEY = 'dashboard-robot-key-0123456789';
const AGENT_KEY = 'dashboard-agent-key-0123456789';

type Json = Record<string, unknown>;

/** A GET, or a POST as the dashboard's page sends it (a JSON body, `{}` unless given) unless `contentType` or `origin` say otherwise. */
async function getJson(
  url: string,
  options: { token?: string; method?: 'GET' | 'POST'; contentType?: string; origin?: string } = {},
  body = '{}',
): Promise<{ status: number; headers: Record<string, unknown>; body: Json }> {
  const post = options.method === 'POST';
  const headers: Record<string, string> = options.token === undefined ? {} : { authorization: `Bearer ${options.token}` };
  if (post) headers['content-type'] = options.contentType ?? 'application/json';
  if (options.origin !== undefined) headers.origin = options.origin;
  const answer = await request(url, {
    method: options.method ?? 'GET',
    headers,
    ...(post ? { body } : {}),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await answer.body.text();
  return { status: answer.statusCode, headers: answer.headers, body: text === '' ? {} : (JSON.parse(text) as Json) };
}

/** Rows the page shows now, as `taskId:status`. */
function rowsOf(page: Page): Promise<string[]> {
  return page.$$eval('#tasks tbody tr', (rows) => rows.map((row) => `${row.getAttribute('data-task-id')}:${row.getAttribute('data-status')}`));
}

/** Waits until the table shows exactly the tasks `ids` (in any status). */
async function untilRows(page: Page, ids: string[]): Promise<void> {
  await page.waitForFunction(
    (wanted: string[]) => {
      const shown = [...document.querySelectorAll('#tasks tbody tr')].map((row) => row.getAttribute('data-task-id'));
      return shown.length === wanted.length && wanted.every((id) => shown.includes(id));
    },
    WAIT,
    ids,
  );
}

describe('task dashboard, no auth: a running and a finished task, filters, detail, cancel', () => {
  const scope = suiteScope();
  let gateway: TestGateway;
  let client: Client;
  let browser: Browser;

  before(async () => {
    const upstream = await scope.upstream('streamable-http');
    gateway = await scope.gateway({ upstreams: { fx: upstream.config }, tasks: TASKS });
    ({ client } = await scope.client(gateway.url));
    browser = await launchChromium();
    scope.defer(() => browser.close());
  });

  test('the page lists both tasks with their columns, filters by status and tool, shows a detail, and cancels', async () => {
    const running = await startTask(client, 'slow', { ms: 600_000 });
    const finished = await startTask(client, 'report', { ms: 1 });
    await client.experimental.tasks.getTaskResult(finished, CallToolResultSchema); // blocks until it ended

    const page = await browser.newPage();
    await page.goto(`${gateway.origin}/ui`, WAIT);
    assert.equal(new URL(page.url()).pathname, '/ui/', 'the path without its slash redirects to the page');
    await page.waitForSelector(`tr[data-task-id="${running}"][data-status="working"]`, WAIT);
    await page.waitForSelector(`tr[data-task-id="${finished}"][data-status="completed"]`, WAIT);
    assert.deepEqual((await rowsOf(page)).slice(0, 2), [`${finished}:completed`, `${running}:working`], 'newest first');
    const cells = await page.$eval(`tr[data-task-id="${running}"]`, (row) => [...row.querySelectorAll('td')].map((td) => td.textContent));
    assert.equal(cells[0], 'working');
    assert.equal(cells[1], 'slow');
    assert.equal(cells[2], 'fx');
    assert.match(cells[3] ?? '', /^session:/, 'the principal: the session that made it');
    assert.match(cells[4] ?? '', /^\d+(s|m \d+s)$/, 'its age');
    assert.equal(cells[6], 'Cancel');
    assert.equal(await page.$(`tr[data-task-id="${finished}"] button.cancel`), null, 'a finished task has nothing to cancel');
    await page.waitForSelector('#upstreams li[data-state="ready"]', WAIT);
    assert.equal(await page.$eval('#upstreams li', (li) => li.textContent), 'fx');

    await page.select('#filter-status', 'working');
    await untilRows(page, [running]);
    assert.match(page.url(), /\?status=working$/, 'the filter is kept in the address');
    await page.select('#filter-status', 'completed');
    await untilRows(page, [finished]);
    await page.select('#filter-status', '');
    await untilRows(page, [finished, running]);
    await page.type('#filter-tool', 'report');
    await page.keyboard.press('Enter');
    await untilRows(page, [finished]);
    await page.click('#filter-clear');
    await untilRows(page, [finished, running]);

    await clickNow(page, `tr[data-task-id="${finished}"] td.tool`);
    await page.waitForSelector(`#detail[data-task-id="${finished}"]:not([hidden])`, WAIT);
    const timeline = await page.$$eval('#timeline li', (items) => items.map((li) => li.getAttribute('data-status')));
    assert.deepEqual(timeline, ['working', 'completed']);
    assert.match(await page.$eval('#outcome', (pre) => pre.textContent ?? ''), /report ready after 1 ms/);
    assert.equal(await page.$eval('#outcome-section', (section) => (section as HTMLElement).hidden), false);

    await page.click('#detail-close');
    await page.waitForSelector('#detail[hidden]', WAIT);
    // Cancel from the list: the first click arms the button, the second sends.
    await clickNow(page, `tr[data-task-id="${running}"] button.cancel`);
    await page.waitForSelector(`tr[data-task-id="${running}"] button.cancel.confirming`, WAIT);
    await clickNow(page, `tr[data-task-id="${running}"] button.cancel.confirming`);
    await page.waitForSelector(`tr[data-task-id="${running}"][data-status="cancelled"]`, WAIT);
    const task = await client.experimental.tasks.getTask(running);
    assert.equal(task.status, 'cancelled', 'recorded like a client cancel: the client sees it');
    assert.equal(task.statusMessage, 'The task was cancelled by request.');

    await clickNow(page, `tr[data-task-id="${running}"] td.tool`);
    await page.waitForSelector(`#detail[data-task-id="${running}"][data-status="cancelled"]`, WAIT);
    assert.deepEqual(await page.$$eval('#timeline li', (items) => items.map((li) => li.getAttribute('data-status'))), ['working', 'cancelled']);
    await page.close();
  });

  test('a page on another local origin cannot cancel (no-cors fetch, form); text/plain and foreign Origins are refused', async (t) => {
    const running = await startTask(client, 'slow', { ms: 600_000 });
    const cancelUrl = `${gateway.origin}/ui/api/tasks/${running}/cancel`;
    // The hostile page: what a browser sends cross-site without asking (no preflight), then says it is done.
    const hostile = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><body>
        <iframe name="sink"></iframe>
        <form id="form" method="POST" enctype="text/plain" target="sink" action="${cancelUrl}"><input name="x" value="1"></form>
        <script>
          (async () => {
            await fetch(${JSON.stringify(cancelUrl)}, { method: 'POST', mode: 'no-cors' }).catch(() => undefined);
            await fetch(${JSON.stringify(cancelUrl)}, { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{}' }).catch(() => undefined);
            document.querySelector('iframe').addEventListener('load', () => { document.body.dataset.done = 'yes'; }, { once: true });
            document.getElementById('form').submit();
          })();
        </script></body>`);
    });
    await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
    // The browser keeps its connections to the page open: close them, or close() waits for Chromium's idle timeout.
    t.after(() => new Promise((resolve) => { hostile.close(resolve); hostile.closeAllConnections(); }));
    const hostileOrigin = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
    const page = await browser.newPage();
    await page.goto(`${hostileOrigin}/`, WAIT);
    await page.waitForSelector('body[data-done="yes"]', WAIT);
    await page.close();
    assert.equal((await client.experimental.tasks.getTask(running)).status, 'working', 'the task keeps running');

    const plain = await getJson(cancelUrl, { method: 'POST', contentType: 'text/plain' });
    assert.equal(plain.status, 415);
    assert.match(String(plain.body.error), /Content-Type: application\/json/);
    const foreign = await getJson(cancelUrl, { method: 'POST', origin: hostileOrigin });
    assert.equal(foreign.status, 403);
    assert.match(String(foreign.body.error), /may not change state/);
    assert.equal((await client.experimental.tasks.getTask(running)).status, 'working', 'still running');
    const own = await getJson(cancelUrl, { method: 'POST', origin: gateway.origin });
    assert.equal(own.status, 200, JSON.stringify(own.body));
    assert.equal((await client.experimental.tasks.getTask(running)).status, 'cancelled', 'the gateway\'s own origin cancels');
  });

  test('the API: filters, bad input, unknown and finished tasks, and the page\'s headers', async () => {
    const done = await startTask(client, 'report', { ms: 1 });
    await client.experimental.tasks.getTaskResult(done, CallToolResultSchema);
    const api = `${gateway.origin}/ui/api`;
    const listed = await getJson(`${api}/tasks?status=completed&tool=report&limit=1`);
    assert.equal(listed.status, 200);
    assert.deepEqual((listed.body.tasks as Json[]).map((t) => t.taskId), [done]);
    assert.equal(typeof listed.body.nextCursor, 'string', 'an earlier completed report is left for the next page');
    const next = await getJson(`${api}/tasks?status=completed&tool=report&limit=1&cursor=${encodeURIComponent(listed.body.nextCursor as string)}`);
    assert.equal((next.body.tasks as Json[]).length, 1);
    assert.notEqual((next.body.tasks as Json[])[0]?.taskId, done);
    assert.equal((await getJson(`${api}/tasks?status=done`)).status, 400);
    assert.equal((await getJson(`${api}/tasks?cursor=forged`)).status, 400);
    assert.equal((await getJson(`${api}/tasks?limit=0`)).status, 400);
    assert.equal((await getJson(`${api}/tasks/no-such-task`)).status, 404);
    assert.equal((await getJson(`${api}/tasks/no-such-task/cancel`, { method: 'POST' })).status, 404);
    const again = await getJson(`${api}/tasks/${done}/cancel`, { method: 'POST' });
    assert.equal(again.status, 409);
    assert.match(String(again.body.error), /already completed/);
    const detail = await getJson(`${api}/tasks/${done}`);
    assert.equal((detail.body.outcome as Json).kind, 'result');
    assert.equal((detail.body.outcome as Json).truncated, false);
    assert.deepEqual((await getJson(`${api}/upstreams`)).body.upstreams, [(await getJson(`${gateway.origin}/readyz`)).body.upstreams].flat());

    const page = await request(`${gateway.origin}/ui/`);
    assert.equal(page.statusCode, 200);
    assert.match(String(page.headers['content-security-policy']), /script-src 'self'/);
    assert.match(await page.body.text(), /<script src="app.js"/);
    const script = await request(`${gateway.origin}/ui/app.js`);
    assert.match(String(script.headers['content-type']), /javascript/);
    await script.body.dump();
  });
});

describe('task dashboard with auth: admin principals and scopes, 401 and 403, the page asks for a key', () => {
  const scope = suiteScope();
  let gateway: TestGateway;
  let closed: TestGateway;
  let browser: Browser;
  let aliceTask: string;

  before(async () => {
    const upstream = await scope.upstream('streamable-http');
    const apiKeys = [
      { principal: 'ops', key: OPS_KEY },
      { principal: 'alice', key: ALICE_KEY },
      { principal: 'robot', key: ROBOT_KEY, scopes: ['taskgate:admin'] },
    ];
    gateway = await scope.gateway({
      upstreams: { fx: upstream.config },
      tasks: TASKS,
      auth: { resource: 'http://127.0.0.1/mcp', apiKeys, admin: { principals: ['key:ops'], scopes: ['taskgate:admin'] } },
    });
    // Auth without auth.admin: nobody may use the dashboard.
    closed = await scope.gateway({ upstreams: { fx: upstream.config }, tasks: TASKS, auth: { resource: 'http://127.0.0.1/mcp', apiKeys } });
    const alice = await scope.plainClient(gateway.url, { headers: { authorization: `Bearer ${ALICE_KEY}` } });
    aliceTask = await startTask(alice, 'slow', { ms: 600_000 });
    browser = await launchChromium();
    scope.defer(() => browser.close());
  });

  test('the API refuses without a key (401 + challenge) and a non-admin key (403); admits admins by principal or scope', async () => {
    const api = `${gateway.origin}/ui/api/tasks`;
    const anonymous = await getJson(api);
    assert.equal(anonymous.status, 401);
    assert.match(String(anonymous.headers['www-authenticate']), /^Bearer resource_metadata=/);
    assert.equal((await getJson(api, { token: 'not-a-key-at-all-0000' })).status, 401);
    const alice = await getJson(api, { token: ALICE_KEY });
    assert.equal(alice.status, 403);
    assert.match(String(alice.body.error), /not an admin/);
    assert.equal((await getJson(`${api}/${aliceTask}/cancel`, { token: ALICE_KEY, method: 'POST' })).status, 403, 'nor cancel');
    assert.equal((await getJson(`${api}/${aliceTask}/cancel`, { token: OPS_KEY, method: 'POST', contentType: 'text/plain' })).status, 415, 'an admin\'s write must be JSON too');
    assert.equal((await getJson(`${api}/${aliceTask}/cancel`, { token: OPS_KEY, method: 'POST', origin: 'http://127.0.0.1:1' })).status, 403, 'and come from no other origin');
    for (const token of [OPS_KEY, ROBOT_KEY]) {
      const admitted = await getJson(api, { token });
      assert.equal(admitted.status, 200);
      assert.deepEqual((admitted.body.tasks as Json[]).map((t) => [t.taskId, t.principal]), [[aliceTask, 'key:alice']], 'every principal\'s tasks');
    }
    const refused = await getJson(`${closed.origin}/ui/api/tasks`, { token: OPS_KEY });
    assert.equal(refused.status, 403, 'without auth.admin nobody is an admin');
    assert.match(String(refused.body.error), /auth\.admin is not configured/);
    const page = await request(`${gateway.origin}/ui/`);
    assert.equal(page.statusCode, 200, 'the page itself holds no data and is served to anyone');
    await page.body.dump();
  });

  test('the page asks for a key, says when it is not an admin\'s, and shows the tasks with an admin\'s', async () => {
    const page = await browser.newPage();
    await page.goto(`${gateway.origin}/ui/`, WAIT);
    await page.waitForSelector('#auth:not([hidden])', WAIT);
    await page.type('#auth-token', ALICE_KEY);
    await page.click('#auth-form button[type="submit"]');
    await page.waitForFunction(() => /not an admin/.test(document.getElementById('auth-reason')?.textContent ?? ''), WAIT);
    await page.type('#auth-token', OPS_KEY);
    await page.click('#auth-form button[type="submit"]');
    await page.waitForSelector(`tr[data-task-id="${aliceTask}"][data-status="working"]`, WAIT);
    assert.equal(await page.$eval(`tr[data-task-id="${aliceTask}"] td.principal`, (td) => td.textContent), 'key:alice');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('taskgate.dashboard.token')), OPS_KEY, 'kept for the tab');
    await page.close();
  });
});

describe('task dashboard: the identity a task\'s upstream sees, and whether a re-run can act for its caller', () => {
  const scope = suiteScope();
  let as: AuthServer;
  let upstream: ProtectedServer;
  let browser: Browser;
  /** Token exchange for callers, sealed callers kept (retry.onLoss), and an upstream with static headers beside it. */
  let exchanging: TestGateway;
  /** The gateway signs an identity for each caller (with claim headers), and keeps no sealed caller. */
  let signing: TestGateway;
  const sealingKey = randomBytes(32).toString('base64');

  /** A gateway fronted by the authorization server, admitting OPS_KEY as its admin, its upstreams as given. */
  async function gatewayWith(port: number, upstreams: Record<string, Json>, tools: string[], extra: Json = {}): Promise<TestGateway> {
    const origin = `http://127.0.0.1:${port}`;
    const gateway = await scope.gateway({
      listen: { host: '127.0.0.1', port, path: '/mcp' },
      tasks: { defaults: { mode: 'optional', pollIntervalMs: 100, retry: { onLoss: true } } },
      upstreams,
      auth: { resource: `${origin}/mcp`, oauth: { issuer: as.issuer }, apiKeys: [{ principal: 'ops', key: OPS_KEY }], admin: { principals: ['key:ops'] } },
      ...extra,
    });
    // Upstreams connect in the background: wait until the tools the tests call are listed.
    const lister = await callerToken(gateway, 'lister');
    const client = await scope.plainClient(gateway.url, { headers: bearer(lister) });
    await eventually(async () => {
      const listed = new Set((await client.listTools()).tools.map((tool) => tool.name));
      return tools.every((name) => listed.has(name));
    }, HANG_MS);
    return gateway;
  }

  function callerToken(gateway: TestGateway, sub: string): Promise<string> {
    return as.mint({ sub, aud: `${gateway.origin}/mcp`, extra: { email: `${sub}@example.test` } });
  }

  before(async () => {
    as = await startAuthServer({ clients: { [GATEWAY_CLIENT.id]: { secret: GATEWAY_CLIENT.secret } } });
    scope.defer(() => as.close());
    upstream = await startProtectedServer({ issuers: [{ issuer: as.issuer, jwksUri: as.jwksUri }] });
    scope.defer(() => upstream.close());
    const plain = await scope.upstream('streamable-http');
    exchanging = await gatewayWith(await freePort(), {
      prot: { url: upstream.url, auth: { tokenExchange: { ...GATEWAY_CLIENT.config, tokenUrl: `${as.issuer}/token` } } },
      open: plain.config,
    }, ['prot__slow', 'open__slow'], { identity: { sealingKeys: [{ kid: 'seal-1', key: sealingKey }] } });
    // The upstream trusts what the signing gateway signs (its issuer: the origin of its auth.resource).
    const signingPort = await freePort();
    const signingOrigin = `http://127.0.0.1:${signingPort}`;
    upstream.trust(signingOrigin, `${signingOrigin}/.well-known/jwks.json`);
    const privateKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    signing = await gatewayWith(signingPort, {
      prot: { url: upstream.url, auth: { signedIdentity: { claims: ['email'] }, claimHeaders: { 'x-user': 'principal' } } },
    }, ['slow'], { identity: { keys: [{ kid: 'gw-1', privateKey }] } });
    browser = await launchChromium();
    scope.defer(() => browser.close());
  });

  test('the API says who the upstream sees, per mode, whether a re-run acts for the caller, and never a token or sealed data', async () => {
    const alice = await callerToken(exchanging, 'alice');
    const aliceClient = await scope.plainClient(exchanging.url, { headers: bearer(alice) });
    const exchanged = await startTask(aliceClient, 'prot__slow', {}); // runs until releaseSlow()
    const open = await startTask(aliceClient, 'open__slow', { ms: 600_000 });
    const bob = await callerToken(signing, 'bob');
    const signed = await startTask(await scope.plainClient(signing.url, { headers: bearer(bob) }), 'slow', {});
    await eventually(() => upstream.events().filter((e) => e.type === 'started' && e.tool === 'slow').length >= 2, HANG_MS);

    const detailOf = async (gateway: TestGateway, taskId: string) => {
      const answer = await getJson(`${gateway.origin}/ui/api/tasks/${taskId}`, { token: OPS_KEY });
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      return answer;
    };
    const aliceDetail = await detailOf(exchanging, exchanged);
    const alicePrincipal = `oauth:${as.issuer}#alice`;
    const identity = aliceDetail.body.identity as Json;
    assert.equal(identity.mode, 'token-exchange');
    assert.equal(identity.actsAs, 'caller');
    assert.ok(String(identity.summary).startsWith(`alice (${alicePrincipal}) via token exchange`), String(identity.summary));
    assert.equal((identity.rerun as Json).outcome, 'as-caller', JSON.stringify(identity));
    const text = JSON.stringify(aliceDetail.body);
    assert.ok(!text.includes(alice), 'not the caller\'s token');
    assert.ok(!text.includes(GATEWAY_CLIENT.secret), 'not the client secret');
    assert.ok(!text.includes('v1.seal-1.'), 'nothing of the sealed caller');
    assert.doesNotMatch(text, /eyJ[\w-]+\.eyJ[\w-]+\./, 'no JWT at all');
    assert.equal((aliceDetail.body.task as Json).principal, alicePrincipal);

    const openIdentity = (await detailOf(exchanging, open)).body.identity as Json;
    assert.equal(openIdentity.mode, 'static-headers');
    assert.equal(openIdentity.actsAs, 'gateway');
    assert.equal((openIdentity.rerun as Json).outcome, 'as-gateway');

    const bobDetail = await detailOf(signing, signed);
    const bobIdentity = bobDetail.body.identity as Json;
    assert.equal(bobIdentity.mode, 'signed-identity');
    assert.equal(bobIdentity.actsAs, 'caller');
    assert.match(String(bobIdentity.summary), /^bob \(oauth:.*#bob\) via a JWT the gateway signs for them \(with their email claim\), with x-user naming bob/);
    assert.deepEqual(bobIdentity.claimHeaders, ['x-user']);
    assert.equal((bobIdentity.rerun as Json).outcome, 'fails', 'no sealing key: a re-run could not act for bob');
    assert.match(String((bobIdentity.rerun as Json).summary), /sealingKeys/);
    assert.doesNotMatch(JSON.stringify(bobDetail.body), /eyJ[\w-]+\.eyJ[\w-]+\./);

    // The task ran as alice; once ended, nothing is kept to run again.
    upstream.releaseSlow();
    const result = await aliceClient.experimental.tasks.getTaskResult(exchanged, CallToolResultSchema);
    assert.equal(whoamiOf(result).sub, 'alice');
    const ended = (await detailOf(exchanging, exchanged)).body.identity as Json;
    assert.equal(ended.mode, 'token-exchange');
    assert.equal((ended.rerun as Json).outcome, 'none');
  });

  test('the page shows whom the upstream sees and what a run elsewhere does, for a running and an ended task', async () => {
    const carol = await callerToken(exchanging, 'carol');
    const client = await scope.plainClient(exchanging.url, { headers: bearer(carol) });
    const running = await startTask(client, 'prot__slow', {});
    const open = await startTask(client, 'open__slow', { ms: 600_000 });
    const page = await browser.newPage();
    await page.goto(`${exchanging.origin}/ui/`, WAIT);
    await page.waitForSelector('#auth:not([hidden])', WAIT);
    await page.type('#auth-token', OPS_KEY);
    await page.click('#auth-form button[type="submit"]');

    await page.waitForSelector(`tr[data-task-id="${running}"]`, WAIT);
    await clickNow(page, `tr[data-task-id="${running}"] td.tool`);
    await page.waitForSelector(`#detail[data-task-id="${running}"] #detail-identity[data-mode="token-exchange"][data-acts-as="caller"]`, WAIT);
    const sees = await page.$eval('#detail-identity', (dd) => dd.textContent ?? '');
    assert.ok(sees.startsWith(`carol (oauth:${as.issuer}#carol) via token exchange`), sees);
    assert.equal(await page.$eval('#detail-identity', (dd) => dd.previousElementSibling?.textContent), 'Upstream sees');
    assert.match(await page.$eval('#detail-rerun[data-outcome="as-caller"]', (dd) => dd.textContent ?? ''), /acts for carol .* again/);

    await clickNow(page, `tr[data-task-id="${open}"] td.tool`);
    await page.waitForSelector(`#detail[data-task-id="${open}"] #detail-identity[data-mode="static-headers"][data-acts-as="gateway"]`, WAIT);
    await page.waitForSelector('#detail-rerun[data-outcome="as-gateway"]', WAIT);

    upstream.releaseSlow();
    await client.experimental.tasks.getTaskResult(running, CallToolResultSchema);
    await clickNow(page, `tr[data-task-id="${running}"] td.tool`);
    await page.waitForSelector(`#detail[data-task-id="${running}"][data-status="completed"] #detail-identity[data-mode="token-exchange"]`, WAIT);
    assert.equal(await page.$('#detail-rerun'), null, 'an ended task runs nowhere again');
    const shown = await page.$eval('body', (body) => (body as HTMLElement).innerText);
    assert.ok(!shown.includes(carol), 'the page shows no token');
    await page.close();
  });
});

describe('dashboard config: turned off, or on another path', () => {
  const scope = suiteScope();

  test('dashboard.enabled: false serves no route; dashboard.path moves it', async () => {
    const upstream = await scope.upstream('streamable-http');
    const off = await scope.gateway({ upstreams: { fx: upstream.config }, dashboard: { enabled: false } });
    for (const path of ['/ui', '/ui/', '/ui/app.js', '/ui/api/tasks']) assert.equal((await getJson(`${off.origin}${path}`).catch(() => ({ status: 0 }))).status, 404, path);
    const moved = await scope.gateway({ upstreams: { fx: upstream.config }, dashboard: { path: '/ops/tasks' } });
    assert.equal((await getJson(`${moved.origin}/ops/tasks/api/tasks`)).status, 200);
    assert.equal((await getJson(`${moved.origin}/ui/api/tasks`)).status, 404);
  });
});

describe('dashboard approvals view: held calls listed to their approvers, approved and denied from the page, no cross-site decisions', () => {
  const scope = suiteScope();
  let gateway: TestGateway;
  let agent: Client;
  let fixtureUrl: string;
  let upstreamConfig: Json;
  let browser: Browser;
  const apiKeys = [
    { principal: 'ops', key: OPS_KEY },
    { principal: 'alice', key: ALICE_KEY },
    { principal: 'robot', key: ROBOT_KEY, scopes: ['taskgate:admin'] },
    { principal: 'agent', key: AGENT_KEY },
  ];
  const approvalRules = [{ match: 'slow_compute', approval: { approvers: ['ops', 'alice'], timeoutMs: 600_000 } }];
  const auth = { resource: 'http://127.0.0.1/mcp', apiKeys, admin: { principals: ['key:ops'], scopes: ['taskgate:admin'] } };

  before(async () => {
    const upstream = await scope.upstream('streamable-http');
    assert.ok(upstream.child?.url !== undefined, 'an HTTP fixture has a URL');
    fixtureUrl = upstream.child.url;
    upstreamConfig = upstream.config as Json;
    // ops is an admin and an approver, alice an approver only, robot an admin only.
    gateway = await scope.gateway({ upstreams: { fx: upstream.config }, tasks: { ...TASKS, rules: approvalRules }, auth });
    agent = await scope.plainClient(gateway.url, { headers: { authorization: `Bearer ${AGENT_KEY}` } });
    browser = await launchChromium();
    scope.defer(() => browser.close());
  });

  /** How many times the upstream started slow_compute with `label`. */
  async function executions(label: string): Promise<number> {
    return (await fixtureExecutions(fixtureUrl))[label] ?? 0;
  }

  /** The dashboard, signed in with `key` (on `origin`, the suite's gateway unless given). */
  async function signedIn(key: string, origin = gateway.origin): Promise<Page> {
    const page = await browser.newPage();
    await page.goto(`${origin}/ui/`, WAIT);
    await page.waitForSelector('#auth:not([hidden])', WAIT);
    await page.type('#auth-token', key);
    await page.click('#auth-form button[type="submit"]');
    return page;
  }

  const item = (taskId: string): string => `#approval-list li[data-task-id="${taskId}"]`;

  test('an approver sees the held call with its arguments as text, approves it, and the call runs once', async () => {
    const label = '<img src=x onerror="document.body.dataset.injected=1">';
    const taskId = await startTask(agent, 'slow_compute', { seconds: 0, label });
    const page = await signedIn(OPS_KEY);
    await page.waitForSelector(`${item(taskId)}[data-state="pending"]`, WAIT);
    assert.equal(await page.$eval(`${item(taskId)} .tool`, (span) => span.textContent), 'slow_compute');
    const fields = await page.$$eval(`${item(taskId)} dl > *`, (nodes) => nodes.map((node) => node.textContent ?? ''));
    assert.equal(fields[fields.indexOf('Requested by') + 1], 'key:agent');
    assert.match(fields[fields.indexOf('Age') + 1] ?? '', /^\d+(s|m \d+s)$/);
    assert.match(fields[fields.indexOf('Deadline') + 1] ?? '', /\(in (9m \d+s|10m 0s)\)$/);
    const shown = await page.$eval(`${item(taskId)} pre.arguments`, (pre) => pre.textContent ?? '');
    assert.deepEqual(JSON.parse(shown), { seconds: 0, label }, 'the arguments exactly as the upstream will get them');
    assert.equal(await page.$(`${item(taskId)} img`), null, 'rendered as text, never as markup');
    assert.match(await page.$eval('#approvals-count', (span) => span.textContent ?? ''), /\(1 pending\)/);
    assert.equal(await executions(label), 0, 'held: the upstream has not seen it');

    await clickNow(page, `${item(taskId)} button.approve`);
    await page.waitForSelector(`${item(taskId)}[data-state="decided"][data-decision="approved"]`, WAIT);
    assert.match(await page.$eval(`${item(taskId)} .outcome`, (p) => p.textContent ?? ''), /^Approved by key:ops at /);
    const result = await agent.experimental.tasks.getTaskResult(taskId, CallToolResultSchema); // blocks until it ended
    assert.notEqual(result.isError, true, JSON.stringify(result));
    assert.equal((await agent.experimental.tasks.getTask(taskId)).status, 'completed');
    assert.equal(await executions(label), 1, 'the approved call ran once');
    // The page's own task list shows the task completed too (ops is an admin).
    await page.waitForSelector(`tr[data-task-id="${taskId}"][data-status="completed"]`, WAIT);
    assert.equal(await page.evaluate(() => document.body.dataset.injected), undefined);
    await clickNow(page, `${item(taskId)} button.dismiss`);
    await page.waitForSelector('#approvals-empty:not([hidden])', WAIT);
    await page.close();
  });

  test('deny with a comment fails the task naming it; a call decided meanwhile shows the 409; non-approvers see an empty view', async () => {
    const denied = await startTask(agent, 'slow_compute', { seconds: 0, label: 'dashboard-deny' });
    const raced = await startTask(agent, 'slow_compute', { seconds: 0, label: 'dashboard-raced' });
    // alice is an approver but no admin: the page asks for an admin's key for the tasks, and lists her approvals.
    const page = await signedIn(ALICE_KEY);
    await page.waitForFunction(() => /not an admin/.test(document.getElementById('auth-reason')?.textContent ?? ''), WAIT);
    await page.waitForSelector(`${item(denied)}[data-state="pending"]`, WAIT);
    await page.waitForSelector(`${item(raced)}[data-state="pending"]`, WAIT);
    assert.equal(await page.$eval('#main', (main) => (main as HTMLElement).hidden), true, 'no task list for a non-admin');

    await page.type(`${item(denied)} input.comment`, 'not during the freeze');
    await clickNow(page, `${item(denied)} button.deny`);
    await page.waitForSelector(`${item(denied)}[data-decision="denied"]`, WAIT);
    assert.match(await page.$eval(`${item(denied)} .outcome`, (p) => p.textContent ?? ''), /^Denied by key:alice at .*: not during the freeze$/);
    const task = await agent.experimental.tasks.getTask(denied); // failed before the 200 was sent
    assert.equal(task.status, 'failed');
    assert.match(String(task.statusMessage), /denied by key:alice: not during the freeze/);
    assert.equal(await executions('dashboard-deny'), 0, 'the upstream never saw the denied call');

    // Another approver decides while this tab still shows the call: hold the tab's next list refresh, so the
    // page's click is the second decision.
    // Once a refresh is held, none is in flight: the page polls one request after the other.
    const held: HTTPRequest[] = [];
    let holding = true;
    let refreshHeld: () => void = () => {};
    const oneHeld = new Promise<void>((resolve) => (refreshHeld = resolve));
    page.on('request', (intercepted) => {
      if (!holding || intercepted.method() !== 'GET' || new URL(intercepted.url()).pathname !== '/approvals') return void intercepted.continue();
      held.push(intercepted);
      refreshHeld();
    });
    await page.setRequestInterception(true);
    await oneHeld;
    const first = await getJson(`${gateway.origin}/approvals/${raced}`, { token: OPS_KEY, method: 'POST' }, JSON.stringify({ decision: 'approve' }));
    assert.equal(first.status, 200, JSON.stringify(first.body));
    await clickNow(page, `${item(raced)} button.approve`);
    await page.waitForSelector(`${item(raced)}[data-state="refused"][data-refusal="409"]`, WAIT);
    assert.match(await page.$eval(`${item(raced)} .outcome`, (p) => p.textContent ?? ''), /Approved by key:ops/, 'the 409 shows who decided');
    holding = false;
    for (const request of held) await request.continue();
    await agent.experimental.tasks.getTaskResult(raced, CallToolResultSchema);
    assert.equal(await executions('dashboard-raced'), 1, 'one decision, one run');
    await page.close();

    // robot is an admin but approves nothing: the view is there, empty.
    const robot = await signedIn(ROBOT_KEY);
    await robot.waitForSelector('#approvals:not([hidden]) #approvals-empty:not([hidden])', WAIT);
    assert.equal(await robot.$eval('#approvals-empty', (p) => p.textContent), 'Nothing waits for your decision.');
    await robot.close();
  });

  test('issue 39 #3: a call that changes under its task id is shown anew (on the next poll, or by the 409 of a stale click), and Approve sends the digest on screen', async (t) => {
    // The call under a task id is changed in the store itself, as a reused id (or anything else) would change it:
    // what the page must do does not depend on how it happened.
    const scope = testScope(t);
    const prefix = uniqueRedisPrefix('dashboard-digest');
    t.after(() => deleteRedisPrefixes([prefix]));
    const redis = new Redis(TEST_REDIS_URL);
    scope.defer(() => redis.quit());
    const held = await scope.gateway({ upstreams: { fx: upstreamConfig }, store: { type: 'redis', url: TEST_REDIS_URL, prefix }, tasks: { ...TASKS, rules: approvalRules }, auth });
    const requester = await scope.plainClient(held.url, { headers: { authorization: `Bearer ${AGENT_KEY}` } });
    /** Replaces the held call of `taskId` (its kept call and the digest its hold is bound to) with `label`'s. */
    const swap = async (taskId: string, label: string): Promise<string> => {
      const key = redisKeys(prefix).task(taskId);
      const call = JSON.parse(String(await redis.hget(key, 'call'))) as { params: Json };
      const params = { ...call.params, arguments: { seconds: 0, label } };
      const digest = approvalDigest(params);
      const approval = { ...(JSON.parse(String(await redis.hget(key, 'approval'))) as Json), digest };
      await redis.hset(key, 'call', JSON.stringify({ ...call, params }), 'approval', JSON.stringify(approval));
      return digest;
    };
    const shownArguments = (page: Page, taskId: string): Promise<Json> => page.$eval(`${item(taskId)} pre.arguments`, (pre) => JSON.parse(pre.textContent ?? '{}') as Json);

    const page = await signedIn(OPS_KEY, held.origin);
    const posted: Json[] = [];
    page.on('request', (request) => {
      if (request.method() === 'POST' && new URL(request.url()).pathname.startsWith('/approvals/')) posted.push(JSON.parse(request.postData() ?? '{}') as Json);
    });

    // On the next poll: the item is rebuilt with the new call, and says so.
    const polled = await startTask(requester, 'slow_compute', { seconds: 0, label: 'digest-shown' });
    await page.waitForSelector(`${item(polled)}[data-state="pending"]`, WAIT);
    assert.deepEqual(await shownArguments(page, polled), { seconds: 0, label: 'digest-shown' });
    const newDigest = await swap(polled, 'digest-swapped');
    await page.waitForSelector(`${item(polled)}[data-digest="${newDigest}"] p.changed`, WAIT);
    assert.deepEqual(await shownArguments(page, polled), { seconds: 0, label: 'digest-swapped' }, 'the arguments Approve is bound to');
    await clickNow(page, `${item(polled)} button.approve`);
    await page.waitForSelector(`${item(polled)}[data-state="decided"][data-decision="approved"]`, WAIT);
    assert.equal(posted.at(-1)?.digest, newDigest, 'approving sends the digest of the call on screen');

    // A click on a call that changed before the page polled again: 409, nothing decided, the new call shown.
    const stale = await startTask(requester, 'slow_compute', { seconds: 0, label: 'digest-stale' });
    await page.waitForSelector(`${item(stale)}[data-state="pending"]`, WAIT);
    const oldDigest = await page.$eval(item(stale), (li) => li.getAttribute('data-digest'));
    let holding = true;
    const heldPolls: HTTPRequest[] = [];
    let pollHeld: () => void = () => {};
    const onePollHeld = new Promise<void>((resolve) => (pollHeld = resolve));
    page.on('request', (intercepted) => {
      if (!holding || intercepted.method() !== 'GET' || new URL(intercepted.url()).pathname !== '/approvals') return void intercepted.continue();
      heldPolls.push(intercepted);
      pollHeld();
    });
    await page.setRequestInterception(true);
    await onePollHeld;
    const swappedDigest = await swap(stale, 'digest-late');
    await clickNow(page, `${item(stale)} button.approve`);
    await page.waitForSelector(`${item(stale)}[data-digest="${swappedDigest}"][data-state="pending"] p.changed`, WAIT);
    assert.equal(posted.at(-1)?.digest, oldDigest, 'the stale click named what it showed');
    assert.deepEqual(await shownArguments(page, stale), { seconds: 0, label: 'digest-late' });
    holding = false;
    for (const request of heldPolls) await request.continue();
    await clickNow(page, `${item(stale)} button.deny`);
    await page.waitForSelector(`${item(stale)}[data-state="decided"][data-decision="denied"]`, WAIT);
    assert.equal(posted.at(-1)?.digest, swappedDigest);

    // The upstream never saw any of it: the approved call's run still holds the call it was made with, which is
    // not the one approved, and fails saying so.
    await requester.experimental.tasks.getTaskResult(polled, CallToolResultSchema).catch(() => undefined); // blocks until it ended
    const ended = await requester.experimental.tasks.getTask(polled);
    assert.equal(ended.status, 'failed');
    assert.match(String(ended.statusMessage), /differ from the ones that were approved/);
    for (const label of ['digest-shown', 'digest-swapped', 'digest-stale', 'digest-late']) assert.equal(await executions(label), 0, label);
    await page.close();
  });

  test('a decision a page on another origin could send is refused: a foreign Origin, a form content type', async () => {
    const taskId = await startTask(agent, 'slow_compute', { seconds: 0, label: 'dashboard-cross-site' });
    const url = `${gateway.origin}/approvals/${taskId}`;
    const decision = JSON.stringify({ decision: 'approve' });
    const foreign = await getJson(url, { token: OPS_KEY, method: 'POST', origin: 'http://127.0.0.1:1' }, decision);
    assert.equal(foreign.status, 403);
    assert.match(String(foreign.body.error), /may not change state/);
    const form = await getJson(url, { token: OPS_KEY, method: 'POST', contentType: 'application/x-www-form-urlencoded' }, 'decision=approve');
    assert.equal(form.status, 415, 'a form body is not even parsed');
    assert.match(String(form.body.error), /must send Content-Type: application\/json/, 'refused as a cross-site write, not by the body parser');
    const plain = await getJson(url, { token: OPS_KEY, method: 'POST', contentType: 'text/plain' }, decision);
    assert.equal(plain.status, 415, 'nor a text/plain one (what a no-cors fetch sends)');
    assert.match(String(plain.body.error), /must send Content-Type: application\/json/);
    const listed = await getJson(`${gateway.origin}/approvals`, { token: OPS_KEY });
    assert.deepEqual((listed.body.approvals as Json[]).map((a) => [a.taskId, a.status]), [[taskId, 'pending']], 'still waiting');
    assert.equal(await executions('dashboard-cross-site'), 0);
    const own = await getJson(url, { token: OPS_KEY, method: 'POST', origin: gateway.origin }, JSON.stringify({ decision: 'deny' }));
    assert.equal(own.status, 200, 'the dashboard\'s own origin decides');
    assert.equal((own.body.approval as Json).status, 'denied');
  });
});
