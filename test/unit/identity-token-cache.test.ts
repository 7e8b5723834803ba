// The token cache (src/identity/token-cache.ts) over an obtain function the test controls: single flight, refresh
// ahead on a clock the test moves, invalidation only of the refused token, failures remembered briefly, the bound on
// requests running at once and on entries. No timers and no sleeps: requests resolve when the test says so.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TokenCache, tokenKey, type ObtainedToken, type TokenCacheEvent } from '../../src/identity/token-cache.js';

/** An obtain function whose requests stay open until the test settles them. */
function controlled() {
  const pending: { resolve: (t: ObtainedToken) => void; reject: (e: unknown) => void }[] = [];
  let calls = 0;
  const obtain = () => {
    calls++;
    return new Promise<ObtainedToken>((resolve, reject) => pending.push({ resolve, reject }));
  };
  return { obtain, pending, get calls() { return calls; } };
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('identity: token cache', () => {
  it('single flight: fifty callers, one request, one token', async () => {
    const cache = new TokenCache();
    const source = controlled();
    const waiting = Array.from({ length: 50 }, () => cache.get('k', source.obtain));
    await flush();
    assert.equal(source.calls, 1);
    source.pending[0]?.resolve({ token: 't1', expiresInSeconds: 300 });
    assert.deepEqual(new Set(await Promise.all(waiting)), new Set(['t1']));
    assert.equal(await cache.get('k', source.obtain), 't1');
    assert.equal(source.calls, 1);
  });

  it('refreshes ahead: inside the margin the current token serves while one request fetches the next', async () => {
    let now = 0;
    const events: TokenCacheEvent['type'][] = [];
    const cache = new TokenCache({ now: () => now, refreshAheadMs: 60_000, expirySkewMs: 5_000, onEvent: (e) => events.push(e.type) });
    const source = controlled();
    const first = cache.get('k', source.obtain);
    await flush();
    source.pending[0]?.resolve({ token: 't1', expiresInSeconds: 300 });
    assert.equal(await first, 't1');
    now = 239_999;
    assert.equal(await cache.get('k', source.obtain), 't1');
    assert.equal(source.calls, 1, 'fresh until expires_in minus the margin');
    now = 240_000;
    assert.equal(await cache.get('k', source.obtain), 't1', 'served while its successor is fetched');
    assert.equal(await cache.get('k', source.obtain), 't1');
    await flush();
    assert.equal(source.calls, 2, 'one refresh');
    source.pending[1]?.resolve({ token: 't2', expiresInSeconds: 300 });
    await flush();
    assert.equal(await cache.get('k', source.obtain), 't2');
    assert.ok(events.includes('refresh_ahead'));
  });

  it('past expiry (minus the skew) callers wait for a new token', async () => {
    let now = 0;
    const cache = new TokenCache({ now: () => now });
    const source = controlled();
    const first = cache.get('k', source.obtain);
    await flush();
    source.pending[0]?.resolve({ token: 't1', expiresInSeconds: 100 });
    await first;
    now = 95_000; // 100 s minus the 5 s skew
    const next = cache.get('k', source.obtain);
    await flush();
    assert.equal(source.calls, 2);
    source.pending[1]?.resolve({ token: 't2', expiresInSeconds: 100 });
    assert.equal(await next, 't2');
  });

  it('invalidate drops only the token that was refused', async () => {
    const cache = new TokenCache();
    const source = controlled();
    const first = cache.get('k', source.obtain);
    await flush();
    source.pending[0]?.resolve({ token: 't1', expiresInSeconds: 300 });
    await first;
    assert.equal(cache.invalidate('k', 'other'), false);
    assert.equal(cache.invalidate('k', 't1'), true);
    const second = cache.get('k', source.obtain);
    await flush();
    source.pending[1]?.resolve({ token: 't2', expiresInSeconds: 300 });
    assert.equal(await second, 't2');
    assert.equal(cache.invalidate('k', 't1'), false, 'a late 401 for the old token leaves the new one');
    assert.equal(await cache.get('k', source.obtain), 't2');
  });

  it('remembers a failure briefly: callers inside the window get it without a request', async () => {
    let now = 0;
    const cache = new TokenCache({ now: () => now, failureTtlMs: 5_000 });
    const source = controlled();
    const first = cache.get('k', source.obtain);
    await flush();
    source.pending[0]?.reject(new Error('authorization server down'));
    await assert.rejects(first, /down/);
    now = 4_999;
    await assert.rejects(cache.get('k', source.obtain), /down/);
    assert.equal(source.calls, 1);
    now = 5_000;
    const retry = cache.get('k', source.obtain);
    await flush();
    assert.equal(source.calls, 2);
    source.pending[1]?.resolve({ token: 't1' });
    assert.equal(await retry, 't1');
  });

  it('bounds requests running at once across keys; the rest queue in order', async () => {
    const cache = new TokenCache({ maxConcurrentRequests: 2 });
    const source = controlled();
    const gets = ['a', 'b', 'c', 'd'].map((k) => cache.get(k, source.obtain));
    await flush();
    assert.equal(source.calls, 2);
    assert.equal(cache.requestsQueued, 2);
    source.pending[0]?.resolve({ token: 'ta' });
    await gets[0];
    await flush();
    assert.equal(source.calls, 3);
    for (const p of source.pending.slice(1)) p.resolve({ token: 'tx' });
    await flush();
    source.pending[3]?.resolve({ token: 'td' });
    await Promise.all(gets);
    assert.equal(source.calls, 4);
    assert.equal(cache.requestsRunning, 0);
  });

  it('bounds entries: the least recently used goes first', async () => {
    const evicted: string[] = [];
    const cache = new TokenCache({ maxEntries: 2, onEvent: (e) => e.type === 'evicted' && evicted.push(e.key) });
    const obtain = (token: string) => () => Promise.resolve({ token });
    await cache.get('a', obtain('ta'));
    await cache.get('b', obtain('tb'));
    await cache.get('a', obtain('ta2')); // a is now the most recently used
    await cache.get('c', obtain('tc'));
    assert.deepEqual(evicted, ['b']);
    assert.equal(cache.size, 2);
    assert.equal(await cache.get('a', obtain('never')), 'ta');
  });

  it('keys the gateway apart from every principal', () => {
    assert.notEqual(tokenKey('up'), tokenKey('up', 'gateway'));
    assert.notEqual(tokenKey('up', 'key:a'), tokenKey('up2', 'key:a'));
  });
});
