// What a new user reads when the gateway starts: no error-looking line on a good start (server-everything asks for
// roots as soon as it connects), and, when the start fails, the reason first and alone.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { before, describe, test } from 'node:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { GATEWAY_CLI_PATH, nodeArgs, startChild, type GatewayChild } from '../fixtures/spawn.js';
import { suiteScope, testScope } from '../helpers/harness.js';

const require = createRequire(import.meta.url);
const EVERYTHING = require.resolve('@modelcontextprotocol/server-everything/dist/index.js');

function everythingConfig(port: number): Record<string, unknown> {
  return {
    listen: { host: '127.0.0.1', port },
    upstreams: { everything: { transport: 'stdio', command: process.execPath, args: [EVERYTHING, 'stdio'] } },
    log: { level: 'info' },
  };
}

/** Log lines that read as trouble: pino level warn (40) or above, or an upstream's stderr saying it failed. */
function troubleLines(stdout: string): string[] {
  return stdout.split('\n').filter((line) => {
    if (!line.startsWith('{')) return false;
    const entry = JSON.parse(line) as { level: number; stderr?: string };
    return entry.level >= 40 || /fail|error/i.test(entry.stderr ?? '');
  });
}

describe('the start-up log', () => {
  // One gateway for both tests: the first reads its start-up log, the second only needs its port taken.
  const scope = suiteScope();
  let gateway: GatewayChild;
  before(async () => {
    gateway = await scope.spawnGateway({ config: everythingConfig(0) });
  });

  test('a good start with server-everything over stdio has no error-looking line (its roots request is answered)', async () => {
    const ready = await fetch(`${gateway.baseUrl}/readyz`);
    assert.equal(ready.status, 200);
    await ready.arrayBuffer();
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.deepEqual(troubleLines(gateway.stdout()), []);
  });

  test('a port already in use: the reason comes first and alone, and the exit code is 1', async (t) => {
    const scope = testScope(t);
    const dir = mkdtempSync(join(tmpdir(), 'taskgate-startup-'));
    scope.defer(() => rmSync(dir, { recursive: true, force: true }));
    const configPath = join(dir, 'taskgate.yaml');
    writeFileSync(configPath, stringify(everythingConfig(gateway.port)));
    const env = { ...process.env };
    for (const key of Object.keys(env)) if (key.startsWith('TASKGATE_')) delete env[key];
    const second = startChild(process.execPath, [...nodeArgs(GATEWAY_CLI_PATH), 'serve', '--config', configPath], { env });
    assert.equal(await second.exited, 1);
    const trouble = troubleLines(second.stdout());
    assert.equal(trouble.length, 1, trouble.join('\n'));
    assert.match(trouble[0] as string, /EADDRINUSE/);
    assert.match(second.stderr(), /failed to start: listen EADDRINUSE/);
  });
});
