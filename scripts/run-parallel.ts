// Runs npm scripts side by side and fails if any of them fails: `tsx scripts/run-parallel.ts typecheck lint ...`.
// `npm test` starts with the steps that share no state (lint, the build, the test build that is also the typecheck):
// each of them keeps about one core busy at most, so on a 2-core CI machine they take about half as long together as
// in a row.
// Each script's output is held back and printed whole when it ends, so that the logs stay readable.
import { spawn } from 'node:child_process';

interface Outcome {
  script: string;
  code: number | string;
  output: string;
  seconds: number;
}

function runScript(script: string): Promise<Outcome> {
  const started = Date.now();
  // npm, not a shell line: the script names come from package.json's own "test" script.
  const child = spawn('npm', ['run', '--silent', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  return new Promise((resolve) => {
    child.once('error', (e) => resolve({ script, code: e.message, output, seconds: (Date.now() - started) / 1000 }));
    child.once('close', (code, signal) => resolve({ script, code: code ?? signal ?? 'unknown', output, seconds: (Date.now() - started) / 1000 }));
  });
}

const scripts = process.argv.slice(2);
if (scripts.length === 0) {
  console.error('usage: tsx scripts/run-parallel.ts <npm script>...');
  process.exit(2);
}
let failed = 0;
await Promise.all(
  scripts.map(async (script) => {
    const outcome = await runScript(script);
    const ok = outcome.code === 0;
    if (!ok) failed++;
    process.stdout.write(`\n> npm run ${script}\n${outcome.output}`);
    process.stdout.write(`> npm run ${script}: ${ok ? 'passed' : `FAILED (${outcome.code})`} in ${outcome.seconds.toFixed(0)} s\n`);
  }),
);
process.exit(failed === 0 ? 0 : 1);
