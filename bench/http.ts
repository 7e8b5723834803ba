// The http scenario: sync tools/call against server-everything over Streamable HTTP, directly (the baseline) and
// through the gateway (and, with --observability, the gateway with metrics scraped and traces exported; with
// --credentials, the gateway authenticating to the upstream with clientCredentials and signedIdentity; with
// --workers 1,2, the gateway as a group of N worker processes on Redis, per N: bench/workers.ts).
import type { CredentialMode } from './credentials.js';
import { startGateway } from './gateway-proc.js';
import type { GatewayCommand } from './gateway-proc.js';
import { heapProbe, heapProbeArgs, heapProbeEnv, type HeapProbe } from './heap.js';
import { httpDriver, measure } from './measure.js';
import { freePort, startProc, waitHttp, type Proc } from './procs.js';
import { ENTRY, NODE, type Settings, type TargetResult } from './settings.js';
import { startWorkersGateway, workersLabel, workersTarget } from './workers.js';

/** A fresh upstream per target: server-everything keeps every SSE event of a session in memory, so a second
 * target measured against the first one's upstream would meet a bigger heap and slower GCs. */
async function withHttpUpstream<T>(fn: (url: string, upstream: Proc, probe: HeapProbe) => Promise<T>): Promise<T> {
  const port = await freePort();
  const probe = heapProbe();
  const url = `http://127.0.0.1:${port}/mcp`;
  const upstream = startProc('server-everything streamableHttp', NODE, [...heapProbeArgs(), ENTRY, 'streamableHttp'], {
    env: { PORT: String(port), ...heapProbeEnv(probe) },
    keepStdout: false,
  });
  try {
    await waitHttp(upstream, url, 20_000);
    return await fn(url, upstream, probe);
  } finally {
    await upstream.stop();
  }
}

export async function httpScenario(s: Settings, gw: GatewayCommand | string, dir: string, round: number): Promise<TargetResult[]> {
  const results: TargetResult[] = [];
  if (s.targets.includes('direct')) {
    results.push(
      await measure('http', 'direct', 'direct', s, round, (run) =>
        withHttpUpstream(async (url, upstream, probe) => {
          const { load, driver } = httpDriver(url, s.clients);
          return run({
            driver,
            rssPid: () => upstream.pid,
            rssOf: 'upstream',
            procs: [],
            tool: () => load.toolName,
            heapProbe: probe,
            notes: [],
          });
        }),
      ),
    );
  }
  if (s.targets.includes('taskgate')) {
    // With --credentials every gateway target has the same API-key front; this one sends static headers upstream.
    const plain: CredentialMode | undefined = s.credentials ? 'static' : undefined;
    const qualifiers = [...(s.observability ? ['unobserved'] : []), ...(s.credentials ? ['static headers'] : [])];
    const label = qualifiers.length > 0 ? `taskgate (${qualifiers.join(', ')})` : 'taskgate';
    const observation = s.observability ? ('off' as const) : undefined;
    results.push(
      await measure('http', 'taskgate', label, s, round, (run) =>
        withHttpUpstream(async (url) => {
          if (typeof gw === 'string') throw new Error(gw);
          return run(await startGateway(s, 'http', gw, url, dir, observation, plain));
        }),
      ),
    );
    if (s.credentials) {
      const variants = [
        { target: 'taskgate-clientCredentials' as const, mode: 'clientCredentials' as const },
        { target: 'taskgate-signedIdentity' as const, mode: 'signedIdentity' as const },
      ];
      for (const { target, mode } of variants) {
        results.push(
          await measure('http', target, `taskgate+${mode}`, s, round, (run) =>
            withHttpUpstream(async (url) => {
              if (typeof gw === 'string') throw new Error(gw);
              return run(await startGateway(s, 'http', gw, url, dir, observation, mode));
            }),
          ),
        );
      }
    }
    if (s.observability) {
      const share = s.traceRatio >= 1 ? '' : ` ${Math.round(s.traceRatio * 100)}%`;
      const observed = [
        { target: 'taskgate-metrics' as const, label: 'taskgate (metrics)', traceRatio: undefined },
        { target: 'taskgate-observed' as const, label: `taskgate (metrics+traces${share})`, traceRatio: s.traceRatio },
      ];
      for (const { target, label: observedLabel, traceRatio } of observed) {
        results.push(
          await measure('http', target, observedLabel, s, round, (run) =>
            withHttpUpstream(async (url) => {
              if (typeof gw === 'string') throw new Error(gw);
              return run(await startGateway(s, 'http', gw, url, dir, { traceRatio }, plain));
            }),
          ),
        );
      }
    }
  }
  for (const workers of s.workers) {
    results.push(
      await measure('http', workersTarget(workers), workersLabel(workers), s, round, (run) =>
        withHttpUpstream(async (url) => {
          if (typeof gw === 'string') throw new Error(gw);
          return run(await startWorkersGateway(s, gw, url, dir, workers));
        }),
      ),
    );
  }
  return results;
}
