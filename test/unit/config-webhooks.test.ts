// The `webhooks` and `webhookDelivery` sections (issue 34): the contract's keys as operators write them, secrets from
// `${ENV}` checked for shape and never shown (check-config, error messages, reload words), endpoint ids stable
// and unique, and a reload that changes them applies live.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { diffConfigs } from '../../src/config/diff.js';
import { parseConfig, type ConfigIssue } from '../../src/config/load.js';
import { configErrorsOf } from '../helpers/config-errors.js';
import { renderEffectiveConfig } from '../../src/config/render.js';

const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const ENV = { HOOK_SECRET: SECRET };
const parse = (text: string, env: Record<string, string> = ENV) => parseConfig(text, 'test.yaml', env);
const errorsOf = (text: string, env: Record<string, string> = ENV): readonly ConfigIssue[] => configErrorsOf(() => parse(text, env));

const BASE = `
upstreams:
  fx: { url: "https://fx.example/mcp" }
`;
const CONTRACT = `${BASE}
webhooks:
  - url: "https://hooks.example/taskgate?token=abc"
    events: [task.created, task.completed, task.failed, task.cancelled, task.input_required, approval.requested, approval.decided]
    secret: \${HOOK_SECRET}
    tools: ["deploy_*"]
    principals: [alice, "key:ci-*"]
    includeResult: true
  - url: "https://pager.example/hook"
    events: [approval.requested]
    secret: \${HOOK_SECRET}
    id: pager
`;

describe('config: webhooks', () => {
  it('takes the contract keys, derives a stable id from the URL, fills the delivery defaults', () => {
    const config = parse(CONTRACT);
    const [hooks, pager] = config.webhooks;
    assert.equal(hooks?.secret, SECRET);
    assert.deepEqual(hooks?.tools, ['deploy_*']);
    assert.deepEqual(hooks?.principals, ['alice', 'key:ci-*']);
    assert.equal(hooks?.includeResult, true);
    assert.match(String(hooks?.id), /^url-[0-9a-f]{12}$/);
    assert.equal(parse(CONTRACT).webhooks[0]?.id, hooks?.id, 'the same URL gives the same id on every replica');
    assert.equal(pager?.id, 'pager');
    assert.equal(pager?.includeResult, false);
    assert.equal(pager?.tools, undefined);
    assert.deepEqual(config.webhookDelivery, { timeoutMs: 10_000, maxAgeMs: 86_400_000, initialBackoffMs: 1_000, maxBackoffMs: 600_000, maxQueuedPerEndpoint: 10_000, maxQueuedBytesPerEndpoint: 67_108_864, maxBodyBytes: 262_144, concurrency: 4 });
    assert.deepEqual(parse(BASE).webhooks, []);
  });

  it('refuses a queue byte bound below the largest body: such a queue would drop every body of that size', () => {
    const errors = errorsOf(`${CONTRACT}\nwebhookDelivery: { maxBodyBytes: 65536, maxQueuedBytesPerEndpoint: 4096 }`);
    assert.ok(errors.some((e) => e.path === 'webhookDelivery.maxQueuedBytesPerEndpoint' && /at least maxBodyBytes \(65536\)/.test(e.message)), JSON.stringify(errors));
  });

  it('refuses a secret that is not whsec_ + base64 of 24-64 bytes, without echoing it', () => {
    for (const bad of ['plain-text-secret', `whsec_${randomBytes(8).toString('base64')}`, `whsec_${randomBytes(65).toString('base64')}`]) {
      const errors = errorsOf(CONTRACT, { HOOK_SECRET: bad });
      assert.ok(errors.some((e) => e.path === 'webhooks[0].secret' && /whsec_/.test(e.message)), JSON.stringify(errors));
      assert.ok(!JSON.stringify(errors).includes(bad), 'the secret is not in the error');
    }
  });

  it('refuses unknown events, keys, and two endpoints of one id', () => {
    assert.ok(errorsOf(`${BASE}\nwebhooks: [{ url: "https://a.example", events: [task.done], secret: "\${HOOK_SECRET}" }]`).some((e) => e.path === 'webhooks[0].events[0]'));
    assert.ok(errorsOf(`${BASE}\nwebhooks: [{ url: "https://a.example", events: [task.created], secret: "\${HOOK_SECRET}", retries: 3 }]`).some((e) => e.path === 'webhooks[0].retries'));
    const twice = `${BASE}\nwebhooks:\n  - { url: "https://a.example", events: [task.created], secret: "\${HOOK_SECRET}" }\n  - { url: "https://a.example", events: [task.failed], secret: "\${HOOK_SECRET}" }`;
    assert.ok(errorsOf(twice).some((e) => e.path === 'webhooks[1].id' && /used twice/.test(e.message)));
  });

  it('check-config hides secrets and credential-looking query parameters', () => {
    const out = renderEffectiveConfig(parse(CONTRACT));
    assert.ok(!out.includes(SECRET));
    assert.ok(!out.includes('token=abc'));
    assert.match(out, /secret: "?\[redacted\]"?/);
    assert.match(out, /maxQueuedPerEndpoint: 10000/);
  });

  it('a reload that changes them applies live, named by key path only', () => {
    const running = parse(CONTRACT);
    const next = parse(CONTRACT.replace('includeResult: true', 'includeResult: false'), { HOOK_SECRET: `whsec_${randomBytes(32).toString('base64')}` });
    const diff = diffConfigs(running, next);
    assert.equal(diff.live.webhooks, true);
    assert.deepEqual(diff.changes, ['webhooks changed']);
    assert.equal(diff.effective.webhooks[0]?.includeResult, false);
    assert.equal(diffConfigs(running, parse(`${CONTRACT}\nwebhookDelivery: { timeoutMs: 500 }`)).live.webhooks, true);
    assert.equal(diffConfigs(running, parse(CONTRACT)).live.webhooks, false);
  });
});
