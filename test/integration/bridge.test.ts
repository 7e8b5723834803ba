// mcp-remote, the stdio bridge Claude Desktop and Cursor use to reach HTTP servers, between a host that gives up
// on a request after 3 s and the gateway: a 6 s call comes back in background mode (a handle, then task_result)
// and in wait mode (keep-alive progress resets the host's timeout and the bridge's body timeout).
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { suiteScope, textOf, type Json, type TestGateway } from '../helpers/harness.js';

const HOST_TIMEOUT_MS = 3_000;
const RELATED_TASK = 'io.modelcontextprotocol/related-task';
const MCP_REMOTE = createRequire(import.meta.url).resolve('mcp-remote/dist/proxy.js');

describe('through mcp-remote (stdio bridge)', () => {
  const scope = suiteScope();
  let gateway: TestGateway;
  let configDir: string;

  before(async () => {
    const upstream = await scope.upstream('stdio');
    gateway = await scope.gateway({
      upstreams: { fx: upstream.config },
      tasks: {
        defaults: { keepAliveProgressMs: 1_000 },
        rules: [{ match: 'slow_compute', plainCalls: 'background', taskAfterMs: 1_000 }],
      },
    });
    // mcp-remote keeps its state (OAuth clients, tokens) here; none is needed, none must leak into $HOME.
    configDir = await mkdtemp(join(tmpdir(), 'taskgate-mcp-remote-'));
    scope.defer(() => rm(configDir, { recursive: true, force: true }));
  });

  /** A host that starts mcp-remote as its stdio server, as Claude Desktop's config would. */
  async function host(): Promise<Client> {
    const client = new Client({ name: 'desktop-like-host', version: '1.0.0' });
    const transport = new StdioClientTransport({
      command: process.execPath,
      // Its own timeouts below the call's length: the bridge must not cut the call either.
      args: [MCP_REMOTE, gateway.url, '--transport', 'http-only', '--body-timeout', '3', '--silent'],
      env: { ...(process.env as Record<string, string>), MCP_REMOTE_CONFIG_DIR: configDir },
      stderr: 'pipe',
    });
    await client.connect(transport);
    scope.defer(() => client.close());
    return client;
  }

  test('background: the 6 s call answers at taskAfterMs with a handle; task_result calls within the host timeout get the result', async () => {
    const client = await host();
    const names = (await client.listTools({}, { timeout: HOST_TIMEOUT_MS })).tools.map((tool) => tool.name);
    assert.ok(names.includes('taskgate_task_result'), names.join(', '));
    const answer = (await client.callTool({ name: 'slow_compute', arguments: { seconds: 6, label: 'bridged' } }, undefined, { timeout: HOST_TIMEOUT_MS })) as Json;
    const taskId = ((answer._meta as Json | undefined)?.[RELATED_TASK] as Json | undefined)?.taskId;
    assert.equal(typeof taskId, 'string', JSON.stringify(answer));
    assert.match(textOf(answer), /taskgate_task_result/);
    let result: Json | undefined;
    for (let round = 0; round < 10 && result === undefined; round++) {
      const fetched = (await client.callTool({ name: 'taskgate_task_result', arguments: { taskId, waitSeconds: 2 } }, undefined, { timeout: HOST_TIMEOUT_MS })) as Json;
      if (!/still running/.test(textOf(fetched))) result = fetched;
    }
    assert.match(textOf(result), /slow_compute \(bridged\) finished after 6s/);
    assert.deepEqual(result?.structuredContent, { seconds: 6, label: 'bridged' });
  });

  test('wait: keep-alive progress crosses the bridge, so a host that resets its timeout on progress gets the 6 s result', async () => {
    const client = await host();
    const progress: number[] = [];
    const result = await client.callTool({ name: 'slow', arguments: { ms: 6_000 } }, undefined, {
      timeout: HOST_TIMEOUT_MS,
      resetTimeoutOnProgress: true,
      onprogress: (p) => progress.push(p.progress),
    });
    assert.match(textOf(result), /"sleptMs":6000/);
    assert.ok(progress.length >= 4, JSON.stringify(progress));
  });
});
