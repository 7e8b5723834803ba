// The README's quick start, as a newcomer follows it: the gateway started as `npm start` starts it (the example
// config, server-everything over stdio, the memory store), then the README's client example run as written in a
// process of its own, the port aside (the test's gateway listens on a free one, set with TASKGATE_PORT).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { freePort, GATEWAY_CLI_PATH, REPO_ROOT, startChild, waitForHttp200 } from '../fixtures/spawn.js';
import { testScope } from '../helpers/harness.js';

const README_URL = 'http://127.0.0.1:8080/mcp';

/** The first TypeScript block under "## Quick start". */
function quickStartExample(): string {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const section = readme.split(/^## Quick start$/m)[1]?.split(/^## /m)[0];
  assert.ok(section !== undefined, 'the README has a "## Quick start" section');
  const code = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(code !== undefined, 'the quick start has a ```ts client example');
  assert.ok(code.includes(README_URL), `the example connects to ${README_URL}`);
  return code;
}

describe('the README quick start', () => {
  test('npm start\'s gateway answers the README\'s client example: tools listed, echo called', { timeout: 120_000 }, async (t) => {
    const scope = testScope(t);
    const example = quickStartExample();
    const port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, TASKGATE_PORT: String(port) };
    for (const key of ['TASKGATE_CONFIG', 'TASKGATE_REDIS_URL', 'TASKGATE_LOG_LEVEL']) delete env[key];
    // What `npm start` runs (package.json), from the repository root.
    const gateway = startChild(process.execPath, ['--import', 'tsx', GATEWAY_CLI_PATH, 'serve', '--config', 'config/taskgate.example.yaml'], { env, cwd: REPO_ROOT });
    scope.defer(() => gateway.kill());
    await waitForHttp200(`http://127.0.0.1:${port}/readyz`, { timeoutMs: 60_000, abort: gateway.exited });

    // The example is plain ESM with top-level await; evaluated from the repository root it imports the SDK as a
    // reader's project would.
    const code = example.replaceAll(README_URL, `http://127.0.0.1:${port}/mcp`);
    const client = startChild(process.execPath, ['--input-type=module', '--eval', code], { cwd: REPO_ROOT });
    scope.defer(() => client.kill());
    const exit = await client.exited;
    assert.equal(exit, 0, `the example exited with ${exit}: ${client.stderr()}`);
    const out = client.stdout();
    assert.match(out, /'echo'/, 'the tool list names echo');
    assert.match(out, /hello through taskgate/, `echo answered: ${out}`);
  });
});
