// The embedded store's per-user connections (store.connections) on node:test's mock clock: a link and a flow are
// found until the millisecond of their expiresAtMs and never at it; a lock holds for its ttlMs, then any owner may
// take it, and the owner whose lock ran out releases nobody else's; the store's sweeps leave what is live as it was;
// connections and registrations never expire. Each bound is checked one millisecond before and at it. What
// every store does alike is test/integration/connections-store.test.ts.
import assert from 'node:assert/strict';
import { beforeEach, describe, it, mock } from 'node:test';
import type { ConsentFlow, ConsentLink } from '../../src/store/connections.js';
import type { MemoryTaskStore } from '../../src/store/memory-task-store.js';
import { memoryStoreOnMockClock } from '../helpers/mock-clock.js';

let store: MemoryTaskStore;

const link = (id: string, expiresAtMs: number): ConsentLink => ({ id, principal: 'oauth:https://idp#alice', upstream: 'github', elicitationId: `e-${id}`, createdAtMs: 0, expiresAtMs });
const flow = (state: string, expiresAtMs: number): ConsentFlow => ({
  state,
  kind: 'consent',
  browserBinding: 'binding',
  sealedVerifier: 'sealed',
  redirectUri: 'https://gw/callback',
  issuer: 'https://as',
  principal: 'oauth:https://idp#alice',
  upstream: 'github',
  expiresAtMs,
});

describe('memory store connections on the mock clock', () => {
  const storeNow = memoryStoreOnMockClock();
  beforeEach(() => {
    store = storeNow();
  });

  it('a link is found until its expiresAtMs, and neither read nor taken at it', async () => {
    await store.connections.putLink(link('read', 1_000));
    await store.connections.putLink(link('take', 1_000));
    mock.timers.setTime(999);
    assert.equal((await store.connections.getLink('read'))?.id, 'read');
    mock.timers.setTime(1_000);
    assert.equal(await store.connections.getLink('read'), undefined);
    assert.equal(await store.connections.takeLink('take'), undefined);
  });

  it('a flow is taken until its expiresAtMs, and not at it', async () => {
    await store.connections.putFlow(flow('early', 1_000));
    await store.connections.putFlow(flow('late', 1_000));
    mock.timers.setTime(999);
    assert.equal((await store.connections.takeFlow('early'))?.state, 'early');
    mock.timers.setTime(1_000);
    assert.equal(await store.connections.takeFlow('late'), undefined);
  });

  it('a lock holds for its ttlMs; then another owner takes it, and the first releases nothing', async () => {
    assert.equal(await store.connections.lock('refresh', 'first', 1_000), true);
    mock.timers.setTime(999);
    assert.equal(await store.connections.lock('refresh', 'second', 1_000), false);
    mock.timers.setTime(1_000);
    assert.equal(await store.connections.lock('refresh', 'second', 1_000), true, 'ran out at 1 000 ms');
    await store.connections.unlock('refresh', 'first');
    assert.equal(await store.connections.lock('refresh', 'third', 1_000), false, "the second owner's lock stays");
    await store.connections.unlock('refresh', 'second');
    assert.equal(await store.connections.lock('refresh', 'third', 1_000), true);
  });

  it('sweeps keep what is live, and what expired stays gone; connections and registrations do not expire', async () => {
    await store.connections.putLink(link('short', 1_000));
    await store.connections.putLink(link('long', 100_000));
    await store.connections.putFlow(flow('long', 100_000));
    const connection = { principal: 'oauth:https://idp#alice', upstream: 'github', issuer: 'https://as', sealed: 's', scopes: [], expiresAtMs: 1_000, issuedAtMs: 0, connectedAtMs: 0, version: 0 };
    assert.equal(await store.connections.put(connection, 0), true);
    const registration = { issuer: 'https://as', redirectUri: 'https://gw/callback', clientId: 'c', tokenEndpointAuthMethod: 'none', registeredAtMs: 0 };
    await store.connections.register(registration);
    // The store's sweeper runs every 30 s on the mocked interval.
    mock.timers.tick(60_000);
    assert.equal(await store.connections.getLink('short'), undefined);
    assert.equal((await store.connections.getLink('long'))?.id, 'long');
    assert.equal((await store.connections.takeFlow('long'))?.state, 'long');
    assert.deepEqual(await store.connections.get('oauth:https://idp#alice', 'github'), { ...connection, version: 1 });
    assert.deepEqual(await store.connections.registration('https://as', 'https://gw/callback'), registration);
  });
});
