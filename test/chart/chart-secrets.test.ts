// Secrets stay out of ConfigMaps: every secret value of the full values is in a Secret and in no ConfigMap; a secret
// written literally into `config` and a placeholder left where a secret goes each fail the render with a message
// naming the value; so do missing required values and a grace period too short for the drain.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { CHART_VALUES_DIR, render, renderText } from '../helpers/helm.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const full = parse(readFileSync(join(CHART_VALUES_DIR, 'full-values.yaml'), 'utf8')) as { secretEnv: Record<string, string>; redis: { password: string } };
const SECRETS = [...Object.values(full.secretEnv), full.redis.password];

async function failure(set: Record<string, unknown>, values = ['required']): Promise<string> {
  const result = await renderText({ values, set });
  assert.equal(result.ok, false, `rendered although it should fail: ${JSON.stringify(set)}`);
  return result.stderr;
}

describe('chart: secrets', () => {
  it('every secret value is in a Secret and in no ConfigMap, plain or base64', async () => {
    const objects = await render({ values: ['full'] });
    const configMaps = JSON.stringify(objects.filter((o) => o.kind === 'ConfigMap'));
    const secretValues = objects
      .filter((o) => o.kind === 'Secret')
      .flatMap((o) => Object.values((o as { data?: Record<string, string> }).data ?? {}).map((v) => Buffer.from(v, 'base64').toString()));
    for (const secret of SECRETS) {
      assert.ok(!configMaps.includes(secret) && !configMaps.includes(Buffer.from(secret).toString('base64')), `${secret} in a ConfigMap`);
      assert.ok(secretValues.includes(secret), `${secret} in no Secret`);
    }
    // Nor anywhere else outside a Secret (env values, annotations).
    const rest = JSON.stringify(objects.filter((o) => o.kind !== 'Secret'));
    for (const secret of SECRETS) assert.ok(!rest.includes(secret), `${secret} outside a Secret`);
  });

  it('a literal at a secret\'s place in config fails the render, naming it', async () => {
    const upstream = { transport: 'streamable-http', url: 'http://u:3001/mcp' };
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ 'config.auth.apiKeys': [{ principal: 'ci', key: 'a-literal-api-key-1234' }] }, 'config.auth.apiKeys[0].key'],
      [{ 'config.upstreams.u': { ...upstream, headers: { Authorization: 'Bearer abc123' } } }, 'config.upstreams.u.headers.Authorization'],
      [{ 'config.upstreams.u': { ...upstream, headers: { 'X-Api-Key': 'abc123' } } }, 'config.upstreams.u.headers.X-Api-Key'],
      [{ 'config.upstreams.u': { ...upstream, url: 'http://u:3001/mcp?access_token=abc' } }, 'config.upstreams.u.url'],
      [{ 'config.upstreams.u': { transport: 'stdio', command: 'x', env: { GITHUB_TOKEN: 'ghp_literal' } } }, 'config.upstreams.u.env.GITHUB_TOKEN'],
      [{ 'config.upstreams.u': { ...upstream, auth: { clientCredentials: { tokenUrl: 'https://as/token', clientId: 'gw', clientSecret: 's3cret' } } } }, 'config.upstreams.u.auth.clientCredentials.clientSecret'],
      [{ 'config.store.url': 'redis://:hunter2@redis:6379' }, 'config.store.url'],
      [{ 'config.store.sentinel.sentinelPassword': 'hunter2' }, 'config.store.sentinel.sentinelPassword'],
      [{ 'config.identity.sealingKeys': [{ id: 'k1', key: 'AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=' }] }, 'config.identity.sealingKeys[0].key'],
      [{ 'config.identity.keys': [{ id: 'k1', privateKey: '-----BEGIN PRIVATE KEY-----' }] }, 'config.identity.keys[0].privateKey'],
      [{ 'config.webhooks': [{ url: 'https://hooks/x', secret: 'whsec_abc' }] }, 'config.webhooks[0].secret'],
      [{ 'config.auth.oauth.login.clientSecret': 'abc' }, 'config.auth.oauth.login.clientSecret'],
    ];
    for (const [set, path] of cases) {
      const message = await failure(set);
      assert.ok(message.includes(`${path} holds a literal secret`), `${path}: ${message}`);
      assert.match(message, /\$\{SOME_VAR\}.*Secret/);
    }
  });

  it('references to env vars at the same places render', async () => {
    const result = await renderText({
      values: ['required'],
      set: {
        'config.upstreams.everything.headers': { Authorization: 'Bearer ${UP_TOKEN}', 'X-Api-Key': '${UP_KEY}' },
        'config.auth.apiKeys': [{ principal: 'ci', key: '${CI_KEY}' }],
        'config.webhooks': [{ url: 'https://hooks/x?token=${HOOK_TOKEN}', secret: '${HOOK_SECRET}' }],
        'config.store.url': 'redis://:${REDIS_PW}@redis:6379',
      },
    });
    assert.ok(result.ok, result.stderr);
  });

  it('a placeholder where a secret goes fails the render, naming it', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ 'secretEnv.CI_KEY': '' }, /secretEnv\.CI_KEY is empty or a placeholder/],
      [{ 'secretEnv.CI_KEY': 'change-me' }, /secretEnv\.CI_KEY is empty or a placeholder/],
      [{ 'secretEnv.CI_KEY': 'CHANGEME-later' }, /secretEnv\.CI_KEY is empty or a placeholder/],
      [{ 'secretEnv.CI_KEY': '<your api key>' }, /secretEnv\.CI_KEY is empty or a placeholder/],
      [{ 'redis.url': 'redis://:change-me@redis:6379' }, /redis\.url carries a placeholder password/],
      [{ 'redis.mode': 'cluster', 'redis.cluster.nodes': ['redis://c:6379'], 'redis.password': 'changeme' }, /redis\.password is a placeholder/],
    ];
    for (const [set, message] of cases) assert.match(await failure(set), message);
  });

  it('missing required values fail the render with what to give', async () => {
    const none = { 'redis.url': '' };
    assert.match(await failure(none), /redis\.url or redis\.existingSecret is required/);
    assert.match(await failure({ 'config.upstreams': null }), /config\.upstreams is required/);
    assert.match(await failure({ 'redis.mode': 'sentinel', 'redis.sentinel.name': 'm' }), /redis\.sentinel\.nodes is required/);
    assert.match(await failure({ 'redis.mode': 'sentinel', 'redis.sentinel.nodes': ['redis://s:26379'] }), /redis\.sentinel\.name is required/);
    assert.match(await failure({ 'redis.mode': 'cluster' }), /redis\.cluster\.nodes is required/);
    assert.match(await failure({ 'ingress.enabled': true }), /ingress\.hosts needs at least one host/);
    assert.match(await failure({ terminationGracePeriodSeconds: 20 }), /terminationGracePeriodSeconds \(20\) must exceed .* \(30\)/);
    assert.match(await failure({ 'config.shutdownTimeoutMs': 0 }), /config\.shutdownTimeoutMs must be above 0/);
  });
});
