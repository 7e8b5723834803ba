// What a reload would change (config/diff.ts) and when the config file counts as changed (config/watch.ts),
// on real files.
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { diffConfigs } from '../../src/config/diff.js';
import { parseConfig } from '../../src/config/load.js';
import { watchConfigFile } from '../../src/config/watch.js';

const upstream = (name: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ [name]: { transport: 'streamable-http', url: `http://127.0.0.1:1/${name}`, prefix: `${name}_`, ...extra } });

function config(extra: Record<string, unknown>): ReturnType<typeof parseConfig> {
  return parseConfig(stringify({ listen: { port: 8080 }, upstreams: upstream('a'), ...extra }), 'test.yaml', {});
}

test('diff: upstreams added, removed and changed are named, with the keys that changed', () => {
  const running = config({ upstreams: { ...upstream('a'), ...upstream('b') } });
  const next = config({ upstreams: { ...upstream('a', { headers: { authorization: 'Bearer secret' } }), ...upstream('c') } });
  const diff = diffConfigs(running, next);
  assert.deepEqual(diff.changes, ["upstream 'c' added", "upstream 'b' removed", "upstream 'a' changed (headers.authorization)"]);
  assert.deepEqual(diff.restart, []);
  assert.ok(!JSON.stringify(diff.changes).includes('secret'), 'values never appear in the words');
});

test('diff: settings bound at start need a restart and keep their running value', () => {
  const running = config({ auth: { resource: 'http://a.example/mcp', apiKeys: [{ principal: 'p', key: 'k'.repeat(16) }] } });
  const next = config({ listen: { port: 9090 }, sse: { keepAliveMs: 1234 }, auth: { resource: 'http://b.example/mcp', apiKeys: [{ principal: 'p', key: 'k'.repeat(16) }], rateLimits: { requestsPerSecond: 5 } } });
  const diff = diffConfigs(running, next);
  assert.deepEqual(diff.restart, ['listen.port needs a restart', 'sse.keepAliveMs needs a restart', 'auth.resource needs a restart']);
  assert.equal(diff.effective.listen.port, 8080);
  assert.equal(diff.effective.sse.keepAliveMs, running.sse.keepAliveMs);
  assert.equal(diff.effective.auth?.resource, 'http://a.example/mcp');
  assert.equal(diff.effective.auth?.rateLimits.requestsPerSecond, 5);
  assert.deepEqual(diff.changes, ['auth.rateLimits.requestsPerSecond changed']);
  assert.equal(diff.live.rateLimits, true);
  assert.equal(diff.live.credentials, false);
});

test('diff: turning auth on needs a restart; task policy and log level apply live', () => {
  const running = config({});
  const next = config({ auth: { resource: 'http://a.example/mcp', apiKeys: [{ principal: 'p', key: 'k'.repeat(16) }] }, tasks: { defaults: { mode: 'required' } }, log: { level: 'debug' } });
  const diff = diffConfigs(running, next);
  assert.deepEqual(diff.restart, ['auth added: needs a restart']);
  assert.equal(diff.effective.auth, undefined);
  assert.equal(diff.live.tasks, true);
  assert.equal(diff.live.log, true);
  assert.deepEqual(diffConfigs(running, config({})).changes, []);
});

test('watch: a file replaced by rename is noticed; rewriting the same bytes is not', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'taskgate-watch-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'taskgate.yaml');
  writeFileSync(path, 'a: 1\n');
  let calls = 0;
  let wake: (() => void) | undefined;
  const watch = watchConfigFile(path, () => {
    calls++;
    wake?.();
  }, { debounceMs: 20 });
  t.after(() => watch.close());
  const changed = (): Promise<void> => new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no change noticed')), 10_000);
    wake = () => {
      clearTimeout(timer);
      resolve();
    };
  });

  let next = changed();
  writeFileSync(join(dir, 'new.tmp'), 'a: 2\n');
  renameSync(join(dir, 'new.tmp'), path);
  await next;
  assert.equal(calls, 1);

  // The same bytes again, an unrelated file, then new bytes: one call, for the new bytes (whether the watcher
  // settles between the writes or not).
  next = changed();
  writeFileSync(path, 'a: 2\n');
  writeFileSync(join(dir, 'unrelated.txt'), 'x');
  writeFileSync(path, 'a: 3\n');
  await next;
  assert.equal(calls, 2);
});
