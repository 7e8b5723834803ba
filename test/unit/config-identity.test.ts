// The upstream-identity part of the config contract (issue 33): `identity` (issuer, signing and sealing keys) and
// `upstreams.<name>.auth` — defaults resolved, every refusal located at its line (token passthrough above all),
// key material checked at load, secrets redacted in check-config's output, a change classified on reload.
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { diffConfigs } from '../../src/config/diff.js';
import { parseConfig, type ConfigIssue } from '../../src/config/load.js';
import { configErrorsOf } from '../helpers/config-errors.js';
import { renderEffectiveConfig } from '../../src/config/render.js';
import type { HttpUpstreamConfig } from '../../src/config/types.js';

const EC_PEM = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const RSA_PEM = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const SMALL_RSA_PEM = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const P384_PEM = generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const SEALING = randomBytes(32).toString('base64');
const ENV = { GATEWAY_SIGNING_KEY: EC_PEM, RSA_KEY: RSA_PEM, TASKGATE_SEALING_KEY: SEALING, SECRET: 's3cret-value' };

const parse = (text: string, env: Record<string, string> = ENV) => parseConfig(text, 'test.yaml', env);
const errorsOf = (text: string, env: Record<string, string> = ENV): readonly ConfigIssue[] => configErrorsOf(() => parse(text, env));
const http = (config: ReturnType<typeof parse>, name: string) => config.upstreams.find((u) => u.name === name) as HttpUpstreamConfig;

const CONTRACT = `
listen: { port: 8080 }
auth:
  resource: https://gw.example/mcp
  apiKeys: [{ principal: ci, key: "0123456789abcdef" }]
  oauth: { issuer: "https://idp.example" }
identity:
  keys:
    - kid: k1
      privateKey: \${GATEWAY_SIGNING_KEY}
    - kid: k0
      privateKey: \${RSA_KEY}
  sealingKeys:
    - kid: s1
      key: \${TASKGATE_SEALING_KEY}
upstreams:
  cc:
    url: https://cc.example/mcp
    auth:
      clientCredentials: { clientId: gw, clientSecret: "\${SECRET}" }
  tx:
    url: https://tx.example/mcp
    transport: sse
    auth:
      tokenExchange: { clientId: gw, clientSecret: "\${SECRET}", tokenUrl: "http://127.0.0.1:9000/token", audience: tx, scope: "read write", tokenEndpointAuthMethod: client_secret_post }
      claimHeaders: { X-User: principal, X-Email: email }
      timeoutMs: 2500
  si:
    url: https://si.example/mcp
    auth:
      signedIdentity: { claims: [email, groups] }
  hdr:
    url: https://hdr.example/mcp
    auth:
      claimHeaders: { X-User: principal }
`;

describe('config: identity and upstreams.<name>.auth', () => {
  it('takes the contract shapes and resolves their defaults', () => {
    const config = parse(CONTRACT);
    assert.equal(config.identity?.issuer, 'https://gw.example', 'the origin of auth.resource');
    assert.deepEqual(config.identity?.keys.map((k) => [k.kid, k.alg]), [['k1', 'ES256'], ['k0', 'RS256']]);
    assert.deepEqual(config.identity?.sealingKeys, [{ kid: 's1', key: SEALING }]);

    const cc = http(config, 'cc').auth;
    assert.deepEqual(cc?.clientCredentials, {
      clientId: 'gw', clientSecret: 's3cret-value', tokenUrl: undefined, resource: 'https://cc.example/mcp', scope: undefined,
      tokenEndpointAuthMethod: 'client_secret_basic', issuer: undefined,
      // Discovered without tokenUrl or issuer: only the gateway's own issuer may have the secret.
      trustedIssuers: ['https://idp.example'],
    });
    assert.equal(cc?.timeoutMs, 10_000);
    assert.deepEqual(cc?.claimHeaders, {});

    const tx = http(config, 'tx').auth;
    assert.equal(tx?.tokenExchange?.audience, 'tx');
    assert.equal(tx?.tokenExchange?.tokenEndpointAuthMethod, 'client_secret_post');
    assert.equal(tx?.tokenExchange?.resource, 'https://tx.example/mcp');
    assert.deepEqual(tx?.claimHeaders, { 'X-User': 'principal', 'X-Email': 'email' });
    assert.equal(tx?.timeoutMs, 2500);

    assert.deepEqual(http(config, 'si').auth?.signedIdentity, { ttlSeconds: 300, claims: ['email', 'groups'], audience: 'https://si.example/mcp' });
    assert.equal(http(config, 'hdr').auth?.signedIdentity, undefined);
    assert.ok(Object.isFrozen(config.identity?.keys[0]));
  });

  it('without auth.resource the issuer is the listen address; identity.issuer wins over both', () => {
    const base = 'upstreams: { a: { url: "http://127.0.0.1:1/mcp" } }\n';
    assert.equal(parse(`${base}listen: { port: 9090 }\nidentity: {}\n`).identity?.issuer, 'http://127.0.0.1:9090');
    assert.equal(parse(`${base}identity: { issuer: "https://id.example/gw" }\n`).identity?.issuer, 'https://id.example/gw');
    assert.equal(parse(base).identity, undefined);
  });

  it('refuses two modes on one upstream, and an empty auth', () => {
    const two = errorsOf(`
identity: { keys: [{ kid: k1, privateKey: "\${GATEWAY_SIGNING_KEY}" }] }
upstreams:
  a:
    url: http://127.0.0.1:1/mcp
    auth:
      clientCredentials: { clientId: gw, clientSecret: x, tokenUrl: "http://127.0.0.1:1/token" }
      signedIdentity: {}
`);
    assert.equal(two.length, 1);
    assert.equal(two[0]?.path, 'upstreams.a.auth.signedIdentity');
    assert.match(two[0]?.message ?? '', /one of clientCredentials, tokenExchange, signedIdentity/);
    assert.equal(two[0]?.line, 8);
    const empty = errorsOf('upstreams: { a: { url: "http://127.0.0.1:1/mcp", auth: {} } }');
    assert.match(empty[0]?.message ?? '', /auth needs clientCredentials, tokenExchange, signedIdentity, authorizationCode or claimHeaders/);
  });

  it('refuses a claim header that would set the credential or a transport header', () => {
    const errors = errorsOf('upstreams: { a: { url: "http://127.0.0.1:1/mcp", auth: { claimHeaders: { Authorization: sub, X-Ok: sub } } } }');
    assert.equal(errors.length, 1);
    assert.equal(errors[0]?.path, 'upstreams.a.auth.claimHeaders.Authorization');
    assert.match(errors[0]?.message ?? '', /a claim may not set it/);
  });

  it('refuses signedIdentity without identity.keys, at the upstream that needs them', () => {
    const errors = errorsOf(`
upstreams:
  a:
    url: http://127.0.0.1:1/mcp
    auth:
      signedIdentity: { ttlSeconds: 60 }
`);
    assert.equal(errors.length, 1);
    assert.equal(errors[0]?.path, 'upstreams.a.auth.signedIdentity');
    assert.equal(errors[0]?.line, 6);
    assert.match(errors[0]?.message ?? '', /needs a signing key: add identity\.keys/);
  });

  it('refuses tokenExchange without auth.oauth: no caller would have a token to exchange', () => {
    const errors = errorsOf('upstreams: { a: { url: "http://127.0.0.1:1/mcp", auth: { tokenExchange: { clientId: gw, clientSecret: x } } } }');
    assert.equal(errors.length, 1);
    assert.equal(errors[0]?.path, 'upstreams.a.auth.tokenExchange');
    assert.match(errors[0]?.message ?? '', /configure auth\.oauth/);
  });

  it('caps signedIdentity.ttlSeconds at 3600', () => {
    const errors = errorsOf(`
identity: { keys: [{ kid: k1, privateKey: "\${GATEWAY_SIGNING_KEY}" }] }
upstreams: { a: { url: "http://127.0.0.1:1/mcp", auth: { signedIdentity: { ttlSeconds: 86400 } } } }
`);
    assert.equal(errors[0]?.path, 'upstreams.a.auth.signedIdentity.ttlSeconds');
    assert.match(errors[0]?.message ?? '', /<= 3600/);
  });

  for (const [written, path] of [
    ['auth: passthrough', 'upstreams.a.auth'],
    ['auth: forward', 'upstreams.a.auth'],
    ['auth: { passthrough: true }', 'upstreams.a.auth.passthrough'],
    ['auth: { forwardToken: true }', 'upstreams.a.auth.forwardToken'],
    ['auth: { forwardClientToken: true, claimHeaders: { X-User: principal } }', 'upstreams.a.auth.forwardClientToken'],
  ] as const) {
    it(`refuses token passthrough (${written}) at its line, saying why`, () => {
      const errors = errorsOf(`upstreams:\n  a:\n    url: http://127.0.0.1:1/mcp\n    ${written}\n`);
      assert.equal(errors.length, 1, JSON.stringify(errors));
      assert.equal(errors[0]?.path, path);
      assert.equal(errors[0]?.line, 4);
      assert.match(errors[0]?.message ?? '', /MUST NOT pass through the token it received from the MCP client/);
      assert.match(errors[0]?.message ?? '', /tokenExchange/);
    });
  }

  it('refuses auth on a stdio upstream that is not per-principal (config-stdio-principal.test.ts has the rest)', () => {
    const errors = errorsOf('upstreams: { a: { command: node, auth: { claimHeaders: { X-User: principal } } } }');
    assert.equal(errors[0]?.path, 'upstreams.a.auth');
    assert.match(errors[0]?.message ?? '', /auth on a stdio upstream needs isolation: per-principal/);
  });

  it('checks key material at load: a bad PEM, a weak or unsupported key, a sealing key of the wrong size', () => {
    const text = `
identity:
  keys:
    - { kid: bad, privateKey: "not a pem" }
    - { kid: small, privateKey: "\${SMALL}" }
    - { kid: p384, privateKey: "\${P384}" }
  sealingKeys:
    - { kid: short, key: "${randomBytes(16).toString('base64')}" }
    - { kid: junk, key: "***" }
upstreams: { a: { url: "http://127.0.0.1:1/mcp" } }
`;
    const errors = errorsOf(text, { ...ENV, SMALL: SMALL_RSA_PEM, P384: P384_PEM });
    const byPath = Object.fromEntries(errors.map((e) => [e.path, e]));
    assert.match(byPath['identity.keys[0].privateKey']?.message ?? '', /not a PEM private key/);
    assert.match(byPath['identity.keys[1].privateKey']?.message ?? '', /1024 bits; at least 2048/);
    assert.match(byPath['identity.keys[2].privateKey']?.message ?? '', /secp384r1; only P-256/);
    assert.match(byPath['identity.sealingKeys[0].key']?.message ?? '', /exactly 32 random bytes/);
    assert.match(byPath['identity.sealingKeys[1].key']?.message ?? '', /exactly 32 random bytes/);
    assert.equal(byPath['identity.keys[0].privateKey']?.line, 4);
    for (const e of errors) assert.ok(!e.message.includes('PRIVATE KEY-----\n'), 'no key material in messages');
  });

  it('refuses a key id used twice and unknown keys with did-you-mean', () => {
    const errors = errorsOf(`
identity:
  keys: [{ kid: k1, privateKey: "\${GATEWAY_SIGNING_KEY}" }, { kid: k1, privateKey: "\${GATEWAY_SIGNING_KEY}" }]
upstreams: { a: { url: "http://127.0.0.1:1/mcp", auth: { clientCredentials: { clientId: gw, clientSecert: x } } } }
`);
    const byPath = Object.fromEntries(errors.map((e) => [e.path, e.message]));
    assert.match(byPath['identity.keys[1].kid'] ?? '', /used twice/);
    assert.match(byPath['upstreams.a.auth.clientCredentials.clientSecert'] ?? '', /did you mean "clientSecret"/);
  });

  it('check-config redacts client secrets and key material, keeping key ids and the rest', () => {
    const out = renderEffectiveConfig(parse(CONTRACT));
    for (const secret of ['s3cret-value', SEALING, 'BEGIN PRIVATE KEY']) assert.ok(!out.includes(secret), `${secret.slice(0, 12)} leaked`);
    const first = parseYaml(out.split('\n---\n')[0] ?? '') as {
      identity: { keys: { kid: string; privateKey: string }[]; sealingKeys: { key: string }[] };
      upstreams: Record<string, { auth: Record<string, { clientSecret?: string } | undefined> }>;
    };
    assert.equal(first.identity.keys[0]?.kid, 'k1');
    assert.equal(first.identity.keys[0]?.privateKey, '[redacted]');
    assert.equal(first.identity.sealingKeys[0]?.key, '[redacted]');
    assert.equal(first.upstreams.cc?.auth.clientCredentials?.clientSecret, '[redacted]');
    assert.equal(first.upstreams.tx?.auth.tokenExchange?.clientSecret, '[redacted]');
    assert.deepEqual(first.upstreams.tx?.auth.claimHeaders, { 'X-User': 'principal', 'X-Email': 'email' });
  });

  it('on reload, an auth change is an upstream change (as headers are) and an identity change applies live; no values in the words', () => {
    const before = parse(CONTRACT);
    const after = parse(CONTRACT, { ...ENV, SECRET: 'rotated-secret', TASKGATE_SEALING_KEY: randomBytes(32).toString('base64') });
    const diff = diffConfigs(before, after);
    assert.deepEqual(diff.upstreams.changed.map((u) => u.name), ['cc', 'tx']);
    assert.equal(diff.live.identity, true);
    const words = [...diff.changes, ...diff.restart].join('\n');
    assert.match(words, /upstream 'cc' changed \(auth\.clientCredentials\.clientSecret\)/);
    assert.match(words, /identity\.sealingKeys changed/);
    assert.ok(!words.includes('rotated-secret') && !words.includes('s3cret'));
    assert.equal(diffConfigs(before, parse(CONTRACT)).live.identity, false);
  });
});

describe('config: per-user consent (upstreams.<name>.auth.authorizationCode, auth.oauth.login, listen.publicUrl)', () => {
  const CONSENT = (over: { login?: string; sealing?: boolean; transport?: string; code?: string; publicUrl?: string } = {}) => `
listen: { port: 8080${over.publicUrl === undefined ? '' : `, publicUrl: "${over.publicUrl}"`} }
auth:
  resource: https://gw.example/mcp
  oauth:
    issuer: "https://idp.example"
${over.login ?? '    login: { clientId: taskgate, clientSecret: "${SECRET}" }'}
identity:
  allowedAuthorizationServers: ["https://github.com/login/oauth"]
${over.sealing === false ? '' : '  sealingKeys: [{ kid: s1, key: "${TASKGATE_SEALING_KEY}" }]'}
upstreams:
  gh:
    url: https://api.githubcopilot.com/mcp/
${over.transport === undefined ? '' : `    transport: ${over.transport}`}
    auth:
      authorizationCode: ${over.code ?? '{ scopes: [repo, read:org], extraAuthorizeParams: { prompt: consent } }'}
`;

  it('loads the contract: resource defaults to the upstream URL, dynamic registration when no clientId', () => {
    const config = parse(CONSENT({ publicUrl: 'https://mcp.example.com' }));
    const code = http(config, 'gh').auth?.authorizationCode;
    assert.deepEqual(code, { scopes: ['repo', 'read:org'], extraAuthorizeParams: { prompt: 'consent' }, resource: 'https://api.githubcopilot.com/mcp/' });
    assert.equal(config.listen.publicUrl, 'https://mcp.example.com');
    assert.deepEqual(config.auth?.oauth?.login, { clientId: 'taskgate', clientSecret: 's3cret-value' });
    assert.deepEqual(config.identity?.allowedAuthorizationServers, ['https://github.com/login/oauth']);
  });

  it('refuses it without a front-door login, without sealing keys, on stdio, each at its line', () => {
    const noLogin = errorsOf(CONSENT({ login: '' }));
    assert.ok(noLogin.some((e) => e.path === 'upstreams.gh.auth.authorizationCode' && /auth\.oauth\.login/.test(e.message)), JSON.stringify(noLogin));
    const noSealing = errorsOf(CONSENT({ sealing: false }));
    assert.ok(noSealing.some((e) => e.path === 'upstreams.gh.auth.authorizationCode' && /identity\.sealingKeys/.test(e.message)), JSON.stringify(noSealing));
  });

  it('refuses a secret without its client id, a reserved authorize parameter, a second mode, a public URL with a path', () => {
    assert.ok(errorsOf(CONSENT({ code: '{ clientSecret: x }' })).some((e) => /needs its clientId/.test(e.message)));
    for (const reserved of ['redirect_uri', 'state', 'Code_Challenge', 'scope']) {
      const errors = errorsOf(CONSENT({ code: `{ extraAuthorizeParams: { ${reserved}: x } }` }));
      assert.ok(errors.some((e) => e.path.endsWith(`extraAuthorizeParams.${reserved}`) && /may not be replaced/.test(e.message)), `${reserved}: ${JSON.stringify(errors)}`);
    }
    const twoModes = errorsOf(CONSENT({ code: '{}\n      signedIdentity: {}' }));
    assert.ok(twoModes.some((e) => /give one of/.test(e.message)), JSON.stringify(twoModes));
    assert.ok(errorsOf(CONSENT({ publicUrl: 'https://mcp.example.com/base' })).some((e) => e.path === 'listen.publicUrl'));
  });

  it('hides both client secrets in check-config', () => {
    const text = renderEffectiveConfig(parse(CONSENT({ code: '{ clientId: gh-app, clientSecret: "${SECRET}" }' })));
    assert.ok(!text.includes('s3cret-value'), text);
  });
});
