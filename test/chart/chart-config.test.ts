// The config the chart renders is one taskgate runs: it passes `taskgate check-config` with the env its pod would have
// (Secrets resolved, none shown), and a gateway started from it on the shared test Redis answers the chart's own
// `helm test` script (files/helm-test.mjs, run with node as in the test pod): /healthz, initialize, tools/list, with the
// API key from the chart's Secret when auth is on.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { createLogger } from '../../src/log.js';
import { startGateway } from '../../src/taskgate.js';
import { GATEWAY_CLI_PATH, nodeArgs } from '../fixtures/spawn.js';
import { containerEnv, gatewayPod, POD_IP, renderedConfig, renderedConfigText, testPod } from '../helpers/chart-pod.js';
import { testScope } from '../helpers/harness.js';
import { CHART_DIR, render, type RenderOptions } from '../helpers/helm.js';
import { redisTestPrefix, TEST_REDIS_URL } from '../helpers/shared-redis.js';

const HELM_TEST_SCRIPT = join(CHART_DIR, 'files/helm-test.mjs');
/** Stand-ins for the Secrets the cluster values set leaves to the operator. */
const EXTERNAL = { 'redis-credentials/password': 'cluster-password-stand-in', 'taskgate-api-keys/OPS_API_KEY': 'ops-api-key-stand-in-0123456789', 'github/token': 'ghp_stand_in' };
const work = mkdtempSync(join(tmpdir(), 'taskgate-chart-'));
after(() => rmSync(work, { recursive: true, force: true }));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runNode(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { env: { PATH: process.env.PATH ?? '', ...env }, stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('chart: the rendered config', () => {
  for (const set of ['required', 'full', 'cluster']) {
    it(`${set}: passes taskgate check-config with the pod's env, and shows none of its secrets`, async () => {
      const objects = await render({ values: [set] });
      const file = join(work, `${set}.yaml`);
      writeFileSync(file, renderedConfigText(objects));
      // The CA bundle is a file of the pod's, not of this machine.
      const { NODE_EXTRA_CA_CERTS: _ca, ...env } = containerEnv(objects, gatewayPod(objects), EXTERNAL);
      const result = await runNode([...nodeArgs(GATEWAY_CLI_PATH), 'check-config', '-c', file], env);
      assert.equal(result.code, 0, result.stderr + result.stdout);
      for (const [name, value] of Object.entries(env)) {
        if (/KEY|SECRET|PASSWORD|TOKEN/.test(name)) assert.ok(!result.stdout.includes(value), `${name} shown by check-config`);
      }
    });
  }
});

describe('chart: the helm test script', () => {
  /** A gateway started from the chart's rendered config and its pod's env, on loopback, the shared Redis and `upstream`. */
  async function gatewayFromChart(t: Parameters<typeof testScope>[0], options: RenderOptions) {
    const scope = testScope(t);
    const upstream = await scope.upstream('streamable-http');
    const prefix = redisTestPrefix('chart');
    const objects = await render({ values: ['required'], ...options, set: { 'redis.url': TEST_REDIS_URL, 'redis.prefix': prefix, 'config.upstreams.everything.url': upstream.config.url, ...options.set } });
    const config = renderedConfig(objects);
    // The pod listens on 0.0.0.0:8080; here a free loopback port. The rest is as rendered.
    config.listen = { ...config.listen, host: '127.0.0.1', port: 0 };
    config.log = { level: 'silent' };
    const parsed = parseConfig(stringify(config), 'chart.yaml', containerEnv(objects, gatewayPod(objects)));
    const gateway = await startGateway(parsed, createLogger(parsed.log, { pretty: false }));
    scope.defer(() => gateway.close());
    return { objects, origin: new URL(gateway.url).origin, mcpPath: parsed.listen.path };
  }

  it('passes against a gateway run from the chart\'s config', async (t) => {
    const { objects, origin } = await gatewayFromChart(t, {});
    const env: Record<string, string> = { ...containerEnv(objects, testPod(objects)), TASKGATE_URL: origin };
    const result = await runNode([HELM_TEST_SCRIPT], env);
    assert.equal(result.code, 0, result.stderr + result.stdout);
    assert.match(result.stdout, /ok \/healthz/);
    assert.match(result.stdout, /ok initialize: .*protocol 2025-11-25/);
    assert.match(result.stdout, /ok tools\/list: [1-9]\d* tools/);
  });

  it('sends the API key from the chart\'s Secret when auth is on, and fails without it', async (t) => {
    const key = 'helm-test-api-key-4f1c9a2b7d';
    const { objects, origin } = await gatewayFromChart(t, {
      set: { 'secretEnv.PROBE_KEY': key, 'config.auth': { resource: 'https://mcp.example.com/mcp', apiKeys: [{ principal: 'probe', key: '${PROBE_KEY}' }] }, 'tests.apiKey.secretKey': 'PROBE_KEY' },
    });
    const env: Record<string, string> = { ...containerEnv(objects, testPod(objects)), TASKGATE_URL: origin };
    assert.equal(env.TASKGATE_API_KEY, key);
    const passed = await runNode([HELM_TEST_SCRIPT], env);
    assert.equal(passed.code, 0, passed.stderr + passed.stdout);
    const { TASKGATE_API_KEY: _key, ...withoutKey } = env;
    const refused = await runNode([HELM_TEST_SCRIPT], withoutKey);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /FAILED: initialize: HTTP 401/);
  });

  it('fails when nothing answers', async () => {
    const result = await runNode([HELM_TEST_SCRIPT], { TASKGATE_URL: 'http://127.0.0.1:9', TASKGATE_MCP_PATH: '/mcp' });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /taskgate helm test FAILED/);
  });

  it('the test pod calls the release\'s Service at the rendered MCP path', async () => {
    const objects = await render({ values: ['full'] });
    const env = containerEnv(objects, testPod(objects));
    assert.equal(env.TASKGATE_URL, 'http://mcp-gateway:80');
    assert.equal(env.TASKGATE_MCP_PATH, renderedConfig(objects).listen.path);
    assert.ok(renderedConfig(objects).listen.allowedHosts.includes('mcp-gateway'), 'the gateway accepts the Service name as Host');
    assert.ok(renderedConfig(objects).listen.allowedHosts.includes('${POD_IP}'), 'and the Pod IP (kubelet, Prometheus)');
    assert.equal(containerEnv(objects, gatewayPod(objects), EXTERNAL).POD_IP, POD_IP);
  });
});
