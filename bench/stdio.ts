// The stdio scenario: sync tools/call against server-everything over stdio, by an SDK client directly (the
// baseline), through the two npm peers that front a stdio server over Streamable HTTP, and through the gateway.
import { join } from 'node:path';
import { startGateway, type GatewayCommand } from './gateway-proc.js';
import { heapProbe, heapProbeArgs, heapProbeEnv } from './heap.js';
import { httpDriver, measure } from './measure.js';
import { freePort, startProc, waitHttp } from './procs.js';
import { ENTRY, NODE, ROOT, type Settings, type TargetResult } from './settings.js';
import { StdioDirect } from './stdio-direct.js';

export async function stdioScenario(s: Settings, gw: GatewayCommand | string, dir: string, round: number): Promise<TargetResult[]> {
  const results: TargetResult[] = [];
  const peerNode = process.env.BENCH_PEER_NODE ?? NODE;
  const serverCmd = `${NODE} ${ENTRY} stdio`;
  if (s.targets.includes('direct')) {
    results.push(
      await measure('stdio', 'direct', 'direct (stdio client)', s, round, async (run) => {
        const driver = new StdioDirect({ command: NODE, args: [ENTRY, 'stdio'], clients: s.clients });
        await run({ driver, rssPid: () => driver.pid, rssOf: 'upstream', procs: [], notes: [] });
      }),
    );
  }
  /** An npm peer fronting the same stdio server over Streamable HTTP, measured like every other target. */
  const peer = async (
    target: 'supergateway' | 'mcp-proxy',
    label: string,
    args: (port: number) => string[],
    readyUrl: (port: number) => string,
    readyStatus: number | undefined,
    note: string,
  ): Promise<void> => {
    if (!s.targets.includes(target)) return;
    results.push(
      await measure('stdio', target, label, s, round, async (run) => {
        const port = await freePort();
        const probe = heapProbe();
        const proc = startProc(target, peerNode, [...heapProbeArgs(), ...args(port)], { env: heapProbeEnv(probe) });
        try {
          await waitHttp(proc, readyUrl(port), 30_000, readyStatus);
        } catch (err) {
          await proc.stop();
          throw err;
        }
        const { load, driver } = httpDriver(`http://127.0.0.1:${port}/mcp`, s.clients);
        await run({
          driver,
          rssPid: () => proc.pid,
          rssOf: `${target} process`,
          procs: [proc],
          tool: () => load.toolName,
          heapProbe: probe,
          notes: [note],
        });
      }),
    );
  };
  await peer(
    'supergateway',
    'supergateway --stateful',
    (port) => [
      join(ROOT, 'node_modules/supergateway/dist/index.js'),
      '--stdio', serverCmd,
      '--outputTransport', 'streamableHttp',
      '--stateful',
      '--port', String(port),
      '--logLevel', 'none',
      '--healthEndpoint', '/healthz',
    ],
    (port) => `http://127.0.0.1:${port}/healthz`,
    200,
    'one stdio server child per session (supergateway stateful design)',
  );
  await peer(
    'mcp-proxy',
    'mcp-proxy',
    (port) => [
      join(ROOT, 'node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs'),
      '--port', String(port),
      '--host', '127.0.0.1',
      '--server', 'stream',
      '--', NODE, ENTRY, 'stdio',
    ],
    (port) => `http://127.0.0.1:${port}/mcp`,
    undefined,
    'one shared stdio server child (mcp-proxy multiplexes sessions)',
  );
  if (s.targets.includes('taskgate')) {
    results.push(
      await measure('stdio', 'taskgate', 'taskgate', s, round, async (run) => {
        if (typeof gw === 'string') throw new Error(gw);
        await run(await startGateway(s, 'stdio', gw, undefined, dir));
      }),
    );
  }
  return results;
}
