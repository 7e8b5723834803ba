// What "listed" means for a resource URI (strict RFC 6570 template matching, never a prefix) and how often a miss
// may make the gateway re-read an upstream's lists (ListedRefresh). The end-to-end cases, through a gateway
// process and real upstreams, are in test/integration/listed-names.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ListedRefresh } from '../../src/gateway/listed-refresh.js';
import { templateMatches } from '../../src/gateway/merged-catalog.js';
import type { Upstream } from '../../src/upstream/life/upstream.js';

describe('resource templates match whole expansions only', () => {
  const cases: [string, string, boolean][] = [
    ['test://item/{id}', 'test://item/42', true],
    ['test://item/{id}', 'test://item/a%2Fb', false],
    ['test://item/{id}', 'test://item/a%5Cb', false],
    ['test://item/{id}', 'test://item/a%20b', true],
    ['test://item/{id}', 'test://item/..', false],
    ['test://item/{id}', 'test://item/%2e%2e', false],
    ['test://item/{id}', 'test://item/%34%32', false],
    ['test://item/{id}', 'test://item/a/b', false],
    ['test://item/{id}', 'test://item/', false],
    ['test://item/{id}', 'test://item/42/', false],
    ['test://item/{id}', 'TEST://ITEM/42', false],
    ['test://item/{id}', 'test://item/4 2', false],
    ['test://item/{id}', 'test://item/ｓ', false],
    ['test://template/{id}/data', 'test://template/1/data', true],
    ['test://template/{id}/data', 'test://template/1/data/more', false],
    ['file:///{+path}', 'file:///home/me/notes.txt', true],
    ['file:///{+path}', 'file:///', false],
    ['file:///{+path}', 'file:///%65tc/passwd', false],
    ['file:///{+path}', 'file:///public/../etc/passwd', false],
    ['file:///{+path}', 'file:///public/./notes.txt', false],
    ['file:///{+path}', 'file:///public/%2e%2e/etc/passwd', false],
    ['file:///{+path}', 'file:///public/%2E%2E%2Fetc/passwd', false],
    ['file:///{+path}', 'file:///public/..%2fetc/passwd', false],
    ['file:///{+path}', 'file:///public/..%2Fetc/passwd', false],
    ['file:///{+path}', 'file:///public/..%5cetc/passwd', false],
    ['file:///{+path}', 'file:///public/a..b/notes.txt', true],
    ['file:///public/{+path}', 'file:///public/../etc/passwd', false],
    ['file:///public/{name}', 'file:///public/..', false],
    ['doc://{#section}', 'doc://#intro', true],
    ['search://{?q}', 'search://?q=x', false],
  ];
  for (const [template, uri, expected] of cases) {
    it(`${template} ${expected ? 'matches' : 'does not match'} ${JSON.stringify(uri)}`, () => assert.equal(templateMatches(template, uri), expected));
  }
});

describe('misses re-read an upstream\'s lists boundedly', () => {
  /** An upstream as ListedRefresh sees it: its state, and a refresh that waits until the test lets it end. */
  function upstream(): { upstream: Upstream; refreshes: number; finish(): void } {
    const pending: (() => void)[] = [];
    const stand = {
      state: 'ready',
      refreshes: 0,
      refreshListed: () => {
        stand.refreshes++;
        return new Promise<void>((resolve) => pending.push(resolve));
      },
    };
    return {
      upstream: stand as unknown as Upstream,
      get refreshes() {
        return stand.refreshes;
      },
      finish: () => pending.splice(0).forEach((resolve) => resolve()),
    };
  }

  it('one refresh in flight, which every miss meanwhile waits for; none again within the interval', async () => {
    const refresh = new ListedRefresh(60_000);
    const up = upstream();
    const waits = Array.from({ length: 100 }, () => refresh.after(up.upstream));
    assert.equal(up.refreshes, 1);
    up.finish();
    await Promise.all(waits);
    await refresh.after(up.upstream);
    assert.equal(up.refreshes, 1, 'within the interval a miss is answered from the lists as they are');
  });

  it('after the interval a miss refreshes again; an upstream that is not up is not asked', async () => {
    const refresh = new ListedRefresh(0);
    const up = upstream();
    const first = refresh.after(up.upstream);
    up.finish();
    await first;
    const second = refresh.after(up.upstream);
    up.finish();
    await second;
    assert.equal(up.refreshes, 2);
    (up.upstream as unknown as { state: string }).state = 'down';
    await refresh.after(up.upstream);
    assert.equal(up.refreshes, 2);
  });
});
