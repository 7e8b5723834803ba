// The gateway as a measured process: how to run it (the built JS, or tsx on the sources), its config for the http
// and stdio scenarios, and one started and ready, observed or not (metrics scraped, traces exported to a sink).
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { builtCli } from './build.js';
import { credentialSetup, type CredentialMode, type CredentialSetup } from './credentials.js';
import { heapProbe, heapProbeArgs, heapProbeEnv } from './heap.js';
import { httpDriver, type Started } from './measure.js';
import { startOtlpSink, type OtlpSink } from './otlp-sink.js';
import { freePort, startProc, waitHttp, type Proc } from './procs.js';
import { ENTRY, NODE, ROOT, type Scenario, type Settings } from './settings.js';

/** How often the observed target's /metrics is scraped during its run (Prometheus' default is 15 s). */
const SCRAPE_EVERY_MS = 1_000;

export interface GatewayCommand {
  command: string;
  args: string[];
  how: string;
}

/**
 * Built JS (no tsx transform cost in the measured process; see build.ts for when it is built), else tsx on the
 * sources when the build failed. A run that promised a build (TEST_SPAWN_BUILD=1) and has none fails instead.
 * With `cpuProfDir`, every gateway process started with it writes a CPU profile there as it exits
 * (bench/profile-summary.ts reads them).
 */
export async function gatewayCommand(useTsx: boolean, cpuProfDir?: string): Promise<GatewayCommand | string> {
  if (!existsSync(join(ROOT, 'src/cli.ts'))) return 'src/cli.ts does not exist yet (gateway not written)';
  const profiled = cpuProfDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', cpuProfDir];
  const tsxCmd = { command: NODE, args: [...profiled, '--import', 'tsx', join(ROOT, 'src/cli.ts')], how: 'node --import tsx src/cli.ts' };
  if (useTsx) return tsxCmd;
  const built = await builtCli();
  if (built.cli !== undefined) return { command: NODE, args: [...profiled, built.cli], how: built.how + (cpuProfDir === undefined ? '' : `, CPU profiles in ${cpuProfDir}`) };
  if (process.env.TEST_SPAWN_BUILD === '1') throw new Error(built.failure ?? built.how);
  console.warn(`! ${built.how}, running the gateway through tsx instead:\n    ${built.failure ?? ''}`);
  return { ...tsxCmd, how: `${tsxCmd.how} (build failed)` };
}

const q = (s: string): string => JSON.stringify(s); // a JSON string is a valid YAML flow scalar

/**
 * `metrics` undefined: the default config (metrics on, never scraped). `credential`: the front's API key and how the
 * (http) upstream is authenticated to (bench/credentials.ts). `store`: a YAML flow mapping (default: memory).
 */
export function gatewayYaml(port: number, scenario: Scenario, upstreamUrl: string | undefined, metrics?: boolean, credential?: CredentialSetup, store = '{ type: memory }'): string {
  const upstream =
    scenario === 'http'
      ? `{ ${[`transport: streamable-http, url: ${q(upstreamUrl ?? '')}`, ...(credential?.upstream ?? [])].join(', ')} }`
      : `{ transport: stdio, command: ${q(NODE)}, args: [${q(ENTRY)}, "stdio"] }`;
  return [
    `listen: { host: 127.0.0.1, port: ${port}, path: /mcp }`,
    `store: ${store}`,
    'log: { level: warn }',
    ...(metrics === undefined ? [] : [`metrics: { enabled: ${metrics} }`]),
    ...(credential?.topLevel ?? []),
    'upstreams:',
    `  everything: ${upstream}`,
    '',
  ].join('\n');
}

/**
 * How the gateway is observed: `undefined` as configured by default; `off` with metrics and tracing off; `on` with
 * metrics scraped every SCRAPE_EVERY_MS and traces exported to a loopback OTLP sink.
 */
export type Observation = undefined | 'off' | { traceRatio: number | undefined };

export async function startGateway(
  s: Settings,
  scenario: Scenario,
  gw: GatewayCommand,
  upstreamUrl: string | undefined,
  dir: string,
  observation?: Observation,
  credentialMode?: CredentialMode,
): Promise<Started> {
  const port = await freePort();
  const gatewayUrl = `http://127.0.0.1:${port}/mcp`;
  const credential = credentialMode === undefined ? undefined : await credentialSetup(credentialMode, gatewayUrl);
  const cfg = join(dir, `taskgate-${scenario}.yaml`);
  writeFileSync(cfg, gatewayYaml(port, scenario, upstreamUrl, observation === undefined ? undefined : observation !== 'off', credential));
  const probe = heapProbe();
  const args = [...heapProbeArgs(), ...gw.args, 'serve', '--config', cfg];
  const traceRatio = observation === undefined || observation === 'off' ? undefined : observation.traceRatio;
  const scraped = observation !== undefined && observation !== 'off';
  const sink = traceRatio !== undefined ? await startOtlpSink() : undefined;
  // The standard sampler variables: every trace, or a head-sampled share of them (what busy deployments run).
  const sampler = (ratio: number): Record<string, string> =>
    ratio >= 1 ? { OTEL_TRACES_SAMPLER: 'parentbased_always_on' } : { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: String(ratio) };
  const tracingEnv: Record<string, string> =
    sink === undefined || traceRatio === undefined
      ? { OTEL_SDK_DISABLED: 'true' }
      : { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_SERVICE_NAME: 'taskgate-bench', OTEL_SDK_DISABLED: 'false', ...sampler(traceRatio) };
  const proc = startProc('taskgate', gw.command, args, {
    cwd: ROOT,
    dropEnvPrefix: 'TASKGATE_',
    env: { ...tracingEnv, ...heapProbeEnv(probe) },
  });
  const notes = [gw.how];
  // Stopped after the gateway (which no longer asks it for anything), noting what it served.
  const credentialPart = { stop: () => credential?.stop(notes) ?? Promise.resolve() };
  try {
    await waitHttp(proc, `http://127.0.0.1:${port}/readyz`, 30_000, 200);
  } catch (err) {
    await proc.stop();
    await credentialPart.stop();
    throw err;
  }
  const { load, driver } = httpDriver(gatewayUrl, s.clients, credential?.clientHeaders);
  const procs: Pick<Proc, 'stop'>[] = [proc, credentialPart];
  if (scraped) {
    procs.push(observer(`http://127.0.0.1:${port}/metrics`, sink, notes));
    notes.push(`metrics scraped every ${SCRAPE_EVERY_MS} ms${sink === undefined ? '' : ', traces exported to a loopback OTLP sink'}`);
  }
  return { driver, rssPid: () => proc.pid, rssOf: 'taskgate process', procs, tool: () => load.toolName, heapProbe: probe, notes };
}

/**
 * Scrapes /metrics like Prometheus while the target runs; stopped with the target's processes, when it notes what
 * was scraped and how many spans arrived (a run where tracing exported nothing measured nothing).
 */
function observer(metricsUrl: string, sink: OtlpSink | undefined, notes: string[]): Pick<Proc, 'stop'> {
  let scrapes = 0;
  let failures = 0;
  const timer = setInterval(() => {
    fetch(metricsUrl)
      .then(async (response) => {
        await response.text();
        if (response.ok) scrapes++;
        else failures++;
      })
      .catch(() => failures++);
  }, SCRAPE_EVERY_MS);
  return {
    async stop() {
      clearInterval(timer); // stopped after the gateway, whose shutdown flushed its last spans to the sink
      notes.push(`${scrapes} scrapes (${failures} failed)${sink === undefined ? '' : `, ${sink.spans()} spans received`}`);
      await sink?.close();
    },
  };
}
