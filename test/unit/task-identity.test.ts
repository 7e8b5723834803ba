// What the dashboard says a task's upstream sees (src/http/task-identity.ts), for each way an upstream can be
// configured (parsed by the real loader) and each state of a task's kept call; never a secret from the config.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, it } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import type { UpstreamConfig } from '../../src/config/types.js';
import { taskUpstreamIdentity } from '../../src/http/task-identity.js';
import type { TaskRecord } from '../../src/store/task-store.js';

const SECRET = 'client-secret-never-shown-0123';
const ALICE = 'oauth:https://idp.example#alice';

const SIGNING_KEY = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const GATEWAY = 'auth:\n  resource: "https://gw.example/mcp"\n  oauth: { issuer: "https://idp.example" }\nidentity:\n  keys: [{ kid: k1, privateKey: "${SIGNING_KEY}" }]\n';

/** The one upstream of a config whose `upstreams.u` is `yaml` (indented under it). */
function upstream(yaml: string): UpstreamConfig {
  const config = parseConfig(`${GATEWAY}upstreams:\n  u:\n${yaml.replace(/^/gm, '    ')}\n`, 'test.yaml', { SECRET, SIGNING_KEY });
  return config.upstreams[0] as UpstreamConfig;
}

function task(extra: Partial<TaskRecord> = {}): TaskRecord {
  return {
    taskId: 't1', principal: ALICE, era: '2025-11-25', tool: 'work', upstream: 'u', status: 'working',
    createdMs: 0, createdUs: 0, updatedMs: 0, retentionMs: 60_000, pollMs: 1000,
    call: { params: {}, identity: { sessionId: 's', protocolVersion: '2025-11-25', capabilities: {} }, caller: 'v1.seal-1.sealed-blob' },
    ...extra,
  };
}

const CLIENT = 'clientId: gw, clientSecret: "${SECRET}", tokenUrl: "https://as.example/token"';

describe('the identity a task\'s upstream sees', () => {
  it('token exchange: the caller by name and principal; an API-key principal has nothing to exchange', () => {
    const exchange = upstream(`url: https://crm.example/mcp\nauth:\n  tokenExchange: { ${CLIENT} }`);
    const seen = taskUpstreamIdentity(task(), exchange);
    assert.equal(seen.mode, 'token-exchange');
    assert.equal(seen.actsAs, 'caller');
    assert.match(seen.summary, /^alice \(oauth:https:\/\/idp\.example#alice\) via token exchange: .*client gw/);
    assert.deepEqual(seen.rerun.outcome, 'as-caller');
    assert.match(seen.rerun.summary, /still valid/, 'a re-run exchanges the caller\'s token again');
    const robot = taskUpstreamIdentity(task({ principal: 'key:robot' }), exchange);
    assert.match(robot.summary, /^nobody: key:robot has no access token to exchange/);
  });

  it('signed identity, client credentials, claim headers alone, static headers', () => {
    const signed = taskUpstreamIdentity(task(), upstream('url: https://svc.example/mcp\nauth:\n  signedIdentity: { claims: [email, groups] }'));
    assert.deepEqual([signed.mode, signed.actsAs], ['signed-identity', 'caller']);
    assert.match(signed.summary, /via a JWT the gateway signs for them \(with their email, groups claims\)$/);

    const shared = taskUpstreamIdentity(task(), upstream(`url: https://svc.example/mcp\nauth:\n  clientCredentials: { ${CLIENT} }`));
    assert.deepEqual([shared.mode, shared.actsAs, shared.rerun.outcome], ['client-credentials', 'gateway', 'as-gateway']);
    assert.equal(shared.summary, 'the gateway\'s own client credentials (client gw)');
    assert.equal(shared.claimHeaders, undefined);

    const named = taskUpstreamIdentity(task(), upstream(`url: https://svc.example/mcp\nauth:\n  clientCredentials: { ${CLIENT} }\n  claimHeaders: { x-user: principal }`));
    assert.deepEqual([named.mode, named.actsAs, named.rerun.outcome], ['client-credentials', 'caller', 'as-caller']);
    assert.match(named.summary, /, with x-user naming alice/);
    assert.deepEqual(named.claimHeaders, ['x-user']);

    const headers = taskUpstreamIdentity(task(), upstream('url: https://svc.example/mcp\nheaders: { authorization: "Bearer ${SECRET}" }\nauth:\n  claimHeaders: { x-user: principal, x-mail: email }'));
    assert.deepEqual([headers.mode, headers.actsAs], ['claim-headers', 'caller']);
    assert.deepEqual(headers.claimHeaders, ['x-user', 'x-mail']);

    const plain = taskUpstreamIdentity(task(), upstream('url: https://svc.example/mcp\nheaders: { authorization: "Bearer ${SECRET}" }'));
    assert.deepEqual([plain.mode, plain.actsAs, plain.rerun.outcome], ['static-headers', 'gateway', 'as-gateway']);
    for (const said of [signed, shared, named, headers, plain]) assert.ok(!JSON.stringify(said).includes(SECRET), 'no secret of the config');
  });

  it('stdio: a child per principal with its upstream token in its env, or the gateway\'s shared child', () => {
    const own = taskUpstreamIdentity(task(), upstream(`command: node\nisolation: per-principal\nenv: { GITHUB_TOKEN: "{{upstreamToken}}" }\nauth:\n  tokenExchange: { ${CLIENT}, resource: "https://api.example" }`));
    assert.deepEqual([own.mode, own.actsAs], ['stdio-per-principal', 'caller']);
    assert.match(own.summary, /^alice \(.*\) in a child process of their own, with a token the authorization server issues for them .* in its env$/);
    const named = taskUpstreamIdentity(task(), upstream('command: node\nisolation: per-principal\nenv: { GITHUB_USER: "{{principal}}" }'));
    assert.match(named.summary, /in a child process of their own, its env naming them$/);
    const shared = taskUpstreamIdentity(task(), upstream('command: node'));
    assert.deepEqual([shared.mode, shared.actsAs, shared.rerun.outcome], ['stdio', 'gateway', 'as-gateway']);
  });

  it('a run elsewhere: as the caller only with a sealed caller; none once ended, for an upstream\'s own task, or without a kept call', () => {
    const exchange = upstream(`url: https://crm.example/mcp\nauth:\n  tokenExchange: { ${CLIENT} }`);
    const unsealed = task();
    delete unsealed.call?.caller;
    const fails = taskUpstreamIdentity(unsealed, exchange).rerun;
    assert.equal(fails.outcome, 'fails');
    assert.match(fails.summary, /rather than run as the gateway.*identity\.sealingKeys/);
    assert.equal(taskUpstreamIdentity(task({ status: 'completed' }), exchange).rerun.outcome, 'none');
    assert.equal(taskUpstreamIdentity(task({ native: true }), exchange).rerun.outcome, 'none');
    assert.match(taskUpstreamIdentity(task({ call: undefined }), exchange).rerun.summary, /not kept/);
    const gone = taskUpstreamIdentity(task(), undefined);
    assert.deepEqual([gone.mode, gone.rerun.outcome], ['unconfigured', 'fails']);
    for (const said of [fails, gone.rerun]) assert.ok(!JSON.stringify(said).includes('sealed-blob'), 'nothing of the sealed caller');
    assert.ok(!JSON.stringify(taskUpstreamIdentity(task(), exchange)).includes('sealed-blob'));
  });
});
