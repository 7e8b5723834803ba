// Runs the Helm binary (fetched once by scripts/fetch-helm.ts) on the chart for test/chart: lint, and render a
// release into parsed objects. Renders of one test file may run side by side (execFile, not spawnSync).
import { execFile } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { ensureHelm } from '../../scripts/fetch-helm.js';
import type { K8sObject } from './k8s-schemas.js';

const run = promisify(execFile);
const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const CHART_DIR = join(REPO, 'charts/taskgate');
export const CHART_VALUES_DIR = join(REPO, 'charts/taskgate/ci');
export const RELEASE = { name: 'gw', namespace: 'mcp' } as const;

export interface RenderOptions {
  /** Value sets under charts/taskgate/ci/ (chart-testing finds them there too), by name without `-values.yaml`. */
  values?: string[];
  /** `--set-json` pairs: path -> value. */
  set?: Record<string, unknown>;
}

function valueArgs({ values = [], set = {} }: RenderOptions): string[] {
  return [
    ...values.flatMap((name) => ['-f', join(CHART_VALUES_DIR, `${name}-values.yaml`)]),
    ...Object.entries(set).flatMap(([path, value]) => ['--set-json', `${path}=${JSON.stringify(value)}`]),
  ];
}

export interface HelmResult {
  ok: boolean;
  stdout: string;
  stderr: string;
}

export async function helm(args: string[]): Promise<HelmResult> {
  try {
    const { stdout, stderr } = await run(ensureHelm(), args, { maxBuffer: 64 * 1024 * 1024, env: { ...process.env, HELM_CACHE_HOME: join(REPO, 'node_modules/.cache/taskgate-helm/home') } });
    return { ok: true, stdout, stderr };
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string };
    return { ok: false, stdout: failed.stdout ?? '', stderr: failed.stderr ?? String(error) };
  }
}

/** `helm template` of the release as text; a failed render's message as `error`. */
export async function renderText(options: RenderOptions = {}): Promise<HelmResult> {
  return helm(['template', RELEASE.name, CHART_DIR, '--namespace', RELEASE.namespace, ...valueArgs(options)]);
}

/** The release's objects; throws with Helm's message when the render fails. */
export async function render(options: RenderOptions = {}): Promise<K8sObject[]> {
  const result = await renderText(options);
  if (!result.ok) throw new Error(`helm template failed: ${result.stderr}`);
  return parseAllDocuments(result.stdout)
    .map((doc) => doc.toJS() as K8sObject | null)
    .filter((object): object is K8sObject => object !== null);
}

export async function lint(options: RenderOptions = {}): Promise<HelmResult> {
  return helm(['lint', '--strict', CHART_DIR, '--namespace', RELEASE.namespace, ...valueArgs(options)]);
}

/** The object of that kind (and name, if given); throws when there is none. */
export function find(objects: K8sObject[], kind: string, name?: string): K8sObject {
  const found = objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  if (found === undefined) throw new Error(`no ${kind}${name === undefined ? '' : `/${name}`} in the render`);
  return found;
}
