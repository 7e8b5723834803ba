// Module hooks of scripts/test-loader.mjs (they run on Node's loader thread): a .ts module of this checkout is
// served the JS `npm run test:build` compiled from it into dist-test/ (same relative path, .js), under the .ts
// file's URL; an import of `./x.js` from such a module finds `./x.ts`, as NodeNext sources name their imports.
// A source with no compiled JS, or newer than it, is an error: a test never runs an older build.
import { Buffer } from 'node:buffer';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { fileURLToPath, URL } from 'node:url';

let root = '';
let out = '';

/** @param {{ root: string }} data the checkout's URL, ending in `/` */
export function initialize(data) {
  root = data.root;
  out = `${root}dist-test/`;
}

/** A .ts file of this checkout that the test build compiles (not a dependency's, not a build output). */
function isSource(url) {
  return url.startsWith(root) && url.endsWith('.ts') && !url.startsWith(out) && !url.includes('/node_modules/');
}

export async function resolve(specifier, context, next) {
  const parent = context.parentURL;
  if (parent !== undefined && isSource(parent) && specifier.endsWith('.js') && (specifier.startsWith('./') || specifier.startsWith('../'))) {
    const source = new URL(`${specifier.slice(0, -'.js'.length)}.ts`, parent);
    if (existsSync(source)) return { url: source.href, format: 'module', shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (!isSource(url)) return next(url, context);
  const compiled = new URL(`${out}${url.slice(root.length, -'.ts'.length)}.js`);
  if (!existsSync(compiled)) throw new Error(`${fileURLToPath(url)} has no compiled JS in dist-test/: run npm run test:build`);
  if (statSync(new URL(url)).mtimeMs > statSync(compiled).mtimeMs) {
    throw new Error(`${fileURLToPath(url)} changed after npm run test:build compiled it: run it again`);
  }
  // The source map inline, as tsx gives it (Node reads no map file for a module a hook served), its sources made
  // absolute: they were relative to the map in dist-test/, not to the .ts URL the module now has.
  const source = readFileSync(compiled, 'utf8').replace(/^\/\/# sourceMappingURL=(\S+)\s*$/m, (_, file) => {
    const mapUrl = new URL(file, compiled);
    const map = JSON.parse(readFileSync(mapUrl, 'utf8'));
    map.sources = map.sources.map((s) => new URL(s, mapUrl).href);
    map.sourceRoot = '';
    return `//# sourceMappingURL=data:application/json;base64,${Buffer.from(JSON.stringify(map)).toString('base64')}`;
  });
  return { format: 'module', source, shortCircuit: true };
}
