// What runs the TypeScript of the test lanes (`node --import ./scripts/test-loader.mjs --test ...`). Under
// `npm test` (TEST_SPAWN_BUILD=1) `test:build` has just compiled src/, test/, bench/ and scripts/ into dist-test/:
// each .ts module is then served the JS compiled from it, under the .ts file's own URL, so import.meta.url, the
// paths tests read next to their files and the tree they inspect are the sources' as through tsx. Without the
// variable (a lane run on its own) this is tsx. The compiled JS spares every test file's process tsx's transforms
// and cache reads (about half a CPU second a file, a third of the unit lane).
import { register } from 'node:module';
import process from 'node:process';
import { URL } from 'node:url';

if (process.env.TEST_SPAWN_BUILD === '1') {
  register('./test-loader-hooks.mjs', import.meta.url, { data: { root: new URL('../', import.meta.url).href } });
  // Stack traces name the .ts lines, as under tsx (the hooks point each module at its source map).
  process.setSourceMapsEnabled(true);
} else {
  await import('tsx');
}
