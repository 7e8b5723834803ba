// The token cache's time rules (src/identity/token-cache.ts) on node:test's mock clock, through the Date.now the
// gateway gives it (no `now` option, as src/identity/parts.ts builds it): the exact millisecond a token starts to be
// refreshed ahead, stops being served, and a failure stops being remembered, each counted from when the token (or
// the failure) arrived. Each rule is checked one millisecond before its bound and at it.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import { TOKEN_CACHE_DEFAULTS, TokenCache, type ObtainedToken, type TokenCacheEvent, type TokenCacheOptions } from '../../src/identity/token-cache.js';

/** An obtain function whose requests stay open until the test settles them. */
function controlled() {
  const pending: { resolve: (t: ObtainedToken) => void; reject: (e: unknown) => void }[] = [];
  const obtain = () => new Promise<ObtainedToken>((resolve, reject) => pending.push({ resolve, reject }));
  return { obtain, pending };
}

/** Lets settled promises run their continuations (setImmediate is not mocked). */
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A cache on the mocked Date.now, with the events it emitted and a source it asks. */
function cacheOnMockClock(options: Omit<TokenCacheOptions, 'now' | 'onEvent'> = {}) {
  const events: TokenCacheEvent['type'][] = [];
  const cache = new TokenCache({ ...options, onEvent: (e) => events.push(e.type) });
  return { cache, events, source: controlled() };
}

/** Takes the events emitted since the last call. */
function drain(events: TokenCacheEvent['type'][]): TokenCacheEvent['type'][] {
  return events.splice(0);
}

/** Obtains the first token for 'k': asked at 0, answered `afterMs` later. */
async function firstToken(setup: ReturnType<typeof cacheOnMockClock>, answer: ObtainedToken, afterMs = 0): Promise<void> {
  const first = setup.cache.get('k', setup.source.obtain);
  await flush();
  mock.timers.tick(afterMs);
  setup.source.pending[0]?.resolve(answer);
  assert.equal(await first, answer.token);
  drain(setup.events);
}

describe('token cache on the mock clock', () => {
  beforeEach(() => mock.timers.enable({ apis: ['Date'], now: 0 }));
  afterEach(() => mock.timers.reset());

  it('refreshes ahead exactly refreshAheadMs before expires_in, counted from when the token arrived', async () => {
    const setup = cacheOnMockClock();
    // Asked at 0, answered at 10 s: the 300 s lifetime starts at 10 s, so the refresh is due at 10 + 300 - 60 = 250 s.
    await firstToken(setup, { token: 't1', expiresInSeconds: 300 }, 10_000);
    mock.timers.setTime(249_999);
    assert.equal(await setup.cache.get('k', setup.source.obtain), 't1');
    assert.deepEqual(drain(setup.events), ['hit']);
    assert.equal(setup.source.pending.length, 1, 'no request before the refresh is due');
    mock.timers.setTime(250_000);
    assert.equal(await setup.cache.get('k', setup.source.obtain), 't1', 'the current token serves while its successor is fetched');
    await flush();
    assert.deepEqual(drain(setup.events), ['refresh_ahead']);
    assert.equal(setup.source.pending.length, 2, 'one refresh, at the bound');
  });

  it('stops serving a token exactly expirySkewMs before it expires: callers then wait for the next', async () => {
    const setup = cacheOnMockClock();
    await firstToken(setup, { token: 't1', expiresInSeconds: 300 });
    mock.timers.setTime(294_999);
    assert.equal(await setup.cache.get('k', setup.source.obtain), 't1', 'still served 1 ms before the skew');
    await flush();
    assert.equal(setup.source.pending.length, 2, 'refreshing ahead since 240 s');
    mock.timers.setTime(295_000);
    let settled = false;
    const waiting = setup.cache.get('k', setup.source.obtain).finally(() => (settled = true));
    await flush();
    assert.equal(settled, false, 'at 300 s minus the 5 s skew the old token is no longer served');
    assert.equal(setup.source.pending.length, 2, 'the caller joins the refresh under way rather than asking again');
    setup.source.pending[1]?.resolve({ token: 't2', expiresInSeconds: 300 });
    assert.equal(await waiting, 't2');
  });

  it('assumes unknownLifetimeMs when the server gives no expires_in', async () => {
    const setup = cacheOnMockClock();
    await firstToken(setup, { token: 't1' });
    const lifetime = TOKEN_CACHE_DEFAULTS.unknownLifetimeMs;
    mock.timers.setTime(lifetime - TOKEN_CACHE_DEFAULTS.refreshAheadMs - 1);
    await setup.cache.get('k', setup.source.obtain);
    mock.timers.setTime(lifetime - TOKEN_CACHE_DEFAULTS.refreshAheadMs);
    await setup.cache.get('k', setup.source.obtain);
    mock.timers.setTime(lifetime - TOKEN_CACHE_DEFAULTS.expirySkewMs - 1);
    await setup.cache.get('k', setup.source.obtain);
    assert.deepEqual(drain(setup.events), ['hit', 'refresh_ahead', 'refresh_ahead']);
  });

  it('a short-lived token: the refresh margin is capped at half its lifetime and the skew at a quarter', async () => {
    const setup = cacheOnMockClock();
    // 8 s: refresh at 8 - min(60, 4) = 4 s, stop serving at 8 - min(5, 2) = 6 s.
    await firstToken(setup, { token: 't1', expiresInSeconds: 8 });
    for (const at of [3_999, 4_000, 5_999]) {
      mock.timers.setTime(at);
      assert.equal(await setup.cache.get('k', setup.source.obtain), 't1', `served at ${at} ms`);
    }
    assert.deepEqual(drain(setup.events), ['hit', 'refresh_ahead', 'refresh_ahead']);
    setup.source.pending[1]?.reject(new Error('refresh failed'));
    await flush();
    drain(setup.events);
    mock.timers.setTime(6_000);
    // Expired, and the failed refresh is remembered: the caller gets that failure, not the old token.
    await assert.rejects(setup.cache.get('k', setup.source.obtain), /refresh failed/);
    assert.deepEqual(drain(setup.events), ['failure_cached']);
  });

  it('a refresh ahead that failed is not tried again until failureTtlMs after the failure', async () => {
    const setup = cacheOnMockClock({ failureTtlMs: 5_000 });
    await firstToken(setup, { token: 't1', expiresInSeconds: 300 });
    mock.timers.setTime(240_000);
    await setup.cache.get('k', setup.source.obtain);
    await flush();
    mock.timers.setTime(241_000);
    setup.source.pending[1]?.reject(new Error('authorization server down'));
    await flush();
    drain(setup.events);
    mock.timers.setTime(245_999);
    assert.equal(await setup.cache.get('k', setup.source.obtain), 't1');
    await flush();
    assert.equal(setup.source.pending.length, 2, 'no request inside the failure window (it ends 5 s after the failure)');
    mock.timers.setTime(246_000);
    assert.equal(await setup.cache.get('k', setup.source.obtain), 't1');
    await flush();
    assert.equal(setup.source.pending.length, 3, 'asked again once the window ended');
    assert.deepEqual(drain(setup.events), ['refresh_ahead', 'refresh_ahead']);
  });
});
