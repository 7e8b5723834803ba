// `isolation: per-principal` stdio upstreams (issue 33, item 3): caller placeholders in env, `idleTimeoutMs`, and
// `auth` allowed on stdio only there; every refusal located at the line that asks for it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseConfig, type ConfigIssue } from '../../src/config/load.js';
import { configErrorsOf } from '../helpers/config-errors.js';
import { renderEffectiveConfig } from '../../src/config/render.js';
import type { StdioUpstreamConfig } from '../../src/config/types.js';

const parse = (text: string) => parseConfig(text, 'test.yaml', { SECRET: 's3cret-value' });
const errorsOf = (text: string): readonly ConfigIssue[] => configErrorsOf(() => parse(text));
const stdio = (text: string) => parse(text).upstreams[0] as StdioUpstreamConfig;
const one = (issues: readonly ConfigIssue[], path: string): ConfigIssue => {
  const found = issues.find((i) => i.path === path);
  assert.ok(found, `expected an issue at ${path}, got ${JSON.stringify(issues)}`);
  return found;
};

describe('config: per-principal stdio upstreams', () => {
  it('takes per-principal with placeholders, idleTimeoutMs and auth, and keeps the placeholders for spawn time', () => {
    const config = stdio(`
upstreams:
  gh:
    command: node
    isolation: per-principal
    idleTimeoutMs: 60000
    maxSessions: 8
    env:
      GITHUB_USER: "{{principal}}"
      EMAIL: "mail={{ claims.email }}"
      GITHUB_TOKEN: "{{upstreamToken}}"
      PLAIN: "\${SECRET}"
    auth:
      clientCredentials: { clientId: gw, clientSecret: "\${SECRET}", tokenUrl: "https://as.example/token", resource: "https://api.github.example" }
`);
    assert.equal(config.isolation, 'per-principal');
    assert.equal(config.idleTimeoutMs, 60000);
    assert.equal(config.maxSessions, 8);
    assert.deepEqual(config.env, { GITHUB_USER: '{{principal}}', EMAIL: 'mail={{ claims.email }}', GITHUB_TOKEN: '{{upstreamToken}}', PLAIN: 's3cret-value' });
    assert.equal(config.auth?.clientCredentials?.resource, 'https://api.github.example');
  });

  it('check-config hides the client secret of a stdio upstream\'s auth, and env values as always', () => {
    const out = renderEffectiveConfig(parse(`
upstreams:
  gh:
    command: node
    isolation: per-principal
    env: { GITHUB_TOKEN: "{{upstreamToken}}" }
    auth:
      tokenExchange: { clientId: gw, clientSecret: "\${SECRET}", tokenUrl: "https://as.example/token", resource: "https://api.example" }
auth:
  oauth: { issuer: "https://idp.example" }
  resource: https://gw.example/mcp
`));
    assert.ok(!out.includes('s3cret-value'), out);
    assert.match(out, /clientId: gw/);
  });

  it('defaults idleTimeoutMs to five minutes', () => {
    assert.equal(stdio('upstreams:\n  a: { command: node, isolation: per-principal }\n').idleTimeoutMs, 300_000);
  });

  it('refuses a caller placeholder in a shared or per-session upstream, at its env line; other braces stay literal there', () => {
    for (const isolation of ['shared', 'per-session']) {
      const issues = errorsOf(`
upstreams:
  a:
    command: node
    isolation: ${isolation}
    env:
      FMT: "{{.Name}}"
      WHO: "{{principal}}"
`);
      assert.equal(issues.length, 1, JSON.stringify(issues));
      const issue = one(issues, 'upstreams.a.env.WHO');
      assert.equal(issue.line, 8);
      assert.match(issue.message, /isolation: per-principal/);
      assert.match(issue.message, new RegExp(isolation));
    }
    assert.equal(stdio('upstreams:\n  a: { command: node, env: { FMT: "{{.Name}}" } }\n').env.FMT, '{{.Name}}');
  });

  it('refuses an unknown placeholder in a per-principal upstream, naming the forms', () => {
    const issue = one(errorsOf('upstreams:\n  a:\n    command: node\n    isolation: per-principal\n    env: { WHO: "{{principle}}" }\n'), 'upstreams.a.env.WHO');
    assert.match(issue.message, /unknown placeholder "\{\{principle\}\}".*\{\{principal\}\}, \{\{claims\.<claim>\}\} or \{\{upstreamToken\}\}/);
  });

  it('refuses {{upstreamToken}} without auth', () => {
    const issue = one(errorsOf('upstreams:\n  a:\n    command: node\n    isolation: per-principal\n    env: { TOKEN: "{{upstreamToken}}" }\n'), 'upstreams.a.env.TOKEN');
    assert.match(issue.message, /needs auth on this upstream/);
  });

  it('refuses auth on a stdio upstream that is not per-principal', () => {
    for (const isolation of ['shared', 'per-session']) {
      const issue = one(errorsOf(`
upstreams:
  a:
    command: node
    isolation: ${isolation}
    auth:
      clientCredentials: { clientId: gw, clientSecret: x, resource: "https://api.example" }
`), 'upstreams.a.auth');
      assert.equal(issue.line, 6);
      assert.match(issue.message, /needs isolation: per-principal/);
    }
  });

  it('refuses claimHeaders on stdio, and asks for the resource or audience a stdio token is for', () => {
    const issues = errorsOf(`
identity:
  keys: []
upstreams:
  a:
    command: node
    isolation: per-principal
    auth:
      clientCredentials: { clientId: gw, clientSecret: x }
      claimHeaders: { X-User: principal }
  b:
    command: node
    isolation: per-principal
    auth:
      signedIdentity: {}
`);
    assert.match(one(issues, 'upstreams.a.auth.claimHeaders').message, /no headers.*\{\{claims\.<claim>\}\}/);
    assert.match(one(issues, 'upstreams.a.auth.clientCredentials.resource').message, /required on a stdio upstream/);
    assert.match(one(issues, 'upstreams.b.auth.signedIdentity.audience').message, /required on a stdio upstream/);
  });

  it('refuses token passthrough on stdio as on HTTP', () => {
    const issue = one(errorsOf('upstreams:\n  a:\n    command: node\n    isolation: per-principal\n    auth: passthrough\n'), 'upstreams.a.auth');
    assert.match(issue.message, /MUST NOT pass/);
  });

  it('says isolation takes per-principal', () => {
    const issue = one(errorsOf('upstreams:\n  a: { command: node, isolation: per-caller }\n'), 'upstreams.a.isolation');
    assert.match(issue.message, /per-principal/);
  });
});
