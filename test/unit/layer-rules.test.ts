// The import rules `npm run lint` enforces with dependency-cruiser (.dependency-cruiser.cjs), run on a small tree
// of stand-in modules at the real paths: a revision is reached only through the registry, one revision never
// imports another, and each layer imports only below it. The tree is written to a temporary folder, so the rules
// are checked as the lint applies them, without touching src/.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';

const run = promisify(execFile);
const CONFIG = resolve('.dependency-cruiser.cjs');
const DEPCRUISE = resolve('node_modules/.bin/depcruise');

/** Each stand-in module and what it imports (paths relative to src/). */
const TREE: Record<string, string[]> = {
  'protocol/rev2025-11-25/codec.ts': [],
  'protocol/rev2025-11-25/session.ts': [],
  'protocol/rev2025-11-25/router.ts': ['protocol/rev2025-11-25/codec.ts', 'protocol/rev2025-11-25/session.ts'],
  'protocol/rev2025-11-25/revision.ts': ['protocol/rev2025-11-25/router.ts', 'protocol/rev2025-11-25/http/front.ts', 'protocol/rev2025-11-25/upstream/side.ts'],
  'protocol/rev2025-11-25/http/front.ts': ['protocol/rev2025-11-25/router.ts', 'http/replies.ts'],
  'protocol/rev2026-07-28/codec.ts': [],
  'protocol/rev2026-07-28/router.ts': ['protocol/rev2026-07-28/codec.ts', 'protocol/rev2025-11-25/codec.ts'],
  'protocol/revisions.ts': ['protocol/rev2025-11-25/revision.ts'],
  'http/replies.ts': [],
  'http/guards.ts': ['protocol/revisions.ts'],
  'http/server.ts': ['http/replies.ts', 'protocol/rev2026-07-28/router.ts'],
  'tasks/engine.ts': ['protocol/revisions.ts'],
  'observability/metrics.ts': ['protocol/revisions.ts'],
  'streams/event-stream.ts': ['protocol/revisions.ts'],
  'gateway/policy-report.ts': ['protocol/revisions.ts'],
  'store/task-store.ts': ['mcp.ts'],
  'mcp.ts': [],
  'protocol/revision-ports.ts': ['protocol/rev2025-11-25/session.ts'],
  'protocol/rev2025-11-25/upstream/side.ts': ['upstream/peer/adapter.ts', 'protocol/rev2025-11-25/codec.ts'],
  'upstream/peer/adapter.ts': [],
  'upstream/peer/connection.ts': ['upstream/transports/transport.ts'],
  'upstream/transports/transport.ts': [],
  'upstream/transports/stdio.ts': ['upstream/peer/adapter.ts'],
  'upstream/peer/sides.ts': ['upstream/life/connection-pool.ts'],
  'upstream/life/connection-pool.ts': [],
  'gateway/sessions.ts': ['protocol/rev2025-11-25/session.ts', 'protocol/revision-ports.ts'],
  'upstream/life/upstream.ts': ['protocol/rev2025-11-25/codec.ts', 'protocol/rev2025-11-25/upstream/side.ts', 'upstream/peer/adapter.ts'],
  'taskgate.ts': ['protocol/revisions.ts', 'protocol/rev2025-11-25/router.ts'],
};

function importPath(from: string, to: string): string {
  const relative = join(...dirname(from).split('/').filter((part) => part !== '.').map(() => '..'), to).replace(/\.ts$/, '.js');
  return relative.startsWith('.') ? relative : `./${relative}`;
}

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
}

describe('layer rules (dependency-cruiser)', () => {
  let root: string;
  let violations: Violation[];

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'taskgate-layers-'));
    for (const [file, imports] of Object.entries(TREE)) {
      const path = join(root, 'src', file);
      await mkdir(dirname(path), { recursive: true });
      const lines = imports.map((to, i) => `import * as m${i} from '${importPath(file, to)}';\nexport const use${i} = m${i};`);
      await writeFile(path, `${lines.join('\n')}\nexport const here = '${file}';\n`);
    }
    await writeFile(join(root, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true } }));
    // depcruise exits non-zero when it finds violations: its JSON report says which.
    const output = await run(DEPCRUISE, ['src', '--config', CONFIG, '--output-type', 'json'], { cwd: root, maxBuffer: 16 * 1024 * 1024 }).catch(
      (error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }),
    );
    violations = (JSON.parse(output.stdout) as { summary: { violations: Violation[] } }).summary.violations;
  });

  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  const broken = (from: string, to: string): string[] =>
    violations.filter((v) => v.from === `src/${from}` && v.to === `src/${to}`).map((v) => v.rule.name).sort();

  it('nothing outside a revision names its router: the registry serves it (registry-only)', () => {
    assert.ok(broken('http/server.ts', 'protocol/rev2026-07-28/router.ts').includes('registry-only'));
    assert.deepEqual(broken('taskgate.ts', 'protocol/rev2025-11-25/router.ts'), ['registry-only']);
  });

  it('outside src/protocol/ nothing imports a revision folder, not even its codec or ports: the registries and revision-ports.ts do', () => {
    assert.deepEqual(broken('upstream/life/upstream.ts', 'protocol/rev2025-11-25/codec.ts'), ['registry-only']);
    assert.deepEqual(broken('gateway/sessions.ts', 'protocol/rev2025-11-25/session.ts'), ['registry-only']);
    assert.deepEqual(broken('gateway/sessions.ts', 'protocol/revision-ports.ts'), []);
    assert.deepEqual(broken('protocol/revision-ports.ts', 'protocol/rev2025-11-25/session.ts'), []);
    assert.deepEqual(broken('protocol/revisions.ts', 'protocol/rev2025-11-25/revision.ts'), []);
    assert.deepEqual(broken('taskgate.ts', 'protocol/revisions.ts'), []);
  });

  it("a revision's upstream side builds on src/upstream/, which never imports it; its entry brings it to the registry, which the composition root hands down", () => {
    assert.deepEqual(broken('protocol/rev2025-11-25/upstream/side.ts', 'upstream/peer/adapter.ts'), []);
    assert.deepEqual(broken('protocol/rev2025-11-25/upstream/side.ts', 'protocol/rev2025-11-25/codec.ts'), []);
    assert.deepEqual(broken('protocol/rev2025-11-25/revision.ts', 'protocol/rev2025-11-25/upstream/side.ts'), []);
    assert.deepEqual(broken('streams/event-stream.ts', 'protocol/revisions.ts'), ['layer-streams']);
    assert.deepEqual(broken('gateway/policy-report.ts', 'protocol/revisions.ts'), ['layer-gateway']);
    assert.deepEqual(broken('upstream/life/upstream.ts', 'protocol/rev2025-11-25/upstream/side.ts'), ['layer-upstream', 'registry-only']);
  });

  it("src/upstream/'s rooms import only downward: life/ over peer/ over transports/", () => {
    assert.deepEqual(broken('upstream/life/upstream.ts', 'upstream/peer/adapter.ts'), []);
    assert.deepEqual(broken('upstream/peer/connection.ts', 'upstream/transports/transport.ts'), []);
    assert.deepEqual(broken('upstream/transports/stdio.ts', 'upstream/peer/adapter.ts'), ['upstream-rooms']);
    assert.deepEqual(broken('upstream/peer/sides.ts', 'upstream/life/connection-pool.ts'), ['upstream-rooms']);
  });

  it('a revision does not import another, not even its codec (revisions-apart)', () => {
    assert.deepEqual(broken('protocol/rev2026-07-28/router.ts', 'protocol/rev2025-11-25/codec.ts'), ['revisions-apart']);
  });

  it("a revision's front sits in the http layer: it may use the shared HTTP helpers and its own router", () => {
    assert.deepEqual(broken('protocol/rev2025-11-25/http/front.ts', 'http/replies.ts'), []);
    assert.deepEqual(broken('protocol/rev2025-11-25/http/front.ts', 'protocol/rev2025-11-25/router.ts'), []);
    assert.deepEqual(broken('protocol/rev2025-11-25/revision.ts', 'protocol/rev2025-11-25/http/front.ts'), []);
  });

  it("the list of every codec derives from the registry, out of reach of the metrics (which are handed what they need of it) and the task core", () => {
    assert.deepEqual(broken('observability/metrics.ts', 'protocol/revisions.ts'), ['layer-observability']);
    assert.deepEqual(broken('tasks/engine.ts', 'protocol/revisions.ts'), ['layer-tasks', 'tasks-era-neutral']);
    assert.deepEqual(broken('store/task-store.ts', 'mcp.ts'), [], 'a revision id is a base type');
  });

  it('the http layer does not import the registry, which sits above it (it is handed the served revisions)', () => {
    assert.deepEqual(broken('http/guards.ts', 'protocol/revisions.ts'), ['layer-http']);
  });
});
