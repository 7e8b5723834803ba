import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { nodeArgs } from '../fixtures/spawn.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = join(ROOT, 'src/cli.ts');
// The CLI from its sources through tsx, or from dist/ when the run built it (nodeArgs); usable from another working
// directory too (default config path tests).
const CLI_ARGS = nodeArgs(CLI);
const configs = (name: string): string => join(ROOT, 'test/unit/configs', name);

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(args: string[], options: { env?: Record<string, string | undefined>; cwd?: string } = {}): Promise<Run> {
  const env: Record<string, string | undefined> = { ...process.env, TASKGATE_CONFIG: undefined, TASKGATE_PORT: undefined, ...options.env };
  for (const key of Object.keys(env)) if (env[key] === undefined) delete env[key];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...CLI_ARGS, ...args], { cwd: options.cwd ?? ROOT, env, stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

describe('cli: usage', () => {
  it('--help and -h print usage to stdout, exit 0', async () => {
    for (const flag of ['--help', '-h']) {
      const r = await run([flag]);
      assert.equal(r.code, 0);
      assert.match(r.stdout, /Usage: taskgate <command>/);
      assert.match(r.stdout, /check-config/);
    }
  });

  it('--version and -v print the package version', async () => {
    for (const flag of ['--version', '-v']) {
      const r = await run([flag]);
      assert.equal(r.code, 0);
      assert.equal(r.stdout.trim(), version);
    }
  });

  it('no command: usage on stderr, exit 2', async () => {
    const r = await run([]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /Usage:/);
    assert.equal(r.stdout, '');
  });

  it('unknown command or option: exit 2 with a hint', async () => {
    const cmd = await run(['serv']);
    assert.equal(cmd.code, 2);
    assert.match(cmd.stderr, /unknown command 'serv' \(did you mean 'serve'\?\)/);
    const opt = await run(['check-config', '--bogus']);
    assert.equal(opt.code, 2);
    assert.match(opt.stderr, /--bogus/);
    const extra = await run(['check-config', 'a.yaml']);
    assert.equal(extra.code, 2);
    assert.match(extra.stderr, /unexpected argument: a\.yaml/);
  });
});

describe('cli: check-config', () => {
  it('--tools connects to the upstreams and prints each tool\'s effective task policy', async () => {
    const r = await run(['check-config', '--tools', '--config', join(ROOT, 'config/taskgate.example.yaml')], { cwd: ROOT });
    assert.equal(r.code, 0, r.stderr);
    const docs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Record<string, unknown>);
    const tools = docs.at(-1)?.tools as Record<string, { upstream: string; mode: string; maxRunMs: number; taskAfterMs: number; upstreamTaskSupport?: string }>;
    assert.equal(tools.echo?.upstream, 'everything');
    assert.equal(tools.echo?.mode, 'optional');
    assert.equal(tools.echo?.upstreamTaskSupport, undefined);
    // The upstream runs this one only as its own task: clients see it required, whatever the policy's default says.
    assert.equal(tools['simulate-research-query']?.upstreamTaskSupport, 'required');
    assert.equal(tools['simulate-research-query']?.mode, 'required');
    assert.equal(tools['trigger-long-running-operation']?.maxRunMs, 600_000);
    assert.equal(tools['trigger-long-running-operation']?.taskAfterMs, 0);
    // Values repeat in full: YAML anchors and aliases (`&a1`, `*a1`) mean nothing to an operator reading this.
    assert.doesNotMatch(r.stdout, /[&*]a\d+\b/);
  });

  it('--tools shows each upstream\'s selection: renamed tools with their upstream name, excluded ones with the pattern', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'taskgate-cli-tools-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'tools.yaml');
    writeFileSync(file, [
      'upstreams:',
      '  everything:',
      '    command: node',
      `    args: [${join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')}, stdio]`,
      '    prefix: ev_',
      '    tools:',
      '      include: [echo, get-*, "simulate-*"]',
      '      exclude: ["simulate-*"]',
      '      overrides: { echo: { name: say, description: Says it back }, ecoh: { title: typo } }',
      'tasks:',
      '  rules: [{ match: ev_say, mode: forbidden }]',
      '',
    ].join('\n'));
    const r = await run(['check-config', '--tools', '--config', file], { cwd: ROOT });
    assert.equal(r.code, 0, r.stderr);
    const report = parseAllDocuments(r.stdout).map((d) => d.toJS() as Record<string, unknown>).at(-1) as {
      tools: Record<string, { upstream: string; upstreamName?: string; mode: string }>;
      excluded: Record<string, Record<string, string>>;
    };
    assert.deepEqual(report.tools.ev_say, { ...report.tools.ev_say, upstream: 'everything', upstreamName: 'echo', mode: 'forbidden' });
    assert.equal(report.tools.ev_echo, undefined);
    assert.ok(Object.keys(report.tools).some((name) => name.startsWith('ev_get-')));
    assert.ok(!Object.keys(report.tools).some((name) => name.includes('simulate-')));
    assert.equal(report.excluded.everything?.['simulate-research-query'], "excluded by 'simulate-*'");
    assert.equal(report.excluded.everything?.['trigger-long-running-operation'], 'matches no include');
    assert.equal(report.excluded.everything?.echo, undefined);
    assert.match(r.stderr, /upstream 'everything' lists no tool 'ecoh' \(upstreams\.everything\.tools\.overrides\)/);
  });

  it('prints the effective config as YAML with secrets redacted, exit 0', async () => {
    const r = await run(['check-config', '--config', configs('valid.yaml')], { env: { CI_TOKEN: 'very-secret' } });
    assert.equal(r.code, 0, r.stderr);
    assert.ok(!r.stdout.includes('very-secret'));
    assert.ok(!r.stdout.includes('dev-key'));
    const docs = parseAllDocuments(r.stdout);
    assert.ok(Array.isArray(docs) && docs.length === 2);
    const [effective, policy] = docs.map((d) => d.toJS() as Record<string, Record<string, unknown>>);
    assert.deepEqual(Object.keys(effective?.upstreams ?? {}), ['everything', 'ci', 'old']);
    assert.deepEqual((effective?.upstreams?.ci as { headers: unknown }).headers, { Authorization: '[redacted]' });
    assert.equal((effective?.listen as { maxBodyBytes: number }).maxBodyBytes, 4 * 1024 * 1024);
    const rules = (policy?.taskPolicy as { rules: { match: string; mode: string; ttlMs: number }[] }).rules;
    assert.deepEqual(rules.map((r) => [r.match, r.mode, r.ttlMs]), [['ci__*', 'required', 3_600_000]]);
    assert.match(r.stderr, /is valid \(3 upstreams\)/);
  });

  it('a bad config: every problem on stderr as file:line:col: key: message, exit 2', async () => {
    const file = configs('invalid.yaml');
    const r = await run(['check-config', '-c', file]);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '');
    assert.ok(r.stderr.includes(`${file}:3:3: listen.prot: unknown key (did you mean "port"?)`), r.stderr);
    assert.ok(r.stderr.includes(`${file}:7:5: upstreams.ci.url: expected an http(s) URL`), r.stderr);
    assert.ok(r.stderr.includes(`${file}:9:15: tasks.defaults.mode:`), r.stderr);
  });

  it('an unset ${VAR} names the file, line and key, exit 2', async () => {
    const r = await run(['check-config', '--config', configs('valid.yaml')], { env: { CI_TOKEN: undefined } });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /valid\.yaml:6:\d+: upstreams\.ci\.headers\.Authorization: environment variable CI_TOKEN is not set/);
  });

  it('a YAML syntax error is located, exit 2', async () => {
    const r = await run(['check-config', '--config', configs('syntax-error.yaml')]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /syntax-error\.yaml:3:\d+: invalid YAML/);
  });

  it('falls back to TASKGATE_CONFIG, then config/taskgate.yaml', async () => {
    const viaEnv = await run(['check-config'], { env: { TASKGATE_CONFIG: configs('invalid.yaml') } });
    assert.equal(viaEnv.code, 2);
    assert.match(viaEnv.stderr, /invalid\.yaml:7:5: upstreams\.ci\.url/);

    const dir = mkdtempSync(join(tmpdir(), 'taskgate-cli-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    const byDefault = await run(['check-config'], { cwd: dir });
    assert.equal(byDefault.code, 2);
    assert.match(byDefault.stderr, /config\/taskgate\.yaml: cannot read config file: no such file/);
    assert.match(byDefault.stderr, /--config <file> or set TASKGATE_CONFIG/);
  });

  it('applies TASKGATE_PORT and reports a bad value as coming from the environment', async () => {
    const ok = await run(['check-config', '-c', configs('valid.yaml')], { env: { CI_TOKEN: 'x', TASKGATE_PORT: '9123' } });
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /port: 9123/);
    const bad = await run(['check-config', '-c', configs('valid.yaml')], { env: { CI_TOKEN: 'x', TASKGATE_PORT: 'http' } });
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /environment variable TASKGATE_PORT: listen\.port: expected an integer/);
  });
});

describe('cli: serve', () => {
  it('a bad config exits 2 before starting anything', async () => {
    const r = await run(['serve', '--config', configs('invalid.yaml')]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /invalid\.yaml:7:5: upstreams\.ci\.url/);
  });

  const gatewayMissing = !existsSync(join(ROOT, 'src/taskgate.ts'));
  it(
    'serves the example config, logs its URL, and exits 0 on SIGTERM',
    { skip: gatewayMissing && 'src/taskgate.ts not written yet', timeout: 30_000 },
    async () => {
      const child = spawn(
        process.execPath,
        [...CLI_ARGS, 'serve', '--config', join(ROOT, 'config/taskgate.example.yaml')],
        { cwd: ROOT, env: { ...process.env, TASKGATE_PORT: '0', TASKGATE_LOG_LEVEL: 'info' }, stdio: 'pipe' },
      );
      let output = '';
      const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
      const url = await new Promise<string>((resolve, reject) => {
        const onData = (d: Buffer) => {
          output += d.toString();
          const match = /"url":"(http:\/\/[^"]+)"/.exec(output);
          if (match?.[1] !== undefined) resolve(match[1]);
        };
        child.stdout.on('data', onData);
        child.stderr.on('data', (d: Buffer) => (output += d.toString()));
        void exited.then((code) => reject(new Error(`exited with ${code} before listening:\n${output}`)));
      });
      assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
      child.kill('SIGTERM');
      assert.equal(await exited, 0, output);
    },
  );
});
