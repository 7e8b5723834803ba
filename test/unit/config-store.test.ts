// The store's Sentinel and Cluster keys (issue 23): their exact names and shapes are a contract checked from
// outside the repo.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig, parseConfig, type ConfigIssue } from '../../src/config/load.js';
import { renderEffectiveConfig } from '../../src/config/render.js';

const UPSTREAMS = 'upstreams: { a: { command: a } }\n';
const parse = (text: string, env: Record<string, string> = {}) => parseConfig(text + UPSTREAMS, 'test.yaml', env);

function parseErrors(text: string): readonly ConfigIssue[] {
  try {
    parse(text);
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.errors;
  }
  assert.fail('expected a ConfigError');
}

describe('config: Redis Sentinel and Cluster', () => {
  it('takes a sentinel set: the primary\'s name and the sentinels, with credentials from the environment', () => {
    const config = parse(
      'store:\n  type: redis\n  prefix: tg\n  sentinel:\n    name: mymaster\n    nodes: ["redis://s1:26379", "redis://s2:26379"]\n' +
        '    password: ${REDIS_PASSWORD}\n    sentinelPassword: ${SENTINEL_PASSWORD}\n',
      { REDIS_PASSWORD: 'p1', SENTINEL_PASSWORD: 'p2' },
    );
    assert.deepEqual(config.store, {
      type: 'redis',
      url: 'redis://127.0.0.1:6379',
      prefix: 'tg',
      commandTimeoutMs: 5000,
      sentinel: { name: 'mymaster', nodes: ['redis://s1:26379', 'redis://s2:26379'], password: 'p1', sentinelPassword: 'p2' },
    });
  });

  it('takes a cluster: its nodes, with username, password and TLS as ioredis takes them', () => {
    const config = parse(
      'store:\n  type: redis\n  cluster:\n    nodes: ["rediss://c1:7000", "rediss://c2:7001"]\n    username: gw\n    password: secret\n' +
        '    tls: { servername: redis.example.com, rejectUnauthorized: false }\n',
    );
    assert.deepEqual(config.store, {
      type: 'redis',
      url: 'redis://127.0.0.1:6379',
      prefix: 'taskgate',
      commandTimeoutMs: 5000,
      cluster: { nodes: ['rediss://c1:7000', 'rediss://c2:7001'], username: 'gw', password: 'secret', tls: { servername: 'redis.example.com', rejectUnauthorized: false } },
    });
    assert.deepEqual(parse('store: { type: redis, cluster: { nodes: ["redis://c1:7000"], tls: true } }\n').store, {
      type: 'redis',
      url: 'redis://127.0.0.1:6379',
      prefix: 'taskgate',
      commandTimeoutMs: 5000,
      cluster: { nodes: ['redis://c1:7000'], tls: true },
    });
  });

  it('located errors: no nodes, a non-Redis URL, a missing name, both topologies, unknown keys', () => {
    const noNodes = parseErrors('store: { type: redis, cluster: { nodes: [] } }\n');
    assert.deepEqual(noNodes.map((e) => e.path), ['store.cluster.nodes']);
    assert.match(noNodes[0]?.message ?? '', /at least one node/);

    const badUrl = parseErrors('store: { type: redis, sentinel: { name: m, nodes: ["http://s1:26379"] } }\n');
    assert.deepEqual(badUrl.map((e) => e.path), ['store.sentinel.nodes[0]']);
    assert.match(badUrl[0]?.message ?? '', /redis:\/\//);

    assert.deepEqual(parseErrors('store: { type: redis, sentinel: { nodes: ["redis://s1:26379"] } }\n').map((e) => e.path), ['store.sentinel.name']);

    const both = parseErrors('store: { type: redis, sentinel: { name: m, nodes: ["redis://s:1"] }, cluster: { nodes: ["redis://c:1"] } }\n');
    assert.match(both[0]?.message ?? '', /either sentinel or cluster/);

    const unknown = parseErrors('store: { type: redis, sentinel: { name: m, nodes: ["redis://s:1"], sentinelPasword: x } }\n');
    assert.deepEqual(unknown.map((e) => e.path), ['store.sentinel.sentinelPasword']);
    assert.match(unknown[0]?.message ?? '', /sentinelPassword/);
  });

  it('the compose sentinel profile\'s config is valid', () => {
    const config = loadConfig(new URL('../../docker/taskgate.sentinel.yaml', import.meta.url).pathname, {});
    assert.deepEqual(config.store.type === 'redis' ? config.store.sentinel : undefined, {
      name: 'taskgate',
      nodes: ['redis://sentinel-1:26379', 'redis://sentinel-2:26379', 'redis://sentinel-3:26379'],
    });
  });

  it('check-config hides the passwords and TLS private keys', () => {
    const config = parse(
      'store:\n  type: redis\n  sentinel: { name: m, nodes: ["redis://s:1"], password: hunter2, sentinelPassword: hunter3, tls: { key: PRIVATE, ca: PUBLIC } }\n',
    );
    const out = renderEffectiveConfig(config);
    for (const secret of ['hunter2', 'hunter3', 'PRIVATE']) assert.ok(!out.includes(secret), `${secret} is hidden`);
    assert.ok(out.includes('PUBLIC') && out.includes('name: m'));
  });
});
