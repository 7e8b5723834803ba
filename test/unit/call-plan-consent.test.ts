// The call plan's consent step (issue 41): what a caller at an upstream that acts as each user gets before the
// upstream is called, per revision and client, and a task's wait for the connection (consent-wait.ts untilConnected):
// the URL elicitation asked through the run, withdrawn once connected, the task ended when the user declines or the
// client takes no URL elicitation. The consent service here is a small one in memory (links, connections, waiters).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { planCall, planConsent, type CallPlan, type ConsentAsk } from '../../src/tasks/call-plan.js';
import { consentState, lostConsent, untilConnected, urlElicitationRequired, type ConsentWaitRun } from '../../src/tasks/consent-wait.js';
import type { ConsentRequest } from '../../src/consent/ports.js';
import { DEFAULT_POLICY } from '../../src/config/schema/defaults.js';
import { ConsentUnavailable } from '../../src/identity/credential-sources.js';
import { refusedUrlElicitation } from '../../src/mcp.js';
import type { InputRequest } from '../../src/tasks/pending-inputs.js';
import type { Outcome } from '../../src/jsonrpc.js';

const ALICE = 'oauth:https://idp.example#alice';
const PLAIN: CallPlan = { kind: 'plain' };
const TASK: CallPlan = { kind: 'task', afterMs: 0, held: false };
const session = (url: boolean): ConsentAsk => ({ urlElicitation: url, inputRequired: false });
const stateless = (url: boolean): ConsentAsk => ({ urlElicitation: url, inputRequired: true });

/** Connections and links in memory: what the consent service keeps in the store. */
class Connections {
  readonly connected = new Set<string>();
  readonly requests: ConsentRequest[] = [];
  private readonly waiters = new Set<() => void>();
  requires = (upstream: string): boolean => upstream === 'github';
  isConnected = async (principal: string, upstream: string): Promise<boolean> => this.connected.has(`${principal} ${upstream}`);
  request = async (_principal: string, upstream: string): Promise<ConsentRequest> => {
    const n = this.requests.length + 1;
    const request = { upstream, elicitationId: `e${n}`, url: `https://gw.example/connect/link${n}`, message: `Connect your ${upstream} account` };
    this.requests.push(request);
    return request;
  };
  whenConnected = (principal: string, upstream: string, signal: AbortSignal): Promise<boolean> =>
    new Promise((resolve) => {
      const check = (): void => {
        if (!this.connected.has(`${principal} ${upstream}`)) return;
        this.waiters.delete(check);
        resolve(true);
      };
      this.waiters.add(check);
      signal.addEventListener('abort', () => (this.waiters.delete(check), resolve(false)), { once: true });
      check();
    });
  connect(principal: string, upstream: string): void {
    this.connected.add(`${principal} ${upstream}`);
    for (const waiter of [...this.waiters]) waiter();
  }
}

/** A run whose questions wait until answered (or withdrawn), as the run relay keeps them. */
function waitingRun(capabilities: Record<string, unknown>) {
  const asked: { request: InputRequest; answer: (outcome: Outcome) => void; withdrawn: () => boolean }[] = [];
  const ended = new AbortController();
  const run: ConsentWaitRun = {
    principal: ALICE,
    upstream: 'github',
    signal: ended.signal,
    ask: (request, signal) =>
      new Promise((resolve) => {
        asked.push({ request, answer: resolve, withdrawn: () => signal.aborted });
        signal.addEventListener('abort', () => resolve({ error: { code: -32800, message: 'Request cancelled' } }), { once: true });
      }),
    refuse: (request) => refusedUrlElicitation(request, capabilities),
  };
  return { run, asked, ended };
}

const until = async (check: () => boolean): Promise<void> => {
  while (!check()) await new Promise((resolve) => setImmediate(resolve));
};

describe('call plan: consent', () => {
  it('asks nothing of a caller who needs no consent or is connected; a refusal of the plan answers first', () => {
    for (const state of ['not_required', 'connected'] as const) {
      assert.equal(planConsent(PLAIN, state, session(true)), 'none');
      assert.equal(planConsent(TASK, state, stateless(false)), 'none');
    }
    assert.equal(planConsent({ kind: 'refuse', why: 'task_forbidden' }, 'not_connected', session(true)), 'none');
  });

  it('refuses an API key or an unauthenticated caller with no link', () => {
    assert.equal(planConsent(PLAIN, 'no_user', session(true)), 'no_user');
    assert.equal(planConsent(TASK, 'no_user', stateless(true)), 'no_user');
  });

  it('a plain call: -32042 in a session, the input-required answer in 2026-07-28, the link without URL elicitation', () => {
    assert.equal(planConsent(PLAIN, 'not_connected', session(true)), 'elicit');
    assert.equal(planConsent(PLAIN, 'not_connected', stateless(true)), 'input_required');
    assert.equal(planConsent(PLAIN, 'not_connected', session(false)), 'link');
    assert.equal(planConsent(PLAIN, 'not_connected', stateless(false)), 'link');
    // A held call, or one for the background, is answered before it is held or run.
    assert.equal(planConsent({ kind: 'wait_held' }, 'not_connected', session(true)), 'elicit');
    assert.equal(planConsent({ kind: 'background', afterMs: 0, held: false }, 'not_connected', session(false)), 'link');
  });

  it('a task waits for the connection, whatever the client takes (one of a name not listed yet too: its run checks the listing once connected)', () => {
    assert.equal(planConsent(TASK, 'not_connected', session(true)), 'in_task');
    assert.equal(planConsent({ kind: 'task', afterMs: 500, held: false }, 'not_connected', stateless(false)), 'in_task');
    assert.equal(planConsent(planCall(DEFAULT_POLICY, { speaksTasks: true, task: 'asked' }), 'not_connected', session(true)), 'in_task');
  });

  it('reads where a caller stands: an API key is nobody to connect, a user is connected once stored', async () => {
    const consent = new Connections();
    assert.equal(await consentState(undefined, ALICE, 'github'), 'not_required');
    assert.equal(await consentState(consent, ALICE, 'docs'), 'not_required');
    assert.equal(await consentState(consent, 'key:ci', 'github'), 'no_user');
    assert.equal(await consentState(consent, undefined, 'github'), 'no_user');
    assert.equal(await consentState(consent, ALICE, 'github'), 'not_connected');
    consent.connect(ALICE, 'github');
    assert.equal(await consentState(consent, ALICE, 'github'), 'connected');
  });

  it('-32042 carries the one URL elicitation', () => {
    const error = urlElicitationRequired({ upstream: 'github', elicitationId: 'e1', url: 'https://gw.example/connect/x', message: 'Connect GitHub' }).toJsonRpc();
    assert.equal(error.code, -32042);
    assert.deepEqual(error.data, { elicitations: [{ mode: 'url', elicitationId: 'e1', url: 'https://gw.example/connect/x', message: 'Connect GitHub' }] });
  });

  it("knows a lost connection from the credential source's failure, for this upstream only", () => {
    const failure = { error: new ConsentUnavailable('github', ALICE, 'grant_refused').toGatewayError().toJsonRpc() };
    assert.equal(lostConsent(failure, 'github'), true);
    assert.equal(lostConsent(failure, 'docs'), false);
    assert.equal(lostConsent(new ConsentUnavailable('github', ALICE, 'not_connected').toGatewayError(), 'github'), true);
    assert.equal(lostConsent({ error: new ConsentUnavailable('github', 'key:ci', 'no_user').toGatewayError().toJsonRpc() }, 'github'), false, 'nobody to ask');
    assert.equal(lostConsent({ result: { content: [] } }, 'github'), false);
  });
});

describe('consent wait of a task', () => {
  it('asks the URL elicitation, and withdraws it once the user connected', async () => {
    const consent = new Connections();
    const { run, asked } = waitingRun({ elicitation: { url: {} } });
    const waited = untilConnected(consent, run);
    await until(() => asked.length === 1);
    assert.deepEqual(asked[0]?.request, { method: 'elicitation/create', params: { mode: 'url', url: 'https://gw.example/connect/link1', elicitationId: 'e1', message: 'Connect your github account' } });
    consent.connect(ALICE, 'github');
    assert.deepEqual(await waited, { connected: true });
    assert.equal(asked[0]?.withdrawn(), true);
  });

  it('runs at once for a connected user, asking nothing', async () => {
    const consent = new Connections();
    consent.connect(ALICE, 'github');
    const { run, asked } = waitingRun({ elicitation: { url: {} } });
    assert.deepEqual(await untilConnected(consent, run), { connected: true });
    assert.equal(asked.length, 0);
    assert.equal(consent.requests.length, 0);
  });

  it('keeps waiting after an accept, and fails saying so after a decline', async () => {
    const consent = new Connections();
    const accepting = waitingRun({ elicitation: { url: {} } });
    const waited = untilConnected(consent, accepting.run);
    await until(() => accepting.asked.length === 1);
    accepting.asked[0]?.answer({ result: { action: 'accept' } });
    await new Promise((resolve) => setImmediate(resolve));
    consent.connect(ALICE, 'github');
    assert.deepEqual(await waited, { connected: true });

    const declining = waitingRun({ elicitation: { url: {} } });
    const refused = untilConnected(new Connections(), declining.run);
    await until(() => declining.asked.length === 1);
    declining.asked[0]?.answer({ result: { action: 'decline' } });
    const end = await refused;
    assert.equal(end.connected, false);
    assert.match(!end.connected && end.outcome !== undefined && 'error' in end.outcome ? end.outcome.error.message : '', /declined to connect/);
  });

  it('ends with the link in a tool error for a client without URL elicitation', async () => {
    const { run, asked } = waitingRun({ elicitation: {} });
    const end = await untilConnected(new Connections(), run);
    assert.equal(asked.length, 0);
    assert.ok(!end.connected && end.outcome !== undefined && 'result' in end.outcome);
    const result = (end as unknown as { outcome: { result: { isError: boolean; content: { text: string }[] } } }).outcome.result;
    assert.equal(result.isError, true);
    assert.match(result.content[0]?.text ?? '', /https:\/\/gw\.example\/connect\/link1/);
  });

  it('stops when the run ends first', async () => {
    const { run, asked, ended } = waitingRun({ elicitation: { url: {} } });
    const waited = untilConnected(new Connections(), run);
    await until(() => asked.length === 1);
    ended.abort();
    assert.deepEqual(await waited, { connected: false });
  });
});
